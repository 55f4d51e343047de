"""What the stdio face's critical path no longer calls (issue #34: the `request`, `push` and `result` stretches of
`bench.elicit_path`), with the same results: the event loop is asked of asyncio once per endpoint and once per call's
clock, not for every request, task, future and clock read (`asyncio.get_running_loop` is a `getpid` system call on
Python 3.11); `is_mapping(None)` runs no ABC check; the known shapes run no `typing.cast`; a handshake-era face looks
for the 2026-07-28 envelope and the request's `_meta` only in a request that has `_meta`, and reads the connection's
`initialize_accepted` until it is True; a served request's id is named before its handler makes its context."""

from __future__ import annotations

import asyncio
import math
import types
from collections.abc import AsyncGenerator, Mapping
from types import SimpleNamespace
from typing import Any, cast

import anyio
import anyio.abc
import pytest

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import NoBackChannelError

from elicitgate.bridging.envelope import without_upstream_identity
from elicitgate.faces.dispatch import ModernRequestContext, RequestContext, _Replay, serve_handshake  # pyright: ignore[reportPrivateUsage]
from elicitgate.faces.known_shapes import sieved_tool_result, tool_call_params_fit
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.tasks import RELATED_TASK, TaskTable
from elicitgate.upstreams.clock import PausableDeadline
from elicitgate.upstreams.link import UpstreamLink
from elicitgate.wire.base import Inbound, SendsAtOnce
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.memory import MemoryWire, memory_wires
from tests.profiled import calls_of, python_calls
from tests.test_unit_frameless_requests import at_once_wires
from tests.test_unit_trims_cost import _router  # pyright: ignore[reportPrivateUsage]
from tests.test_unit_upstream_stamp import modern_connection

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- the loop in hand -------------------------------------------------------------------------------------------------


async def test_a_calls_clock_asks_for_the_loop_once() -> None:
    loop = asyncio.get_running_loop()
    with python_calls(c_prefix="c:") as called:
        clock = PausableDeadline(1000.0)
        with clock:
            clock.pause()
            assert clock.deadline == math.inf
            clock.resume()
            deadline = clock.deadline
    assert called.count("c:get_running_loop") == 1
    assert clock.loop is loop
    assert loop.time() < deadline <= loop.time() + 1000.0


class _Quiet:
    """A wire that takes every message at once and reads nothing until it is closed."""

    def __init__(self) -> None:
        self.sent: list[JsonObject] = []
        self.closed = anyio.Event()

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        self.sent.append(message)

    async def messages(self) -> AsyncGenerator[Inbound]:
        await self.closed.wait()
        return
        yield


async def test_a_request_of_a_running_endpoint_asks_no_loop() -> None:
    wire = _Quiet()
    endpoint = Endpoint(wire, "upstream 'u'")
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, _nothing, _nothing)
        answer, called = calls_of(lambda: endpoint.asking("r1", "tools/call", {"name": "t"}), c_calls=True)
        assert "get_running_loop" not in called
        assert wire.sent == [{"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": {"name": "t"}}]
        assert isinstance(answer, asyncio.Future) and not answer.done()
        answer.cancel()
        wire.closed.set()


