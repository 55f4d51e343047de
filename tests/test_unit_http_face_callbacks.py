"""`/mcp` served from the connection's own steps (faces/streamable.py `at_body`, web/http_protocol.py `DirectRoute.
at_body`, faces/event_streams.py `EventStream.put`): the HTTP face as `serve` builds it over a gateway with no
upstream, its own protocol on a stand-in socket. A POST carrying the client's answer or notification is handed in
and answered 202 with no task; a request's answer (one JSON body, or an SSE event and the stream's end) is written
in the step that puts it, not one loop turn later by the request's task; what cannot be done at once (writing
paused, `100 Continue`, a body past the flow control's mark) and what fails goes through uvicorn's task as before."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from uvicorn.config import Config
from uvicorn.server import ServerState

from elicitgate.config import build_config
from elicitgate.faces import event_streams
from elicitgate.faces.event_streams import EventLimits, SessionEvents
from elicitgate.faces.http import HttpFaceServer, build_http_app
from elicitgate.gateway import Gateway
from elicitgate.web.client_address import ClientAddress
from elicitgate.web.http_protocol import DirectRoute, HttpLimits, LimitedHttpTools, limited_protocol
from tests.test_unit_http_protocol import MAX_HEAD, MAX_LINE, Socket, turns

pytestmark = pytest.mark.anyio

HEAD = (b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: application/json, text/event-stream\r\n"
        b"content-type: application/json\r\n")


def post(message: dict[str, Any], session: bytes | None = None, extra: bytes = b"") -> bytes:
    body = json.dumps(message).encode()
    named = b"mcp-session-id: %s\r\nmcp-protocol-version: 2025-06-18\r\n" % session if session is not None else b""
    return HEAD + named + extra + b"content-length: %d\r\n\r\n%s" % (len(body), body)


class Face:
    """One connection to the face's `/mcp`, its protocol and what it wrote."""

    def __init__(self, protocol: LimitedHttpTools, socket: Socket, state: ServerState, endpoint: Any = None) -> None:
        self.endpoint = endpoint
        self.protocol = protocol
        self.socket = socket
        self.state = state
        self.session = b""

    def held(self) -> bytes:
        """What was written, with what the connection holds until its loop turn ends (`CoalescedWrites`)."""
        return bytes(self.socket.written) + b"".join(self.protocol.transport._held)  # pyright: ignore[reportAttributeAccessIssue]

    async def until(self, reached: Callable[[], bool]) -> None:
        for _ in range(10_000):
            if reached():
                return
            await asyncio.sleep(0)
        raise AssertionError("not reached")

    async def answered(self, request: bytes, count: int = 1) -> bytes:
        """Feed `request`; what the connection writes once `count` more answers (`HTTP/1.1 `) are out."""
        before = len(self.socket.written)
        self.protocol.data_received(request)
        await self.until(lambda: self.socket.written[before:].count(b"HTTP/1.1 ") >= count
                         and self.socket.written.endswith((b"\r\n\r\n", b"}")))
        return bytes(self.socket.written[before:])


@asynccontextmanager
async def face() -> AsyncIterator[Face]:
    """The HTTP face with a session opened (`initialize`, `notifications/initialized`) on one connection."""
    loop = asyncio.get_running_loop()
    cfg = build_config({"mcpServers": {}}, "test_unit_http_face_callbacks")
    gateway = Gateway(cfg)
    app = build_http_app(gateway, "http://127.0.0.1:8000")
    config = uvicorn.Config(ClientAddress(app), log_level="warning", lifespan="off", access_log=False,
                            http=limited_protocol(HttpLimits.of(cfg.http)), proxy_headers=False)
    HttpFaceServer(config, app)
    config.load()
    async with app.router.lifespan_context(app):
        state = ServerState()
        protocol = config.http_protocol_class(config=config, server_state=state, app_state={}, _loop=loop)
        socket = Socket()
        protocol.connection_made(socket)
        connection = Face(protocol, socket, state, app.state.mcp)
        opened = await connection.answered(post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        connection.session = opened.lower().split(b"mcp-session-id: ", 1)[1].split(b"\r\n", 1)[0]
        await connection.until(lambda: not state.tasks)  # initialize's task, ended
        try:
            yield connection
        finally:
            protocol.connection_lost(None)
            await turns()


@pytest.mark.parametrize("cut", [None, "head", 7], ids=["one read", "head then body", "body in pieces"])
async def test_a_client_s_notification_is_answered_202_with_no_task(cut: str | int | None) -> None:
    async with face() as connection:
        request = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, connection.session)
        at = request.index(b"\r\n\r\n") + 4
        pieces = ([request] if cut is None else [request[:at], request[at:]] if cut == "head"
                  else [request[:at]] + [request[i:i + cut] for i in range(at, len(request), cut)])
        before = len(connection.socket.written)
        for piece in pieces:
            connection.protocol.data_received(piece)
            assert not connection.state.tasks, "no task for the request, its body whole or not"
        await connection.until(lambda: b"HTTP/1.1 202" in connection.socket.written[before:])
        answer = bytes(connection.socket.written[before:])
        assert b"mcp-session-id: " + connection.session in answer.lower()
        assert answer.endswith(b"content-length: 0\r\n" + b"mcp-session-id: " + connection.session + b"\r\n\r\n")
        assert not connection.state.tasks
        # the session goes on: a request after it is served (its task, then its answer)
        ping = await connection.answered(post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, connection.session))
        assert ping.startswith(b"HTTP/1.1 200") and ping.endswith(b'{"jsonrpc":"2.0","id":1,"result":{}}')


