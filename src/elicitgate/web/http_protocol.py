"""The HTTP server's own limits on what a client sends: how big a request head may be, and how long a head or a
body may take to arrive. uvicorn's httptools protocol has neither: httptools joins a header's pieces as they
come (a 50 MB header took seconds of CPU and ~4x its size in memory), and a head sent a byte a second held its
connection open for as long as the client liked.

`LimitedHttpTools` is that protocol with the limits in front of its parser: `HeadScanner` counts a head's bytes
before the parser sees them, and a head over `http.max_header_bytes` (414 for a request line over
`http.max_request_line_bytes`) is answered at once, without feeding, or keeping, the rest. A head or a body
still incomplete after `http.head_timeout` / `http.body_timeout` is answered 408. Each refusal is plain text
naming the config key, and the connection closes (docs/security.md).

What a response writes in one turn of the event loop goes to the socket as one write (`CoalescedWrites`): uvicorn
writes a head and each body part on its own, and over loopback TCP each write is a system call that also wakes
the reader (bench/README.md, "The HTTP face's writes and `/mcp` past Starlette")."""

from __future__ import annotations

import asyncio
import http
import logging
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, cast

import httptools
from starlette.types import ASGIApp
from uvicorn.config import Config
from uvicorn.logging import TRACE_LOG_LEVEL
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT, FlowControl, service_unavailable
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import (
    get_client_addr,
    get_local_addr,
    get_path_with_query_string,
    get_remote_addr,
)
from uvicorn.server import ServerState

from elicitgate.config import HttpFaceConfig
from elicitgate.errors import HeadTooLarge
from elicitgate.json_shapes import JsonObject
from elicitgate.web.client_address import PEER

logger = logging.getLogger(__name__)

LINGER = 5.0
"""Seconds a refused connection is still read (and what comes dropped) after the answer, before it closes. A
socket closed with unread bytes sends a reset, which can destroy the answer before the client reads it (a
client still sending a big head is the usual case); nginx's lingering close does the same."""

_HEAD_ENDS = (b"\n\n", b"\n\r\n")
"""Every way an empty line can end a head (CRLF CRLF, and the bare-LF forms a lenient parser takes)."""
_LINE_BREAKS = (b"\r", b"\n", b"")
"""A head's first byte that `HeadScanner.take`'s fast path leaves to the general one (blank lines before a request
line are skipped; no byte: nothing to scan)."""


@dataclass(frozen=True)
class HttpLimits:
    """What `LimitedHttpTools` enforces (`http.*` in the config)."""

    max_request_line_bytes: int = 8 * 1024
    max_header_bytes: int = 32 * 1024
    head_timeout: float = 30.0
    body_timeout: float = 60.0

    @classmethod
    def of(cls, http: HttpFaceConfig) -> HttpLimits:
        return cls(http.max_request_line_bytes, http.max_header_bytes, http.head_timeout, http.body_timeout)


class HeadScanner:
    """The bytes of one request head, counted as they arrive, before a parser sees them.

    `take` says how far the parser may be fed: up to the next place where the head may end (an empty line),
    so that everything fed while a head is incomplete is head; it raises `HeadTooLarge` as soon as the bytes
    up to there would pass a limit (the head cannot end sooner, so the refusal is never early)."""

    def __init__(self, max_line: int, max_head: int) -> None:
        self.max_line = max_line
        self.max_head = max_head
        self.size = 0
        self.line = 0
        self._line_started = False
        self._line_done = False
        self._tail = b""
        """The head's last two bytes so far: an empty line may begin in one chunk and end in the next."""

    def reset(self) -> None:
        """A new head begins."""
        self.size = self.line = 0
        self._line_started = self._line_done = False
        self._tail = b""

    def take(self, data: bytes, start: int) -> int:
        """Where to stop feeding `data` from `start`: just past the next possible end of the head, or its end."""
        if not self.size and not self._line_started and data[start:start + 1] not in _LINE_BREAKS:
            # A head's first bytes, not a blank line: where its request line ends and where the head may end, found
            # in this one frame (`_next_end`, then `seen` and `_count_line`, counted them the same way).
            newline = data.find(b"\n", start)
            crlf = data.find(b"\n\r\n", newline) if newline >= 0 else -1
            lf = data.find(b"\n\n", newline, len(data) if crlf < 0 else crlf + 2) if newline >= 0 else -1
            end = lf + 2 if lf >= 0 else crlf + 3 if crlf >= 0 else len(data)
            line = (end if newline < 0 or newline >= end else newline + 1) - start
            if line > self.max_line:
                raise HeadTooLarge(414, f"URI Too Long: the request line is over http.max_request_line_bytes "
                                        f"({self.max_line} bytes)\n")
            if end - start > self.max_head:
                raise HeadTooLarge(
                    431, f"Request Header Fields Too Large: the request head is over http.max_header_bytes "
                    f"({self.max_head} bytes)\n")
            self._line_started = True
            self._line_done = 0 <= newline < end
            self.line = line
            self.size = end - start
            self._tail = data[end - 2 if end - 2 > start else start:end]
            return end
        end = self._next_end(data, start)
        self.seen(data, start, end)
        return end

    def seen(self, data: bytes, start: int, end: int) -> None:
        """Count `data[start:end]` as head bytes."""
        if not self._line_done:
            self._count_line(data, start, end)
        size = self.size + end - start
        if size > self.max_head:
            raise HeadTooLarge(
                431, f"Request Header Fields Too Large: the request head is over http.max_header_bytes "
                f"({self.max_head} bytes)\n")
        self.size = size
        self._tail = (self._tail + data[max(start, end - 2):end])[-2:]

    def _count_line(self, data: bytes, start: int, end: int) -> None:
        at = start
        if not self._line_started:
            while at < end and data[at] in b"\r\n":  # empty lines before a request line are skipped (RFC 9112 2.2)
                at += 1
            if at == end:
                return
            self._line_started = True
        newline = data.find(b"\n", at, end)
        line = self.line + (end if newline < 0 else newline + 1) - at
        if line > self.max_line:
            raise HeadTooLarge(
                414, f"URI Too Long: the request line is over http.max_request_line_bytes ({self.max_line} bytes)\n")
        self.line = line
        self._line_done = newline >= 0

    def _next_end(self, data: bytes, start: int) -> int:
        # The first "\n\r\n", then a "\n\n" only where it would end no later: one pass over the head, never over a
        # body after it.
        crlf = data.find(b"\n\r\n", start)
        lf = data.find(b"\n\n", start, len(data) if crlf < 0 else crlf + 2)
        end = lf + 2 if lf >= 0 else crlf + 3 if crlf >= 0 else len(data)
        if self._tail:
            probe = self._tail + data[start:start + 2]
            kept = len(self._tail)
            for empty in _HEAD_ENDS:
                for at in range(kept):
                    if probe.startswith(empty, at) and at + len(empty) > kept:
                        end = min(end, start + at + len(empty) - kept)
        return end