@pytest.mark.parametrize("serving", [True, False], ids=["face", "upstream"])
async def test_a_request_of_the_peers_is_served_in_a_task_made_without_asking_for_the_loop(serving: bool) -> None:
    wire, peer = memory_wires()
    endpoint = Endpoint(wire, "the client" if serving else "upstream 'u'", serving=serving)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, _answered, _nothing)
        inbound = Inbound({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t"}})
        _, called = calls_of(lambda: endpoint._dispatch(inbound, _answered, _nothing), c_calls=True)  # pyright: ignore[reportPrivateUsage]
        assert "get_running_loop" not in called
        assert await _written(peer) == {"jsonrpc": "2.0", "id": 7, "result": {"method": "tools/call"}}
        peer.close()


async def test_a_served_requests_id_is_named_before_its_handler_is_called() -> None:
    wire, client = memory_wires()
    seen: list[object] = []

    def on_request(inbound: Inbound, method: str, params: JsonObject | None) -> Any:
        seen.append(inbound.served_id)
        return _answered(inbound, method, params)

    async with anyio.create_task_group() as tg:
        await tg.start(Endpoint(wire, "the client", serving=True).run, on_request, _nothing)
        await client.say({"jsonrpc": "2.0", "id": "q-1", "method": "tools/call", "params": {}})
        assert await _written(client) == {"jsonrpc": "2.0", "id": "q-1", "result": {"method": "tools/call"}}
        client.close()
    assert seen == ["q-1"]


# -- calls cut from the shapes' checks --------------------------------------------------------------------------------


def test_is_mapping_of_none_runs_no_abc_check() -> None:
    found, called = calls_of(lambda: is_mapping(None))
    assert found is False and called == ["is_mapping"]
    assert is_mapping({}) and is_mapping(types.MappingProxyType({"a": 1})) and not is_mapping([])


def test_the_known_shapes_run_no_cast() -> None:
    fits, called = calls_of(lambda: tool_call_params_fit({"name": "t", "arguments": {"x": 1}}))
    assert fits is True and called == ["tool_call_params_fit"]
    result = {"content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}], "isError": False}
    sieved, called = calls_of(lambda: sieved_tool_result(result))
    assert called == ["sieved_tool_result"]
    assert sieved == {"content": [{"text": "hi", "type": "text"}, {"text": "there", "type": "text"}], "isError": False}


# -- a handshake-era face's request -----------------------------------------------------------------------------------


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def test_a_handshake_call_without_meta_looks_for_no_envelope_and_reads_the_init_gate_until_it_is_open() -> None:
    wire, client = memory_wires()
    server: Server[Any] = Server("t")
    served: list[object] = []

    async def call(ctx: ServerRequestContext[Any, Any], runner: ServerRunner[Any]) -> JsonObject:
        served.append(ctx.request_id)
        return {"content": [{"type": "text", "text": "ok"}]}

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_handshake, server, wire, None, server.create_initialization_options(), {"tools/call": call})
        await client.say(INITIALIZE)
        assert "result" in await _written(client)
        await client.say({"jsonrpc": "2.0", "method": "notifications/initialized"})
        first = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {}}}
        await client.say(first)
        assert await _written(client) == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"content": [{"type": "text", "text": "ok"}]},
        }
        with python_calls() as called:
            await client.say({**first, "id": 2})
            answer = await _written(client)
        assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "ok"}]}}
        assert served == [1, 2]
        assert "has_modern_envelope" not in called
        assert "_extract_meta" not in called
        assert "initialize_accepted" not in called
        # with `_meta` (a progress token), the envelope is looked for, and the meta lifted as the kernel does
        with python_calls() as called:
            await client.say(
                {**first, "id": 3, "params": {"name": "t", "arguments": {}, "_meta": {"progressToken": 5}}}
            )
            answer = await _written(client)
        assert answer == {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "ok"}]}}
        assert "has_modern_envelope" in called and "_extract_meta" in called
        client.close()


async def _nothing(inbound: Inbound, method: str, params: JsonObject | None) -> Any:
    return {}


async def _answered(inbound: Inbound, method: str, params: JsonObject | None) -> JsonObject:
    return {"method": method}


async def _written(peer: MemoryWire) -> JsonObject:
    with anyio.fail_after(5):
        message, _ = await peer.receive()
    assert isinstance(message, dict)
    return message


# -- the answers: settled and written in fewer calls ------------------------------------------------------------------


async def test_a_request_settled_by_its_caller_is_forgotten_in_one_call() -> None:
    wire = _Quiet()
    endpoint = Endpoint(wire, "upstream 'u'")
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, _nothing, _nothing)
        answer = endpoint.asking("r1", "tools/call", None, settled_by_caller=True)
        assert isinstance(answer, asyncio.Future)
        answer.set_result({"ok": True})
        _, called = calls_of(lambda: endpoint.asked_over("r1", None))
        assert called == ["asked_over"]
        assert endpoint._waiters == {}  # pyright: ignore[reportPrivateUsage]
        assert await answer == {"ok": True}
        # a caller that left: the future cancelled, the peer told
        left = endpoint.asking("r2", "tools/call", None, settled_by_caller=True)
        endpoint.asked_over("r2", None)
        assert isinstance(left, asyncio.Future) and left.cancelled()
        with anyio.fail_after(5):
            while len(wire.sent) < 3:
                await anyio.lowlevel.checkpoint()
        assert wire.sent[-1] == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "r2", "reason": "caller cancelled"},
        }
        wire.closed.set()


