"""The gateway's HTTP/1.1 client for its upstreams (`wire.http_client`: asyncio Protocols and httptools' response
parser), against tiny asyncio servers on real sockets that answer as each case needs:

- bodies framed by Content-Length, chunked (with trailers, which are dropped) and by the end of the connection;
  a head that arrives split in many pieces, and a 100 Continue before the real head;
- kept-alive connections reused per origin, at most `max_idle` kept idle; one the server closed while idle is
  not reused, and a request that met such a close as it was written is sent again on a new connection;
- the limits of a network-facing parser: a head over `MAX_HEAD_BYTES` and bytes that are not HTTP are a
  `ProtocolError`, a body read whole past its limit too; a server that goes silent is a `ReadTimeout` (before
  its head or in the middle of its body), one that takes no request a `WriteTimeout`, one that closes mid-body a
  `ReadError`, a refused connection a `HttpConnectError`, a TLS handshake that never ends a `ConnectTimeout`;
- backpressure: a body read more slowly than it comes pauses reading from the socket and still arrives whole;
- TLS through asyncio's ssl: a server whose certificate authority is trusted is reached, one that is not is
  refused saying why;
- a header with a line break in it is refused before anything is sent.
And the parser fuzzed (hypothesis): any response, in any split, is read as sent; any bytes at all end in a
response or a `TransportError`, never another exception or a hang.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elicitgate.errors import (
    ConnectTimeout,
    HttpConnectError,
    HttpError,
    ProtocolError,
    ReadError,
    ReadTimeout,
    TransportError,
    WriteTimeout,
)
from elicitgate.wire import http_client
from elicitgate.wire.http import HttpWire
from elicitgate.wire.http_client import HIGH_WATER, MAX_HEAD_BYTES, HttpClient, Response, Timeouts, Url
from tests.conftest import free_port
from tests.test_upstream_network import _certificates  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio

WAIT = 30  # an upper bound on anything awaited here, for a loaded machine
Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

LONG_RUN = "FUZZ_EXAMPLES" in os.environ


def fuzz(ci_examples: int) -> Any:
    return settings(max_examples=int(os.environ["FUZZ_EXAMPLES"]) if LONG_RUN else ci_examples, deadline=None,
                    derandomize=not LONG_RUN, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Server:
    """A TCP server on a free port: each connection served by `serve(reader, writer)`, counted."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.connections = 0
        self.port = 0

    def url(self, path: str = "/mcp", scheme: str = "http") -> Url:
        return Url.parse(f"{scheme}://127.0.0.1:{self.port}{path}")


@asynccontextmanager
async def _server(serve: Serve, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(serve)
    serving: set[asyncio.Task[Any]] = set()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        serving.add(task)
        server.connections += 1
        try:
            await serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went, or the test is over (a cancelled handler would be logged as an error)
        finally:
            writer.close()

    listening = await asyncio.start_server(connection, "127.0.0.1", 0, ssl=tls)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)


async def _request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and its Content-Length body."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length) if length else b""


