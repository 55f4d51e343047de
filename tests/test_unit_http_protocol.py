"""`LimitedHttpTools` (web/http_protocol.py) on its own, fuzzed (hypothesis): the head counting feeds the parser in
slices, so whatever the chunks a stream arrives in, every request in it reaches the app as sent, and a head over a
limit is answered 414 / 431 with no more than the limit of it ever fed to the parser. The protocol is uvicorn's,
with its real httptools parser and a real app; only the socket is a stand-in that keeps what is written."""

from __future__ import annotations

import asyncio
import os
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from uvicorn.config import Config
from uvicorn.server import ServerState

from elicitgate.config import build_config
from elicitgate.errors import ConfigError, HeadTooLarge
from elicitgate.web.http_protocol import HeadScanner, HttpLimits, limited_protocol

LONG_RUN = "FUZZ_EXAMPLES" in os.environ
MAX_LINE = 200
MAX_HEAD = 1000


def fuzz(ci_examples: int) -> Any:
    return settings(max_examples=int(os.environ["FUZZ_EXAMPLES"]) if LONG_RUN else ci_examples, deadline=None,
                    derandomize=not LONG_RUN, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Socket(asyncio.Transport):
    """What the protocol writes, and whether it paused reading or closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 80)}.get(name, default)

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

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass


class CountingParser:
    """The protocol's parser, counting the bytes it is fed."""

    def __init__(self, parser: Any) -> None:
        self._parser = parser
        self.fed = 0

    def feed_data(self, data: Any) -> None:
        self.fed += len(data)
        self._parser.feed_data(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


async def feed(protocol: asyncio.Protocol, socket: Socket, stream: bytes, cuts: list[int]) -> None:
    """`stream` fed to `protocol` cut at `cuts`, as a socket would: none while reading is paused, none once closed."""
    for start, end in pairwise([0, *sorted(set(cuts)), len(stream)]):
        for _ in range(1000):  # the app's tasks answer, and a paused connection reads again
            if not socket.paused:
                break
            await asyncio.sleep(0)
        if socket.closed:
            break
        protocol.data_received(stream[start:end])


async def whole_body(receive: Any) -> bytes:
    """An ASGI request's body, every part of it received."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def ok(send: Any) -> None:
    """A 200 answer whose body is `ok`."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def run(
    stream: bytes, cuts: list[int]
) -> tuple[list[tuple[str, str, list[tuple[bytes, bytes]], bytes]], Socket, int]:
    """Feed `stream` cut at `cuts` (as a socket would, none while reading is paused); what the app saw, the
    socket, and how many bytes the parser was fed."""
    seen: list[tuple[str, str, list[tuple[bytes, bytes]], bytes]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = await whole_body(receive)
        seen.append((scope["method"], scope["path"], [h for h in scope["headers"] if h[0].startswith(b"x-")], body))
        await ok(send)

    loop = asyncio.get_running_loop()
    protocol_class = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))
    protocol = protocol_class(config=Config(app, lifespan="off", log_level="critical"), server_state=ServerState(),
                              app_state={}, _loop=loop)
    parser = CountingParser(protocol.parser)
    protocol.parser = parser  # pyright: ignore[reportAttributeAccessIssue]
    socket = Socket()
    protocol.connection_made(socket)
    await feed(protocol, socket, stream, cuts)
    for _ in range(100):
        await asyncio.sleep(0)
    closed, socket.closed = socket.closed, False
    protocol.connection_lost(None)
    socket.closed = closed
    return seen, socket, parser.fed


token = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
value = st.text("abcdefghijklmnopqrstuvwxyz0123456789 ;=,/\n\r", max_size=80).map(
    lambda text: text.replace("\r", "").replace("\n", "").strip())
requests = st.fixed_dictionaries({
    "method": st.sampled_from(["GET", "POST"]),
    "path": st.text("abcxyz/._-", max_size=60).map(lambda path: "/" + path),
    "headers": st.lists(st.tuples(token.map(lambda name: "x-" + name), value), max_size=6),
    "body": st.binary(max_size=300),
    "chunked": st.booleans(),
})


def encode(request: dict[str, Any]) -> tuple[bytes, bytes]:
    """The request's head and body on the wire."""
    lines = [f"{request['method']} {request['path']} HTTP/1.1", "Host: example.test"]
    lines += [f"{name}: {text}" for name, text in request["headers"]]
    body: bytes = request["body"]
    if request["chunked"]:
        lines.append("Transfer-Encoding: chunked")
        framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:100], body[100:]) if part)
        body = framed + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), body


