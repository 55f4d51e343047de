# elicitgate in a container: docs/deploy.md. Build: docker build -t elicitgate .
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# Exact versions from the lock file first (a layer that changes only with the dependencies), then the gateway.
COPY requirements.lock ./
RUN pip install -r requirements.lock
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-deps .

RUN useradd --system --uid 10001 --home-dir /var/lib/elicitgate --create-home elicitgate
USER elicitgate
# On 0.0.0.0, /mcp without authentication (http.auth) stops start-up instead of a warning.
ENV XDG_STATE_HOME=/var/lib/elicitgate ELICITGATE_HTTP__REQUIRE_AUTH=true
EXPOSE 8808
# 0.0.0.0 inside the container (its loopback is its own); publish it as `-p 127.0.0.1:8808:8808` for a proxy on the
# host (docs/deploy.md). The request limits (http.max_header_bytes, http.head_timeout, ...) are on by default.
# Every route checks Host / Origin: set http.allowed_hosts / http.allowed_origins (and http.public_url) in the config.
ENTRYPOINT ["elicitgate", "serve", "--config", "/etc/elicitgate/elicitgate.json", "--http", "0.0.0.0:8808"]
HEALTHCHECK --interval=10s --timeout=3s \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8808/healthz', timeout=2)"]
