"""What a response stream held open costs the gateway's HTTP client (`wire.http_client`), and the body framing that
lets it hold little: a held POST's event stream (a question waiting for a person) keeps no httptools parser (the
head alone is httptools'; the body is framed by the connection) and arms no timer of its own (every streamed body
of a client shares one read-timeout timer, `StreamedReads`); the connection is reused after the stream ends, with
a parser made anew for the next head. The body framing is checked against httptools' own on any chunked body
(sizes in either case and with leading zeros, extensions, a trailer), in any split.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import httptools  # pyright: ignore[reportMissingTypeStubs]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitgate.errors import ProtocolError, ReadTimeout, TransportError
from elicitgate.wire import http_client
from elicitgate.wire.http_client import HttpClient, Response, StreamedReads, Timeouts, Url
from tests.test_wire_http_client import (  # pyright: ignore[reportPrivateUsage]
    WAIT,
    _answering,  # pyright: ignore[reportPrivateUsage]
    _get,  # pyright: ignore[reportPrivateUsage]
    _parse,  # pyright: ignore[reportPrivateUsage]
    _request,  # pyright: ignore[reportPrivateUsage]
    _server,  # pyright: ignore[reportPrivateUsage]
    _Sink,  # pyright: ignore[reportPrivateUsage]
    _split,  # pyright: ignore[reportPrivateUsage]
    fuzz,
)

pytestmark = pytest.mark.anyio

STREAMS = 20
EVENT = b'data: {"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{}}\n\n'
STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_held_streams_keep_no_parser_nor_a_timer_each_and_a_connection_is_reused_after_its_stream() -> None:
    ended = asyncio.Event()
    end = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(STREAM_HEAD + _chunk(EVENT))
        await writer.drain()
        await end.wait()
        if not ended.is_set():  # one stream ends; the others stay open
            ended.set()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            await _request(reader)  # the next request, on the same connection
            body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        await asyncio.Event().wait()

    loop = asyncio.get_running_loop()
    client = HttpClient(timeouts=Timeouts(read=WAIT * 4))
    try:
        async with _server(serve) as server:
            timers = _live_timers(loop)
            sinks: list[_Sink] = []
            responses: list[Response] = []
            for _ in range(STREAMS):
                response = await asyncio.wait_for(client.request("POST", server.url(), {}, b"{}"), WAIT)
                sink = _Sink()
                response.stream(sink)
                sinks.append(sink)
                responses.append(response)
            await asyncio.wait_for(_until(lambda: all(b"".join(sink.parts) == EVENT for sink in sinks)), WAIT)
            connections = [response.connection for response in responses]
            assert all(connection is not None and connection.parser is None for connection in connections)
            held = _live_timers(loop) - timers
            assert held <= 1, f"{held} timers for {STREAMS} held streams"
            end.set()
            await asyncio.wait_for(_until(lambda: any(sink.ends for sink in sinks)), WAIT)
            done = next(sink for sink in sinks if sink.ends)
            assert done.ends == [None] and b"".join(done.parts) == EVENT
            response, body = await _get(client, server.url(), b"{}")
            assert response.status == 200 and body == b'{"jsonrpc":"2.0","id":1,"result":{}}'
            assert server.connections == STREAMS  # the ended stream's connection answered it
            assert sum(not sink.ends for sink in sinks) == STREAMS - 1
    finally:
        await client.aclose()


def _live_timers(loop: asyncio.AbstractEventLoop) -> int:
    """Timers armed on the loop and not cancelled (asyncio keeps cancelled ones in its heap a while)."""
    scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]  # pyright: ignore
    return sum(not timer.cancelled() for timer in scheduled)


async def _until(reached: Callable[[], bool]) -> None:
    """Until a state is reached that the sinks' chunks, coming in the connections' callbacks, bring about."""
    while not reached():
        await asyncio.sleep(0.01)


async def test_streams_that_read_stay_while_a_silent_one_times_out_on_the_shared_timer() -> None:
    """The shared timer goes on from stream to stream: each one silent for the read timeout ends with `ReadTimeout`,
    the one that keeps reading does not, whatever order they began in."""
    talk = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await _request(reader)
        writer.write(STREAM_HEAD + _chunk(EVENT))
        await writer.drain()
        if b"x-talk" in head:
            while True:  # a comment every 50 ms until the test is over: well within the read timeout
                await talk.wait()
                writer.write(_chunk(b": keep-alive\n\n"))
                await writer.drain()
                await asyncio.sleep(0.05)
        await asyncio.Event().wait()

    client = HttpClient(timeouts=Timeouts(read=2.0))
    try:
        async with _server(serve) as server:
            talker = await asyncio.wait_for(client.request("POST", server.url(), {"x-talk": "1"}, b"{}"), WAIT)
            talking = _Sink()
            talker.stream(talking)
            talk.set()
            silent = [_Sink() for _ in range(3)]
            for sink in silent:
                response = await asyncio.wait_for(client.request("POST", server.url(), {}, b"{}"), WAIT)
                response.stream(sink)
            for sink in silent:
                await asyncio.wait_for(sink.over.wait(), WAIT)
                assert len(sink.ends) == 1 and isinstance(sink.ends[0], ReadTimeout)
            assert not talking.ends, "the stream that reads timed out"
            assert len(talking.parts) > 1
    finally:
        await client.aclose()


async def test_a_stream_that_came_again_moves_behind_the_others() -> None:
    """`StreamedReads` keeps its streams in the order their last chunk came: the first due is always the first."""
    reads = StreamedReads(60)
    url = Url.parse("http://upstream.test/mcp")
    first, second = Response(url, 60), Response(url, 60)
    reads.came(first)
    reads.came(second)
    reads.came(first)
    assert list(reads._streams) == [second, first]  # pyright: ignore[reportPrivateUsage]
    reads.forget(second)
    reads.forget(first)
    assert len(reads) == 0
    reads.stop()
    assert reads._timer is None  # pyright: ignore[reportPrivateUsage]


# -- the body framing, against httptools' own ----------------------------------------------------------------

hexdigits = st.sampled_from(["lower", "upper", "zeros"])
extension = st.sampled_from([b"", b";a", b";name=value", b';q="x y"', b";a;b=1"])
trailer = st.lists(st.sampled_from([b"x-sum: 1", b"expires: never", b"a: b c"]), max_size=3)


def _size(n: int, style: str) -> bytes:
    text = b"%x" % n
    return text.upper() if style == "upper" else b"00" + text if style == "zeros" else text


def _httptools_body(wire: bytes) -> bytes | Exception:
    """The body httptools (llhttp) reads from `wire`, whole, or why it refused it."""
    class Reader:
        def __init__(self) -> None:
            self.parts: list[bytes] = []
            self.done = False

        def on_body(self, body: bytes) -> None:
            self.parts.append(body)

        def on_message_complete(self) -> None:
            self.done = True

    reader = Reader()
    try:
        httptools.HttpResponseParser(reader).feed_data(wire)
    except httptools.HttpParserError as exc:
        return exc
    return b"".join(reader.parts) if reader.done else ValueError("not complete")


@fuzz(300)
@given(body=st.binary(max_size=2000), sizes=st.lists(st.integers(1, 600), max_size=6), style=hexdigits,
       extensions=st.lists(extension, min_size=1, max_size=4), trailers=trailer,
       cuts=st.lists(st.integers(0, 10_000), max_size=10), stream_after=st.none() | st.integers(0, 11),
       seed=st.integers(0, 2**16))
async def test_a_chunked_body_is_framed_as_httptools_frames_it(
    body: bytes, sizes: list[int], style: str, extensions: list[bytes], trailers: list[bytes], cuts: list[int],
    stream_after: int | None, seed: int,
) -> None:
    pick = random.Random(seed)
    parts, rest = [], body
    for size in sizes:
        part, rest = rest[:size], rest[size:]
        if part:
            parts.append(b"%s%s\r\n%s\r\n" % (_size(len(part), style), pick.choice(extensions), part))
    if rest:
        parts.append(b"%s%s\r\n%s\r\n" % (_size(len(rest), style), pick.choice(extensions), rest))
    last = b"0" if style != "zeros" else b"000"
    payload = b"".join(parts) + last + pick.choice(extensions) + b"\r\n" + b"".join(t + b"\r\n" for t in trailers)
    wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + payload + b"\r\n"
    expected = _httptools_body(wire)
    _, read, _ = await _parse(_split(wire, cuts), eof=False, stream_after=stream_after)
    if isinstance(expected, bytes):
        assert read == expected == body
    else:
        assert isinstance(read, TransportError), (expected, read)


@pytest.mark.parametrize(("payload", "why"), [
    (b"zz\r\nab\r\n0\r\n\r\n", "not hexadecimal"),
    (b"2\r\nabc\r\n0\r\n\r\n", "longer than its size"),
    (b"2\nab\r\n0\r\n\r\n", "does not end with CRLF"),
    (b"1" * 5000, "chunk-size line"),
    (b"0\r\n" + b"x-a: " + b"b" * 70_000, "trailer"),
])
async def test_a_malformed_chunked_body_is_a_protocol_error_saying_what(payload: bytes, why: str) -> None:
    wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + payload
    _, read, _ = await _parse([wire[:50], wire[50:]], eof=False)
    assert isinstance(read, ProtocolError) and why in str(read), read


async def test_bytes_past_a_response_s_end_close_its_connection_and_the_response_stands() -> None:
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"
    async with _server(_answering(answer)) as server:
        client = HttpClient()
        try:
            response, body = await _get(client, server.url())
            assert response.status == 200 and body == b"ok"
            assert client.connections == 0
        finally:
            await client.aclose()


# -- connects to one origin at once, bounded ------------------------------------------------------------------


async def test_connects_to_one_origin_are_bounded_and_the_requests_past_the_bound_all_get_a_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past `MAX_CONNECTING_PER_ORIGIN` connects on their way, a request takes the first connection that comes free
    (kept alive) or opens one as another's connect ends: a burst of answers does not flood the server's backlog. A
    request cancelled while it waits gives up its turn; closing the client ends the waits."""
    monkeypatch.setattr(http_client, "MAX_CONNECTING_PER_ORIGIN", 2)
    accepted = asyncio.Event()
    connecting = most = 0
    client = HttpClient()
    connect = client._connect  # pyright: ignore[reportPrivateUsage]

    async def counted(url: Url) -> http_client._Connection:  # pyright: ignore[reportPrivateUsage]
        nonlocal connecting, most
        connecting += 1
        most = max(most, connecting)
        try:
            await accepted.wait()  # every connect stays on its way until the test lets them through
            return await connect(url)
        finally:
            connecting -= 1

    client._connect = counted  # type: ignore[method-assign]  # pyright: ignore[reportPrivateUsage]
    accepted_answer = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
    try:
        async with _server(_answering(accepted_answer)) as server:
            requests = [asyncio.ensure_future(client.request("POST", server.url(), {}, b"{}")) for _ in range(12)]
            await asyncio.wait_for(_until(lambda: connecting == 2), WAIT)
            await asyncio.sleep(0)
            assert most == 2
            requests[5].cancel()  # waiting: its turn goes to the others
            accepted.set()
            done = await asyncio.wait_for(asyncio.gather(*requests, return_exceptions=True), WAIT)
            assert isinstance(done[5], asyncio.CancelledError)
            answered = [response for response in done if isinstance(response, Response)]
            assert len(answered) == 11 and all(response.status == 202 for response in answered)
            for response in answered:
                response.close()
            assert most == 2 and server.connections <= 11
            accepted.clear()
            waiting = [asyncio.ensure_future(client.request("POST", server.url(), {}, b"{}")) for _ in range(20)]
            await asyncio.wait_for(_until(lambda: connecting == 2 or all(w.done() for w in waiting)), WAIT)
            await client.aclose()
            accepted.set()
            ends = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), WAIT)
            assert all(isinstance(end, Response | TransportError) for end in ends), ends
            assert any(isinstance(end, TransportError) for end in ends)
    finally:
        await client.aclose()