async def test_the_202_comes_two_loop_turns_after_the_message_is_handed_in() -> None:
    """As `_post` writes it: what the message sets off has had two turns first (bench/README)."""
    async with face() as connection:
        before = len(connection.socket.written)
        connection.protocol.data_received(post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                               connection.session))
        for _ in range(2):
            assert not connection.held()[before:]
            await asyncio.sleep(0)
        assert connection.held()[before:].startswith(b"HTTP/1.1 202")


async def test_a_202_waits_for_writing_to_resume_in_a_task() -> None:
    async with face() as connection:
        before = len(connection.socket.written)
        connection.protocol.pause_writing()
        connection.protocol.data_received(post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                               connection.session))
        await turns()
        assert not connection.held()[before:]
        assert len(connection.state.tasks) == 1, "writing must wait: a task does"
        connection.protocol.resume_writing()
        await connection.until(lambda: b"HTTP/1.1 202" in connection.socket.written[before:])
        await turns()
        assert not connection.state.tasks


async def test_a_request_s_json_answer_is_written_in_the_step_that_answers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not one loop turn later by the request's task: the answer is in the connection's writes as `put` returns."""
    put = event_streams.EventStream.put
    seen: list[bytes] = []
    async with face() as connection:

        def watched(stream: event_streams.EventStream, message: Any, *, last: bool = False) -> bool:
            done = put(stream, message, last=last)
            seen.append(connection.held())
            return done

        monkeypatch.setattr(event_streams.EventStream, "put", watched)
        answer = await connection.answered(post({"jsonrpc": "2.0", "id": 7, "method": "ping"}, connection.session))
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"jsonrpc":"2.0","id":7,"result":{}}')
        assert seen and seen[-1].endswith(b'{"jsonrpc":"2.0","id":7,"result":{}}'), "written as it was put"


async def test_a_body_that_is_no_message_is_refused_as_before() -> None:
    async with face() as connection:
        body = b'{"jsonrpc": "2.0", "id": 1, "method": '
        request = HEAD + b"mcp-session-id: %s\r\ncontent-length: %d\r\n\r\n%s" % (connection.session, len(body), body)
        answer = await connection.answered(request)
        assert answer.startswith(b"HTTP/1.1 400")
        assert b'"code":-32700' in answer and b"Parse error" in answer
        assert b"mcp-session-id: " + connection.session in answer.lower()


async def test_a_client_awaiting_100_continue_and_a_big_body_are_read_by_the_request_s_task() -> None:
    async with face() as connection:
        before = len(connection.socket.written)
        request = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, connection.session,
                       extra=b"expect: 100-continue\r\n")
        at = request.index(b"\r\n\r\n") + 4
        connection.protocol.data_received(request[:at])
        assert len(connection.state.tasks) == 1, "started with the head, to write 100 Continue"
        await connection.until(lambda: b"HTTP/1.1 100 Continue" in connection.socket.written[before:])
        connection.protocol.data_received(request[at:])
        await connection.until(lambda: b"HTTP/1.1 202" in connection.socket.written[before:])
        await connection.until(lambda: not connection.state.tasks)  # the 202 leaves in the task's last step

        big = post({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"pad": "x" * 100_000}},
                   connection.session)
        before = len(connection.socket.written)
        at = big.index(b"\r\n\r\n") + 4
        connection.protocol.data_received(big[:at])
        assert not connection.state.tasks
        connection.protocol.data_received(big[at:at + 70_000])  # past the flow control's high-water mark
        assert len(connection.state.tasks) == 1, "its task reads the rest"
        await turns()
        connection.protocol.data_received(big[at + 70_000:])
        await connection.until(lambda: b"HTTP/1.1 202" in connection.socket.written[before:])


async def test_a_failure_outside_the_task_is_answered_as_uvicorn_answers_an_app_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 500 and the close, logged as uvicorn logs an app's failure; the request pipelined behind it is not
    answered (uvicorn drops it)."""
    served: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        served.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    def failing(scope: Any, cycle: Any, connection: Any) -> Any:
        raise RuntimeError("at_body failed")

    from elicitgate.web.client_address import ClientAddress as Outer

    protocol_class = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))
    protocol_class.direct = DirectRoute(b"/mcp", app, app, Outer(app).inner, at_body=failing)
    protocol = protocol_class(config=Config(app, lifespan="off", log_config=None), server_state=ServerState(),
                              app_state={}, _loop=asyncio.get_running_loop())
    socket = Socket()
    protocol.connection_made(socket)
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        protocol.data_received(b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
                               b"POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
        await turns()
    assert socket.written.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert socket.written.count(b"HTTP/1.1 ") == 1 and socket.closed
    assert served == []
    assert "Exception in ASGI application" in caplog.text and "at_body failed" in caplog.text
    protocol.connection_lost(None)


SseWriter = Callable[[Any, Any, Any], Awaitable[None]]


async def _sse(lean: bool) -> tuple[bytes, list[bytes], bool]:
    """A stream written as an SSE response on the face's own server (`lean`: its `send`, else a wrapper of it, as
    any other server's); two events put, the second the last. What was written, what the connection held as each
    `put` returned, and what the writer returned."""
    stream = SessionEvents(EventLimits(100, 1000)).open()
    done: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        done.append(await stream.write(send if lean else (lambda message: send(message)), receive, after=0,
                                       priming=True, headers=[(b"mcp-session-id", b"s")]))

    protocol = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))(
        config=Config(app, lifespan="off", log_level="critical"), server_state=ServerState(), app_state={},
        _loop=asyncio.get_running_loop())
    socket = Socket()
    protocol.connection_made(socket)
    protocol.data_received(b"GET /mcp HTTP/1.1\r\nHost: a\r\n\r\n")
    await turns()
    held: list[bytes] = []
    for message, last in (({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create"}, False),
                          ({"jsonrpc": "2.0", "id": 1, "result": {}}, True)):
        stream.put(message, last=last)
        held.append(bytes(socket.written) + b"".join(protocol.transport._held))  # pyright: ignore[reportAttributeAccessIssue]
        await turns()
    protocol.connection_lost(None)
    name = stream.name.encode()
    return bytes(socket.written).replace(b"id: " + name, b"id: S"), held, done == [True]


async def test_an_sse_event_and_the_stream_s_end_are_written_in_the_step_that_puts_them() -> None:
    written, held, done = await _sse(lean=True)
    other, _, other_done = await _sse(lean=False)
    assert done and other_done
    assert written == other, "the same bytes as the reader writes them"
    assert held[0].endswith(b'data: {"jsonrpc":"2.0","id":3,"method":"elicitation/create"}\r\n\r\n\r\n')
    assert held[1].endswith(b'data: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n\r\n0\r\n\r\n')


async def test_a_request_answered_within_the_json_window_has_no_task() -> None:
    async with face() as connection:
        before = len(connection.socket.written)
        connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, connection.session))
        for _ in range(10_000):
            assert not connection.state.tasks
            if connection.socket.written[before:].endswith(b"}"):
                break
            await asyncio.sleep(0)
        answer = bytes(connection.socket.written[before:])
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"jsonrpc":"2.0","id":5,"result":{}}')
        assert b"content-type: application/json" in answer


