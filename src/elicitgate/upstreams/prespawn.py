"""Stdio servers started before the event loop, while the gateway is still importing.

The gateway takes about a second to import what it runs on (the SDK, pydantic models, uvicorn), and a
Python stdio server about as long to import its own. So `elicitgate serve` starts each configured stdio
server's process as soon as the configuration is read (`start`), with nothing but the standard library,
and the two overlap. The server's first connection attempt takes the running process over (`claim`) and
reads and writes its pipes on the event loop (`upstreams.adopted`); a reconnect, or a connection of a
client's own (`per_session`), starts a new process the same way (`spawn`). A process no connection took
(the gateway stopped first) is stopped by `stop_unclaimed`, in the order a connection stops its own. A
process that cannot be started is not kept: the first attempt starts it again the usual way
(`_compat.spawn_stdio_server`), which says why it cannot.

How a process is started and stopped is the `mcp` SDK's (`mcp.client.stdio`): the same environment, a
session of its own (so stopping its process group stops everything it started), the same order and waits.
This module imports only the standard library, so it mirrors those values; tests/test_prespawn.py checks them
against the SDK's own.

`serve` starts them sooner still (`start_early`, from `cli` before it imports typer and pydantic): from the file
as read, before it is validated, ~0.2 s of the gateway's CPU earlier, while one of the two cores would otherwise
wait. `start` then keeps each process the validated configuration has a server for with the same command, and
stops the others; whatever ends `serve` before that (an invalid file, a wrong option) stops them all.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from elicitgate.client_files import expand_placeholders
from elicitgate.config_error import ConfigError
from elicitgate.config_file import read_config_file
from elicitgate.hostport import bind_tcp, parse_hostport
from elicitgate.json_shapes import is_array, is_object

if TYPE_CHECKING:
    from elicitgate.config import HttpServer, StdioServer  # the validated configuration, loaded by then

STDERR_TAIL_LINES = 20
"""A stdio server's last lines of stderr kept for error messages and `doctor`."""

INHERITED_ENV_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What a stdio server inherits of the gateway's environment: the SDK's `DEFAULT_INHERITED_ENV_VARS` (POSIX)."""

STOP_GRACE = 2.0
"""Seconds a server has to exit after its stdin closed (the SDK's `PROCESS_TERMINATION_TIMEOUT`)."""
KILL_GRACE = 2.0
"""Seconds its process group has after SIGTERM before SIGKILL (the SDK's `FORCE_KILL_TIMEOUT`)."""
REAP_GRACE = 2.0
"""Seconds to see a killed process gone (the SDK's `_KILL_REAP_TIMEOUT`)."""
STDERR_DRAIN_WAIT = 2.0
"""Seconds the stderr pipe of a stopped server may take to end (a child it started may hold it open)."""
POLL_INTERVAL = 0.01


def default_environment() -> dict[str, str]:
    """The SDK's `get_default_environment()`: the inherited variables that are set, without exported
    shell functions (a value starting with `()`)."""
    inherited = ((key, os.environ.get(key)) for key in INHERITED_ENV_VARS)
    return {key: value for key, value in inherited if value is not None and not value.startswith("()")}


def server_environment(config: StdioServer) -> dict[str, str]:
    """What a stdio server runs with: the default environment, its own `env` over it, nothing else."""
    return default_environment() | config.env


Spec = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], str | None]
"""What starting a server depends on (command, args, env, cwd): a process started for one spec serves no other."""


class StderrPump:
    """A pipe for a stdio server's stderr: each line goes on to ours (operators see its logs), and the last
    ones stay in a tail (a server that dies before answering often says why only there).

    A thread reads it, so the lines flow before the event loop runs and while it is busy."""

    def __init__(self, tail: deque[str]) -> None:
        read_fd, write_fd = os.pipe()
        self.child_end: TextIO = os.fdopen(write_fd, "w")
        """The end the server writes to; close it once the server has it (`close_child_end`)."""
        self._tail = tail
        self._lock = threading.Lock()
        self._drained = threading.Event()
        threading.Thread(target=self._pump, args=(read_fd,), name="upstream-stderr", daemon=True).start()

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, encoding="utf-8", errors="replace") as reader:
            for line in reader:
                sys.stderr.write(line)  # looked up per line: whatever stderr is by then
                sys.stderr.flush()
                with self._lock:
                    self._tail.append(line.rstrip("\n"))
        self._drained.set()

    def keep_tail_in(self, tail: deque[str]) -> None:
        """From now on keep the last lines in `tail`, starting with those already read."""
        with self._lock:
            tail.extend(self._tail)
            self._tail = tail

    def close_child_end(self) -> None:
        """Our copy of the server's end: the pipe ends when the server and everything it started exit."""
        self.child_end.close()

    def wait_drained(self, timeout: float = STDERR_DRAIN_WAIT) -> bool:
        """Whether every line reached our stderr within `timeout` seconds (blocks: call from a thread)."""
        return self._drained.wait(timeout)


