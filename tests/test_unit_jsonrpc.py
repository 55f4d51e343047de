"""The upstream JSON-RPC endpoint (`wire.endpoint.Endpoint`) over in-memory wires (`wire.memory`): what it
writes for each call, and what it does with every kind of message a server can send, well-formed or not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, REQUEST_TIMEOUT

from mcp.shared.exceptions import MCPError

from elicitgate.errors import MethodNotFound, PeerLost, UrlElicitationRequired
from elicitgate.wire import codec
from elicitgate.wire.base import Inbound, MessageWire
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.framing import LineBuffer
from elicitgate.wire.memory import MemoryWire, memory_wires

pytestmark = pytest.mark.anyio


async def written(server: MemoryWire) -> dict[str, Any]:
    """What the endpoint wrote next, read at the server's end of the wire."""
    with anyio.fail_after(5):
        message, _ = await server.receive()
    assert isinstance(message, dict)
    return message


class Recorder:
    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []
        self.noted = anyio.Event()

    async def on_request(self, inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if method == "fail":
            raise MCPError(code=-32042, message="refused", data={"why": "test"})
        if method == "crash":
            raise RuntimeError("boom")
        if method == "wait":
            await anyio.sleep_forever()
        return {"method": method, "params": params, "related": inbound.related_request_id}

    async def on_notify(self, inbound: Inbound, method: str, params: dict[str, Any] | None) -> None:
        self.notes.append((method, params))
        self.noted.set()


async def _running(wire: MessageWire, recorder: Recorder, tg: anyio.abc.TaskGroup) -> Endpoint:
    endpoint = Endpoint(wire, "test")
    await tg.start(endpoint.run, recorder.on_request, recorder.on_notify)
    return endpoint


async def test_responses_find_their_requests_in_any_order() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)
        results: dict[str, Any] = {}

        async def call(request_id: str) -> None:
            results[request_id] = await endpoint.request(request_id, "tools/call", {"name": request_id})

        tg.start_soon(call, "a")
        first = await written(server)
        tg.start_soon(call, "b")
        second = await written(server)
        assert first == {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "a"}}
        await server.say({"jsonrpc": "2.0", "id": second["id"], "result": {"n": 2}})
        await server.say({"jsonrpc": "2.0", "id": first["id"], "result": {"n": 1}})
        server.close()
    assert results == {"a": {"n": 1}, "b": {"n": 2}}


@pytest.mark.parametrize(
    ("said", "code", "message", "data"),
    [
        ({"code": -32602, "message": "bad", "data": {"field": "x"}}, -32602, "bad", {"field": "x"}),
        ({"code": "-32602", "message": "bad"}, INTERNAL_ERROR, None, {"error": {"code": "-32602", "message": "bad"}}),
        ("nope", INTERNAL_ERROR, None, {"error": "nope"}),
    ],
)
async def test_error_responses_raise_as_said_or_say_what_was_malformed(
    said: Any, code: int, message: str | None, data: Any
) -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)

        async def answer() -> None:
            sent = await written(server)
            await server.say({"jsonrpc": "2.0", "id": sent["id"], "error": said})

        tg.start_soon(answer)
        with pytest.raises(MCPError) as raised:
            await endpoint.request("r1", "tools/call", None)
        server.close()
    assert raised.value.error.code == code
    assert raised.value.error.data == data
    if message is not None:
        assert raised.value.error.message == message


async def test_a_result_that_is_not_an_object_is_an_error_not_a_hang() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)

        async def answer() -> None:
            await written(server)
            await server.say({"jsonrpc": "2.0", "id": "r1", "result": [1, 2]})

        tg.start_soon(answer)
        with pytest.raises(MCPError, match="not a JSON object") as raised:
            await endpoint.request("r1", "tools/call", None)
        server.close()
    assert raised.value.error.code == INTERNAL_ERROR


async def test_a_caller_that_leaves_tells_the_server_and_an_answered_one_does_not() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)
        with anyio.CancelScope() as scope:

            async def leave_once_written() -> None:
                await written(server)
                scope.cancel()

            tg.start_soon(leave_once_written)
            await endpoint.request("r1", "tools/call", None, headers={"Mcp-Protocol-Version": "x"})
        with anyio.fail_after(5):
            cancel, headers = await server.receive()
        assert cancel == {
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "r1", "reason": "caller cancelled"},
        }
        assert headers == {"Mcp-Protocol-Version": "x"}

        async def answer() -> None:
            await written(server)
            await server.say({"jsonrpc": "2.0", "id": "r2", "result": {}})

        tg.start_soon(answer)
        assert await endpoint.request("r2", "ping", None) == {}
        server.close()
    assert server.unread == 0  # no cancel for the answered one


async def test_a_timeout_is_request_timeout_and_cancels_upstream_unless_told_not_to() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)
        with pytest.raises(MCPError) as raised:
            await endpoint.request("r1", "tools/call", None, timeout=0.01)
        assert raised.value.error.code == REQUEST_TIMEOUT
        assert (await written(server))["method"] == "tools/call"
        assert (await written(server))["params"] == {"requestId": "r1", "reason": "timed out after 0.01s"}
        with pytest.raises(MCPError):
            await endpoint.request("r2", "server/discover", None, timeout=0.01, cancel_on_abandon=False)
        assert (await written(server))["id"] == "r2"
        server.close()
    assert server.unread == 0


