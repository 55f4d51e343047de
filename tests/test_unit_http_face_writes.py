"""When the HTTP face's bytes reach the socket (web/http_protocol.py `CoalescedWrites.write_held`): what a response
writes in one step is still joined into one write, but a response's end, and an SSE event put from a callback (a
question pushed on a request's parked stream), leave in the step that writes them, not at the end of the event
loop's turn after every other callback of that turn (the broker's bookkeeping, the next connection's read), and no
callback is left to run for them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from elicitgate.faces import event_streams
from elicitgate.web.http_protocol import CoalescedWrites, HttpLimits, limited_protocol
from tests.test_unit_http_face_callbacks import face, held_requests, post
from tests.test_unit_http_protocol import MAX_HEAD, MAX_LINE, CountingSocket, turns

pytestmark = pytest.mark.anyio


def _flush_pending(transport: Any) -> bool:
    """Whether a turn's-end flush is still to run on the connection."""
    return getattr(transport, "_soon", "no such slot") is not None


async def test_write_held_writes_what_is_held_as_one_write_and_calls_off_the_turn_s_end_flush() -> None:
    socket = CountingSocket()
    writes = CoalescedWrites(socket, asyncio.get_running_loop())
    writes.write(b"head")
    writes.write(b"body")
    assert socket.writes == []
    writes.write_held()
    assert socket.writes == [b"headbody"] and not _flush_pending(writes)
    writes.write_held()  # nothing held: nothing written
    await turns(3)
    assert socket.writes == [b"headbody"]
    writes.write(b"later")  # not whole yet: at the turn's end, as before
    assert socket.writes == [b"headbody"]
    await turns(1)
    assert socket.writes == [b"headbody", b"later"]
    writes.write(b"last")
    writes.close()
    assert socket.writes == [b"headbody", b"later", b"last"] and socket.closed


async def test_a_json_answer_is_on_the_socket_as_put_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Head and body in one write, in the step that puts the answer (not at the turn's end)."""
    put = event_streams.EventStream.put
    seen: list[tuple[bytes, bool]] = []
    async with face() as connection:

        def watched(stream: event_streams.EventStream, message: Any, *, last: bool = False) -> bool:
            done = put(stream, message, last=last)
            seen.append((bytes(connection.socket.written), _flush_pending(connection.protocol.transport)))
            return done

        monkeypatch.setattr(event_streams.EventStream, "put", watched)
        answer = await connection.answered(post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, connection.session))
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"jsonrpc":"2.0","id":3,"result":{}}')
        assert seen[-1][0] == bytes(connection.socket.written), "on the socket as it was put"
        assert not seen[-1][1]


async def test_a_question_s_stream_and_the_answer_leave_in_the_steps_that_put_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The event that ends the JSON window (a question, progress) starts the SSE stream: its head and the event are on
    the socket as `put` returns; so are the answer and the stream's end, as the answer is put."""
    async with face() as connection:
        before = len(connection.socket.written)
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, connection.session))
            ((wire, _),) = held
            question = {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "elicitation/create",
                "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
            }
            wire.send_on_behalf(question, 9)
            now = bytes(connection.socket.written[before:])
            assert now.startswith(b"HTTP/1.1 200 OK") and b"content-type: text/event-stream" in now
            assert now.endswith(
                b'"method":"elicitation/create","params":{"message":"?","requestedSchema":'
                b'{"type":"object","properties":{}}}}\r\n\r\n\r\n'
            )
            assert not _flush_pending(connection.protocol.transport)
            progress = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1},
            }
            wire.send_on_behalf(progress, 9)  # the parked stream's next event
            assert connection.socket.written.endswith(b'"progress":1}}\r\n\r\n\r\n')
            assert not _flush_pending(connection.protocol.transport)
        await connection.until(lambda: connection.socket.written.endswith(b"0\r\n\r\n"))
        assert not _flush_pending(connection.protocol.transport)
        answer = bytes(connection.socket.written[before:])
        assert answer.count(b"HTTP/1.1 ") == 1 and answer.count(b"event: message") == 3
        assert b'data: {"jsonrpc":"2.0","id":9,"result":{}}' in answer


async def test_the_202_leaves_in_the_step_that_writes_it_two_turns_after_the_message() -> None:
    async with face() as connection:
        before = len(connection.socket.written)
        connection.protocol.data_received(
            post({"jsonrpc": "2.0", "method": "notifications/initialized"}, connection.session)
        )
        for _ in range(2):
            assert not connection.held()[before:]
            await asyncio.sleep(0)
        assert bytes(connection.socket.written[before:]).startswith(b"HTTP/1.1 202")
        assert not _flush_pending(connection.protocol.transport)


async def test_a_task_s_response_is_still_one_write_per_turn_and_its_end_leaves_as_it_is_sent() -> None:
    """uvicorn's `send` path: a JSON answer's head and body one write; an SSE stream's head and first event one write
    at the turn's end; its last event and its end one write, as the end is sent."""
    later = asyncio.Event()
    sent_end = asyncio.Event()
    seen: list[list[bytes]] = []
    socket = CountingSocket()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        if scope["path"] == "/json":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})
            seen.append(list(socket.writes))
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: 1\r\n\r\n", "more_body": True})
        await later.wait()
        await send({"type": "http.response.body", "body": b"data: 2\r\n\r\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        seen.append(list(socket.writes))
        sent_end.set()

    protocol = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))(
        config=Config(app, lifespan="off", log_level="critical"),
        server_state=ServerState(),
        app_state={},
        _loop=asyncio.get_running_loop(),
    )
    protocol.connection_made(socket)
    protocol.data_received(b"GET /json HTTP/1.1\r\nHost: example.test\r\n\r\n")
    await turns()
    protocol.data_received(b"GET /sse HTTP/1.1\r\nHost: example.test\r\n\r\n")
    await turns()
    later.set()
    await sent_end.wait()
    protocol.connection_lost(None)
    assert len(socket.writes) == 3, socket.writes
    assert seen[0] == socket.writes[:1] and socket.writes[0].endswith(b"\r\n\r\nok"), "on the socket as sent"
    assert socket.writes[1].endswith(b"\r\n\r\nb\r\ndata: 1\r\n\r\n\r\n")
    assert seen[1] == socket.writes and socket.writes[2] == b"b\r\ndata: 2\r\n\r\n\r\n0\r\n\r\n"