@asynccontextmanager
async def held_requests(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[Any]]:
    """The client's requests held back from the session (handed in once the test lets them go)."""
    from elicitgate.faces.http_session import SessionWire

    held: list[Any] = []
    hand_in = SessionWire.hand_in

    def holding(wire: SessionWire, inbound: Any) -> None:
        if "id" in inbound.message and "method" in inbound.message:
            held.append((wire, inbound))
            return
        hand_in(wire, inbound)

    monkeypatch.setattr(SessionWire, "hand_in", holding)
    yield held
    monkeypatch.setattr(SessionWire, "hand_in", hand_in)
    for wire, inbound in held:
        hand_in(wire, inbound)


async def test_a_request_past_the_json_window_goes_on_as_an_sse_stream_in_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from elicitgate.faces import streamable

    monkeypatch.setattr(streamable, "JSON_WINDOW", 0.01)
    async with face() as connection:
        before = len(connection.socket.written)
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 6, "method": "ping"}, connection.session))
            assert len(held) == 1 and not connection.state.tasks
            await connection.until(lambda: bool(connection.state.tasks))  # the window passed: the stream's task
        await connection.until(lambda: connection.socket.written.endswith(b"0\r\n\r\n"))
        answer = bytes(connection.socket.written[before:])
        assert answer.startswith(b"HTTP/1.1 200") and b"content-type: text/event-stream" in answer
        assert b'data: {"jsonrpc":"2.0","id":6,"result":{}}' in answer
        await connection.until(lambda: not connection.state.tasks)