async def test_the_wire_ending_fails_every_waiting_request_with_connection_closed() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    errors: list[MCPError] = []
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)

        async def call(request_id: str) -> None:
            try:
                await endpoint.request(request_id, "tools/call", None)
            except MCPError as exc:
                errors.append(exc)

        tg.start_soon(call, "a")
        tg.start_soon(call, "b")
        await written(server)
        await written(server)
        server.close()
    assert [(type(e), e.error.code) for e in errors] == [(PeerLost, CONNECTION_CLOSED)] * 2
    with pytest.raises(PeerLost):
        await endpoint.request("c", "tools/call", None)


async def test_server_requests_are_answered_with_results_and_errors() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        await _running(wire, recorder, tg)
        await server.say(
            {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {"m": 1}}, related="eg-3"
        )
        assert await written(server) == {
            "jsonrpc": "2.0", "id": 7,
            "result": {"method": "elicitation/create", "params": {"m": 1}, "related": "eg-3"},
        }
        await server.say({"jsonrpc": "2.0", "id": 8, "method": "fail"})
        assert await written(server) == {
            "jsonrpc": "2.0", "id": 8, "error": {"code": -32042, "message": "refused", "data": {"why": "test"}},
        }
        await server.say({"jsonrpc": "2.0", "id": 9, "method": "crash"})
        assert await written(server) == {
            "jsonrpc": "2.0", "id": 9, "error": {"code": INTERNAL_ERROR, "message": "boom"},
        }
        await server.say({"jsonrpc": "2.0", "id": 10, "method": "sampling/createMessage", "params": [1]})
        answer = await written(server)
        assert answer["id"] == 10 and answer["error"]["code"] == INVALID_REQUEST
        server.close()


class EncodingWire:
    """One end of memory wires that writes each message as JSON first, as every real wire does (`wire.codec`)."""

    def __init__(self, wire: MemoryWire) -> None:
        self._wire = wire

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        codec.dumps_line(message)
        await self._wire.send(message, headers)

    def messages(self) -> AsyncIterator[Inbound]:
        return self._wire.messages()


async def test_an_answer_too_deep_to_write_is_answered_with_an_error_instead() -> None:
    (near, server), recorder = memory_wires(), Recorder()
    wire = EncodingWire(near)
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    async with anyio.create_task_group() as tg:
        await _running(wire, recorder, tg)
        await server.say({"jsonrpc": "2.0", "id": 11, "method": "echo", "params": {"deep": deep}})
        answer = await written(server)
        assert answer["id"] == 11 and answer["error"]["code"] == INTERNAL_ERROR
        assert answer["error"]["message"] == "the answer cannot be written as JSON: JSON nested too deep to write"
        await server.say({"jsonrpc": "2.0", "id": 12, "method": "ping"})
        assert (await written(server))["id"] == 12
        server.close()


class RefusingWire:
    """One end of memory wires that cannot send any answer (it raises `ValueError`, as a failing socket check
    once did)."""

    def __init__(self, wire: MemoryWire) -> None:
        self._wire = wire
        self.refused: list[dict[str, Any]] = []
        self.refusing = anyio.Event()

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if "method" not in message:
            self.refused.append(message)
            self.refusing.set()
            raise ValueError("cannot send")
        await self._wire.send(message, headers)

    def messages(self) -> AsyncIterator[Inbound]:
        return self._wire.messages()

    async def refusals(self, count: int) -> list[tuple[Any, bool]]:
        """(id, is an error) of each answer refused, once `count` were."""
        with anyio.fail_after(5):
            while len(self.refused) < count:
                self.refusing = anyio.Event()
                await self.refusing.wait()
        return sorted((m["id"], "error" in m) for m in self.refused)


async def test_an_answer_the_wire_refuses_is_replaced_by_one_error_and_then_dropped() -> None:
    """Before, the error standing in for the answer failed the same way and was replaced in turn, for ever."""
    (near, server), recorder = memory_wires(), Recorder()
    wire = RefusingWire(near)
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)
        await server.say({"jsonrpc": "2.0", "id": 21, "method": "ping"})
        await server.say({"jsonrpc": "2.0", "id": 22, "method": "ping"})
        assert await wire.refusals(4) == [(21, False), (21, True), (22, False), (22, True)]
        tg.start_soon(endpoint.request, "r1", "tools/list", None)  # the endpoint goes on
        assert (await written(server))["method"] == "tools/list"
        assert len(wire.refused) == 4
        server.close()
        tg.cancel_scope.cancel()


