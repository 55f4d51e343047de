"""The lean relay for streamable HTTP MCP: `python -m bench.lean_http_relay --listen HOST:PORT --upstream URL`.

Every request that reaches it (any path, any method: POST, the GET stream, DELETE) goes to URL with the same
headers (`Mcp-Session-Id` and the rest; only those about one connection are each side's own) and its JSON
body parsed with `orjson.loads` and written again with `orjson.dumps`; the upstream's answer comes back the
same way: a JSON body re-serialised whole, an SSE stream (`text/event-stream`) passed on as it comes, as a
chunked body, with each `data:` line's JSON re-serialised. Nothing else: no routing, no ids rewritten, no
checks, no sessions of its own.

It is built for the least a Python process can add: asyncio Protocols on uvloop both ways, requests parsed
with `httptools.HttpRequestParser`, responses with `httptools.HttpResponseParser`, upstream connections kept
alive in a pool (one per exchange in flight; a GET stream holds one for as long as it runs), everything in
the protocols' callbacks (no task per message: one only to open a new upstream connection). It is the lowest
floor for anything written in Python between a client and a server over streamable HTTP (`bench.bare_http_relay`
is the same job on the libraries the gateway runs, uvicorn and httpx2); `bench.floor` and `bench.latency`
measure it beside the direct call and elicitgate. A bench piece: it relays what the `mcp` SDK client and
server send each other (HTTP/1.1, Content-Length or chunked bodies), and assumes no more.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
from collections import deque
from http import HTTPStatus
from typing import cast
from urllib.parse import urlsplit

import httptools  # pyright: ignore[reportMissingTypeStubs]
import orjson
import uvloop

HOP_BY_HOP = frozenset({b"host", b"connection", b"keep-alive", b"content-length", b"transfer-encoding", b"te",
                        b"upgrade", b"proxy-connection", b"trailer"})
"""Headers about one connection, not the message: each side of the relay sets its own."""

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE = re.compile(rb"\r\n|\n|\r")
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}

Headers = list[tuple[bytes, bytes]]


def _again(data: bytes) -> bytes:
    return orjson.dumps(orjson.loads(data))


def _event_again(event: bytes) -> bytes:
    """One SSE event with each `data:` line's JSON written again (other lines, and empty data, as they were)."""
    out: list[bytes] = []
    for line in _LINE.split(event):
        if line.startswith(b"data:") and line[5:].strip():
            line = b"data: " + _again(line[5:])
        out.append(line)
    return b"\n".join(out)


def _head(status: int, headers: Headers, framing: bytes, keep_alive: bool) -> bytes:
    """A response's status line and headers, `framing` (Content-Length or chunked) this side's own."""
    lines = [b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"Unknown")), framing]
    lines += [name + b": " + value for name, value in headers if name.lower() not in HOP_BY_HOP]
    if not keep_alive:
        lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


class Request:
    """One request from the client, whole (the SDK's requests are small)."""

    __slots__ = ("method", "headers", "body", "keep_alive")

    def __init__(self, method: bytes, headers: Headers, body: bytes, keep_alive: bool) -> None:
        self.method = method
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