async def test_a_request_id_already_in_flight_is_refused_409(monkeypatch: pytest.MonkeyPatch) -> None:
    async with face() as connection:
        async with held_requests(monkeypatch) as held:
            request = post({"jsonrpc": "2.0", "id": 8, "method": "ping"}, connection.session)
            connection.protocol.data_received(request)
            assert len(held) == 1
            second = Face(*(await _second_connection(connection)))
            second.session = connection.session
            refused = await second.answered(request)
            assert refused.startswith(b"HTTP/1.1 409")
            assert b"already in flight" in refused and b"mcp-session-id: " + connection.session in refused.lower()
            second.protocol.connection_lost(None)
        await connection.until(lambda: connection.socket.written.endswith(b'"id":8,"result":{}}'))


async def _second_connection(first: Face) -> tuple[LimitedHttpTools, Socket, ServerState]:
    state = ServerState()
    protocol = type(first.protocol)(config=first.protocol.config, server_state=state, app_state={},
                                    _loop=asyncio.get_running_loop())
    socket = Socket()
    protocol.connection_made(socket)
    return protocol, socket, state


async def test_an_event_before_the_answer_starts_the_sse_stream_in_the_step_that_puts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head and the event go out as the event is put (the question pushed to the client one turn sooner); the
    response then waits with no task (`EventStream.park`); the answer and the stream's end are written as the answer
    is put, and the request is let go in that step."""
    async with face() as connection:
        before = len(connection.socket.written)
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, connection.session))
            (wire, _), = held
            progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": 1, "progress": 1}}
            wire.send_on_behalf(progress, 9)
            now = connection.held()[before:]
            assert now.startswith(b"HTTP/1.1 200 OK") and b"content-type: text/event-stream" in now
            assert now.endswith(b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,'
                                b'"progress":1}}\r\n\r\n\r\n')
            await turns()
            assert not connection.state.tasks, "no task waits for the rest of the stream"
        await connection.until(lambda: connection.held().endswith(b"0\r\n\r\n"))
        assert not connection.state.tasks
        answer = connection.held()[before:]
        assert answer.count(b"HTTP/1.1 ") == 1 and answer.count(b"event: message") == 2
        assert b'data: {"jsonrpc":"2.0","id":9,"result":{}}' in answer
        assert not connection.endpoint._sessions[connection.session.decode()].in_flight  # pyright: ignore[reportPrivateUsage]


async def test_an_initialize_on_a_session_answered_with_an_error_ends_the_session_as_before() -> None:
    async with face() as connection:
        answer = await connection.answered(post({"jsonrpc": "2.0", "id": 11, "method": "initialize", "params": {}},
                                                connection.session))
        assert answer.startswith(b"HTTP/1.1 200") and b'"error"' in answer
        assert connection.session.decode() not in connection.endpoint._sessions  # pyright: ignore[reportPrivateUsage]


class _Question:
    """A question as a stream carries it (`contracts.Question`), its carriers' calls recorded."""

    def __init__(self) -> None:
        from elicitgate.elicitation.carriers import Carriers

        self.calls: list[str] = []
        self.abandoned: list[str] = []
        calls = self.calls

        class Recorded(Carriers):
            __slots__ = ()

            def attach(self, carrier: object) -> None:
                calls.append("attach")
                super().attach(carrier)

            def detach(self, carrier: object, why: str) -> None:
                calls.append("detach")
                super().detach(carrier, why)

        self.carriers = Recorded(3600.0, self.abandoned.append)
        self.hosted = False
        self.terminal = False

    @property
    def state(self) -> _Question:
        return self


