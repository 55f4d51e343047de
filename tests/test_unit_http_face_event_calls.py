"""What a request's SSE stream runs per event on the HTTP face (faces/event_streams.py, issue #34): the question that
ends the JSON window starts the stream, each event after it is written by `put` to the parked response, the answer
ends it. Per event no `isinstance` call (the direct writer's three kinds told by type), no frame to count the kept
event (`added`) or to wake a reader that is not there (`_wake`), no frame around `codec.dumps` (`encode`), and the
response's keep-alive timer set on the connection's loop without asking asyncio for it (`get_running_loop`, a
`getpid` system call on Python 3.11); the same bytes on the wire, and the events still kept for a resuming client."""

from __future__ import annotations

from typing import Any

import pytest

from elicitgate.faces.event_streams import EventLimits, EventStream, SessionEvents
from elicitgate.faces.streamable import StreamableHttpEndpoint
from elicitgate.web.request_headers import RequestHeaders
from tests.profiled import calls_of, python_calls
from tests.test_unit_http_face_callbacks import face, held_requests, post

pytestmark = pytest.mark.anyio

QUESTION = {
    "jsonrpc": "2.0",
    "id": 4,
    "method": "elicitation/create",
    "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
PER_EVENT_GONE = {"c:isinstance", "added", "_wake", "encode", "c:get_running_loop", "attached"}


async def test_a_parked_stream_s_events_are_written_with_no_type_check_count_or_wake_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with face() as connection:
        before = len(connection.socket.written)
        async with held_requests(monkeypatch) as held:
            connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, connection.session))
            ((wire, _),) = held
            with python_calls(c_prefix="c:") as first:
                wire.send_on_behalf(QUESTION, 9)  # ends the window: the stream begun and parked
            stream = wire.answers[9]
            with python_calls(c_prefix="c:") as second:
                wire.send_on_behalf(PROGRESS, 9)  # the parked stream's next event
            assert [seq for seq, _ in stream.events] == [1, 2], "kept for a client that resumes"
            assert stream.written == 2 and wire.events.kept == 2
        assert "c:get_running_loop" not in first, first
        ours = second[: second.index("wrote")]  # then the keep-alive timer re-armed: the stand-in loop's own calls
        assert not PER_EVENT_GONE & set(ours), " ".join(ours)
        assert "c:get_running_loop" not in second, " ".join(second)
        await connection.until(lambda: connection.socket.written.endswith(b"0\r\n\r\n"))
        answer = bytes(connection.socket.written[before:])
        events = answer.split(b"\r\n\r\n")
        assert events[1].endswith(
            b"id: "
            + stream.name.encode()
            + b"/1\r\nevent: message\r\ndata: "
            + (
                b'{"jsonrpc":"2.0","id":4,"method":"elicitation/create","params":{"message":"?","requestedSchema":'
                b'{"type":"object","properties":{}}}}'
            )
        )
        assert b'data: {"jsonrpc":"2.0","id":9,"result":{}}' in answer


def test_a_stream_is_made_and_carries_its_first_question_with_fewer_frames() -> None:
    log = SessionEvents(EventLimits(per_session=10, total=100))
    stream, called = calls_of(log.open)
    assert "__init__" in called and called.count("__init__") == 1, called  # the stream's own, not `Wakeable`'s too
    assert isinstance(stream, EventStream) and stream._waiter is None  # pyright: ignore[reportPrivateUsage]


def test_kept_events_past_a_bound_still_go_oldest_first() -> None:
    limits = EventLimits(per_session=2, total=100)
    log = SessionEvents(limits)
    stream = log.open()
    for n in range(3):
        stream.put({"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}})
    assert [seq for seq, _ in stream.events] == [2, 3] and log.kept == 2 and limits.kept == 2


def test_the_priming_check_reads_the_header_as_sent() -> None:
    for sent, expected in ((b"2025-11-25", True), (b"2026-07-28", True), (b"2025-06-18", False), (None, False)):
        raw = [(b"mcp-protocol-version", sent)] if sent is not None else []
        headers = RequestHeaders(scope={"headers": raw})
        found, called = calls_of(lambda headers=headers: StreamableHttpEndpoint._primes(headers))  # pyright: ignore[reportPrivateUsage]
        assert found is expected
        assert called == ["_primes"], called


def test_an_answer_is_put_on_its_stream_with_no_request_id_call() -> None:
    from elicitgate.faces.http_session import SessionWire

    wire = SessionWire(EventLimits(per_session=10, total=100))
    stream = wire.answers[5] = wire.events.open()
    run: Any = wire.send({"jsonrpc": "2.0", "id": 5, "result": {}})
    _, called = calls_of(lambda: _finish(run))
    assert "is_request_id" not in called, called
    assert stream.closed and 5 not in wire.answers


def _finish(coroutine: Any) -> None:
    try:
        coroutine.send(None)
    except StopIteration:
        return
    raise AssertionError("the send waited")