def expected(request: dict[str, Any]) -> tuple[str, str, list[tuple[bytes, bytes]], bytes]:
    headers = [(name.encode(), text.encode()) for name, text in request["headers"]]
    return request["method"], request["path"], headers, request["body"]


def fits(head: bytes) -> bool:
    return len(head) <= MAX_HEAD and head.index(b"\n") + 1 <= MAX_LINE


@fuzz(200)
@given(batch=st.lists(requests, min_size=1, max_size=4), data=st.data())
def test_requests_within_the_limits_reach_the_app_whatever_the_chunks(batch: list[dict[str, Any]], data: st.DataObject):
    encoded = [encode(request) for request in batch]
    batch = [request for request, (head, _) in zip(batch, encoded, strict=True) if fits(head)]
    stream = b"".join(head + body for head, body in encoded if fits(head))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    seen, socket, _ = asyncio.run(run(stream, cuts))
    assert seen == [expected(request) for request in batch]
    assert socket.written.count(b"HTTP/1.1 200 OK") == len(batch) and not socket.closed


@fuzz(200)
@given(before=st.lists(requests.map(lambda r: {**r, "chunked": False}), max_size=2), big=requests,
       padding=st.integers(0, 3000), in_line=st.booleans(), data=st.data())
def test_a_head_over_a_limit_is_refused_with_no_more_than_the_limit_fed(
    before: list[dict[str, Any]], big: dict[str, Any], padding: int, in_line: bool, data: st.DataObject,
):
    before = [request for request in before if fits(encode(request)[0])]
    if in_line:
        big = {**big, "path": big["path"] + "p" * padding}
    else:
        big = {**big, "headers": [*big["headers"], ("x-pad", "v" * padding)]}
    head, body = encode(big)
    line_over = head.index(b"\n") + 1 > MAX_LINE
    if not line_over and len(head) <= MAX_HEAD:
        return  # within the limits: the other test's case
    first = b"".join(b"".join(encode(request)) for request in before)
    stream = first + head + body
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    seen, socket, fed = asyncio.run(run(stream, cuts))
    assert seen == [expected(request) for request in before]
    status = b"414 Request-URI Too Long" if line_over else b"431 Request Header Fields Too Large"
    assert socket.written.count(b"HTTP/1.1 200 OK") == len(before) and status in socket.written
    assert fed <= len(first) + (MAX_LINE if line_over else MAX_HEAD)


@fuzz(500)
@given(head=st.binary(max_size=400), data=st.data())
def test_the_scanner_counts_any_bytes_the_same_in_any_chunks(head: bytes, data: st.DataObject):
    """Where it lets the parser stop, and whether it refuses, do not depend on how the bytes are cut."""

    def scan(edges: list[int]) -> tuple[set[int], int | None]:
        scanner = HeadScanner(max_line=50, max_head=200)
        stops: set[int] = set()
        try:
            for start, end in pairwise(edges):
                piece = head[start:end]
                at = 0
                while at < len(piece):
                    at = scanner.take(piece, at)
                    stops.add(start + at)
        except HeadTooLarge as refusal:
            return stops, refusal.status
        return stops, None

    edges = [0, *sorted(set(data.draw(st.lists(st.integers(1, max(1, len(head) - 1)), max_size=10)))), len(head)]
    whole, cut = scan([0, len(head)]), scan(edges)
    assert cut[1] == whole[1]
    if whole[1] is None:  # every possible end of the head is a place to stop, wherever the cuts
        assert cut[0] - set(edges) == whole[0] - set(edges)


def test_a_request_line_limit_over_the_head_limit_is_a_configuration_error_saying_why():
    with pytest.raises(ConfigError) as caught:
        build_config({"mcpServers": {}, "http": {"max_request_line_bytes": 65536}}, "f.json")
    assert "max_request_line_bytes (65536) must not exceed max_header_bytes (32768)" in str(caught.value)
    limits = HttpLimits.of(build_config({"mcpServers": {}}, "f.json").http)
    assert limits == HttpLimits(8192, 32768, 30.0, 60.0)  # on by default