async def test_a_question_pushed_on_a_request_s_stream_attaches_its_carrier_once_with_no_grace_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Carried while the request's response waits for its first event (as the broker carries a question before
    pushing it), the question is attached once by the stream's reader: no grace timer started and cancelled."""
    question = _Question()
    async with face() as connection:
        before = len(connection.socket.written)
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 12, "method": "ping"},
                                                   connection.session))
            (wire, _), = held
            wire.answers[12].carry(question)  # pyright: ignore[reportArgumentType]
            assert not question.carriers.waiting, "no grace period while the POST's response waits"
            wire.send_on_behalf({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": {}}, 12)
            await connection.until(lambda: bool(question.calls))
            assert question.calls == ["attach"] and not question.carriers.waiting
        await connection.until(lambda: connection.socket.written.endswith(b"0\r\n\r\n"))
        answer = bytes(connection.socket.written[before:])
        assert b'"method":"elicitation/create"' in answer and b'data: {"jsonrpc":"2.0","id":12,"result":{}}' in answer
        await connection.until(lambda: not connection.state.tasks)
    assert question.calls == ["attach"] and not question.abandoned


async def test_a_question_carried_by_a_request_answered_as_one_json_body_is_detached_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No reader came (the answer went as one JSON body): the question's grace period runs, as it did when `carry`
    detached it at once."""
    question = _Question()
    async with face() as connection:
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 13, "method": "ping"},
                                                   connection.session))
            (wire, _), = held
            wire.answers[13].carry(question)  # pyright: ignore[reportArgumentType]
        await connection.until(lambda: connection.socket.written.endswith(b'"id":13,"result":{}}'))
        assert question.calls[-1:] == ["detach"] and question.carriers.waiting
    question.carriers.stop()


async def test_a_session_ended_while_a_request_waits_in_its_json_window_answers_it_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session's end answers each waiting request; one in its JSON window (no task) is let go by that answer's
    `put` as the session's requests are gone through (it raised `dictionary changed size during iteration`)."""
    async with face() as connection:
        before = len(connection.socket.written)
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 14, "method": "ping"},
                                                   connection.session))
            assert len(held) == 1
            second = Face(*(await _second_connection(connection)))
            ended = await second.answered(b"DELETE /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\nmcp-session-id: %s\r\n"
                                          b"content-length: 0\r\n\r\n" % connection.session)
            assert ended.startswith(b"HTTP/1.1 200")
            second.protocol.connection_lost(None)
            held.clear()  # its session is gone
        await connection.until(lambda: connection.socket.written.endswith(b"}"))
        answer = bytes(connection.socket.written[before:])
        assert answer.startswith(b"HTTP/1.1 200") and b'"id":14,"error":' in answer
        assert b"Connection closed: the session ended" in answer
        assert connection.session.decode() not in connection.endpoint._sessions  # pyright: ignore[reportPrivateUsage]


QUESTION = {"jsonrpc": "2.0", "id": 4, "method": "elicitation/create", "params": {}}


async def _parked(connection: Face, request_id: int, question: _Question | None = None) -> tuple[Face, Any]:
    """A second connection whose request `request_id` (held back from the session by `held_requests`) has had a
    question pushed on its stream, which is now parked with no task; that connection and the session's wire."""
    second = Face(*(await _second_connection(connection)))
    second.session = connection.session
    second.protocol.data_received(post({"jsonrpc": "2.0", "id": request_id, "method": "ping"}, connection.session))
    wire = connection.endpoint._sessions[connection.session.decode()].wire  # pyright: ignore[reportPrivateUsage]
    if question is not None:
        wire.answers[request_id].carry(question)
    wire.send_on_behalf(QUESTION, request_id)
    assert b'"method":"elicitation/create"' in second.held() and not second.state.tasks
    return second, wire


