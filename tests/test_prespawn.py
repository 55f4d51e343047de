"""Stdio servers started before the event loop (`upstreams.prespawn`, issue 16's start-up): `serve` starts
them as soon as its config is read, their first connection takes them over (`upstreams.adopted`), and
one nobody took is stopped. Real gateway processes in front of the demo server (the mcp SDK's `Server`)
and shell launchers that say when they ran; in process, the same seam under `UpstreamConnection.open`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp_types import RequestId

import mcp.client.stdio as sdk_stdio
from mcp import Client

from elicitgate.config import StdioServer
from elicitgate.errors import ConnectError
from elicitgate.upstreams import prespawn
from elicitgate.upstreams.adopted import AdoptedProcess
from elicitgate.upstreams.connection import UpstreamConnection
from tests import conftest
from tests.conftest import PEERS, PY, PortTaken, Process, free_port, inprocess_gateway, wait_healthy, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _nothing_left_waiting() -> Iterator[None]:
    yield
    prespawn.stop_unclaimed()


def _launched(name: str, tmp_path: Path, then: str = f"exec {PY} -m elicitgate.demo.server") -> dict[str, Any]:
    """A stdio server behind a shell line that says it ran (stderr) and appends its pid to `<name>.pids`
    (the pid of the demo server after `exec`)."""
    pids = tmp_path / f"{name}.pids"
    return {"command": "sh", "args": ["-c", f"echo 'launcher {name} ran' >&2; echo $$ >> {pids}; {then}"],
            "era": "handshake"}


def _pids(tmp_path: Path, name: str) -> list[int]:
    path = tmp_path / f"{name}.pids"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    """Running: a zombie (exited, not yet reaped by whoever inherited it) is not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _serve_http(config: Path, env: dict[str, str] | None = None) -> Process:
    """On another port if the one picked was taken before the gateway bound it: a gateway that could not bind
    exits before it starts a server, so the launchers' pid files count only this gateway's processes."""
    return Process.on_free_port(
        lambda port: [PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"],
        env=env)


# -- the gateway, end to end ------------------------------------------------------------------------------


async def test_stdio_servers_start_before_the_gateway_has_imported_what_it_serves_with(tmp_path: Path) -> None:
    """Both launchers run before the gateway prints its address (which comes after its imports: before
    this change, an upstream started only once the event loop ran); each process is the one that serves
    (started once), elicitations included."""
    config = write_config(tmp_path, {"one": _launched("one", tmp_path), "two": _launched("two", tmp_path)},
                          audit={"enabled": False})
    gateway = _serve_http(config)

    async def answer(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"ok": True})

    try:
        wait_healthy(gateway.url)
        async with Client(f"{gateway.url}/mcp", mode="legacy", elicitation_callback=answer) as client:
            confirmed = await client.call_tool("one__confirm", {"question": "sure?"})
            echoed = await client.call_tool("two__echo", {"text": "early"})
        started = {name: _pids(tmp_path, name) for name in ("one", "two")}
    finally:
        log = gateway.stop()
    assert confirmed.content[0].text == "confirm: accepted {'ok': True}"  # type: ignore[union-attr]
    assert echoed.content[0].text == "early"  # type: ignore[union-attr]
    # Per-session connections of this client start processes of their own, later: the first is the primary's.
    assert all(len(pids) >= 1 for pids in started.values()), started
    lines = log.splitlines()
    address = next(i for i, line in enumerate(lines) if "elicitgate: MCP at" in line)
    for name in ("one", "two"):
        ran = next(i for i, line in enumerate(lines) if f"launcher {name} ran" in line)
        assert ran < address, log


