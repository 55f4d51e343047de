"""Shared fixtures: real upstream servers and real gateway processes, on ports the tests pick."""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pexpect
import pytest

from mcp.client.stdio import StdioServerParameters


def _own_directory(variable: str, prefix: str) -> None:
    """`variable` set to a directory of this test process's own, removed as it exits."""
    os.environ[variable] = directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


# The gateway keeps its requestState key under $XDG_STATE_HOME, and `serve` (with the demo server) the code its
# imports generate under $XDG_CACHE_HOME (`elicitgate.codecache`): never the tester's own.
_own_directory("XDG_STATE_HOME", "elicitgate-test-state-")
_own_directory("XDG_CACHE_HOME", "elicitgate-test-cache-")

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
PY = sys.executable
_random = random.SystemRandom()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _signals_as_at_a_terminal() -> None:
    # A shell without job control starts a background command (`./scripts/test &`, a second suite beside
    # this one) with SIGINT and SIGQUIT ignored, and every process below it inherits that: Ctrl-C typed in
    # the terminal a test opens would then reach a process that ignores it. A person's terminal does not.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def in_terminal(*args: Any, **kwargs: Any) -> pexpect.spawn:
    """`pexpect.spawn`, the process started as from a person's terminal, whatever started the suite."""
    return pexpect.spawn(*args, preexec_fn=_signals_as_at_a_terminal, **kwargs)


def _listen_ports() -> range:
    """Ports outside the kernel's ephemeral range, which no outgoing connection takes as its local port."""
    try:
        low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - 10000 >= 4096:
        return range(10000, low)
    if 65535 - high >= 4096:
        return range(high + 1, 65536)
    return range(1024, 65536)


LISTEN_PORTS = _listen_ports()
PORT_LOCKS = Path(tempfile.gettempdir()) / "elicitgate-test-ports"
_reserved: deque[int] = deque()
"""Lock files of the ports this process handed out last: a second suite on the machine skips them until the
server they were picked for has bound them (by the time 64 more have been handed out, long since)."""