def _resume(connection: Face, written: bytes) -> bytes:
    """A GET resuming the stream whose events `written` holds, after its last event."""
    last = written.rsplit(b"id: ", 1)[1].split(b"\r\n", 1)[0]
    return (b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: text/event-stream\r\nmcp-session-id: %s\r\n"
            b"mcp-protocol-version: 2025-06-18\r\nlast-event-id: %s\r\n\r\n" % (connection.session, last))


async def test_a_parked_stream_writes_its_keep_alive_comments_with_no_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_streams, "SSE_PING_INTERVAL", 0.0)
    async with face() as connection:
        async with held_requests(monkeypatch):
            second, _ = await _parked(connection, 15)
            await second.until(lambda: second.held().count(b": ping\r\n\r\n") >= 2)
            assert not second.state.tasks
        await second.until(lambda: second.held().endswith(b"0\r\n\r\n"))
        assert b'data: {"jsonrpc":"2.0","id":15,"result":{}}' in second.held() and not second.state.tasks
        second.protocol.connection_lost(None)


async def test_a_parked_stream_whose_client_goes_lets_its_request_go_and_is_resumed_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client going away detaches its question (the grace period runs) and lets the request go as a broken
    stream's; the call goes on, and a client resuming the stream with `Last-Event-ID` gets its answer."""
    question = _Question()
    async with face() as connection:
        session = connection.endpoint._sessions[connection.session.decode()]  # pyright: ignore[reportPrivateUsage]
        async with held_requests(monkeypatch):
            second, _ = await _parked(connection, 16, question)
            assert question.calls == ["attach"]
            second.protocol.connection_lost(None)
            await connection.until(lambda: question.calls == ["attach", "detach"])
            assert question.carriers.waiting and session.broke and not session.in_flight
            third = Face(*(await _second_connection(connection)))
            third.protocol.data_received(_resume(connection, second.held()))
            await third.until(lambda: question.calls[-1] == "attach")
            assert not question.carriers.waiting
        await third.until(lambda: third.held().endswith(b"0\r\n\r\n"))
        assert b'data: {"jsonrpc":"2.0","id":16,"result":{}}' in third.held()
        assert b"elicitation/create" not in third.held(), "only what followed the last event received"
        await third.until(lambda: not third.state.tasks)
        assert not session.in_flight and not session.wire.answers
        third.protocol.connection_lost(None)
    question.carriers.stop()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def test_a_parked_stream_taken_over_by_a_resuming_client_is_closed_as_a_cancelled_writer_s_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its request let go as not done, and its response left unended, which uvicorn logs and closes (as it did the
    response of a `write` cancelled by the newer one)."""
    records = _Records()
    async with face() as connection:
        async with held_requests(monkeypatch):
            second, _ = await _parked(connection, 17)
            third = Face(*(await _second_connection(connection)))
            logging.getLogger("uvicorn.error").addHandler(records)
            try:
                third.protocol.data_received(_resume(connection, second.held()))
                await second.until(lambda: second.socket.closed and not second.state.tasks)
            finally:
                logging.getLogger("uvicorn.error").removeHandler(records)
            assert records.messages == ["ASGI callable returned without completing response."]
            assert not second.held().endswith(b"0\r\n\r\n")
        await third.until(lambda: third.held().endswith(b"0\r\n\r\n"))
        assert b'data: {"jsonrpc":"2.0","id":17,"result":{}}' in third.held()
        await third.until(lambda: not third.state.tasks)
        second.protocol.connection_lost(None)
        third.protocol.connection_lost(None)


async def test_a_parked_stream_that_cannot_write_at_once_goes_on_in_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    async with face() as connection:
        async with held_requests(monkeypatch):
            second, _ = await _parked(connection, 18)
            second.protocol.pause_writing()
        await second.until(lambda: bool(second.state.tasks))  # the answer came while writing was paused
        assert b'"id":18,"result"' not in second.held()
        second.protocol.resume_writing()
        await second.until(lambda: second.held().endswith(b"0\r\n\r\n") and not second.state.tasks)
        assert second.held().count(b'data: {"jsonrpc":"2.0","id":18,"result":{}}') == 1
        second.protocol.connection_lost(None)
