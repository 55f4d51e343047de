"""The HTTP face's shortcuts on its own server (web/http_protocol.py, faces/http_answers.py), each against the
longer way it replaces, fuzzed (hypothesis): a whole JSON answer written in one step (`LeanCycle.respond`) gives
the bytes of its two ASGI messages; a body that came whole (`LeanCycle.whole_body`) is what `receive` gives; the
end of a head found in one pass (`HeadScanner._next_end`) is where a scan for every kind of empty line puts it; a
request's `Signal` and the connection's `LeanFlow` wake and wait as `asyncio.Event` does."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from uvicorn.config import Config
from uvicorn.server import ServerState

from elicitgate.faces.http_answers import read_body, reply
from elicitgate.web.http_protocol import HeadScanner, HttpLimits, LeanCycle, LeanFlow, Signal, limited_protocol
from tests.test_unit_http_protocol import MAX_HEAD, MAX_LINE, Socket, feed, fuzz, turns

_HEAD_ENDS = (b"\n\n", b"\n\r\n")


def next_end_by_every_scan(tail: bytes, data: bytes, start: int) -> int:
    """Where a head may end next, as `HeadScanner` found it before: every kind of empty line searched from `start`
    (and across the end of the bytes before, `tail`), the nearest end kept."""
    ends: list[int] = []
    if tail:
        probe = tail + data[start:start + 2]
        kept = len(tail)
        ends.extend(start + at + len(end) - kept for end in _HEAD_ENDS for at in range(kept)
                    if probe.startswith(end, at) and at + len(end) > kept)
    for end in _HEAD_ENDS:
        at = data.find(end, start)
        if at >= 0:
            ends.append(at + len(end))
    return min(ends, default=len(data))


@fuzz(ci_examples=400)
@given(tail=st.binary(max_size=2).map(lambda raw: bytes(b"a\r\n"[byte % 3] for byte in raw)),
       data=st.lists(st.sampled_from([b"a", b"\r", b"\n", b":", b"\r\n", b"\n\n", b"\r\n\r\n"]), max_size=24)
       .map(b"".join),
       start=st.integers(0, 8))
@example(tail=b"\r\n", data=b"\r\nbody\n\n", start=0)
@example(tail=b"\n", data=b"\nx", start=0)
@example(tail=b"", data=b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody\n\nmore", start=0)
@example(tail=b"", data=b"a\n\r\n\n", start=0)
def test_a_head_ends_where_a_scan_for_every_empty_line_puts_it(tail: bytes, data: bytes, start: int) -> None:
    start = min(start, len(data))
    scanner = HeadScanner(MAX_LINE, MAX_HEAD)
    scanner._tail = tail  # pyright: ignore[reportPrivateUsage]
    assert scanner._next_end(data, start) == next_end_by_every_scan(tail, data, start)  # pyright: ignore[reportPrivateUsage]


def serve(app: Any, stream: bytes, cuts: list[int] | None = None) -> bytes:
    """What one connection of the face's protocol writes for `stream` (fed cut at `cuts`), served by `app`."""

    async def main() -> bytes:
        protocol = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))(
            config=Config(app, lifespan="off", log_level="critical"), server_state=ServerState(), app_state={},
            _loop=asyncio.get_running_loop())
        socket = Socket()
        protocol.connection_made(socket)
        for start, end in pairwise([0, *sorted(set(cuts or [])), len(stream)]):
            await feed(protocol, socket, stream[start:end], [])
            await turns()
        await turns()
        protocol.connection_lost(None)
        return bytes(socket.written)

    return asyncio.run(main())


answers = st.fixed_dictionaries({
    "status": st.sampled_from([200, 202, 400, 404, 409, 413]),
    "message": st.one_of(st.none(), st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": st.integers(0, 9),
                                                            "result": st.dictionaries(st.text(max_size=4),
                                                                                      st.integers(), max_size=3)})),
    "extra": st.lists(st.tuples(st.sampled_from([b"mcp-session-id", b"x-a", b"allow", b"Connection"]),
                                st.sampled_from([b"abc123", b"GET, POST", b"close", b"keep-alive"])), max_size=3),
})


@fuzz(ci_examples=60)
@given(answered=st.lists(answers, min_size=1, max_size=3),
       methods=st.lists(st.sampled_from(["GET", "POST", "HEAD"]), min_size=3, max_size=3),
       closing=st.booleans())
@example(answered=[{"status": 202, "message": None, "extra": []}], methods=["POST", "GET", "GET"], closing=False)
@example(answered=[{"status": 200, "message": {"jsonrpc": "2.0", "id": 1, "result": {}}, "extra": []}],
         methods=["HEAD", "GET", "GET"], closing=False)
