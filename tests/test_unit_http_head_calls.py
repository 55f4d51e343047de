"""What `LimitedHttpTools` (web/http_protocol.py) calls for a request's head and body: its headers' names lowered all
at once, not a frame and two calls per header, and a body's bytes counted with no call per feed more than it needs;
the headers an app sees (names, values, order, trailers, `Expect: 100-continue`) are uvicorn's own protocol's,
whatever their case and the chunks the stream comes in."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from elicitgate.web.http_protocol import HttpLimits, limited_protocol
from tests.profiled import python_calls
from tests.test_unit_http_protocol import Socket, feed, fuzz, ok, turns, whole_body

LIMITS = HttpLimits(8 * 1024, 32 * 1024, 3600, 3600)

Seen = list[tuple[list[tuple[bytes, bytes]], bytes]]


def _protocol(app: Any, protocol_class: Any) -> tuple[Any, Socket]:
    protocol = protocol_class(
        config=Config(app, lifespan="off", log_level="critical"),
        server_state=ServerState(),
        app_state={},
        _loop=asyncio.get_running_loop(),
    )
    socket = Socket()
    protocol.connection_made(socket)
    return protocol, socket


async def _served(protocol_class: Any, stream: bytes, cuts: list[int]) -> tuple[Seen, bytes]:
    """What the app saw of each request (its headers, read once its body is in, and its body), and what was written."""
    seen: Seen = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = await whole_body(receive)
        seen.append((list(scope["headers"]), body))
        await ok(send)

    protocol, socket = _protocol(app, protocol_class)
    await feed(protocol, socket, stream, cuts)
    await turns()
    protocol.connection_lost(None)
    return seen, bytes(socket.written)


name_chars = "abcXYZ-_!#$%&'*+.^`|~09"
header_names = st.one_of(
    st.sampled_from(["Host", "host", "HOST", "Content-Type", "X-Id", "x-id", "Expect", "expect", "EXPECT"]),
    st.text(name_chars, min_size=1, max_size=10),
)
header_values = st.one_of(
    st.sampled_from(["100-continue", "100-Continue", "text/plain", ""]),
    st.text("abc XYZ09;=,/-", max_size=12).map(str.strip),
)
trailers = st.lists(st.tuples(st.text(name_chars, min_size=1, max_size=8), st.text("abcXY09", max_size=6)), max_size=2)


def _encoded(headers: list[tuple[str, str]], body: bytes, chunked: bool, trailer: list[tuple[str, str]]) -> bytes:
    lines = ["POST /x HTTP/1.1", *(f"{name}: {value}" for name, value in headers)]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        ending = "".join(f"{name}: {value}\r\n" for name, value in trailer).encode() + b"\r\n"
        framed = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n" + ending
    else:
        lines.append(f"Content-Length: {len(body)}")
        framed = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + framed


@fuzz(150)
@given(
    headers=st.lists(st.tuples(header_names, header_values), max_size=8).filter(
        lambda headers: all(name.lower() not in ("content-length", "transfer-encoding") for name, _ in headers)
    ),
    body=st.binary(max_size=40),
    chunked=st.booleans(),
    trailer=trailers,
    data=st.data(),
)
@example(headers=[("Expect", "100-continue")], body=b"x", chunked=False, trailer=[], data=None)
@example(
    headers=[("X-A", "1"), ("x-a", "2"), ("EXPECT", "100-CONTINUE")],
    body=b"",
    chunked=True,
    trailer=[("Expect", "100-continue"), ("X-T", "t")],
    data=None,
)
def test_the_headers_an_app_sees_are_uvicorn_s_whatever_their_case_and_chunks(
    headers: list[tuple[str, str]],
    body: bytes,
    chunked: bool,
    trailer: list[tuple[str, str]],
    data: st.DataObject | None,
):
    stream = _encoded(headers, body, chunked, trailer) * 2
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6)) if data is not None else []

    async def main() -> tuple[tuple[Seen, bytes], tuple[Seen, bytes]]:
        return (await _served(limited_protocol(LIMITS), stream, cuts), await _served(HttpToolsProtocol, stream, cuts))

    ours, uvicorns = asyncio.run(main())
    assert ours == uvicorns


def _head(count: int) -> bytes:
    lines = ["POST /x HTTP/1.1", "Host: example.test", "Content-Length: 2"]
    lines += [f"X-Header-{index}: value {index}" for index in range(count)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _calls_of_a_head(count: int) -> list[str]:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> list[str]:
        protocol, _ = _protocol(app, limited_protocol(LIMITS))
        protocol.data_received(_head(0))  # the first request's own set-up (the scanner's, the parser's) left out
        protocol.data_received(b"ok")
        await turns()
        head = _head(count)
        with python_calls(c_prefix="c:") as called:
            protocol.data_received(head)
        protocol.connection_lost(None)
        return called

    return asyncio.run(main())


def test_a_head_s_calls_grow_by_one_callback_per_header_and_nothing_more():
    few, many = _calls_of_a_head(1), _calls_of_a_head(12)
    assert many.count("on_header") == few.count("on_header") + 11
    assert [name for name in many if name != "on_header"] == [name for name in few if name != "on_header"]
    assert many.count("c:lower") == 1, "the names lowered at once"


def test_a_body_fed_after_its_head_is_counted_with_no_call_to_min():
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()

    async def main() -> list[str]:
        protocol, _ = _protocol(app, limited_protocol(LIMITS))
        protocol.data_received(b"POST /x HTTP/1.1\r\nHost: example.test\r\nContent-Length: 4\r\n\r\n")
        with python_calls(c_prefix="c:") as called:
            protocol.data_received(b"ab")
        protocol.connection_lost(None)
        return called

    called = asyncio.run(main())
    assert "on_body" in called
    assert "c:min" not in called
    assert called.count("c:len") == 3, called  # the feed's size, the body's and what the request holds (`on_body`)


def _respond_calls(count: int) -> list[str]:
    """The calls of the second of two alike responses on a connection, `count` headers each (`LeanCycle.respond`)."""
    headers = [(b"content-type", b"application/json"), *((b"x-h%d" % index, b"v") for index in range(count))]

    async def main() -> list[str]:
        answered = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await answered.wait()  # answered by the test, from outside the task

        protocol, _ = _protocol(app, limited_protocol(LIMITS))
        called: list[str] = []
        for _ in range(2):
            protocol.data_received(b"GET /x HTTP/1.1\r\nHost: example.test\r\n\r\n")
            await turns()
            cycle = protocol.cycle
            with python_calls(c_prefix="c:") as called:
                cycle.respond(200, headers, b"ok")
            await turns()
        answered.set()
        await turns()
        protocol.connection_lost(None)
        return called

    return asyncio.run(main())


def test_a_head_written_again_costs_no_call_per_header():
    few, many = _respond_calls(1), _respond_calls(10)
    assert "_head" in few
    assert few == many


def test_heads_kept_are_uvicorn_s_for_each_request_kind_and_follow_the_date():
    stream = (
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\nHEAD / HTTP/1.1\r\nHost: a\r\n\r\n"
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.0\r\nHost: a\r\n\r\n"
    )
    headers = [(b"content-type", b"text/plain"), (b"x-id", b"7")]

    async def written(protocol_class: Any, state: ServerState, date: bytes) -> bytes:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"ok"})

        state.default_headers = [(b"date", date)]
        protocol = protocol_class(
            config=Config(app, lifespan="off", log_level="critical"),
            server_state=state,
            app_state={},
            _loop=asyncio.get_running_loop(),
        )
        socket = Socket()
        protocol.connection_made(socket)
        await feed(protocol, socket, stream, [len(stream) // 4, len(stream) // 2, 3 * len(stream) // 4])
        await turns()
        protocol.connection_lost(None)
        return bytes(socket.written)

    async def main() -> list[tuple[bytes, bytes]]:
        ours, uvicorns = ServerState(), ServerState()
        return [
            (await written(limited_protocol(LIMITS), ours, date), await written(HttpToolsProtocol, uvicorns, date))
            for date in (b"Fri, 27 Nov 2026 16:00:00 GMT", b"Fri, 27 Nov 2026 16:00:01 GMT")
        ]

    for ours, uvicorns in asyncio.run(main()):
        assert ours == uvicorns
        assert ours.count(b"HTTP/1.1 200 OK") == 4 and b"connection: close" in ours