class CoalescedWrites(asyncio.Transport):
    """A connection's transport whose writes are joined until the event loop's turn ends, or until `write_held` says
    the part under way is whole: a JSON answer (head, then body) or an SSE event with the stream's end leave as one
    write. `close` and `write_eof` write what is held first; everything else is the transport's own."""

    __slots__ = ("_transport", "_held", "_call_soon", "_soon", "loop")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:  # pyright: ignore[reportMissingSuperCall]
        # Not `asyncio.BaseTransport`'s: its one field, the extra info, is the transport's (`get_extra_info`).
        self._transport = transport
        self._held: list[bytes | bytearray | memoryview] = []
        self._call_soon = loop.call_soon
        self._soon: asyncio.Handle | None = None
        """The turn's-end `flush` while something is held."""
        self.loop = loop
        """The connection's event loop, for what its responses time (`asyncio.get_running_loop()` is a `getpid` system
        call on Python 3.11)."""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._held:
            self._soon = self._call_soon(self.flush)
        self._held.append(data)

    def flush(self) -> None:
        self._soon = None
        held = self._held
        if not held:
            return
        self._held = []
        if not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def write_held(self) -> None:
        """What is held written now, not at the turn's end (whose `flush` is called off): a response's end, or an
        SSE event put from a callback, leaves before the callbacks after this one (the broker's bookkeeping, the
        next read) instead of after them."""
        soon = self._soon
        if soon is not None:
            soon.cancel()
            self.flush()

    def close(self) -> None:
        if self._soon is not None:
            self.write_held()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def write_eof(self) -> None:
        self.write_held()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(part) for part in self._held)

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.write_held()
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


class Starts(Protocol):
    """What starts a request's task on its connection (uvicorn's `run_asgi` around `app`: its handling of an app's
    failure, the server's count of tasks)."""

    def start(self, cycle: LeanCycle, app: ASGIApp) -> None: ...


AtBody = Callable[[dict[str, Any], "LeanCycle", Starts], "ASGIApp | None"]
"""`DirectRoute.at_body`: (the prepared scope, the request's cycle with its whole body, its connection) -> the app to
run in the request's task, or None when the request was taken care of in this step (its answer written, or to be
written from a callback, which starts a task through the connection's `start` if it must wait)."""