class _AtOnce(_Quiet):
    """A wire that writes without waiting, and says so (`wire.base.SendsAtOnce`), as a face's pipe with room does."""

    def send_now(self, message: JsonObject) -> bool:
        self.sent.append(message)
        return True


async def test_a_faces_answer_is_written_at_once_where_its_wire_can() -> None:
    wire = _AtOnce()
    endpoint = Endpoint(wire, "the client", serving=True)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, _answered, _nothing)
        with python_calls() as called:
            endpoint._dispatch(Inbound({"jsonrpc": "2.0", "id": 4, "method": "m"}), _answered, _nothing)  # pyright: ignore[reportPrivateUsage]
            with anyio.fail_after(5):
                while not wire.sent:
                    await anyio.lowlevel.checkpoint()
        assert wire.sent == [{"jsonrpc": "2.0", "id": 4, "result": {"method": "m"}}]
        assert "send_now" in called and "_write_answer" not in called
        wire.closed.set()


def test_the_faces_replay_hands_on_its_wires_send_now() -> None:
    wire = _AtOnce()
    replay = _Replay(wire)
    assert isinstance(replay, SendsAtOnce)
    assert replay.send_now({"jsonrpc": "2.0", "method": "n"}) and wire.sent == [{"jsonrpc": "2.0", "method": "n"}]
    assert not isinstance(_Replay(_Quiet()), SendsAtOnce)


# -- the push: fewer calls before the broker --------------------------------------------------------------------------