def _answering(*answers: bytes, keep: bool = True) -> Serve:
    """Answer each request on a connection with the next of `answers` (the last one again once they run out)."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = 0
        while True:
            try:
                await _request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(answers[min(index, len(answers) - 1)])
            await writer.drain()
            index += 1
            if not keep:
                return
    return serve


async def _get(client: HttpClient, url: Url, body: bytes | None = None) -> tuple[Response, bytes]:
    response = await asyncio.wait_for(client.request("POST" if body else "GET", url, {"accept": "*/*"}, body), WAIT)
    try:
        return response, await asyncio.wait_for(response.read(), WAIT)
    finally:
        response.close()


async def test_a_content_length_body_arrives_and_its_connection_is_kept_alive_and_reused() -> None:
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head, body = await _request(reader)
            seen.append(head + body)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-twice: a\r\nx-twice: b\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    async with _server(serve) as server:
        client = HttpClient()
        try:
            for n in range(3):
                response, body = await _get(client, server.url("/mcp?x=1"), b'{"n": %d}' % n)
                assert (response.status, body) == (200, b'{"n": %d}' % n)
                assert response.headers["content-type"] == "application/json"
                assert response.headers["x-twice"] == "a, b"
            assert server.connections == 1 and client.connections == 1
            assert seen[0].startswith(b"POST /mcp?x=1 HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n" % server.port)
            assert b"content-length: 8\r\n" in seen[0]
        finally:
            await client.aclose()


async def test_a_chunked_body_with_trailers_arrives_whole_and_the_trailers_are_dropped() -> None:
    answer = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n"
              b"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nx-sum: 11\r\n\r\n")
    async with _server(_answering(answer)) as server:
        client = HttpClient()
        try:
            for _ in range(2):
                response, body = await _get(client, server.url())
                assert body == b"hello world" and "x-sum" not in response.headers
            assert server.connections == 1  # the trailers were read: the connection was reusable
        finally:
            await client.aclose()


async def test_a_head_split_into_single_bytes_and_a_100_continue_before_it_are_read_as_one_response() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nx-a: 1\r\ncontent-length: 2\r\n\r\nok"

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        for byte in answer:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0)

    async with _server(trickle) as server:
        client = HttpClient()
        try:
            response, body = await _get(client, server.url())
            assert (response.status, response.headers, body) == (201, {"x-a": "1", "content-length": "2"}, b"ok")
        finally:
            await client.aclose()


async def test_a_body_framed_by_the_end_of_the_connection_ends_there_and_the_connection_is_not_reused() -> None:
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end", keep=False)
                       ) as server:
        client = HttpClient()
        try:
            for _ in range(2):
                _, body = await _get(client, server.url())
                assert body == b"until the end"
            assert server.connections == 2
        finally:
            await client.aclose()


async def test_a_connection_the_server_closed_while_idle_is_not_reused_nor_is_its_request_lost() -> None:
    closed = asyncio.Event()

    async def one_answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # the server's keep-alive timeout, at once
        await writer.wait_closed()
        closed.set()

    async with _server(one_answer_then_close) as server:
        client = HttpClient()
        try:
            for _ in range(3):
                closed.clear()
                _, body = await _get(client, server.url())
                assert body == b"ok"
                await asyncio.wait_for(closed.wait(), WAIT)
            assert server.connections == 3
        finally:
            await client.aclose()


async def test_a_request_that_meets_a_reused_connection_closing_is_sent_again_on_a_new_one() -> None:
    """The race a closed-while-idle check cannot see: the server closes just as the request is written."""
    requests = 0

    async def first_answers_then_drops_the_next(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await _request(reader)
        requests += 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        if server.connections == 1:
            await _request(reader)  # read the second request, then close without a byte of answer
            requests += 1

    async with _server(first_answers_then_drops_the_next) as server:
        client = HttpClient()
        try:
            assert (await _get(client, server.url()))[1] == b"ok"
            assert (await _get(client, server.url()))[1] == b"ok"
            assert (requests, server.connections) == (3, 2)
        finally:
            await client.aclose()


async def test_at_most_max_idle_connections_are_kept_per_origin() -> None:
    release = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _request(reader)
            await release.wait()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    async with _server(slow) as server:
        client = HttpClient(max_idle=2)
        try:
            calls = [asyncio.ensure_future(_get(client, server.url())) for _ in range(5)]
            while server.connections < 5:
                await asyncio.sleep(0.01)
            assert client.connections == 5  # connections in use are not capped
            release.set()
            assert [body for _, body in await asyncio.wait_for(asyncio.gather(*calls), WAIT)] == [b"ok"] * 5
            assert client.connections == 2
        finally:
            await client.aclose()


async def test_a_head_over_the_limit_is_refused_as_soon_as_that_much_came() -> None:
    sent = asyncio.Event()

    async def endless_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")
        for n in range(MAX_HEAD_BYTES // 100 + 10):
            writer.write(b"x-%d: %s\r\n" % (n, b"v" * 90))
        await writer.drain()
        sent.set()
        await asyncio.Event().wait()  # and never ends it

    async with _server(endless_head) as server:
        client = HttpClient()
        try:
            with pytest.raises(ProtocolError, match=f"head .* is over {MAX_HEAD_BYTES} bytes"):
                await _get(client, server.url())
            assert client.connections == 0
        finally:
            await client.aclose()


async def test_bytes_that_are_not_http_are_a_protocol_error() -> None:
    async with _server(_answering(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")) as server:
        client = HttpClient()
        try:
            with pytest.raises(ProtocolError, match="not an HTTP/1.1 response"):
                await _get(client, server.url())
        finally:
            await client.aclose()


async def test_a_body_read_whole_past_its_limit_is_a_protocol_error_and_its_connection_is_closed() -> None:
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 100)) as server:
        client = HttpClient()
        try:
            response = await client.request("GET", server.url(), {})
            with pytest.raises(ProtocolError, match="larger than 10 bytes"):
                await response.read(10)
            response, body = await _get(client, server.url())
            assert len(body) == 100
        finally:
            await client.aclose()


async def test_a_silent_server_is_a_read_timeout_before_the_head_and_in_the_middle_of_the_body() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        await asyncio.Event().wait()

    async def half_a_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf")
        await writer.drain()
        await asyncio.Event().wait()

    client = HttpClient(timeouts=Timeouts(read=0.2))
    try:
        async with _server(silent) as server:
            with pytest.raises(ReadTimeout, match="no response"):
                await _get(client, server.url())
        async with _server(half_a_body) as server:
            response = await client.request("GET", server.url(), {})
            chunks = response.chunks()
            assert await anext(chunks) == b"half"
            with pytest.raises(ReadTimeout, match="nothing received"):
                await anext(chunks)
        assert client.connections == 0
    finally:
        await client.aclose()


async def test_a_streamed_body_gets_what_came_then_each_chunk_and_a_silent_server_ends_it_with_a_read_timeout() -> None:
    async def half_a_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf")
        await writer.drain()
        await reader.readexactly(1)  # more once the client streams the body
        writer.write(b"more")
        await writer.drain()
        await asyncio.Event().wait()

    client = HttpClient(timeouts=Timeouts(read=0.2))
    try:
        async with _server(half_a_body) as server:
            response = await client.request("GET", server.url(), {})
            sink = _Sink()
            response.stream(sink)
            assert response.headers == {}
            assert response.connection is not None and response.connection.transport is not None
            response.connection.transport.write(b"!")
            await asyncio.wait_for(sink.over.wait(), WAIT)
            assert b"".join(sink.parts) == b"halfmore"
            assert isinstance(sink.ends[0], ReadTimeout) and "nothing received" in str(sink.ends[0])
        assert client.connections == 0
    finally:
        await client.aclose()


async def test_a_call_s_post_stream_held_open_is_read_without_a_task_and_its_answer_still_comes() -> None:
    """Through the wire (`wire.http.HttpWire`): the server's request on the POST's stream arrives, the POST's task
    has ended meanwhile (a call pending on a person holds no task), and the answer comes later on the same stream."""
    release = asyncio.Event()

    def chunk(event: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(event), event)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(chunk(b'id: 1\ndata: {"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{}}\n\n'))
        await writer.drain()
        await release.wait()
        writer.write(chunk(b'id: 2\ndata: {"jsonrpc":"2.0","id":7,"result":{"ok":true}}\n\n') + b"0\r\n\r\n")
        await writer.drain()
        await _request(reader)  # the connection is kept alive: until the client closes it

    async with _server(serve) as server:
        wire = HttpWire(server.url().text)
        messages = wire.messages()
        try:
            await wire.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}})
            asked = await asyncio.wait_for(anext(messages), WAIT)
            assert isinstance(asked.message, dict) and asked.message["method"] == "elicitation/create"
            assert asked.related_request_id == 7
            tasks = wire._tasks  # pyright: ignore[reportPrivateUsage]
            if tasks:
                await asyncio.wait_for(asyncio.wait(tasks), WAIT)
            release.set()
            answer = await asyncio.wait_for(anext(messages), WAIT)
            assert answer.message == {"jsonrpc": "2.0", "id": 7, "result": {"ok": True}} and not answer.lost
            assert not wire._posts  # pyright: ignore[reportPrivateUsage]
        finally:
            await wire.aclose()


async def test_a_server_closing_mid_body_is_a_read_error() -> None:
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this", keep=False)) as server:
        client = HttpClient()
        try:
            with pytest.raises(ReadError, match="ended before the response did"):
                await _get(client, server.url())
        finally:
            await client.aclose()
    chunked_cut = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"
    async with _server(_answering(chunked_cut, keep=False)) as server:
        client = HttpClient()
        try:
            with pytest.raises(ReadError):
                await _get(client, server.url())
        finally:
            await client.aclose()


async def test_a_refused_connection_is_a_connect_error() -> None:
    client = HttpClient()
    try:
        with pytest.raises(HttpConnectError):
            await client.request("GET", Url.parse(f"http://127.0.0.1:{free_port()}/"), {})
    finally:
        await client.aclose()


async def test_a_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with _server(mute) as server:
        client = HttpClient(timeouts=Timeouts(connect=0.3))
        try:
            with pytest.raises(ConnectTimeout):
                await client.request("GET", server.url(scheme="https"), {})
        finally:
            await client.aclose()


async def test_a_request_the_server_does_not_take_is_a_write_timeout() -> None:
    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with _server(never_reads) as server:
        client = HttpClient(timeouts=Timeouts(write=0.2))
        try:
            with pytest.raises(WriteTimeout):
                await asyncio.wait_for(client.request("POST", server.url(), {}, b"x" * (64 * 1024 * 1024)), WAIT)
        finally:
            await client.aclose()


async def test_a_body_read_more_slowly_than_it_comes_pauses_reading_and_arrives_whole() -> None:
    body = bytes(range(256)) * (HIGH_WATER * 8 // 256)
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)) as server:
        client = HttpClient()
        try:
            response = await client.request("GET", server.url(), {})
            connection = response.connection
            assert connection is not None
            received = bytearray()
            paused = False
            async for chunk in response.chunks():
                received += chunk
                paused = paused or connection.paused
                if not paused:
                    await asyncio.sleep(0.05)  # read more slowly than the server writes, until reading paused
            assert bytes(received) == body and paused and not connection.paused
            assert (await _get(client, server.url()))[1] == body  # the connection reads again once reused
        finally:
            await client.aclose()


async def test_tls_reaches_a_server_whose_authority_is_trusted_and_refuses_one_that_is_not(tmp_path: Path) -> None:
    ca, cert, key = _certificates(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(ca))
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecret"), served) as server:
        client = HttpClient(tls=trusting)
        try:
            assert (await _get(client, server.url(scheme="https")))[1] == b"secret"
        finally:
            await client.aclose()
        default = HttpClient()  # the system's authorities: this one is not among them
        try:
            with pytest.raises(HttpConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await default.request("GET", server.url(scheme="https"), {})
        finally:
            await default.aclose()


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")) as server:
        client = HttpClient()
        try:
            with pytest.raises(HttpError, match="line break"):
                await client.request("GET", server.url(), {"x-session": "a\r\nx-injected: 1"})
            assert server.connections == 0
        finally:
            await client.aclose()


# -- the parser, fuzzed ----------------------------------------------------------------------------------


class _Socket(asyncio.Transport):
    """A stand-in for the connection's socket: keeps what is written, and whether reading paused or it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def write(self, data: Any) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def _started() -> tuple[http_client._Connection, Response]:  # pyright: ignore[reportPrivateUsage]
    """A connection on a stand-in socket whose GET has been written: what comes next is its response."""
    url = Url.parse("http://upstream.test/mcp")
    connection = http_client._Connection(HttpClient(), url.origin)  # pyright: ignore[reportPrivateUsage]
    connection.connection_made(_Socket())
    response = Response(url, None)
    connection.start(b"GET /mcp HTTP/1.1\r\n\r\n", response)
    return connection, response


