"""Gateway configs for the bench, and the launch lines of every process it starts.

The gateway's defaults protect a real deployment (32 pending elicitations per session, 10,000 in
all, 120 per minute per client with a burst of 30). A benchmark that sends thousands of
elicitations from one client hits all of them, so `gateway_config` raises them; the report says so.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

PY = sys.executable
Era = Literal["handshake", "modern"]

DEMO_SERVER = ["-m", "elicitgate.demo.server"]
"""The bundled demo upstream: `confirm` does one form elicitation, `echo` answers at once."""

BENCH_LIMITS: dict[str, Any] = {
    "max_pending_per_session": 1_000_000,
    "max_pending_total": 2_000_000,  # above the per-session limit, as the config requires
    "rate_limit_per_minute": 1e12,
    "rate_limit_burst": 1_000_000_000,
}
"""What the bench raises (defaults: 32, 10,000, 120/min, burst 30)."""


def stdio_upstream(era: Era) -> dict[str, Any]:
    return {"command": PY, "args": list(DEMO_SERVER), "era": era}


def http_upstream(url: str, era: Era) -> dict[str, Any]:
    return {"url": url, "era": era}


def gateway_config(
    servers: dict[str, dict[str, Any]], *, log_level: str = "info", steady: bool = True, src: Path | None = None
) -> dict[str, Any]:
    """A gateway config with the bench's limits; everything else stays at its default.

    `log_level` stays `info` (the default) unless a caller says otherwise: every elicitation's
    audit event is part of the work the gateway does. `steady` (the latency, scale and profile benches)
    opens the audit store at start: by default it opens at the first record, which falls in the warm-up
    and put its one-time import and migration check (~0.3 s of CPU) into whichever target's measurement
    came next. The start-up benches keep the default. `src` is the source tree the gateway will run
    (`bench.ab`'s base or work tree), if not the one on `PYTHONPATH` or this checkout's.
    """
    config: dict[str, Any] = {"mcpServers": servers, "elicitation": dict(BENCH_LIMITS), "log_level": log_level}
    if steady and _has_audit_open_at_start(src):
        config["audit"] = {"open_at_start": True}
    return config


def _has_audit_open_at_start(src: Path | None) -> bool:
    """Whether the elicitgate under test knows `audit.open_at_start` (`bench --ref` or `bench.ab --base`
    may run an older one, which opened its store at start anyway and refuses keys it does not know): read
    from the source its processes will import (`src`, else the first `PYTHONPATH` entry holding it, else
    this checkout's)."""
    sources = [src] if src is not None else []
    sources += [Path(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sources.append(Path(__file__).resolve().parent.parent / "src")
    for source in sources:
        package = source / "elicitgate"  # config.py, or the config/ package since it was split
        configs = [path for path in (package / "config.py", *sorted(package.glob("config/*.py"))) if path.is_file()]
        if configs:
            return any("open_at_start" in path.read_text() for path in configs)
    return False


def write_config(directory: Path, name: str, config: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def gateway_argv(config: Path, http: str | None = None) -> list[str]:
    argv = [PY, "-m", "elicitgate.cli", "serve", "--config", str(config)]
    return [*argv, "--http", http] if http else argv


def demo_argv(http: str | None = None) -> list[str]:
    return [PY, *DEMO_SERVER, *(["--http", http] if http else [])]


def bare_relay_argv() -> list[str]:
    """The demo server over stdio behind `bench.bare_relay` (each line parsed and serialised again, nothing else)."""
    return [PY, "-m", "bench.bare_relay", *demo_argv()]


def bare_http_relay_argv(listen: str, upstream_url: str) -> list[str]:
    """`bench.bare_http_relay` on `listen` in front of `upstream_url` (each JSON body and SSE event parsed and
    serialised again, nothing else)."""
    return [PY, "-m", "bench.bare_http_relay", "--listen", listen, "--upstream", upstream_url]


def lean_relay_argv() -> list[str]:
    """The demo server over stdio behind `bench.lean_relay` (the same job as `bench.bare_relay`, on protocol
    callbacks and orjson: the lowest floor)."""
    return [PY, "-m", "bench.lean_relay", *demo_argv()]


def lean_work_relay_argv() -> list[str]:
    """The demo server over stdio behind `bench.lean_work_relay` (the lean relay plus, for each elicitation, the work
    elicitgate's broker does for it, by its own functions: the floor for a gateway that keeps its promise)."""
    return [PY, "-m", "bench.lean_work_relay", "--", *demo_argv()]


def lean_http_relay_argv(listen: str, upstream_url: str) -> list[str]:
    """`bench.lean_http_relay` on `listen` in front of `upstream_url` (the same job as `bench.bare_http_relay`,
    on asyncio Protocols, httptools and orjson: the lowest floor)."""
    return [PY, "-m", "bench.lean_http_relay", "--listen", listen, "--upstream", upstream_url]


def lean_http_work_relay_argv(listen: str, upstream_url: str) -> list[str]:
    """`bench.lean_http_work_relay` on `listen` in front of `upstream_url` (the lean HTTP relay plus, for each
    elicitation, the work elicitgate's broker does for it, by its own functions)."""
    return [PY, "-m", "bench.lean_http_work_relay", "--listen", listen, "--upstream", upstream_url]


def fastmcp_argv(*, upstream_url: str | None = None, http: str | None = None) -> list[str]:
    """The FastMCP proxy (`bench.fastmcp_proxy`) in front of the demo server (stdio) or a URL."""
    argv = [PY, "-m", "bench.fastmcp_proxy"]
    if http:
        argv += ["--http", http]
    if upstream_url:
        return [*argv, "--url", upstream_url]
    return [*argv, "--command", PY, *DEMO_SERVER]