async def test_a_started_server_gets_only_the_safe_environment_and_its_own_env(tmp_path: Path) -> None:
    """As tests/test_security.py's promise, through the process started early: with `shared`, every call
    goes to the primary connection, the one that took it over."""
    server = {"command": "node", "args": [str(PEERS / "ts" / "elicit_server.mjs")], "env": {"ONLY_MINE": "1"},
              "session_policy": "shared"}
    config = write_config(tmp_path, {"ts": server}, audit={"enabled": False})
    secrets = {
        "ELICITGATE_ADMIN_TOKEN": "admin-CbA1VFdV9SuAbDAnpdFk0bFxP00Kx10PIUJHKqD3Urw",
        "OTHER_SERVICE_API_KEY": "sk-other",
    }
    gateway = _serve_http(config, env=secrets)
    try:
        wait_healthy(gateway.url)
        async with Client(f"{gateway.url}/mcp", mode="legacy") as client:
            names = json.loads((await client.call_tool("ts__environment", {})).content[0].text)  # type: ignore[union-attr]
    finally:
        gateway.stop()
    assert "ONLY_MINE" in names and not set(secrets) & set(names) and "XDG_STATE_HOME" not in names
    assert set(names) - {"ONLY_MINE"} <= set(sdk_stdio.get_default_environment()) | {"NODE_OPTIONS", "NODE"}


async def test_the_started_process_is_the_primary_and_a_crash_starts_a_new_one_the_usual_way(tmp_path: Path) -> None:
    servers = {"one": {**_launched("one", tmp_path), "session_policy": "shared"}}
    config = write_config(tmp_path, servers, audit={"enabled": False},
                          upstream_retry={"initial_backoff": 0.1, "max_backoff": 0.2})
    gateway = _serve_http(config)
    try:
        wait_healthy(gateway.url)
        assert len(_pids(tmp_path, "one")) == 1  # started once: taken over, not started again
        first = _pids(tmp_path, "one")[0]
        os.kill(first, 9)
        deadline = time.monotonic() + 30
        while len(_pids(tmp_path, "one")) < 2 and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        wait_healthy(gateway.url)
        async with Client(f"{gateway.url}/mcp", mode="legacy") as client:
            echoed = await client.call_tool("one__echo", {"text": "again"})
        pids = _pids(tmp_path, "one")
    finally:
        log = gateway.stop()
    assert echoed.content[0].text == "again"  # type: ignore[union-attr]
    assert len(pids) == 2 and not _alive(pids[0]), log
    assert "upstream 'one' went away" in log
    assert not _alive(pids[1])  # the gateway stopped it on its way out


