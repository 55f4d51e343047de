"""A throwaway Redis (Debian's `redis-server`, installed by scripts/test) and gateway replicas sharing it.

`redis_server` starts one `redis-server` on a free loopback port, no persistence; `Replicas` starts
`elicitgate serve --http` processes with one config and `ELICITGATE_REDIS_URL`, each with its own state
directory (so a shared `requestState` key can only come from Redis). `RoundRobin` is what a load
balancer without session affinity does: each HTTP request goes to the next replica.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.conftest import PY, Process, free_port


class RedisServer:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: scripts/test installs Debian's redis-server package")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tempfile.mkdtemp(prefix="elicitgate-redis-")
        self.argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                     "--dir", self.dir, "--loglevel", "warning"]
        self.proc: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            for _ in range(200):  # bounded: redis-server listens within milliseconds
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    if self.proc.poll() is not None:
                        output = self.proc.stdout.read() if self.proc.stdout else ""
                        raise RuntimeError(f"redis-server exited: {output}") from None
                    time.sleep(0.02)
            raise TimeoutError("redis-server did not answer")
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: its connections stay open and nothing answers, as across a network partition."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, decode_responses=True)


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


START_TIMEOUT = 120.0
"""Three gateway processes starting at once on a busy two-core machine take their time."""


def wait_listening(proc: Process) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"replica exited: {proc.proc.stderr.read() if proc.proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", proc.port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"replica did not listen on {proc.port}")


def wait_ready(url: str) -> None:
    """Until /healthz says 200; a busy machine may take longer than a request timeout to answer the first."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/healthz", timeout=10).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"replica {url} not healthy")


class Replicas:
    """`count` replicas of `elicitgate serve --http` with `config` and the Redis URL."""

    def __init__(self, config: Path, redis_url: str, count: int = 3, env: dict[str, str] | None = None) -> None:
        self.states = [tempfile.mkdtemp(prefix="elicitgate-replica-") for _ in range(count)]

        self.procs: list[Process] = []
        for state in self.states:  # all start side by side, then each is waited for
            port = free_port()
            argv = [PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"]
            proc = Process.__new__(Process)
            proc.port, proc.url = port, f"http://127.0.0.1:{port}"
            proc.proc = subprocess.Popen(argv, env={**os.environ, "ELICITGATE_REDIS_URL": redis_url,
                                                    "XDG_STATE_HOME": state, **(env or {})},
                                         stderr=subprocess.PIPE, text=True)
            self.procs.append(proc)
        try:
            for proc in self.procs:
                wait_listening(proc)
                wait_ready(proc.url)
        except BaseException:
            self.stop()  # none of them outlives a start that failed
            raise

    @property
    def urls(self) -> list[str]:
        return [proc.url for proc in self.procs]

    def kill(self, index: int) -> None:
        """SIGKILL: no clean leave, its lease must lapse."""
        proc = self.procs[index].proc
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.proc.poll() is None:
                proc.stop()
        for state in self.states:
            shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def replicas() -> Iterator[Any]:
    started: list[Replicas] = []

    def start(config: Path, redis_url: str, count: int = 3, env: dict[str, str] | None = None) -> Replicas:
        started.append(Replicas(config, redis_url, count, env))
        return started[-1]

    yield start
    for group in started:
        group.stop()


class RoundRobin(httpx2.AsyncBaseTransport):
    """Each request to the next replica, as a load balancer without affinity sends them."""

    def __init__(self, urls: list[str]) -> None:
        self.targets = [httpx2.URL(url) for url in urls]
        self.sent: list[tuple[int, Any]] = []
        """Which replica each request went to, with its JSON body (None for a GET)."""
        self.headers: list[dict[str, str]] = []
        """The headers of each request, as the client sent them."""
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        index = len(self.sent) % len(self.targets)
        body = json.loads(request.content) if request.method == "POST" and request.content else None
        self.sent.append((index, body))
        self.headers.append({k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")})
        target = self.targets[index]
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        return await self._inner.handle_async_request(request)

    def calls(self, method: str) -> list[tuple[int, dict[str, Any]]]:
        """(replica, params) of each JSON-RPC request `method` sent."""
        return [(i, body.get("params") or {}) for i, body in self.sent
                if isinstance(body, dict) and body.get("method") == method]

    def replay(self, method: str, index: int) -> tuple[dict[str, Any], dict[str, str]]:
        """The body and headers of the `index`th request `method`, to send again."""
        sent = [(body, headers) for (_, body), headers in zip(self.sent, self.headers, strict=True)
                if isinstance(body, dict) and body.get("method") == method]
        return sent[index]

    async def aclose(self) -> None:
        await self._inner.aclose()