async def test_a_request_the_server_cancels_is_not_answered() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        await _running(wire, recorder, tg)
        await server.say({"jsonrpc": "2.0", "id": "w", "method": "wait"})
        await server.say({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}})
        await recorder.noted.wait()  # the cancel also reaches the gateway, after the handler was stopped
        await server.say({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        assert (await written(server))["id"] == "p"  # the next answer; none ever came for "w"
        server.close()


async def test_a_serving_endpoint_answers_what_is_in_flight_when_the_wire_ends() -> None:
    """The requests of the peer's still being served when its wire ends (each in a task of its own, outside
    the endpoint's task group) are cancelled and answered `Connection closed`, except one the peer cancelled
    itself; `run` returns once they are."""
    (wire, server), recorder = memory_wires(), Recorder()
    endpoint = Endpoint(wire, "the client", serving=True)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, recorder.on_request, recorder.on_notify)
            for request_id in ("a", "b", "c"):
                await server.say({"jsonrpc": "2.0", "id": request_id, "method": "wait"})
            await server.say({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "b"}})
            await recorder.noted.wait()
            server.close()
    answers = []
    while True:
        try:
            answers.append(server.receive_nowait()[0])
        except anyio.WouldBlock:
            break
    assert sorted(answers, key=lambda m: m["id"]) == [
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}}
        for request_id in ("a", "c")
    ]


async def test_progress_goes_to_its_request_and_other_notifications_to_the_gateway() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    progress: list[tuple[float, float | None, str | None]] = []
    got = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        got.set()

    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)

        async def serve() -> None:
            sent = await written(server)
            assert sent["params"]["_meta"] == {"k": 1, "progressToken": "r1"}
            await server.say({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": "r1", "progress": 1, "total": 4, "message": "a"}})
            await got.wait()
            await server.say({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
            await recorder.noted.wait()
            await server.say({"jsonrpc": "2.0", "id": "r1", "result": {}})

        tg.start_soon(serve)
        await endpoint.request("r1", "tools/call", {"_meta": {"k": 1}}, on_progress=on_progress)
        server.close()
    assert progress == [(1.0, 4.0, "a")]
    assert recorder.notes == [("notifications/message", {"level": "info"})]


async def test_unreadable_and_stray_messages_are_skipped_and_reading_goes_on() -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)

        async def serve() -> None:
            await written(server)
            await server.say(ValueError("not JSON: b'server starting'"))
            await server.say({"jsonrpc": "2.0", "id": "unknown", "result": {}})
            await server.say({"jsonrpc": "2.0", "id": True, "method": "ping"})
            await server.say({"jsonrpc": "2.0"})
            await server.say({"jsonrpc": "2.0", "id": "r1", "result": {"ok": True}})

        tg.start_soon(serve)
        assert await endpoint.request("r1", "tools/call", None) == {"ok": True}
        server.close()


@pytest.mark.parametrize(
    ("error", "lost", "typed"),
    [
        ({"code": -32601, "message": "Method not found"}, False, MethodNotFound),
        ({"code": -32042, "message": "auth", "data": {"elicitations": [{"mode": "url", "x": 1}]}}, False,
         UrlElicitationRequired),
        ({"code": -32000, "message": "the server's own -32000"}, False, MCPError),
        ({"code": -32000, "message": "stream ended without a response"}, True, PeerLost),
    ],
)
async def test_errors_the_gateway_acts_on_are_typed_and_only_the_transport_can_say_lost(
    error: dict[str, Any], lost: bool, typed: type[MCPError]
) -> None:
    (wire, server), recorder = memory_wires(), Recorder()
    async with anyio.create_task_group() as tg:
        endpoint = await _running(wire, recorder, tg)

        async def answer() -> None:
            await written(server)
            await server.say({"jsonrpc": "2.0", "id": "r1", "error": error}, lost=lost)

        tg.start_soon(answer)
        with pytest.raises(MCPError) as raised:
            await endpoint.request("r1", "tools/call", None)
        server.close()
    assert type(raised.value) is typed
    assert (raised.value.error.code, raised.value.error.message) == (error["code"], error["message"])
    if typed is UrlElicitationRequired:
        assert raised.value.error.data == error["data"]  # passed on verbatim, unknown fields and all
        assert raised.value.elicitations == [{"mode": "url", "x": 1}]


def test_a_malformed_url_elicitation_error_has_no_elicitations() -> None:
    for data in (None, "x", {"elicitations": "x"}, {"elicitations": {"a": 1}}):
        assert UrlElicitationRequired(-32042, "auth", data).elicitations == []


def test_lines_split_across_any_number_of_chunks_are_parsed_once_whole() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"z" * 200_000 + b'"}}'
    lines = LineBuffer()
    found = [m for i in range(0, len(line), 4096) for m in lines.feed(line[i : i + 4096])]
    assert found == []
    found = lines.feed(b"\n\n  \n" + b'{"id":2}\n{"id"')  # the end of the long line, blank lines, two more
    assert [m["id"] for m in found if isinstance(m, dict)] == [1, 2]
    assert found[0]["params"]["x"] == "z" * 200_000
    assert lines.feed(b"") == [] and lines.feed(b":3}") == []
    assert lines.end() == {"id": 3}  # the last line, without its newline
    assert lines.end() is None
    assert isinstance(LineBuffer().feed(b"not json\n")[0], ValueError)