def _spec(config: StdioServer) -> Spec:
    return config.command, tuple(config.args), tuple(sorted(config.env.items())), config.cwd


@dataclass(eq=False)
class StartedProcess:
    """A stdio server's process started by `start` (or `start_early`), running until a connection claims it."""

    server: str
    spec: Spec
    popen: subprocess.Popen[bytes]
    stderr: StderrPump

    def kill(self) -> None:
        """SIGKILL its process group and reap it: for a claimed process that could not be taken over."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()


_waiting: dict[str, StartedProcess] = {}
"""The started processes no connection has claimed yet, by server name."""


def start(servers: Mapping[str, StdioServer | HttpServer]) -> None:
    """Start the process of every stdio server in `servers` (the enabled ones) now, for its first attempt. One
    `start_early` started for a server not among them, or for another command, is stopped (in the background).

    On Windows nothing is started early: the SDK starts a server there in a Job Object of its own."""
    if sys.platform == "win32":
        return
    from elicitgate.config import StdioServer  # loaded by now: `servers` is the validated configuration

    stdio = {name: config for name, config in servers.items() if isinstance(config, StdioServer)}
    _discard([name for name, started in _waiting.items() if name not in stdio or started.spec != _spec(stdio[name])])
    for name, config in stdio.items():
        if name not in _waiting:
            started = spawn(name, config)
            if started is not None:
                _waiting[name] = started


SERVE_VALUE_OPTIONS = ("--http", "--log-level")
"""`serve`'s options other than `--config` that take a value (`cli.serve`); `--stdio` is its only flag."""