class DirectRoute:
    """One path that a `LimitedHttpTools` server hands straight to its endpoint's app: what the outer middleware
    (`ClientAddress`, with uvicorn's proxy-header rules, and the app's own dispatch by path) and the checks in front
    of the endpoint (`admit`: the Host / Origin guard) would do to its scope is done in `prepare`, before the
    request's task starts, instead of by more frames that every resumption of that task passes through."""

    __slots__ = ("raw_path", "app", "owner", "proxy", "admit", "at_body", "_trusted")

    def __init__(self, raw_path: bytes, app: ASGIApp, owner: ASGIApp, proxy: ProxyHeadersMiddleware,
                 admit: Callable[[dict[str, Any]], ASGIApp | None] | None = None,
                 at_body: AtBody | None = None) -> None:
        self.raw_path = raw_path
        self.app = app
        self.owner = owner
        """What `scope["app"]` names (the HTTP face's Starlette app)."""
        self.proxy = proxy
        """`ClientAddress`'s proxy-header middleware: the proxies whose headers it believes."""
        self.admit = admit
        """Called with the prepared scope: the app that answers the request instead of `app` (a refusal), or None
        to let it through."""
        self.at_body = at_body
        """For a POST: called, instead of starting `app`'s task with the head, once the request's whole body is in
        (a body over the flow control's high-water mark, or awaiting `100 Continue`, starts the task as before): what
        to run in the request's task, or None when it was taken care of without one."""
        self._trusted: dict[str | None, bool] = {}
        """Whether the proxy-header rules trust a client's host, by host: the few a server sees (its clients, its
        proxies), each asked of uvicorn's rules (a frame and an LRU look-up) once, not for every request."""

    def prepare(self, scope: dict[str, Any]) -> ASGIApp:
        """`ClientAddress` then uvicorn's `ProxyHeadersMiddleware`, for an HTTP request, in place; then `admit`.
        What to run for the request: `app`, or what `admit` answers it with."""
        client = scope.get("client")
        host = client[0] if client else None
        scope[PEER] = host
        scope["app"] = self.owner
        trusted = self.proxy.trusted_hosts
        believed = self._trusted.get(host)
        if believed is None:
            believed = self._trust(host)
        if believed:
            self._forwarded(scope, trusted)
        admit = self.admit
        if admit is not None and (instead := admit(scope)) is not None:
            return instead
        return self.app

    def _trust(self, host: str | None) -> bool:
        """`host in` the proxy-header rules, kept (at most `_TRUSTED_HOSTS_KEPT` hosts, then all let go)."""
        if len(self._trusted) >= _TRUSTED_HOSTS_KEPT:
            self._trusted.clear()
        believed = self._trusted[host] = host in self.proxy.trusted_hosts
        return believed

    @staticmethod
    def _forwarded(scope: dict[str, Any], trusted: Any) -> None:
        proto: bytes | None = None
        forwarded: list[bytes] = []
        for name, value in scope["headers"]:
            if name == b"x-forwarded-proto":
                proto = value
            elif name == b"x-forwarded-for":
                forwarded.append(value)
        if proto is not None:
            scheme = proto.decode("latin1").strip()
            if scheme in ("http", "https", "ws", "wss"):
                scope["scheme"] = scheme
        if forwarded:
            host, port = trusted.get_trusted_client_address(b", ".join(forwarded).decode("latin1"))
            if host:
                scope["client"] = (host, port)


class Signal:
    """A request's `message_event` (body come, request ended, client gone): `asyncio.Event`'s `set`, `clear`,
    `is_set` and `wait`, without the deque (760 bytes) every event makes; a request held open (a pushed question's
    POST) keeps its event for as long as it stays open. Its waiter is the request's `receive`, one at a time."""

    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if not self._value:
            self._value = True
            waiters, self._waiters = self._waiters, None
            if waiters:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if self._value:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = [waiter]
        else:
            self._waiters.append(waiter)
        try:
            await waiter
            return True
        finally:
            self._drop(waiter)

    def _drop(self, waiter: asyncio.Future[bool]) -> None:
        """A waiter cancelled before `set` woke it."""
        if self._waiters is not None and waiter in self._waiters:
            self._waiters.remove(waiter)


class Watch:
    """A call of `gone` once a response's client has gone (`LeanCycle.watch`); `cancel` when the response ends
    first."""

    __slots__ = ("_cycle", "_gone")

    def __init__(self, cycle: LeanCycle, gone: Callable[[], object]) -> None:
        self._cycle: LeanCycle | None = cycle
        self._gone: Callable[[], object] | None = gone

    def cancel(self) -> None:
        self._gone = None
        cycle, self._cycle = self._cycle, None
        if cycle is not None and cycle.watched is self:
            cycle.watched = None

    def fire(self) -> None:
        gone, self._gone = self._gone, None
        self._cycle = None
        if gone is not None:
            gone()