class Front(asyncio.Protocol):
    """One client connection: parses its requests, hands each to an upstream connection, writes the answers.

    One exchange at a time: a request that comes while one is answered waits in `queue` (HTTP/1.1 pipelining)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.queue: deque[Request] = deque()
        self.back: Back | None = None
        """The upstream connection answering the current exchange, if one is."""
        self.busy = False
        self.keep_alive = True
        self.headers: Headers = []
        self.body = bytearray()

    # asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.write(_head(400, [(b"content-type", b"text/plain")], b"content-length: %d" % len(str(exc)), False)
                       + str(exc).encode())
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.queue.clear()
        if self.back is not None:  # mid-answer (the SDK's client drops an SSE stream once it has its answer)
            self.back.abandon()
            self.back = None

    # httptools
    def on_message_begin(self) -> None:
        self.headers = []
        self.body = bytearray()

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        body = bytes(self.body)
        if body:
            body = _again(body)
        self.queue.append(Request(self.parser.get_method(), self.headers, body, self.parser.should_keep_alive()))
        if not self.busy:
            self.next()

    # the exchange
    def next(self) -> None:
        if not self.queue or self.transport is None:
            return
        self.busy = True
        request = self.queue.popleft()
        self.keep_alive = request.keep_alive
        self.relay.send(self, request)

    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def answer(self, status: int, headers: Headers, body: bytes) -> None:
        """A whole answer (Content-Length)."""
        self.write(_head(status, headers, b"content-length: %d" % len(body), self.keep_alive) + body)
        self.done()

    def start(self, status: int, headers: Headers) -> None:
        """The head of a streamed (chunked) answer."""
        self.write(_head(status, headers, b"transfer-encoding: chunked", self.keep_alive))

    def chunk(self, data: bytes) -> None:
        self.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end(self) -> None:
        self.write(b"0\r\n\r\n")
        self.done()

    def done(self) -> None:
        self.back = None
        self.busy = False
        if not self.keep_alive:
            self.close()
        else:
            self.next()

    def failed(self, started: bool, why: str) -> None:
        """The upstream could not be reached, or its connection dropped mid-answer."""
        self.back = None
        if started:  # the head is out: only closing tells the client
            self.close()
            return
        self.answer(502, [(b"content-type", b"text/plain")], f"bench.lean_http_relay: upstream: {why}".encode())


class Back(asyncio.Protocol):
    """One keep-alive connection to the upstream: sends one exchange's request, parses its answer."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.front: Front | None = None
        self.request: Request | None = None
        self.reused = False
        self.received = False
        self.started = False
        self.stream = False
        self.status = 0
        self.headers: Headers = []
        self.body = bytearray()
        self.pending = b""

    def send(self, front: Front, request: Request, reused: bool) -> None:
        assert self.transport is not None
        self.front, self.request, self.reused = front, request, reused
        self.received = self.started = False
        front.back = self
        relay = self.relay
        head = [request.method + b" " + relay.target + b" HTTP/1.1", b"host: " + relay.host,
                b"content-length: %d" % len(request.body)]
        head += [name + b": " + value for name, value in request.headers if name.lower() not in HOP_BY_HOP]
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + request.body)

    def abandon(self) -> None:
        """The client went away mid-answer (the SDK's client drops a POST's SSE stream once it has its answer).
        A POST's answer ends soon: read the rest and discard it, and the connection goes back to the pool when it
        ends (`on_message_complete`); a GET stream may never end: close its connection."""
        self.front = None
        if self.request is not None and self.request.method == b"POST":
            return
        if self.transport is not None:
            self.transport.close()

    # asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.lost(f"bad response: {exc}")
            if self.transport is not None:
                self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.relay.forget(self)
        front, request = self.front, self.request
        if front is None or request is None:
            return
        if self.reused and not self.received:  # the server closed it as idle as we sent: once more on a new one
            self.front = None
            self.relay.send(front, request, fresh=True)
            return
        self.lost(str(exc) if exc else "connection closed mid-answer")

    def lost(self, why: str) -> None:
        front, self.front = self.front, None
        if front is not None:
            front.failed(self.started, why)

    # httptools
    def on_message_begin(self) -> None:
        self.headers = []
        self.body = bytearray()
        self.pending = b""

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        kind = next((value for name, value in self.headers if name.lower() == b"content-type"), b"")
        self.stream = kind.startswith(b"text/event-stream")
        if self.stream and self.front is not None:
            self.started = True
            self.front.start(self.status, self.headers)

    def on_body(self, body: bytes) -> None:
        if not self.stream:
            self.body += body
            return
        pending = self.pending + body
        out: list[bytes] = []
        while match := _EVENT_END.search(pending):
            event = self.event_again(pending[: match.start()])
            if event is not None:
                out.append(event + b"\n\n")
            pending = pending[match.end():]
        self.pending = pending
        if out and self.front is not None:
            self.front.chunk(b"".join(out))

    def event_again(self, event: bytes) -> bytes | None:
        """An SSE event as it goes on to the client, parsed and written again; None drops it (a subclass's say)."""
        return _event_again(event)

    def on_message_complete(self) -> None:
        front, self.front, self.request = self.front, None, None
        if self.parser.should_keep_alive():
            self.relay.release(self)
        elif self.transport is not None:
            self.transport.close()
        if front is None:
            return
        if self.stream:
            if self.pending:
                front.chunk(self.pending)
            front.end()
            return
        body = bytes(self.body)
        kind = next((value for name, value in self.headers if name.lower() == b"content-type"), b"")
        if body and kind.startswith(b"application/json"):
            body = _again(body)
        front.answer(self.status, self.headers, body)


class Relay:
    """One upstream URL and the pool of idle keep-alive connections to it."""

    back: type[Back] = Back
    """The upstream connection's protocol (a subclass's, `bench.lean_http_work_relay`)."""

    def __init__(self, upstream: str) -> None:
        url = urlsplit(upstream)
        if url.scheme != "http" or not url.hostname:
            raise SystemExit(f"--upstream: an http:// URL, not {upstream!r}")
        self.address = (url.hostname, url.port or 80)
        self.host = url.netloc.encode()
        self.target = ((url.path or "/") + (f"?{url.query}" if url.query else "")).encode()
        self.idle: list[Back] = []

    def send(self, front: Front, request: Request, fresh: bool = False) -> None:
        while self.idle and not fresh:
            back = self.idle.pop()
            if back.transport is not None and not back.transport.is_closing():
                back.send(front, request, reused=True)
                return
        opening = asyncio.ensure_future(
            asyncio.get_running_loop().create_connection(lambda: self.back(self), *self.address)
        )
        opening.add_done_callback(lambda done: self._opened(done, front, request))

    def _opened(self, done: asyncio.Future[tuple[asyncio.Transport, Back]], front: Front, request: Request) -> None:
        if (exc := done.exception()) is not None:
            front.failed(False, str(exc) or type(exc).__name__)
            return
        back = done.result()[1]
        if front.transport is None:  # the client left meanwhile
            self.release(back)
            return
        back.send(front, request, reused=False)

    def release(self, back: Back) -> None:
        self.idle.append(back)

    def forget(self, back: Back) -> None:
        if back in self.idle:
            self.idle.remove(back)


async def serve(listen: str, upstream: str, relay: Relay | None = None, front: type[Front] = Front) -> None:
    """Relay on `listen` to `upstream` until SIGINT or SIGTERM; `relay` and `front` are a subclass's
    (`bench.cpu_price`)."""
    host, _, port = listen.rpartition(":")
    pool = relay if relay is not None else Relay(upstream)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: front(pool), host, int(port))
    stop = loop.create_future()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, lambda: stop.done() or stop.set_result(None))
    await stop
    server.close()  # not waiting for open connections (a client's GET stream) to end


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--upstream", required=True, metavar="URL")
    args = parser.parse_args()
    uvloop.run(serve(args.listen, args.upstream))


if __name__ == "__main__":
    main()