def start_early(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> None:
    """For `elicitgate serve --config FILE` (`args`, the command line after the program): start the stdio servers
    of FILE as read, before the gateway imports pydantic to validate it, so that their start-up overlaps all of
    the gateway's. Only entries that validation will take as they are (a command, args and env of strings); any
    doubt (another command, an option not known here, `ELICITGATE_*` variables that set servers, a file that
    does not parse) starts nothing here, and `start` does it once the configuration is valid.

    With `--http HOST:PORT` the address is bound first, as `serve` always does before it starts anything
    (`cli_serve.claim_port` takes the socket, `bound_early`): where it cannot be, nothing starts here."""
    global _bound
    if sys.platform == "win32" or list(args[:1]) != ["serve"]:
        return
    options = serve_options(args[1:]) or {}
    path = options.get("--config")
    if path is None or any("MCPSERVERS" in name.upper().replace("_", "") for name in environ):
        return
    if not os.path.isfile(path):
        return  # a pipe (`--config <(...)`) can be read once, by the validation; a missing file, it reports
    try:
        data = read_config_file(path)
    except ConfigError:
        return  # validation says what is wrong with it
    servers = data.get("mcpServers")
    if "mcpServers" not in data and is_object(data.get("servers")):
        servers = data["servers"]  # VS Code's layout (`client_files.adapt`)
    servers, unset = expand_placeholders(servers, environ)
    if not is_object(servers) or unset:
        return
    if (http := options.get("--http")) is not None:
        try:
            address = parse_hostport(http)
            _bound = (address, bind_tcp(*address))
        except (ValueError, OSError):
            return  # the CLI says what is wrong, before anything starts
    atexit.register(stop_unclaimed)  # `serve` ends before `start` (an invalid file): these stop all the same
    for name, entry in servers.items():
        spec = _spec_as_written(entry)
        if spec is not None and name not in _waiting:
            started = _launch(name, spec)
            if started is not None:
                _waiting[name] = started


_bound: tuple[tuple[str, int], socket.socket] | None = None
"""The address of `serve --http` and the socket `start_early` bound to it, until `bound_early` hands it over."""


def bound_early(host: str, port: int) -> socket.socket | None:
    """The socket `start_early` bound to `host`:`port`, once (the caller listens on it)."""
    global _bound
    if _bound is None or _bound[0] != (host, port):
        return None
    sock, _bound = _bound[1], None
    return sock


def serve_options(args: Sequence[str]) -> dict[str, str] | None:
    """`serve`'s options with a value (`--config`, also as `-c`; `SERVE_VALUE_OPTIONS`), the last of each as the CLI
    takes it, as `--NAME FILE` or `--NAME=FILE`; None if an argument is none of them nor `--stdio` (`--help`, a
    mistake: the CLI says what), or the last one lacks its value."""
    found: dict[str, str] = {}
    rest = iter(args)
    for arg in rest:
        name, equals, value = arg.partition("=")
        name = "--config" if name == "-c" and not equals else name
        if name not in ("--config", *SERVE_VALUE_OPTIONS):
            if arg != "--stdio":
                return None
        elif equals and arg.startswith("--"):
            found[name] = value
        elif (following := next(rest, None)) is not None:
            found[name] = following
        else:
            return None
    return found


def _spec_as_written(entry: object) -> Spec | None:
    """The spec of an enabled stdio server's entry whose values validation keeps as they are; else None."""
    if not is_object(entry) or "url" in entry or entry.get("type", "stdio") != "stdio":
        return None
    if entry.get("enabled", True) is not True:
        return None
    command, args, env, cwd = entry.get("command"), entry.get("args", []), entry.get("env", {}), entry.get("cwd")
    if not isinstance(command, str) or not command or not is_array(args) or not is_object(env):
        return None
    if not all(isinstance(arg, str) for arg in args) or not all(isinstance(value, str) for value in env.values()):
        return None
    if cwd is not None and not isinstance(cwd, str):
        return None
    return command, tuple(args), tuple(sorted(env.items())), cwd


def spawn(name: str, config: StdioServer) -> StartedProcess | None:
    """As the SDK's `stdio_client` (anyio's `open_process`, asyncio's `Popen`): pipes for stdin and stdout,
    stderr to the pump, a session of its own. None where `Popen` refuses (the caller lets the SDK start it,
    which says exactly why). Also how every later connection's process starts (`transports._start_stdio`)."""
    return _launch(name, _spec(config))


def _launch(name: str, spec: Spec) -> StartedProcess | None:
    command, args, env, cwd = spec
    stderr = StderrPump(deque(maxlen=STDERR_TAIL_LINES))
    try:
        popen = subprocess.Popen(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr.child_end,
            env=default_environment() | dict(env),
            cwd=cwd,
            start_new_session=True,
            bufsize=0,
        )
    except (OSError, ValueError):
        return None  # the first attempt starts it the usual way, and reports what is wrong exactly so
    finally:
        stderr.close_child_end()
    return StartedProcess(name, spec, popen, stderr)


def claim(server: str, config: StdioServer) -> StartedProcess | None:
    """The process started for `server`, once: the caller owns it from then on (it reads its pipes and
    stops it). `None` when none was started, it was claimed already, or it was started for another command
    (it is then left to `stop_unclaimed`)."""
    started = _waiting.get(server)
    if started is None or started.spec != _spec(config):
        return None
    del _waiting[server]
    return started


def stop_unclaimed() -> None:
    """Stop every started process that no connection claimed, as a connection stops its own (the SDK's
    order): close its stdin, give it `STOP_GRACE` seconds to exit, then SIGTERM its process group and
    SIGKILL what is left after `KILL_GRACE`. All of them together, so the waits overlap."""
    left = list(_waiting.values())
    _waiting.clear()
    _stop(left)
    while _stopping:
        _stopping.pop().join()


_stopping: list[threading.Thread] = []
"""Threads stopping the processes `start` let go of (`_discard`), joined by `stop_unclaimed`."""


def _discard(names: list[str]) -> None:
    """Stop the started processes of `names` in a thread: the waits must not hold up the start-up."""
    if not names:
        return
    left = [_waiting.pop(name) for name in names]
    stopping = threading.Thread(target=_stop, args=(left,), name="prespawn-discard", daemon=True)
    stopping.start()
    _stopping.append(stopping)


def _stop(left: list[StartedProcess]) -> None:
    if not left:
        return
    for started in left:
        assert started.popen.stdin is not None, "started with pipes"
        with contextlib.suppress(OSError):
            started.popen.stdin.close()
    _wait_until(lambda: all(s.popen.poll() is not None for s in left), STOP_GRACE)
    stubborn = [s for s in left if s.popen.poll() is None]
    for started in stubborn:
        _signal_group(started.popen.pid, signal.SIGTERM)
    # Polling the leader reaps it: a zombie leader would keep its group alive.
    _wait_until(lambda: not any(s.popen.poll() is None or _group_alive(s.popen.pid) for s in stubborn), KILL_GRACE)
    for started in stubborn:
        if _group_alive(started.popen.pid):
            _signal_group(started.popen.pid, signal.SIGKILL)
    _wait_until(lambda: all(s.popen.poll() is not None for s in stubborn), REAP_GRACE)
    for started in left:
        assert started.popen.stdout is not None, "started with pipes"
        started.popen.stdout.close()
        started.stderr.wait_drained()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    """The leader's pid is its group's id (`start_new_session`), valid even after the leader was reaped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a member we may not signal is still a member
    return True


def _wait_until(done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)
    return True