def test_a_whole_answer_in_one_step_writes_what_its_two_messages_write(
    answered: list[dict[str, Any]], methods: list[str], closing: bool,
) -> None:
    """`reply` on the face's server writes a JSON answer with `LeanCycle.respond`: the same bytes as the start and
    body messages through `send` (a HEAD request's, a closing connection's and a client's own `Connection`
    header's included), request after request on one connection."""
    requests = [(methods[index], answered[index % len(answered)]) for index in range(3)]
    stream = b"".join(f"{method} /mcp HTTP/1.1\r\nHost: example.test\r\n{'Connection: close' if closing else ''}"
                      f"\r\n\r\n".encode() for method, _ in requests)

    def app(one_step: bool) -> Any:
        served = iter(requests)

        async def answer(scope: Any, receive: Any, send: Any) -> None:
            _, answer = next(served)
            await receive()
            await reply(send if one_step else (lambda message: send(message)), answer["status"], answer["message"],
                        extra=answer["extra"])

        return answer

    taken: list[bool] = []
    respond = LeanCycle.respond

    def counted(cycle: LeanCycle, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
        taken.append(respond(cycle, status, headers, body))
        return taken[-1]

    LeanCycle.respond = counted  # pyright: ignore[reportAttributeAccessIssue]
    try:
        one_step = serve(app(True), stream)
    finally:
        LeanCycle.respond = respond  # pyright: ignore[reportAttributeAccessIssue]
    assert one_step == serve(app(False), stream)
    assert taken[0] is (requests[0][0] != "HEAD"), "the first answer in one step, unless to a HEAD request"


@fuzz(ci_examples=60)
@given(body=st.binary(max_size=200), limit=st.integers(0, 220), chunked=st.booleans(),
       cuts=st.lists(st.integers(0, 400), max_size=3), expect=st.booleans())
@example(body=b"", limit=0, chunked=False, cuts=[], expect=False)
@example(body=b"x" * 10, limit=9, chunked=False, cuts=[], expect=False)
def test_a_body_taken_whole_is_what_receive_gives(
    body: bytes, limit: int, chunked: bool, cuts: list[int], expect: bool,
) -> None:
    """`read_body` takes a body that came whole with its head from the cycle (`LeanCycle.whole_body`): the same
    body, or None over the limit, as reading it message by message from `receive`, and the same bytes written
    (a `100 Continue` asked for is still written first)."""
    framing = "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {len(body)}\r\n"
    wire = (b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n") if chunked else body
    stream = (f"POST /mcp HTTP/1.1\r\nHost: example.test\r\n{'Expect: 100-continue' if expect else 'X-A: b'}\r\n"
              f"{framing}\r\n").encode() + wire

    def app(whole: bool, seen: list[bytes | None]) -> Any:
        async def read(scope: Any, receive: Any, send: Any) -> None:
            got = await read_body(receive if whole else (lambda: receive()), limit)
            seen.append(got)
            await reply(send, 200, {"n": len(got) if got is not None else -1})

        return read

    whole: list[bytes | None] = []
    stepwise: list[bytes | None] = []
    taken: list[bytes | None] = []
    whole_body = LeanCycle.whole_body

    def counted(cycle: LeanCycle) -> bytes | None:
        taken.append(whole_body(cycle))
        return taken[-1]

    LeanCycle.whole_body = counted  # pyright: ignore[reportAttributeAccessIssue]
    try:
        at_once = serve(app(True, whole), stream, cuts)
    finally:
        LeanCycle.whole_body = whole_body  # pyright: ignore[reportAttributeAccessIssue]
    assert at_once == serve(app(False, stepwise), stream, cuts)
    if not cuts and not expect:
        assert taken[0] == body, "a body that came with its head is taken whole"
    assert whole == stepwise
    assert whole == [body if len(body) <= limit else None]


def test_a_signal_wakes_and_waits_as_an_event_does() -> None:
    async def main() -> None:
        for event in (Signal(), asyncio.Event()):
            assert not event.is_set()
            waiters = [asyncio.ensure_future(event.wait()) for _ in range(2)]
            await asyncio.sleep(0)
            assert not any(waiter.done() for waiter in waiters)
            event.set()
            assert await asyncio.gather(*waiters) == [True, True]
            assert event.is_set() and await event.wait()
            event.clear()
            cancelled = asyncio.ensure_future(event.wait())
            kept = asyncio.ensure_future(event.wait())
            await asyncio.sleep(0)
            cancelled.cancel()
            await asyncio.sleep(0)
            assert cancelled.cancelled() and not kept.done()
            event.set()
            assert await kept
            event.set()  # again: nothing to wake
            assert event.is_set()

    asyncio.run(main())


def test_lean_flow_control_holds_a_writer_only_while_writing_is_paused() -> None:
    async def main() -> None:
        socket = Socket()
        flow = LeanFlow(socket)
        await asyncio.wait_for(flow.drain(), 5)  # never paused: nothing to wait for
        flow.pause_writing()
        flow.pause_writing()
        drained = asyncio.ensure_future(flow.drain())
        await asyncio.sleep(0)
        assert flow.write_paused and not drained.done()
        flow.resume_writing()
        await asyncio.wait_for(drained, 5)
        flow.pause_writing()
        again = asyncio.ensure_future(flow.drain())
        await asyncio.sleep(0)
        assert not again.done()
        flow.resume_writing()
        await asyncio.wait_for(again, 5)
        flow.pause_reading()
        assert socket.paused and flow.read_paused
        flow.resume_reading()
        assert not socket.paused

    asyncio.run(main())


if __name__ == "__main__":
    pytest.main([__file__])