class LeanCycle(RequestResponseCycle):
    """uvicorn's request-response cycle, with `send` written for the usual case: a response body part on a
    chunked or sized response goes out in a few steps; everything else (the head, HEAD requests, errors) as
    uvicorn does it. `watch` tells a streamed response that its client has gone without a task waiting on
    `receive` for as long as it stays open."""

    watched: Watch | None = None
    transport: CoalescedWrites  # pyright: ignore[reportIncompatibleVariableOverride]  # `LimitedHttpTools`'

    def watch(self, gone: Callable[[], object]) -> Watch:
        """Call `gone` soon (from the event loop) once the client has gone, as a task returning from `receive`'s
        `http.disconnect` would have: at once if it has gone already."""
        watch = self.watched = Watch(self, gone)
        if self.disconnected:
            self.lost()
        return watch

    def lost(self) -> None:
        """The client has gone (the protocol marked this cycle `disconnected`)."""
        watch, self.watched = self.watched, None
        if watch is not None:
            asyncio.get_running_loop().call_soon(watch.fire)

    async def send(self, message: Any) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        if not self.response_started:
            self._start(message)
            return
        if self.response_complete or message["type"] != "http.response.body" or self.scope["method"] == "HEAD":
            await super().send(message)
            return
        self._body(message.get("body", b""), message.get("more_body", False))

    def write_held(self) -> None:
        """What this response wrote in the caller's step leaves now, not at the loop turn's end (`CoalescedWrites`)."""
        self.transport.write_held()

    def whole_body(self) -> bytes | None:
        """The request's body when all of it has come and nothing is to be written or waited for first, taken as
        `receive` takes it; else None, having done nothing: then `receive` it."""
        if self.more_body or self.waiting_for_100_continue or self.disconnected or self.response_complete:
            return None
        if self.flow.read_paused:
            self.flow.resume_reading()
        self.message_event.clear()
        body = bytes(self.body)
        self.body = bytearray()
        return body

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
        """A whole response at once, written as `send` writes its start and then its body, without the two messages
        and awaits; False, having done nothing, when it cannot be done without waiting (writing is paused) or is
        not the usual case (a response under way, a HEAD request): then `send` it."""
        if self.flow.write_paused or self.response_started or self.scope["method"] == "HEAD":
            return False
        if not self.disconnected:
            self._head(status, headers)
            self._body(body, False)
        return True

    def start_now(self, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        """A response's status line and headers written in the caller's step, as `send` writes them; False, having
        done nothing, when `send` would wait or do otherwise (writing paused, the client gone, a response under way,
        a HEAD request)."""
        if self.flow.write_paused or self.disconnected or self.response_started or self.scope["method"] == "HEAD":
            return False
        self._head(status, headers)
        return True

    def write_now(self, body: bytes, more_body: bool) -> bool:
        """A body part of the response under way written in the caller's step, as `send` writes it; False, having
        done nothing, when `send` would wait or do otherwise (writing paused, the client gone, no response under way
        or already complete, a HEAD request): then `send` it from the response's task."""
        if (self.flow.write_paused or self.disconnected or not self.response_started or self.response_complete
                or self.scope["method"] == "HEAD"):
            return False
        self._body(body, more_body)
        return True

    def _body(self, body: bytes, more_body: bool) -> None:
        """A body part of a started response, not a HEAD request's."""
        if self.chunked_encoding:
            if more_body:
                if body:
                    self.transport.write(b"%x\r\n%b\r\n" % (len(body), body))
                return
            self.transport.write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
        else:
            left = self.expected_content_length - len(body)
            if left < 0:
                raise RuntimeError("Response content longer than Content-Length")
            self.expected_content_length = left
            self.transport.write(body)
            if more_body:
                return
            if left:
                raise RuntimeError("Response content shorter than Content-Length")
        self.response_complete = True
        self.transport.write_held()  # the response is whole
        self.message_event.set()
        if not self.keep_alive:
            self.transport.close()
        self.on_response()

    def _start(self, message: Any) -> None:
        """The status line and headers, as uvicorn writes them."""
        if message["type"] != "http.response.start":
            raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{message['type']}'.")
        self._head(message["status"], message.get("headers", ()))

    def _head(self, status_code: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        self.response_started = True
        self.waiting_for_100_continue = False
        scope = self.scope
        if self.access_log:
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(scope), scope["method"],
                                    get_path_with_query_string(scope), scope["http_version"], status_code)
        headers = tuple(headers)
        kept = _KEPT_HEADS
        if kept.defaults is not self.default_headers:
            kept.start_over(self.default_headers)
        key = (status_code, self.keep_alive, scope["method"] == "HEAD", headers)
        try:
            made = kept.heads.get(key)
        except TypeError:  # not bytes (ASGI says bytes): written (or refused) as uvicorn does, and not kept
            made = key = None
        if made is None:
            made = self._head_made(status_code, headers)
            if key is not None:
                kept.keep(key, made)
        self.transport.write(made[0])
        _, self.expected_content_length, self.chunked_encoding, self.keep_alive = made

    def _head_made(self, status_code: int, headers: tuple[tuple[bytes, bytes], ...]) -> MadeHead:
        """The head's bytes as uvicorn writes them, and the framing they leave the response with."""
        scope = self.scope
        content = [STATUS_LINE[status_code]]
        has_connection_close = False
        plain = _PLAIN_LINES
        for lines in (self.default_headers, headers):
            for name, value in lines:
                try:
                    line = plain.get((name, value))
                except TypeError:  # not bytes (ASGI says bytes): checked below, as uvicorn does, and not kept
                    line = None
                if line is not None:
                    content.append(line)
                    continue
                if HEADER_RE.search(name):
                    raise RuntimeError("Invalid HTTP header name.")
                if HEADER_VALUE_RE.search(value):
                    raise RuntimeError("Invalid HTTP header value.")
                header_name = name
                name = name.lower()
                if name == b"content-length" and self.chunked_encoding is None:
                    self.expected_content_length = int(value.decode())
                    self.chunked_encoding = False
                elif name == b"transfer-encoding" and value.lower() == b"chunked":
                    self.expected_content_length = 0
                    self.chunked_encoding = True
                elif name == b"connection":
                    if b"close" in [token.lower().strip() for token in value.split(b",")]:
                        self.keep_alive = False
                        has_connection_close = True
                elif name not in _FRAMING and type(header_name) is bytes and type(value) is bytes:
                    line = name + b": " + value + b"\r\n"
                    if len(plain) >= _PLAIN_LINES_LIMIT:
                        plain.clear()
                    plain[(header_name, value)] = line
                    content.append(line)
                    continue
                content += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not has_connection_close:
            content.append(b"connection: close\r\n")
        if self.chunked_encoding is None and scope["method"] != "HEAD" and status_code not in (204, 304):
            self.chunked_encoding = True
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        return b"".join(content), self.expected_content_length, self.chunked_encoding, self.keep_alive


class Raising:
    """An app that fails with `error` (what a step of the request outside its task raised, `DirectRoute.at_body`'s),
    run in `run_asgi` so that the failure is answered as uvicorn answers an app's."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raise self.error


_PLAIN_LINES: dict[tuple[bytes, bytes], bytes] = {}
"""A response header's line by its (name, value) as the app gave it, once checked, for every header that does
not frame the response (not `content-length`, `transfer-encoding` or `connection`): the same few (content types,
the date of this second, a session's id) come again and again, and each was checked with two regular expressions
and lowered for every response."""
_PLAIN_LINES_LIMIT = 1024

MadeHead = tuple[bytes, int, bool | None, bool]
"""A response head's bytes, and the cycle's `expected_content_length`, `chunked_encoding` and `keep_alive` after it."""


class KeptHeads:
    """Whole response heads by (status, the request's keep-alive, a HEAD request, the app's headers), for one list of
    the server's default headers (its `date` changes each second: a new list, and the heads start over): the same
    few heads (a session's SSE stream, its 202, its JSON answers) come again and again, and each was written header
    by header (`_PLAIN_LINES` for each line). At most `limit` (then all are let go)."""

    __slots__ = ("defaults", "heads", "limit")

    def __init__(self, limit: int) -> None:
        self.defaults: object = None
        self.heads: dict[object, MadeHead] = {}
        self.limit = limit

    def start_over(self, defaults: object) -> None:
        self.defaults = defaults
        self.heads = {}

    def keep(self, key: object, made: MadeHead) -> None:
        if len(self.heads) >= self.limit:
            self.heads = {}
        self.heads[key] = made


_KEPT_HEADS = KeptHeads(256)
_FRAMING = frozenset((b"content-length", b"transfer-encoding", b"connection"))


def _addresses(transport: asyncio.Transport) -> tuple[tuple[str, int | None] | None, tuple[str, int] | None]:
    """A connection's local and remote (host, port), as uvicorn's `get_local_addr` / `get_remote_addr` give them:
    a TCP connection's as the transport keeps them (uvloop's, without the system call and socket object that
    uvicorn's make per connection), anything else's (a Unix socket) by uvicorn's."""
    local = _tcp_address(transport.get_extra_info("sockname"))
    remote = _tcp_address(transport.get_extra_info("peername"))
    return (local or get_local_addr(transport), remote or get_remote_addr(transport))


def _tcp_address(info: Any) -> tuple[str, int] | None:
    """(host, port) of a TCP socket's address as the transport gives it (IPv6: host, port, flowinfo, scope id), else
    None. With no `cast` and `isinstance` calls: this runs for each of a connection's two addresses."""
    try:
        host, port = info[0], info[1]
    except (TypeError, LookupError):  # None, or no port
        return None
    return (str(host), port) if type(port) is int and type(info) is tuple else None


def plain_answer(status: int, text: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole HTTP/1.1 response that closes its connection."""
    body = text.encode()
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n".encode()]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines += [b"content-type: text/plain; charset=utf-8\r\n", b"content-length: %d\r\n" % len(body),
              b"connection: close\r\n\r\n", body]
    return b"".join(lines)


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The body's length when `Content-Length` frames it (the parser has checked it), else None (chunked)."""
    length: int | None = None
    for name, value in headers:
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
    return length


def _after_chunked_body(data: bytes, body_end: int, end: int) -> int:
    """Where the head that follows a chunked body begins, in a feed that ended inside that head.

    The parser does not say where a chunked body ended, but its last line is empty, and a head not yet ended
    has no empty line (but blank lines before its request line, which the parser skips): the head begins after
    the feed's last one, and no sooner than the body's data (`body_end`). A head that both began and ended
    inside one such feed (pipelined after a chunked body) is within that one read of the socket (256 KiB at
    most), not counted."""
    last = max(data.rfind(b"\n\n", body_end, end) + 2, data.rfind(b"\n\r\n", body_end, end) + 3)
    return max(last, body_end)


_TRUSTED_HOSTS_KEPT = 1024

_NO_RAW_HEADERS: list[bytes] = []
"""`LimitedHttpTools._raw_headers` outside a head: never added to (a connection held open for a pushed question keeps
no list of its own)."""

_NO_PIPELINE: Any = ()
"""A connection's pipelined requests while it has none (read as an empty queue): an empty deque is 760 bytes, and a
connection held open for a pushed question keeps what it has."""


class LeanFlow(FlowControl):
    """uvicorn's flow control, its event for a writer waiting on a paused transport made when writing first pauses
    (rarely: a client not reading) instead of for every connection."""

    def __init__(self, transport: asyncio.Transport) -> None:  # pyright: ignore[reportMissingSuperCall]
        self._transport = transport
        self.read_paused = False
        self.write_paused = False
        self._is_writable_event: asyncio.Event = None  # type: ignore[assignment]  # made as writing first pauses

    async def drain(self) -> None:
        if self._is_writable_event is not None:  # pyright: ignore[reportUnnecessaryComparison]
            await self._is_writable_event.wait()

    def pause_writing(self) -> None:
        if not self.write_paused:
            self.write_paused = True
            if self._is_writable_event is None:  # pyright: ignore[reportUnnecessaryComparison]
                self._is_writable_event = asyncio.Event()  # made unset
            else:
                self._is_writable_event.clear()

    def resume_writing(self) -> None:
        if self.write_paused:
            self.write_paused = False
            self._is_writable_event.set()


class LimitedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with `limits` (set per server by `limited_protocol`)."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    direct: ClassVar[DirectRoute | None] = None
    """A path served past the outer middleware (`faces.http` sets `/mcp`'s), else None."""
    app: Any
    """The config's loaded app (uvicorn's, with no `cast` call per connection)."""
    parser: httptools.HttpRequestParser  # None once the connection is lost (uvicorn's, and `connection_lost`'s)
    _shared: ClassVar[tuple[Config, logging.Logger, logging.Logger, bool, Literal["2.0", "3.0"]] | None] = None
    server_loop: ClassVar[asyncio.AbstractEventLoop | None] = None
    """The loop the server serves its connections in, set as it starts (`faces.http.HttpFaceServer`): uvicorn makes
    each connection's protocol with no loop, and asking asyncio for it (`get_event_loop`) is a `getpid` system call on
    Python 3.11."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: JsonObject,
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        # uvicorn's own `__init__`, less what it recomputed for every connection (two logger lookups and a walk
        # of the logging tree for the access log's handlers, the config's properties): a client that opens a connection
        # per request (the `mcp` SDK's does for an elicitation's two POSTs) paid it each time. Computed once per
        # server's config.
        shared = type(self)._shared
        if shared is None or shared[0] is not config:
            if not config.loaded:
                config.load()
            access_logger = logging.getLogger("uvicorn.access")
            shared = type(self)._shared = (config, logging.getLogger("uvicorn.error"), access_logger,
                                           access_logger.hasHandlers(), config.asgi_version)
        _, self.logger, self.access_logger, self.access_log, self.asgi_version = shared
        self.config = config
        self.app = config.loaded_app  # pyright: ignore[reportUnknownMemberType]
        self.loop = _loop or self.server_loop or asyncio.get_event_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)  # as uvicorn: answer a pipelined first
        self.ws_protocol_class = config.ws_protocol_class
        self.root_path = config.root_path
        self.limit_concurrency = config.limit_concurrency
        self.app_state = app_state
        self.timeout_keep_alive_task = None
        self.timeout_keep_alive = config.timeout_keep_alive
        self.server_state = server_state
        self.connections = server_state.connections
        self.tasks = server_state.tasks
        self.transport = None  # type: ignore[assignment]  # until connection_made, as uvicorn's
        self.flow = None  # type: ignore[assignment]
        self.server = None
        self.client = None
        self.scheme = None
        self.pipeline = _NO_PIPELINE  # type: ignore[assignment]  # a deque of its own once a request is pipelined
        self.scope = None  # type: ignore[assignment]
        self.headers = None  # type: ignore[assignment]
        self.expect_100_continue = False
        self.cycle = None  # type: ignore[assignment]

        self._head = HeadScanner(self.limits.max_request_line_bytes, self.limits.max_header_bytes)
        self._in_head = True
        """Between requests or inside a head (not inside a body)."""
        self._body_left: int | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._refused = False
        self._deferred: tuple[int, str] | None = None
        self._began_in_feed = False
        self._body_in_feed = 0
        self._socket: asyncio.Transport = None  # type: ignore[assignment]  # until connection_made
        """The connection's own transport, under `CoalescedWrites` (whose `is_closing` is its)."""
        self._pending: LeanCycle | None = None
        """The direct route's request whose body is coming, its task not yet started (`_whole` once it is in)."""
        self._raw_headers: list[bytes] = _NO_RAW_HEADERS
        """The head's header names and values so far, in turn, as the parser gave them (a list of its own from the
        message's begin to its head's end)."""

    # -- the connection -------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.connections.add(self)
        self.flow = LeanFlow(transport)  # the flow control keeps the transport itself
        self.server, self.client = _addresses(transport)  # type: ignore[assignment]
        self.scheme = "https" if transport.get_extra_info("sslcontext") else "http"  # uvicorn's `is_ssl`
        if self.logger.level <= TRACE_LOG_LEVEL:
            self.logger.log(TRACE_LOG_LEVEL, "%sHTTP connection made", "%s:%d - " % self.client if self.client else "")
        self.transport = CoalescedWrites(transport, self.loop)
        self._socket = transport
        self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._pending = None  # its body never came whole: nobody to answer
        self._stop_timers()
        if self._linger is not None:
            self._linger.cancel()
        # uvicorn's `connection_lost`, written out (its `_unset_keepalive_if_required` and the flow control's
        # `resume_writing` in line, where they would do nothing but return).
        self.connections.discard(self)
        if self.logger.level <= TRACE_LOG_LEVEL:
            self.logger.log(TRACE_LOG_LEVEL, "%sHTTP connection lost", "%s:%d - " % self.client if self.client else "")
        cycle = self.cycle
        if cycle is not None:  # pyright: ignore[reportUnnecessaryComparison]  # None until the first request's head
            if not cycle.response_complete:
                cycle.disconnected = True
            cycle.message_event.set()
        if self.flow is not None and self.flow.write_paused:  # pyright: ignore[reportUnnecessaryComparison]
            self.flow.resume_writing()
        if exc is None:
            self.transport.close()
            if self.timeout_keep_alive_task is not None:
                self._unset_keepalive_if_required()
        self.parser = None  # type: ignore[assignment]
        if cycle is not None and cycle.disconnected and isinstance(cycle, LeanCycle):  # pyright: ignore[reportUnnecessaryComparison]
            cycle.lost()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped until the lingering close
        if self.timeout_keep_alive_task is not None:
            self._unset_keepalive_if_required()
        view = memoryview(data)
        start = 0
        size = len(data)
        socket = self._socket
        try:
            while start < size and not socket.is_closing():
                in_head = self._in_head
                if in_head:
                    end = self._head.take(data, start)
                elif body_left := self._body_left:  # Content-Length: only what is left of this body
                    end = start + body_left if body_left < size - start else size
                else:
                    end = size
                self._began_in_feed = False
                self._body_in_feed = 0
                if not self._feed(view[start:end]):
                    return
                if not in_head and self._in_head and self._began_in_feed:
                    self._head.seen(data, _after_chunked_body(data, start + self._body_in_feed, end), end)
                start = end
        except HeadTooLarge as refusal:
            self._refuse_head(refusal.status, refusal.text)
            return
        if not self._in_head or self._head.size:  # else between requests: no timer to arm
            self._arm_timers()

    def _feed(self, chunk: memoryview) -> bool:
        """Feed the parser as uvicorn does; False when the connection is handed over or answered 400."""
        parser = self.parser
        if parser is None:  # pyright: ignore[reportUnnecessaryComparison]  # the connection is gone (uvicorn drops it)
            return False
        try:
            parser.feed_data(chunk)
        except httptools.HttpParserError:
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self._stop_timers()
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        return True

    # -- parser callbacks -----------------------------------------------------------------------------------

    # uvicorn's own callbacks, written out for one request's work: a scope built in one step, headers lowered as
    # they come, and the request served by `LeanCycle`; `/mcp` (`direct`) past the outer middleware.

    def on_message_begin(self) -> None:
        self._began_in_feed = True
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self._raw_headers = []
        self.scope = {  # type: ignore[assignment]  # uvicorn's HTTPScope, as uvicorn builds it
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "root_path": self.root_path,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_head:
            self._raw_headers += (name, value)  # lowered all at once with the head (`_headers_lowered`)
        else:  # a chunked body's trailer field: into the request's headers as it comes, as uvicorn's
            self._header_lowered(name, value)

    def _header_lowered(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def _headers_lowered(self) -> None:
        """The head's headers into `headers` (the scope's list), their names in lower case: the names joined, lowered
        and split again in three calls, not two calls and a frame per header (a name is a token: no line breaks)."""
        raw = self._raw_headers
        self._raw_headers = _NO_RAW_HEADERS
        if not raw:
            return
        names = b"\n".join(raw[0::2]).lower().split(b"\n")
        self.headers[:] = zip(names, raw[1::2], strict=True)
        if b"expect" in names:
            self.expect_100_continue = any(
                name == b"expect" and value.lower() == b"100-continue" for name, value in self.headers
            )

    def on_headers_complete(self) -> None:
        self._headers_lowered()
        self._in_head = False
        if self._head_timer is not None:
            self._cancel_head_timer()
        self._body_left = _content_length(self.headers)
        parser = self.parser
        scope: dict[str, Any] = self.scope  # pyright: ignore[reportAssignmentType]  # uvicorn's HTTPScope, a dict
        http_version = parser.get_http_version()
        scope["method"] = parser.get_method().decode("ascii")
        if http_version != "1.1":
            scope["http_version"] = http_version
        if parser.should_upgrade() and self._should_upgrade():
            return
        url = self.url
        direct = self.direct
        if direct is not None and url == direct.raw_path:  # no query, nothing to unquote
            raw_path, query = url, b""
        else:
            parsed_url = httptools.parse_url(url)
            raw_path, query = parsed_url.path, parsed_url.query or b""
            direct = None
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root_path = self.root_path
        scope["path"] = root_path + path if root_path else path
        scope["raw_path"] = root_path.encode("ascii") + raw_path if root_path else raw_path
        scope["query_string"] = query
        app: Callable[..., Awaitable[None]]
        if self.limit_concurrency is not None and (
            len(self.connections) >= self.limit_concurrency or len(self.tasks) >= self.limit_concurrency
        ):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")
        elif direct is not None and not root_path:
            app = direct.prepare(scope)
        else:
            app = cast("ASGIApp", self.app)
        existing_cycle = self.cycle
        signal: Any = Signal()  # `asyncio.Event`'s part that a cycle uses
        self.cycle = cycle = LeanCycle(
            scope=self.scope, transport=self.transport, flow=self.flow, logger=self.logger,
            access_logger=self.access_logger, access_log=self.access_log,
            default_headers=self.server_state.default_headers, message_event=signal,
            expect_100_continue=self.expect_100_continue,
            keep_alive=http_version != "1.0" and parser.should_keep_alive(), on_response=self.on_response_complete,
        )
        if existing_cycle is None or existing_cycle.response_complete:  # pyright: ignore[reportUnnecessaryComparison]
            if (direct is not None and app is direct.app and direct.at_body is not None and scope["method"] == "POST"
                    and not self.expect_100_continue):
                self._pending = cycle  # its task, or none, once its body is in (`_whole`)
            else:
                self._start_asgi_task(cycle, app)  # type: ignore[arg-type]
        else:  # pipelined: queued until the answers before it are written
            self.flow.pause_reading()
            if self.pipeline is _NO_PIPELINE:
                self.pipeline = deque()
            self.pipeline.appendleft((cycle, app))  # type: ignore[arg-type]

    def on_body(self, body: bytes) -> None:
        size = len(body)
        self._body_in_feed += size
        if self._body_left is not None:
            self._body_left -= size
        cycle = self.cycle
        if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
            return
        cycle.body += body
        if len(cycle.body) > HIGH_WATER_LIMIT:
            if self._pending is cycle:  # its task reads the rest (and resumes reading)
                self._start_pending()
            self.flow.pause_reading()
        cycle.message_event.set()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head.reset()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        cycle = self.cycle
        if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
            return
        cycle.more_body = False
        cycle.message_event.set()
        pending = self._pending
        if pending is not None and pending is cycle:
            self._pending = None
            self._whole(pending)

    def _whole(self, cycle: LeanCycle) -> None:
        """A POST to the direct route, its whole body in: `at_body` says what runs it. Its
        failure is the app's, answered in the request's task as uvicorn's `run_asgi` answers one (logged; a 500 and
        the close when no response started, else the close)."""
        direct = self.direct
        assert direct is not None and direct.at_body is not None
        try:
            app = direct.at_body(cycle.scope, cycle, self)  # pyright: ignore[reportArgumentType]
        except Exception as exc:
            app = Raising(exc)
        if app is not None:
            self._start_asgi_task(cycle, app)  # type: ignore[arg-type]

    def start(self, cycle: LeanCycle, app: ASGIApp) -> None:
        """`Starts.start`: a task for `app` on `cycle`, in uvicorn's `run_asgi`."""
        self._start_asgi_task(cycle, app)  # type: ignore[arg-type]

    def _start_pending(self) -> None:
        """The request whose body is still coming and more than the flow control holds: its task starts, to read
        it."""
        cycle, self._pending = self._pending, None
        direct = self.direct
        if cycle is not None and direct is not None:
            self._start_asgi_task(cycle, direct.app)  # type: ignore[arg-type]

    # -- timers and refusals --------------------------------------------------------------------------------

    def _arm_timers(self) -> None:
        if self._socket.is_closing():
            return
        if self._in_head:
            if self._head.size and self._head_timer is None:
                self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_late)
        elif self._body_timer is None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _stop_timers(self) -> None:
        if self._head_timer is not None:
            self._cancel_head_timer()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _answering(self) -> bool:
        """Whether a response to an earlier request is still on its way."""
        cycle = cast("RequestResponseCycle | None", self.cycle)  # None until the first request's head
        return cycle is not None and not cycle.response_complete

    def _head_late(self) -> None:
        self._head_timer = None
        if self._head.size == 0 and not self._answering():
            self.transport.close()  # a connection that never sent a byte: nothing to answer
            return
        self._refuse_head(408, f"Request Timeout: the request head did not arrive within http.head_timeout "
                               f"({self.limits.head_timeout:g} s)\n")

    def _body_late(self) -> None:
        self._body_timer = None
        if self.flow.read_paused:  # the gateway is not reading (its app has not asked yet): not the client's fault
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)
            return
        logger.info("%s: the request body did not arrive within http.body_timeout", self._who())
        cycle = self.cycle
        if cycle.response_started:
            self.transport.close()
            return
        cycle.disconnected = True  # the app's `receive` says the client has gone, and what it sends is dropped
        cycle.message_event.set()
        if self._pending is cycle:
            self._pending = None  # its task was never started: nothing to tell
        if isinstance(cycle, LeanCycle):
            cycle.lost()
        self._answer_and_close(408, f"Request Timeout: the request body did not arrive within http.body_timeout "
                                    f"({self.limits.body_timeout:g} s)\n")

    def _refuse_head(self, status: int, text: str) -> None:
        logger.info("%s: %d %s", self._who(), status, text.split(": ", 1)[1].strip())
        self._stop_timers()
        self._refused = True  # what still comes is dropped
        if self._answering() or self.pipeline:  # earlier requests (pipelined) are answered first, in order
            self._deferred = (status, text)
            return
        self._answer_and_close(status, text)

    def on_response_complete(self) -> None:
        # uvicorn's, written out: the checks of its calls (the keep-alive timer to cancel, reading to resume) in line.
        self.server_state.total_requests += 1
        if not self._socket.is_closing():
            if self.timeout_keep_alive_task is not None:
                self._unset_keepalive_if_required()
            if self.flow.read_paused:
                self.flow.resume_reading()
            if self.pipeline:  # the next pipelined request's turn
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            else:
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler
                )
        if self._deferred is not None and not self._answering() and not self.pipeline:
            self._answer_and_close(*self._deferred)

    def _answer_and_close(self, status: int, text: str) -> None:
        if self.transport.is_closing():
            return
        self._stop_timers()
        self._unset_keepalive_if_required()
        self._refused = True
        self.transport.write(plain_answer(status, text, self.server_state.default_headers))
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the answer, then FIN; the client's close (or LINGER) ends it
            self._linger = self.loop.call_later(LINGER, self.transport.close)
        else:
            self.transport.close()

    def _who(self) -> str:
        return "%s:%d" % self.client if self.client else "a client"


def limited_protocol(limits: HttpLimits) -> type[LimitedHttpTools]:
    """The protocol class for `uvicorn.Config(http=...)` with these limits."""

    class Limited(LimitedHttpTools):
        pass

    Limited.limits = limits
    return Limited
