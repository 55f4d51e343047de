"""Shared fixtures: real upstream servers and real gateway processes, on ports the tests pick."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp.client.stdio import StdioServerParameters

# The gateway keeps its requestState key under $XDG_STATE_HOME: never the tester's own.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="elicitgate-test-state-")

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
PY = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stdio_server(module_or_script: str, *args: str, era: str = "auto", **extra: Any) -> dict[str, Any]:
    """An mcpServers entry that runs a Python peer over stdio."""
    argv = ["-m", module_or_script] if not module_or_script.endswith(".py") else [module_or_script]
    return {"command": PY, "args": [*argv, *args], "era": era, **extra}


def write_config(tmp_path: Path, servers: dict[str, Any], **sections: Any) -> Path:
    path = tmp_path / "elicitgate.json"
    path.write_text(json.dumps({"mcpServers": servers, **sections}))
    return path


def gateway_stdio(config: Path) -> StdioServerParameters:
    """Launch parameters for `elicitgate serve --stdio`, for `mcp.Client`."""
    return StdioServerParameters(
        command=PY, args=["-m", "elicitgate.cli", "serve", "--config", str(config)], env=dict(os.environ)
    )


class Process:
    """A background process serving HTTP, waited on until its port answers."""

    def __init__(self, argv: list[str], port: int, path: str = "/healthz", env: dict[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv} exited: {self.proc.stderr.read() if self.proc.stderr else ''}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"{argv} did not listen on {port}")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err or ""


@pytest.fixture
def http_upstream() -> Iterator[Any]:
    """Start Python upstream servers over streamable HTTP: `http_upstream("tests.peers.x", ...)`."""
    started: list[Process] = []

    def start(module: str, *args: str) -> Process:
        port = free_port()
        proc = Process([PY, "-m", module, "--http", f"127.0.0.1:{port}", *args], port, path="/mcp")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def http_gateway() -> Iterator[Any]:
    """Start `elicitgate serve --http` on a free port for a config file."""
    started: list[Process] = []

    def start(config: Path, env: dict[str, str] | None = None) -> Process:
        started.append(serve_http(config, env))
        return started[-1]

    yield start
    for proc in started:
        proc.stop()


def serve_http(config: Path, env: dict[str, str] | None = None) -> Process:
    """`elicitgate serve --http` on a free port, returned once /healthz says every upstream is up."""
    port = free_port()
    proc = Process([PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"],
                   port, env=env)
    wait_healthy(proc.url)
    return proc


def wait_healthy(url: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = httpx2.get(f"{url}/healthz")
        body = response.json()
        if response.status_code == 200:
            return body
        time.sleep(0.1)
    raise TimeoutError(f"gateway not healthy: {body}")


class InProcessGateway:
    """The gateway app served by uvicorn inside the test's event loop, on a real port.

    The transport is real HTTP; the gateway object is reachable so tests can assert that
    nothing is left pending afterwards.
    """

    def __init__(self, gateway: Any, port: int) -> None:
        self.gateway = gateway
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.mcp_url = f"{self.url}/mcp"


from contextlib import asynccontextmanager  # noqa: E402


@asynccontextmanager
async def inprocess_gateway(config: dict[str, Any]):
    import anyio
    import uvicorn

    from elicitgate.config import build_config
    from elicitgate.faces.http import build_http_app
    from elicitgate.gateway import Gateway

    gateway = Gateway(build_config(config, "test config"))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_http_app(gateway), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.02)
        try:
            yield InProcessGateway(gateway, port)
        finally:
            server.should_exit = True