def free_port() -> int:
    """A port nothing listens on, that no other test process (this suite's other worker, a second suite beside
    it) is handed meanwhile: one port's lock file, `flock`ed, between choosing it and the server binding it. A
    port the kernel picks (bind to 0) may be handed to another process's outgoing connection or bind first."""
    PORT_LOCKS.mkdir(exist_ok=True)
    for _ in range(1000):
        port = _random.choice(LISTEN_PORTS)
        fd = os.open(PORT_LOCKS / str(port), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
        except OSError:  # held by another test process, or in use
            os.close(fd)
            continue
        _reserved.append(fd)
        if len(_reserved) > 64:
            os.close(_reserved.popleft())
        return port
    raise RuntimeError(f"no free port in {LISTEN_PORTS}")


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


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on TCP `port` (any address), from /proc/net/tcp{,6}."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[1].rpartition(":")[2] == f"{port:04X}" and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    return inodes


def _listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` holds a socket listening on `port` (not another process that took the port)."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fds / fd) in inodes for fd in os.listdir(fds))
    except (FileNotFoundError, ProcessLookupError):
        return False


class PortTaken(RuntimeError):
    """The process exited because another process had taken the port picked for it (`free_port` only
    promises a port free when it was picked: on a busy machine another test may bind it first)."""


class Process:
    """A background process serving HTTP, waited on until it listens on its port (itself: an answer from
    another process that took the port meanwhile is not taken for its own)."""

    def __init__(self, argv: list[str], port: int, path: str = "/healthz", env: dict[str, str] | None = None, *,
                 as_at_a_terminal: bool = False) -> None:
        """`as_at_a_terminal`: its SIGINT and SIGQUIT as a person's terminal leaves them (`_signals_as_at_a_terminal`),
        for a test of what Ctrl-C does."""
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=_signals_as_at_a_terminal if as_at_a_terminal else None)
        deadline = time.monotonic() + 90  # a start takes seconds on a busy machine: a bound, not an expectation
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                taken = "already in use" in err or "address in use" in err.lower()
                raise (PortTaken if taken else RuntimeError)(f"{argv} exited: {err}")
            if sys.platform == "linux" and not _listens_on(self.proc.pid, port):
                time.sleep(0.05)
                continue
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"{argv} did not listen on {port}")

    @classmethod
    def on_free_port(cls, argv_for: Callable[[int], list[str]], env: dict[str, str] | None = None) -> Process:
        """`argv_for(port)` started on a free port, and on another one if that port was taken meanwhile."""
        for _ in range(5):
            port = free_port()
            try:
                return cls(argv_for(port), port, env=env)
            except PortTaken:
                continue
        raise RuntimeError("no free port held long enough to start on, five times")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=30)
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


def wait_healthy(url: str, timeout: float = 90) -> dict[str, Any]:
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


# -- spreading the suite over pytest-xdist workers (scripts/test runs `-n 2 --dist load`) -----------------

TOGETHER = frozenset({
    "tests/test_audit_postgres.py", "tests/test_docs_commands.py", "tests/test_fuzz.py", "tests/test_hosted_browser.py",
    "tests/test_inbox_terminal.py", "tests/test_replicas.py",
})
"""The modules whose tests share a module-scoped fixture (a gateway, a browser, a PostgreSQL cluster...): each
runs whole on one worker, so it is set up once. Every other test is a unit of its own that either worker may
take, so no big file holds one worker while the other idles. The tests of a module that shares a fixture and
is missing here fail at set-up, saying so (`pytest_runtest_setup`)."""

SHARED_SCOPES = ("module", "package", "session")


def _shares_fixtures(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of ours set up once for its module.
    The one in force is the last definition of a name; plugins' own (`tmp_path_factory`) have no baseid."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else []
    return any(defs and defs[-1].baseid and defs[-1].scope in SHARED_SCOPES for defs in definitions)


def _bound(item: pytest.Item) -> float:
    """The timeout a test says it needs past the default (the conformance run, the wheel install, pyright), else 0."""
    marker = item.get_closest_marker("timeout")
    if marker and marker.args and float(marker.args[0]) > float(item.config.getini("timeout") or 0):
        return float(marker.args[0])
    return 0.0


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _unit(nodeid: str) -> str:
    """What one worker takes at once (`TestsOrModules`): a module of TOGETHER, else the test."""
    return _module(nodeid) if _module(nodeid) in TOGETHER else nodeid


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest units of work first, so that neither worker ends the run on a long one while the other idles:
    the tests that declare a longer timeout (longest first, with the module of TOGETHER they belong to), then the
    other modules of TOGETHER (most tests first), then the rest as collected. A unit stays in one piece.
    Under xdist the scheduler then puts the units of most tests first (`--loadscope-reorder`, on by default,
    a stable sort): the modules of TOGETHER lead, then the single tests in this order, the long ones first."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item.nodeid), []).append(item)

    def rank(entry: tuple[int, list[pytest.Item]]) -> tuple[float, float, int]:
        index, tests = entry
        bound = max(_bound(item) for item in tests)
        together = len(tests) if _module(tests[0].nodeid) in TOGETHER else 0
        return -bound, -together, index

    ordered = sorted(enumerate(units.values()), key=rank)
    items[:] = [item for _, tests in ordered for item in tests]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _shares_fixtures(item) and _module(item.nodeid) not in TOGETHER:
        pytest.fail(f"{_module(item.nodeid)} has a module-scoped fixture: add it to TOGETHER in tests/conftest.py "
                    "(or both workers may set it up, each with only some of its tests)", pytrace=False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` would do this with marks, but it cannot under pytest 9 (it renames `_nodeid`, which
    pytest 9 no longer reads): a module of TOGETHER is one unit of work, every other test its own."""
    if config.getoption("dist") != "load":
        return None  # another --dist asked for by name
    from xdist.scheduler import LoadScopeScheduling

    class TestsOrModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return TestsOrModules(config, log)
