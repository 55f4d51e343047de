"""An upstream request's answer resumes its caller with nothing of the endpoint's on the event loop in between
(`UpstreamConnection.request` settles its request itself, `Endpoint.asking(..., settled_by_caller=True)` and
`asked_over`): the request is forgotten as its caller resumes, and what the future's done callback (`_Asked`) did
still holds: the peer told when the caller leaves, `PeerLost` when the connection ends. In memory, on a real
`Endpoint`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp_types import CONNECTION_CLOSED

from mcp.shared.exceptions import MCPError

from elicitgate.errors import PeerLost
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.memory import memory_wires
from tests.test_unit_frameless_requests import _client, at_once_wires, written  # pyright: ignore[reportPrivateUsage]
from tests.test_unit_upstream_stamp import modern_connection

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _on(endpoint: Endpoint) -> UpstreamConnection:
    conn = modern_connection()
    conn.endpoint = endpoint
    return conn


class _Scheduled:
    """What is put on the event loop with `call_soon` while it is watched (the loop's own `call_soon` still runs it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.callbacks: list[Callable[..., Any]] = []
        loop = asyncio.get_running_loop()
        call_soon = loop.call_soon

        def watched(callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.Handle:
            self.callbacks.append(callback)
            return call_soon(callback, *args, context=context)

        monkeypatch.setattr(loop, "call_soon", watched)


async def test_the_answer_resumes_the_caller_with_no_callback_of_the_endpoints_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wire, server = at_once_wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        conn = _on(endpoint)
        results: list[Any] = []
        answered = anyio.Event()

        async def call() -> None:
            results.append(await conn.request("tools/call", {"name": "echo"}, timeout=30))
            results.append(dict(endpoint._waiters))  # pyright: ignore[reportPrivateUsage]
            answered.set()

        tg.start_soon(call)
        message, _ = await written(server)
        scheduled = _Scheduled(monkeypatch)
        await server.say({"jsonrpc": "2.0", "id": message["id"], "result": {"ok": True}})
        with anyio.fail_after(5):
            await answered.wait()
        monkeypatch.undo()
        assert results == [{"ok": True}, {}]  # forgotten by the time its caller has the answer
        owners = [getattr(callback, "__self__", callback) for callback in scheduled.callbacks]
        assert not [owner for owner in owners if type(owner).__module__ == "elicitgate.wire.endpoint"]
        assert conn.in_flight_origins() == []
        server.close()


async def test_an_error_answer_is_raised_and_the_request_forgotten() -> None:
    wire, server = at_once_wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        conn = _on(endpoint)
        failed: list[Any] = []
        ended = anyio.Event()

        async def call() -> None:
            try:
                await conn.request("tools/call", {"name": "echo"}, timeout=30)
            except MCPError as exc:
                failed.extend([exc.error.message, dict(endpoint._waiters)])  # pyright: ignore[reportPrivateUsage]
            ended.set()

        tg.start_soon(call)
        message, _ = await written(server)
        await server.say({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "no"}})
        with anyio.fail_after(5):
            await ended.wait()
        server.close()
    assert failed == ["no", {}]


@pytest.mark.parametrize("wires", [at_once_wires, memory_wires], ids=["written-at-once", "write-waits"])
async def test_a_caller_that_leaves_tells_the_peer_and_forgets_the_request(wires: Any) -> None:
    wire, server = wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        conn = _on(endpoint)
        with anyio.CancelScope() as scope:

            async def leave_once_written() -> None:
                await written(server)
                scope.cancel()

            tg.start_soon(leave_once_written)
            await conn.request("tools/call", {"name": "echo"}, timeout=30)
        assert scope.cancelled_caught
        cancel, headers = await written(server)
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "eg-1", "reason": "caller cancelled"},
        }
        assert headers is not None and headers["mcp-method"] == "tools/call"
        assert endpoint._waiters == {}  # pyright: ignore[reportPrivateUsage]
        assert conn.in_flight_origins() == []
        server.close()


async def test_a_request_out_of_time_tells_the_peer_and_raises_timeout() -> None:
    wire, server = at_once_wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        conn = _on(endpoint)
        with pytest.raises(TimeoutError):
            await conn.request("tools/call", {"name": "echo"}, timeout=0)
        written_first, _ = await written(server)
        cancel, _ = await written(server)
        assert written_first["id"] == "eg-1"
        assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == "eg-1"
        assert endpoint._waiters == {}  # pyright: ignore[reportPrivateUsage]
        server.close()


async def test_the_connections_end_fails_the_request_with_peer_lost() -> None:
    wire, server = at_once_wires()
    failed: list[BaseException] = []

    async def call(conn: UpstreamConnection) -> None:
        try:
            await conn.request("tools/call", {"name": "echo"}, timeout=30)
        except PeerLost as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        tg.start_soon(call, _on(endpoint))
        await written(server)
        server.close()
    assert len(failed) == 1 and isinstance(failed[0], PeerLost)
    assert failed[0].error.code == CONNECTION_CLOSED
