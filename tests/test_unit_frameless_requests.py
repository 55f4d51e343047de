"""What a call held while a person answers keeps of the endpoint (`wire.endpoint.Endpoint`), issue #34: a face's request
is served by its handler's own coroutine as its task (`_serve_in_task`, no `_handle` frame around it), and a request
upstream made with `asking` is its future alone (no `request` frame while it waits). What `_handle` and `request`
promised still holds: answers, errors, a cancelled request not answered, the connection's end answered `Connection
closed`; our request's answer, the peer told when its caller leaves, `PeerLost` when the connection ends."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR

from mcp.shared.exceptions import MCPError

from elicitgate.errors import PeerLost
from elicitgate.json_shapes import JsonObject
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.memory import MemoryWire, memory_wires

pytestmark = pytest.mark.anyio


class WritesAtOnce(MemoryWire):
    """A memory wire that writes without waiting, as the gateway's pipes and HTTP wires do when they have room."""

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        self._outgoing.send_nowait((Inbound(message), headers))  # pyright: ignore[reportPrivateUsage]


def at_once_wires() -> tuple[WritesAtOnce, MemoryWire]:
    wire, server = memory_wires()
    ours = WritesAtOnce(wire._outgoing, wire._incoming)  # pyright: ignore[reportPrivateUsage]
    return ours, server


async def written(server: MemoryWire) -> tuple[dict[str, Any], Mapping[str, str] | None]:
    with anyio.fail_after(5):
        message, headers = await server.receive()
    assert isinstance(message, dict)
    return message, headers


async def _nothing(inbound: Inbound, method: str, params: dict[str, Any] | None) -> Any:
    return {}


async def _client(wire: MemoryWire, tg: anyio.abc.TaskGroup) -> Endpoint:
    endpoint = Endpoint(wire, "upstream 'u'")
    await tg.start(endpoint.run, _nothing, _nothing)
    return endpoint


# -- our requests: `asking` ----------------------------------------------------------------------------------------


async def test_asking_writes_as_it_is_called_and_its_caller_awaits_the_future_alone() -> None:
    wire, server = at_once_wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        answer = endpoint.asking("r1", "tools/call", {"name": "t"}, headers={"Mcp-Protocol-Version": "x"})
        assert isinstance(answer, asyncio.Future)  # no coroutine of the endpoint's held while it waits
        message, headers = server.receive_nowait()  # written already
        assert message == {"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": {"name": "t"}}
        assert headers == {"Mcp-Protocol-Version": "x"}
        await server.say({"jsonrpc": "2.0", "id": "r1", "result": {"ok": True}})
        with anyio.fail_after(5):
            assert await answer == {"ok": True}
        await asyncio.sleep(0)  # the future's done callback
        assert endpoint._waiters == {}  # pyright: ignore[reportPrivateUsage]
        # the id is free again
        again = endpoint.asking("r1", "ping", None)
        await server.say({"jsonrpc": "2.0", "id": "r1", "error": {"code": -32000, "message": "no"}})
        with anyio.fail_after(5), pytest.raises(MCPError, match="no"):
            await again
        server.close()


@pytest.mark.parametrize("wires", [at_once_wires, memory_wires], ids=["written-at-once", "write-waits"])
async def test_a_caller_that_leaves_while_asking_tells_the_peer_and_forgets_the_request(wires: Any) -> None:
    wire, server = wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        with anyio.CancelScope() as scope:

            async def leave_once_written() -> None:
                await written(server)
                scope.cancel()

            tg.start_soon(leave_once_written)
            await endpoint.asking("r1", "tools/call", None, headers={"Mcp-Protocol-Version": "x"})
        assert scope.cancelled_caught
        cancel, headers = await written(server)
        assert cancel == {
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "r1", "reason": "caller cancelled"},
        }
        assert headers == {"Mcp-Protocol-Version": "x"}
        assert endpoint._waiters == {}  # pyright: ignore[reportPrivateUsage]
        server.close()


@pytest.mark.parametrize("wires", [at_once_wires, memory_wires], ids=["written-at-once", "write-waits"])
async def test_the_connections_end_fails_a_request_asked_with_peer_lost(wires: Any) -> None:
    wire, server = wires()
    failed: list[BaseException] = []

    async def ask(endpoint: Endpoint) -> None:
        try:
            await endpoint.asking("r1", "tools/call", None)
        except PeerLost as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        tg.start_soon(ask, endpoint)
        await written(server)
        server.close()
    assert len(failed) == 1 and isinstance(failed[0], PeerLost)
    assert failed[0].error.code == CONNECTION_CLOSED
    with pytest.raises(PeerLost):
        endpoint.asking("r2", "ping", None)  # refused at once once it ended


async def test_asking_refuses_an_id_in_flight_and_keeps_the_first() -> None:
    wire, server = at_once_wires()
    async with anyio.create_task_group() as tg:
        endpoint = await _client(wire, tg)
        first = endpoint.asking("r1", "tools/call", None)
        with pytest.raises(ValueError, match="already in flight"):
            endpoint.asking("r1", "tools/call", None)
        await written(server)
        await server.say({"jsonrpc": "2.0", "id": "r1", "result": {"first": True}})
        with anyio.fail_after(5):
            assert await first == {"first": True}
        server.close()