async def test_a_port_another_process_took_first_is_not_mistaken_for_the_gateway(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`free_port` only says a port was free: on a busy machine another test's process may listen there before
    the gateway binds it. That process's answers are not the gateway's (its `/healthz` said healthy for a
    gateway that had exited without starting anything); the gateway goes on another port, and the one that
    could not bind started no server."""
    config = write_config(tmp_path, {"one": {**_launched("one", tmp_path), "session_policy": "shared"}},
                          audit={"enabled": False})
    with socket.socket() as taker:
        taker.bind(("127.0.0.1", 0))
        taker.listen()
        taken = taker.getsockname()[1]
        argv = [PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{taken}"]
        with pytest.raises(PortTaken, match="already in use"):
            Process(argv, taken)
        picks = iter([taken])
        monkeypatch.setattr(conftest, "free_port", lambda: next(picks, None) or free_port())
        gateway = _serve_http(config)
    try:
        wait_healthy(gateway.url)
        assert gateway.port != taken and len(_pids(tmp_path, "one")) == 1
    finally:
        gateway.stop()


def test_a_started_server_nobody_took_is_stopped_when_start_up_fails(tmp_path: Path) -> None:
    """A bad state key file stops `serve` after the servers were started: they are stopped, in the SDK's
    order; this one ignores its stdin closing, so its process group gets SIGTERM."""
    key_file = tmp_path / "state.key"
    key_file.write_text("not hex")
    ignores_stdin = f"sleep 60 & echo $! >> {tmp_path / 'one.pids'}; wait"
    config = write_config(tmp_path, {"one": _launched("one", tmp_path, then=ignores_stdin)},
                          bridging={"state_key_file": str(key_file)})
    began = time.monotonic()
    done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - began
    assert done.returncode == 2 and "64 hex digits" in done.stderr, done.stderr
    assert "launcher one ran" in done.stderr
    pids = _pids(tmp_path, "one")
    assert len(pids) == 2, done.stderr  # the shell and its sleep: started before the key was read
    assert not any(_alive(pid) for pid in pids)
    assert took < prespawn.STOP_GRACE + prespawn.KILL_GRACE + 20


def test_the_stdio_face_with_its_client_gone_at_once_leaves_no_server_running(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"one": _launched("one", tmp_path), "two": _launched("two", tmp_path)},
                          audit={"enabled": False})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pids = _pids(tmp_path, "one") + _pids(tmp_path, "two")
    assert len(pids) == 2, done.stderr
    assert not any(_alive(pid) for pid in pids)


async def test_a_server_that_cannot_start_is_reported_as_the_usual_way_reports_it(tmp_path: Path) -> None:
    """`serve` (which starts servers early) says what a gateway that starts them on the event loop says."""
    servers: dict[str, Any] = {
        "ghost": {"command": str(tmp_path / "no-such-server")},
        "unlisted": {"command": "elicitgate-no-such-command"},
        "nowhere": {"command": "sh", "args": ["-c", "true"], "cwd": str(tmp_path / "no-such-dir")},
    }
    retry = {"initial_backoff": 30, "max_backoff": 30}
    async with inprocess_gateway({"mcpServers": servers, "upstream_retry": retry}) as usual:
        expected = {name: usual.gateway.links[name].last_error for name in servers}
    gateway = _serve_http(write_config(tmp_path, servers, upstream_retry=retry, audit={"enabled": False}))
    try:
        body: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            body = httpx2.get(f"{gateway.url}/healthz").json()
            if all(body["upstreams"][name]["error"] for name in servers):
                break
            await anyio.sleep(0.05)
    finally:
        gateway.stop()
    said = {name: body["upstreams"][name]["error"] for name in servers}
    assert said == expected
    assert said["ghost"] == f"upstream 'ghost': command not found: {tmp_path / 'no-such-server'}"
    assert said["unlisted"] == "upstream 'unlisted': command not found: elicitgate-no-such-command"


# -- the seam, in process ---------------------------------------------------------------------------------


class _NoAsks:
    async def on_server_request(
        self, connection: UpstreamConnection, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        raise AssertionError(f"the server asked {method}")

    async def on_server_notification(
        self, connection: UpstreamConnection, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> None:
        return None


async def _open(name: str, config: StdioServer, tg: anyio.abc.TaskGroup) -> UpstreamConnection:
    return await UpstreamConnection.open(name, config, _NoAsks(), tg, advertised_capabilities={}, connect_timeout=20)


async def test_the_first_connection_takes_the_started_process_over_and_stops_it_in_the_sdks_order() -> None:
    config = StdioServer(command=PY, args=["-m", "elicitgate.demo.server"], era="handshake")
    prespawn.start({"demo": config})
    started = prespawn._waiting["demo"]  # noqa: SLF001 - which process it is
    async with anyio.create_task_group() as tg:
        conn = await _open("demo", config, tg)
        assert prespawn.claim("demo", config) is None  # taken, once
        result = await conn.request("tools/call", {"name": "echo", "arguments": {"text": "adopted"}})
        assert result["content"][0]["text"] == "adopted"
        second = await _open("demo", config, tg)  # a later connection (a reconnect, a client's) starts its own
        await second.request("tools/call", {"name": "echo", "arguments": {"text": "own"}})
        await second.close()
        assert started.popen.poll() is None
        await conn.close()
    assert started.popen.returncode == 0  # it read its stdin's end and exited: no signal needed


async def test_what_a_started_server_said_before_it_died_is_in_the_error(tmp_path: Path) -> None:
    config = StdioServer(command="sh", args=["-c", "echo 'ModuleNotFoundError: no module named nope' >&2; exit 1"])
    prespawn.start({"broken": config})
    async with anyio.create_task_group() as tg:
        with pytest.raises(ConnectError) as caught:
            await _open("broken", config, tg)
    assert "its stderr ended with: ModuleNotFoundError: no module named nope" in str(caught.value)
    assert caught.value.stderr_tail == ["ModuleNotFoundError: no module named nope"]


async def test_the_adopted_process_is_an_anyio_process_the_sdk_can_stop() -> None:
    config = StdioServer(command="sh", args=["-c", "cat"])
    prespawn.start({"cat": config})
    started = prespawn.claim("cat", config)
    assert started is not None
    from elicitgate.upstreams.adopted import adopt

    process = await adopt(started.popen)
    assert isinstance(process, AdoptedProcess) and process.pid == started.popen.pid
    assert process.stdin is not None and process.stdout is not None
    await process.stdin.send(b"ping\n")
    assert await process.stdout.receive() == b"ping\n"
    await sdk_stdio._stop_server_process(process)  # noqa: SLF001 - the SDK's own stop, as `_compat.stop_stdio_server`
    assert process.returncode == 0
    with pytest.raises((anyio.ClosedResourceError, anyio.EndOfStream)):
        await process.stdout.receive()


def test_a_process_started_for_another_command_is_not_handed_out_and_is_stopped() -> None:
    config = StdioServer(command="sh", args=["-c", "cat"])
    prespawn.start({"cat": config})
    started = prespawn._waiting["cat"]  # noqa: SLF001
    assert prespawn.claim("cat", StdioServer(command="sh", args=["-c", "cat -u"])) is None
    assert prespawn.claim("other", config) is None
    prespawn.stop_unclaimed()
    assert started.popen.returncode == 0


def test_stop_unclaimed_closes_stdin_then_terminates_then_kills_the_group(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(prespawn, "STOP_GRACE", 0.5)
    monkeypatch.setattr(prespawn, "KILL_GRACE", 0.5)
    stubborn = ("trap 'echo got-TERM >&2' TERM; echo trap-set >&2; read line; echo stdin-closed >&2; "
                "while :; do sleep 0.05; done")
    prespawn.start({"stubborn": StdioServer(command="sh", args=["-c", stubborn])})
    started = prespawn._waiting["stubborn"]  # noqa: SLF001
    err, deadline = "", time.monotonic() + 60
    while "trap-set" not in err:  # the shell has set its trap (its stderr reaches ours through the pump)
        assert time.monotonic() < deadline, err
        time.sleep(0.01)
        err += capfd.readouterr().err
    began = time.monotonic()
    prespawn.stop_unclaimed()
    took = time.monotonic() - began
    assert started.popen.returncode == -9
    assert took >= 1.0  # each grace waited for
    err += capfd.readouterr().err
    assert err.index("stdin-closed") < err.index("got-TERM"), err


def test_the_environment_and_the_waits_are_the_sdks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHELL", "() { :; }")  # an exported shell function: never inherited
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("ELICITGATE_ADMIN_TOKEN", "secret-secret-secret")
    assert prespawn.default_environment() == sdk_stdio.get_default_environment()
    assert prespawn.INHERITED_ENV_VARS == tuple(sdk_stdio.DEFAULT_INHERITED_ENV_VARS)
    assert prespawn.server_environment(StdioServer(command="x", env={"HOME": "/srv", "KEY": "v"})) == (
        sdk_stdio.get_default_environment() | {"HOME": "/srv", "KEY": "v"}
    )
    assert (prespawn.STOP_GRACE, prespawn.KILL_GRACE, prespawn.REAP_GRACE) == (
        sdk_stdio.PROCESS_TERMINATION_TIMEOUT, sdk_stdio.FORCE_KILL_TIMEOUT, sdk_stdio._KILL_REAP_TIMEOUT  # noqa: SLF001
    )