class _Sink:
    """A streamed body's chunks and end (`Response.stream`), as they came."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.ends: list[TransportError | None] = []
        self.over = asyncio.Event()

    def body(self, chunk: bytes) -> None:
        assert not self.ends, "a chunk after the end"
        self.parts.append(chunk)

    def ended(self, error: TransportError | None) -> None:
        self.ends.append(error)
        self.over.set()


async def _parse(
    pieces: list[bytes], *, eof: bool, stream_after: int | None = None
) -> tuple[Response, bytes | TransportError, dict[str, str]]:
    """Feed `pieces` to one connection as its socket would, then the end of the connection if `eof`: the
    response, its body or the error that ended it, and its headers. With `stream_after`, the body is handed to a
    sink (`Response.stream`) once that many pieces came and the head with them, else read whole at the end."""
    client = HttpClient()
    url = Url.parse("http://upstream.test/mcp")
    connection = http_client._Connection(client, url.origin)  # pyright: ignore[reportPrivateUsage]
    connection.connection_made(_Socket())
    response = Response(url, None)
    head = connection.start(b"GET /mcp HTTP/1.1\r\n\r\n", response)
    sink: _Sink | None = None
    headers: dict[str, str] = {}

    def stream() -> None:
        nonlocal sink, headers
        if stream_after is not None and sink is None and response.status:
            headers = dict(response.headers)
            sink = _Sink()
            response.stream(sink)

    for i, piece in enumerate(pieces):
        if i >= (stream_after or 0):
            stream()
        connection.data_received(piece)
    if eof:
        connection.eof_received()
        connection.connection_lost(None)
    stream()
    assert head.done() or not eof  # the end of the connection settles a response that never got its head
    if not response.status:
        return response, connection.failure or ReadError("no head"), headers
    if sink is not None:
        assert len(sink.ends) <= 1
        if not sink.ends:
            return response, ReadError("not ended"), headers
        return response, sink.ends[0] or b"".join(sink.parts), headers
    headers = response.headers
    if not response.finished:
        return response, ReadError("not ended"), headers
    try:
        return response, await response.read(), headers
    except TransportError as exc:
        return response, exc, headers


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True) if data[a:b]]


token = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(lambda name: not name.startswith("-"))
header_value = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30)
framings = st.sampled_from(["length", "chunked", "eof"])


@fuzz(300)
@given(status=st.integers(200, 599).filter(lambda s: s not in (204, 304)),
       headers=st.dictionaries(token.filter(lambda n: n not in ("content-length", "transfer-encoding", "connection")),
                               header_value, max_size=6),
       body=st.binary(max_size=3000), framing=framings, chunk_sizes=st.lists(st.integers(1, 700), max_size=8),
       cuts=st.lists(st.integers(0, 10_000), max_size=12), stream_after=st.none() | st.integers(0, 13))
async def test_any_response_in_any_split_is_read_as_sent(
    status: int, headers: dict[str, str], body: bytes, framing: str, chunk_sizes: list[int], cuts: list[int],
    stream_after: int | None,
) -> None:
    """Read whole at its end, or streamed to a sink from any piece on (`Response.stream`)."""
    lines = [b"HTTP/1.1 %d Whatever" % status] + [f"{name}: {value}".encode() for name, value in headers.items()]
    if framing == "length":
        lines.append(b"content-length: %d" % len(body))
        payload = body
    elif framing == "chunked":
        lines.append(b"transfer-encoding: chunked")
        parts, rest = [], body
        for size in chunk_sizes or [len(body) or 1]:
            part, rest = rest[:size], rest[size:]
            if part:
                parts.append(b"%x\r\n%s\r\n" % (len(part), part))
        if rest:
            parts.append(b"%x\r\n%s\r\n" % (len(rest), rest))
        payload = b"".join(parts) + b"0\r\n\r\n"
    else:
        lines.append(b"connection: close")
        payload = body
    wire = b"\r\n".join(lines) + b"\r\n\r\n" + payload
    response, read, seen = await _parse(_split(wire, cuts), eof=framing == "eof", stream_after=stream_after)
    assert read == body
    assert response.status == status
    assert {name: seen[name] for name in headers} == headers


HEADS = [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.0 404 x\r\n", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
         b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]
"""Beginnings of a response, for the fuzzer to go on from."""


@fuzz(300)
@given(data=st.binary(max_size=400) | st.builds(bytes.__add__, st.sampled_from(HEADS), st.binary(max_size=200)),
       cuts=st.lists(st.integers(0, 1000), max_size=6), eof=st.booleans(), stream_after=st.none() | st.integers(0, 7))
async def test_any_bytes_end_in_a_response_or_a_transport_error(
    data: bytes, cuts: list[int], eof: bool, stream_after: int | None
) -> None:
    response, read, _ = await _parse(_split(data, cuts), eof=eof, stream_after=stream_after)
    assert isinstance(read, bytes | TransportError)
    if eof:
        assert isinstance(read, bytes) or response.status == 0 or not response.complete


async def test_a_json_answer_past_max_event_bytes_fails_that_request_saying_why() -> None:
    """Through the wire (`wire.http.HttpWire`): an answer as one JSON body is bounded like an event of a stream."""
    big = b'{"jsonrpc": "2.0", "id": 1, "result": {"text": "%s"}}' % (b"x" * 5000)
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(big), big)
    async with _server(_answering(answer)) as server:
        wire = HttpWire(server.url().text, max_event_bytes=1000)
        messages = wire.messages()
        try:
            await wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})
            inbound = await asyncio.wait_for(anext(messages), WAIT)
            assert inbound.lost and isinstance(inbound.message, dict)
            reason = inbound.message["error"]["message"]
            assert "larger than 1000 bytes (max_event_bytes)" in reason, reason
        finally:
            await wire.aclose()