# -- the peer's requests on a face: `_serve_in_task` -------------------------------------------------------------------


async def test_a_faces_request_runs_as_its_handlers_own_coroutine_and_its_end_answers_it() -> None:
    wire, server = memory_wires()
    made: list[Coroutine[Any, Any, Any]] = []
    seen: dict[str, object] = {}
    release = anyio.Event()

    async def served(params: dict[str, Any] | None) -> dict[str, Any]:
        task = asyncio.current_task()
        assert task is not None
        seen["coroutine"] = task.get_coro()
        await release.wait()
        if params and params.get("fail"):
            raise MCPError(code=-32001, message="refused", data={"why": "asked to"})
        if params and params.get("crash"):
            raise RuntimeError("boom")
        return {"echo": params}

    def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> Coroutine[Any, Any, Any]:
        made.append(served(params))
        return made[-1]

    endpoint = Endpoint(wire, "the client", serving=True)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, on_request, _nothing)
        await server.say({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"a": 1}})
        with anyio.fail_after(5):
            while "coroutine" not in seen:
                await anyio.lowlevel.checkpoint()
        assert seen["coroutine"] is made[0]  # no `_handle` frame around it
        release.set()
        assert (await written(server))[0] == {"jsonrpc": "2.0", "id": 1, "result": {"echo": {"a": 1}}}
        await server.say({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"fail": True}})
        assert (await written(server))[0] == {
            "jsonrpc": "2.0", "id": 2, "error": {"code": -32001, "message": "refused", "data": {"why": "asked to"}},
        }
        await server.say({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"crash": True}})
        assert (await written(server))[0] == {
            "jsonrpc": "2.0", "id": 3, "error": {"code": INTERNAL_ERROR, "message": "boom"},
        }
        server.close()


async def test_a_faces_request_the_peer_cancelled_is_not_answered_and_one_the_end_cut_short_is() -> None:
    wire, server = memory_wires()
    waiting: dict[str, anyio.Event] = {"a": anyio.Event(), "b": anyio.Event()}

    async def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if method == "ping":
            return {}
        waiting[method].set()
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    endpoint = Endpoint(wire, "the client", serving=True)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, on_request, _nothing)
        await server.say({"jsonrpc": "2.0", "id": "a", "method": "a"})
        await server.say({"jsonrpc": "2.0", "id": "b", "method": "b"})
        with anyio.fail_after(5):
            await waiting["a"].wait()
            await waiting["b"].wait()
        await server.say({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}})
        await server.say({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        assert (await written(server))[0] == {"jsonrpc": "2.0", "id": "p", "result": {}}  # and nothing for "a"
        server.close()  # the connection ends under "b"
        assert (await written(server))[0] == {
            "jsonrpc": "2.0", "id": "b", "error": {"code": CONNECTION_CLOSED, "message": "Connection closed"},
        }
    with pytest.raises((anyio.EndOfStream, anyio.WouldBlock)):
        server.receive_nowait()


async def test_a_faces_handler_that_refuses_before_any_await_is_answered_and_reading_goes_on() -> None:
    wire, server = memory_wires()

    def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> Coroutine[Any, Any, Any]:
        if method == "refused":
            raise MCPError(code=-32600, message="not on this connection")
        return _nothing(inbound, method, params)

    endpoint = Endpoint(wire, "the client", serving=True)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, on_request, _nothing)
        await server.say({"jsonrpc": "2.0", "id": 1, "method": "refused"})
        assert (await written(server))[0] == {
            "jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "not on this connection"},
        }
        await server.say({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert (await written(server))[0] == {"jsonrpc": "2.0", "id": 2, "result": {}}
        server.close()


async def test_a_served_request_keeps_only_its_id_and_progress_token_once_its_handler_has_it() -> None:
    """The decoded request (its params, the tool's arguments) is the handler's: the `Inbound` the request's context
    reads while it is served (`faces.dispatch.RequestContext.request_id`, `.progress`) keeps only those two."""
    from mcp.shared.jsonrpc_dispatcher import progress_token_from_params

    wire, server = memory_wires()
    held: dict[object, Inbound] = {}
    release = anyio.Event()

    async def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        assert params is not None
        held[params["n"]] = inbound
        await release.wait()
        return {"n": params["n"], "arguments": params["arguments"]}

    endpoint = Endpoint(wire, "the client", serving=True)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, on_request, _nothing)
        arguments = {"question": "Proceed?"}
        await server.say({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"n": 1, "arguments": arguments, "_meta": {"progressToken": "t-1", "x": 1}}})
        await server.say({"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": {"n": 2, "arguments": {}}})
        with anyio.fail_after(5):
            while len(held) < 2:
                await anyio.lowlevel.checkpoint()
        first, second = held[1].message, held[2].message
        assert first == {"params": {"_meta": {"progressToken": "t-1"}}}
        assert isinstance(first, dict) and progress_token_from_params(first.get("params")) == "t-1"
        # The id beside the message; without a progress token, no message of its own (one empty message shared).
        assert (held[1].served_id, held[2].served_id) == (7, "s")
        assert second == {}
        release.set()
        answers = {(await written(server))[0]["id"] for _ in range(2)}
        assert answers == {7, "s"}
        server.close()