class CountingSocket(Socket):
    """A `Socket` that also keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: Any) -> None:
        super().write(data)
        self.writes.append(bytes(data))


async def turns(count: int = 100) -> None:
    """Let the event loop run the app's tasks and the protocol's callbacks."""
    for _ in range(count):
        await asyncio.sleep(0)


def test_what_a_response_writes_in_one_turn_of_the_loop_leaves_in_one_write():
    """A JSON answer is one write (head and body), an SSE stream one write for its head and first event and one
    for its last event and its end: each write is a system call and a wake-up of the client (uvicorn made one
    per `send`)."""

    async def main() -> list[bytes]:
        later = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            if scope["path"] == "/json":
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
                await send({"type": "http.response.body", "body": b"ok"})
                return
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": b"data: 1\r\n\r\n", "more_body": True})
            await later.wait()
            await send({"type": "http.response.body", "body": b"data: 2\r\n\r\n", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        loop = asyncio.get_running_loop()
        protocol = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))(
            config=Config(app, lifespan="off", log_level="critical"), server_state=ServerState(), app_state={},
            _loop=loop)
        socket = CountingSocket()
        protocol.connection_made(socket)
        protocol.data_received(b"GET /json HTTP/1.1\r\nHost: example.test\r\n\r\n")
        await turns()
        protocol.data_received(b"GET /sse HTTP/1.1\r\nHost: example.test\r\n\r\n")
        await turns()
        later.set()
        await turns()
        protocol.connection_lost(None)
        return socket.writes

    writes = asyncio.run(main())
    assert len(writes) == 3, writes
    assert writes[0].startswith(b"HTTP/1.1 200 OK") and writes[0].endswith(b"\r\n\r\nok")
    assert writes[1].startswith(b"HTTP/1.1 200 OK") and writes[1].endswith(b"\r\n\r\nb\r\ndata: 1\r\n\r\n\r\n")
    assert writes[2] == b"b\r\ndata: 2\r\n\r\n\r\n0\r\n\r\n"


forwarded_headers = st.lists(st.tuples(
    st.sampled_from([b"x-forwarded-for", b"x-forwarded-proto", b"x-other"]),
    st.one_of(st.sampled_from([b"https", b"http", b"wss", b" http ", b"gopher", b"", b"10.0.0.1", b"::1",
                               b"10.0.0.1, 127.0.0.1", b"[::1]:8080", b"10.0.0.2:99"]),
              st.binary(max_size=12).filter(lambda value: b"\xff" not in value))),
    max_size=4)


@fuzz(300)
@given(peer=st.sampled_from(["127.0.0.1", "10.9.9.9", "::1"]), headers=forwarded_headers,
       trusted=st.sampled_from(["127.0.0.1", "127.0.0.1,10.9.9.9", "*"]))
def test_the_direct_route_gives_the_scope_client_address_gives(peer: str, headers: list[tuple[bytes, bytes]],
                                                                 trusted: str):
    """`/mcp` skips `ClientAddress` (and uvicorn's proxy-header rules inside it): `DirectRoute.prepare` leaves its
    scope with the same client, scheme and connecting address, whoever connects and whatever they forward."""
    from elicitgate.web.client_address import PEER, ClientAddress
    from elicitgate.web.http_protocol import DirectRoute

    seen: list[dict[str, Any]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append(dict(scope))

    def scope() -> dict[str, Any]:
        return {"type": "http", "client": (peer, 5000), "scheme": "http", "headers": list(headers), "path": "/mcp"}

    outer = ClientAddress(inner, trusted)
    asyncio.run(outer(scope(), None, None))  # pyright: ignore[reportArgumentType]
    direct = scope()
    DirectRoute(b"/mcp", inner, inner, outer.inner).prepare(direct)
    assert (direct["client"], direct["scheme"], direct[PEER]) == (seen[0]["client"], seen[0]["scheme"], seen[0][PEER])
    assert direct["app"] is inner


def test_only_the_direct_routes_exact_path_goes_past_the_outer_app():
    """`/mcp` reaches the direct route's app; `/mcp/`, `/mcp?x=1`, `/mc` and `/mcp%2F` the server's app (uvicorn's
    parsing of the path and query kept for them)."""
    from elicitgate.web.http_protocol import DirectRoute

    async def main() -> list[tuple[str, str, str, bytes]]:
        seen: list[tuple[str, str, str, bytes]] = []

        def app_named(name: str) -> Any:
            async def app(scope: Any, receive: Any, send: Any) -> None:
                await receive()
                seen.append((name, scope["path"], scope["raw_path"].decode(), scope["query_string"]))
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
            return app

        loop = asyncio.get_running_loop()
        protocol_class = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))
        outer = app_named("outer")
        from elicitgate.web.client_address import ClientAddress

        protocol_class.direct = DirectRoute(b"/mcp", app_named("direct"), outer,
                                            ClientAddress(outer).inner)
        protocol = protocol_class(config=Config(outer, lifespan="off", log_level="critical"),
                                  server_state=ServerState(), app_state={}, _loop=loop)
        socket = Socket()
        protocol.connection_made(socket)
        for target in ("/mcp", "/mcp/", "/mcp?x=1", "/mc", "/mcp%2F", "/mcp"):
            protocol.data_received(f"POST {target} HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\n\r\n"
                                   .encode())
            await turns()
        protocol.connection_lost(None)
        assert socket.written.count(b"HTTP/1.1 200 OK") == 6
        return seen

    assert asyncio.run(main()) == [
        ("direct", "/mcp", "/mcp", b""), ("outer", "/mcp/", "/mcp/", b""), ("outer", "/mcp", "/mcp", b"x=1"),
        ("outer", "/mc", "/mc", b""), ("outer", "/mcp/", "/mcp%2F", b""), ("direct", "/mcp", "/mcp", b"")]


def test_a_streamed_response_learns_its_client_has_gone_without_a_task_watching():
    """An SSE response (`faces.http_answers.on_disconnect`, as `/mcp`'s streams use it) is told its client went
    away by the connection's protocol: no task waits on `receive` beside the request's own for as long as the
    stream stays open (a pushed question holds it until answered), and `gone` is called once the connection is
    lost; a watch cancelled as the response ends is never called."""
    from elicitgate.faces.http_answers import on_disconnect

    async def main() -> tuple[int, int, list[str]]:
        calls: list[str] = []
        opened = asyncio.Event()
        tasks_while_open: list[int] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            name = scope["path"]
            watch = on_disconnect(receive, lambda: calls.append(name))
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": b"data: 1\r\n\r\n", "more_body": True})
            if name == "/ends":
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                watch.cancel()
                return
            tasks_while_open.append(len(asyncio.all_tasks()))
            opened.set()
            await asyncio.Event().wait()  # held open until the client goes

        loop = asyncio.get_running_loop()
        protocol_class = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))
        baseline = len(asyncio.all_tasks())
        ended = protocol_class(config=Config(app, lifespan="off", log_level="critical"), server_state=ServerState(),
                               app_state={}, _loop=loop)
        ended.connection_made(Socket())
        ended.data_received(b"GET /ends HTTP/1.1\r\nHost: example.test\r\n\r\n")
        await turns()
        ended.connection_lost(None)
        held = protocol_class(config=Config(app, lifespan="off", log_level="critical"), server_state=ServerState(),
                              app_state={}, _loop=loop)
        held.connection_made(Socket())
        held.data_received(b"GET /held HTTP/1.1\r\nHost: example.test\r\n\r\n")
        await opened.wait()
        held.connection_lost(None)
        await turns()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()
        return baseline, tasks_while_open[0], calls

    baseline, while_open, calls = asyncio.run(main())
    assert while_open == baseline + 1, "the request's own task, and no watcher beside it"
    assert calls == ["/held"]


header_names = st.one_of(st.sampled_from([b"content-type", b"Content-Type", b"x-id", b"content-length",
                                          b"transfer-encoding", b"connection", b"Connection", b"bad name", b"x(y)"]),
                         st.binary(max_size=6))
header_values = st.one_of(st.sampled_from([b"application/json", b"2", b"chunked", b"close", b"keep-alive", b"a\nb",
                                           b"a\x00"]), st.binary(max_size=8))


@fuzz(ci_examples=60)
@given(headers=st.lists(st.tuples(header_names, header_values), max_size=5))
@example(headers=[(b"content-length", b"2"), (b"content-length", b"2")])
@example(headers=[(b"x-id", b"1"), (b"connection", b"close"), (b"connection", b"close")])
def test_response_heads_are_written_as_uvicorn_writes_them_the_first_time_and_again(
    headers: list[tuple[bytes, bytes]],
):
    """`LeanCycle` keeps the line of each header that does not frame the response, once checked: the same headers
    sent again (three responses on one connection) give the bytes uvicorn's own protocol writes, framing headers
    and headers it refuses included."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    async def written(protocol_class: Any) -> bytes:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"ok"})

        protocol = protocol_class(config=Config(app, lifespan="off", log_level="critical"),
                                  server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop())
        socket = Socket()
        protocol.connection_made(socket)
        for _ in range(3):
            if socket.closed:
                break
            protocol.data_received(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
            await turns()
        protocol.connection_lost(None)
        return bytes(socket.written)

    async def main() -> tuple[bytes, bytes]:
        return (await written(limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))),
                await written(HttpToolsProtocol))

    ours, uvicorns = asyncio.run(main())
    assert ours == uvicorns