def _context(modern: bool = False) -> RequestContext:
    endpoint = SimpleNamespace(asking=lambda request_id, method, params: ("asked", request_id, method, params))
    dispatcher = cast(Any, SimpleNamespace(endpoint=endpoint))
    inbound = Inbound({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
    return (ModernRequestContext if modern else RequestContext)(dispatcher, inbound)


def test_a_question_to_the_client_reads_whether_its_request_is_served_without_a_call() -> None:
    context = _context()
    asked, called = calls_of(lambda: context.asking("elicitation/create", {"x": 1}, "eg-1"))
    assert asked == ("asked", "eg-1", "elicitation/create", {"x": 1})
    assert called == ["asking", "<lambda>"]
    context._inbound.served = True  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(NoBackChannelError):
        context.asking("elicitation/create", None, "eg-2")
    with pytest.raises(NoBackChannelError):
        _context(modern=True).asking("elicitation/create", None, "eg-3")


def test_a_message_without_meta_names_no_task_without_a_call() -> None:
    found, called = calls_of(lambda: TaskTable.upstream_id_in({"message": "m"}))
    assert found is None and called == ["upstream_id_in"]
    assert TaskTable.upstream_id_in({"_meta": {RELATED_TASK: {"taskId": "t1"}}}) == "t1"
    assert TaskTable.upstream_id_in({"_meta": {}}) is None and TaskTable.upstream_id_in(None) is None


class _NoTasks:
    def __init__(self) -> None:
        self.asked: list[object] = []

    def of_upstream(self, connection: object, upstream_id: object) -> None:
        self.asked.append(upstream_id)


def test_a_pushed_question_naming_no_task_is_not_looked_up_in_the_task_table() -> None:
    router = cast(Any, object.__new__(InboundRouter))
    router.tasks = tasks = _NoTasks()
    origin = SimpleNamespace(peer="p")
    connection = SimpleNamespace(in_flight_origins=lambda: [origin], owner=None, tags_origin=False)
    whose = router._whose(connection, None, {"message": "m"})
    assert (whose.origin, whose.named, whose.params) == (origin, False, {"message": "m"})
    assert tasks.asked == []
    router._whose(connection, None, {"message": "m", "_meta": {RELATED_TASK: {"taskId": "t1"}}})
    assert tasks.asked == ["t1"]


def test_a_result_without_meta_is_returned_without_a_call() -> None:
    result = {"content": []}
    kept, called = calls_of(lambda: without_upstream_identity(result))
    assert kept is result and called == ["without_upstream_identity"]


class _Answered:
    """An upstream endpoint whose requests are answered at once (its futures made on a loop it was given)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def asking(self, request_id: str, method: str, params: Any, **_: Any) -> asyncio.Future[JsonObject]:
        future: asyncio.Future[JsonObject] = self.loop.create_future()
        future.set_result({"content": []})
        return future

    def asked_over(self, request_id: str, headers: Any) -> None:
        pass


async def test_a_request_upstream_asks_for_the_loop_once_for_its_deadline_and_its_end() -> None:
    loop = asyncio.get_running_loop()
    conn = modern_connection()
    conn.endpoint = cast(Endpoint, _Answered(loop))
    before = loop.time()
    with python_calls(c_prefix="c:") as called:
        assert await conn.request("tools/call", {"name": "echo"}, timeout=30) == {"content": []}
    assert called.count("c:get_running_loop") == 1
    assert before <= conn.last_active == conn.last_answer <= loop.time()


async def test_an_answer_and_a_request_are_routed_without_checking_their_ids_in_a_call() -> None:
    wire, peer = at_once_wires()
    endpoint = Endpoint(wire, "upstream 'u'")
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, _answered, _nothing)
        answer = endpoint.asking("r1", "tools/call", None)
        await _written(peer)
        response = Inbound({"jsonrpc": "2.0", "id": "r1", "result": {"ok": 1}})
        _, called = calls_of(lambda: endpoint._dispatch(response, _answered, _nothing))  # pyright: ignore[reportPrivateUsage]
        assert "is_request_id" not in called
        # its done callback forgets it, without `_forget`'s call
        with python_calls() as called:
            assert await answer == {"ok": 1}
            await asyncio.sleep(0)
        assert "_answer_settled" in called and "_forget" not in called
        assert endpoint._waiters == {}  # pyright: ignore[reportPrivateUsage]
        request = Inbound({"jsonrpc": "2.0", "id": 9, "method": "ping"})
        _, called = calls_of(lambda: endpoint._dispatch(request, _answered, _nothing))  # pyright: ignore[reportPrivateUsage]
        assert "is_request_id" not in called
        assert await _written(peer) == {"jsonrpc": "2.0", "id": 9, "result": {"method": "ping"}}
        # ids of other types are still told apart as before
        endpoint._dispatch(Inbound({"jsonrpc": "2.0", "id": True, "result": {}}), _answered, _nothing)  # pyright: ignore[reportPrivateUsage]
        endpoint._dispatch(Inbound({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), _answered, _nothing)  # pyright: ignore[reportPrivateUsage]
        assert peer.unread == 0
        peer.close()


# -- the request's route: fewer property calls ------------------------------------------------------------------------


class _Primary:
    """An upstream connection whose era is read through a property, as `UpstreamConnection.era` is."""

    def __init__(self, era: str) -> None:
        self._era = era

    @property
    def era(self) -> str:
        return self._era


def test_a_tool_not_required_as_a_task_is_not_asked_its_upstreams_era() -> None:
    router = _router([{"name": "echo"}])
    router.links = cast(Any, {"demo": SimpleNamespace(primary=_Primary("handshake"))})
    apart, called = calls_of(lambda: router._runs_as_task("demo", {"name": "echo"}))  # pyright: ignore[reportPrivateUsage]
    assert apart is False and called == ["_runs_as_task", "task_required"]
    required = {"name": "long", "execution": {"taskSupport": "required"}}
    assert router._runs_as_task("demo", required)  # pyright: ignore[reportPrivateUsage]
    router.links = cast(Any, {"demo": SimpleNamespace(primary=_Primary("modern"))})
    assert not router._runs_as_task("demo", required)  # pyright: ignore[reportPrivateUsage]


def test_whether_a_link_gives_clients_connections_of_their_own_reads_its_policy_without_a_call() -> None:
    link = cast(Any, object.__new__(UpstreamLink))
    link.config = SimpleNamespace(session_policy=None)
    link.primary = _Primary("handshake")
    own, called = calls_of(lambda: link.per_client)
    assert own is True and called == ["per_client", "era"]
    link.config.session_policy = "shared"
    assert link.per_client is False and link.policy == "shared"
    link.config.session_policy = "per_session"
    link.primary = _Primary("modern")
    assert link.per_client is False
    link.primary = None
    assert link.per_client is False
