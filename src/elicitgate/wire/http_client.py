"""A lean HTTP/1.1 client for the gateway's upstream wires: asyncio Protocols and httptools' response parser.

httpx2 + httpcore2 + h11 were over a third of a relay's CPU per call (issue 34's profile: httpcore2 17%, h11 16%,
httpx2 10%). Here a connection is an asyncio `Protocol` whose `data_received` feeds a response's head to httptools'
(llhttp's) parser, whose callbacks build it in place and settle one future; the body is framed by the connection
itself (the parser is let go of at the head's end: a stream held open keeps none), each chunk lands in the
response's buffer and wakes its reader, and the end of the message hands the connection back to its origin's
keep-alive pool at once, whether or not the body was read yet. No task per connection, response or read, and one
read-timeout timer for all of a client's streamed bodies (`StreamedReads`).

What a network-facing parser needs, each bounded: the response head (`MAX_HEAD_BYTES`, a chunked body's trailer
too), a chunk-size line (`MAX_CHUNK_LINE`), a whole body read (`Response.read`'s `limit`), the connect, write and
read timeouts (each a timer), and backpressure (reading from the socket pauses once `HIGH_WATER` bytes of a body wait
unread, and resumes below half of it). Bodies framed by Content-Length, chunked (extensions and trailers read and
dropped), or by the end of the connection, as llhttp frames them (`tests/test_unit_http_held_streams.py` checks the
chunked framing against its own); bytes past a response's end close its connection. TLS is asyncio's (`ssl`):
verified by default against the system's certificate authorities, or `SSL_CERT_FILE` / `SSL_CERT_DIR`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import platform
import re
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, cast
from urllib.parse import urljoin, urlsplit

import httptools  # pyright: ignore[reportMissingTypeStubs]

from elicitgate.errors import (
    BodyTooLarge,
    ConnectTimeout,
    HttpConnectError,
    HttpError,
    InvalidUrl,
    ProtocolError,
    ReadError,
    ReadTimeout,
    TransportError,
    WriteTimeout,
)
from elicitgate.wire.wakeup import Wakeable

MAX_HEAD_BYTES = 64 * 1024
"""The largest response head (status line and headers) read: a server that sends more is refused."""

HIGH_WATER = 256 * 1024
"""Bytes of a body received and not yet read past which the connection stops reading from its socket."""

MAX_IDLE_PER_ORIGIN = 64
"""Kept-alive connections kept idle per origin; one more that comes free is closed. Connections in use are not
capped: every call in flight holds one (its POST's response stream) and each answer to an elicitation needs
one more, so a cap would leave the answers none (bench/README.md, "Changes made to the gateway")."""


MAX_CONNECTING_PER_ORIGIN = 128
"""Connections being opened to one origin at once; a request past it takes the first one that comes free, or opens
one as another's connect ends. Ten thousand answers to a server's elicitations POSTed at once each opened a
connection and overflowed the server's listen backlog (uvicorn's is 2,048): connects timed out or were reset, and
answers were lost once their retries ran out (bench/README.md, "A held POST's HTTP connection, trimmed"). Well
under any server's backlog, and more than a burst of calls needs on a network where a connect takes 100 ms."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds: to connect (and finish TLS), to have a write taken, between two reads of a response."""

    connect: float | None = 30.0
    write: float | None = 30.0
    read: float | None = 300.0


@dataclass(frozen=True, slots=True)
class Url:
    """An absolute http(s) URL, split once."""

    scheme: str
    host: str
    port: int
    target: str
    """The request target: path and query."""
    userinfo: str
    explicit_port: bool
    text: str
    origin: tuple[str, str, int] = field(init=False, repr=False, compare=False)
    """Scheme, host and port: made once, the key of its keep-alive pool and held by each of its connections."""
    host_line: str | None = field(default=None, init=False, repr=False, compare=False)
    """The request head's `host` line, made at the first request (`_request_head`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "origin", (self.scheme, self.host, self.port))

    @classmethod
    def parse(cls, text: str) -> Url:
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as exc:
            raise InvalidUrl(f"{text!r}: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise InvalidUrl(f"{text!r} is not an http or https URL with a host")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
        default = 443 if scheme == "https" else 80
        return cls(scheme, parts.hostname, port or default, target, userinfo, port is not None, text)

    def join(self, location: str) -> Url:
        return Url.parse(urljoin(self.text, location))

    def shown(self) -> str:
        """The URL without its userinfo, query or fragment (for messages and logs)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.explicit_port else ""
        return f"{self.scheme}://{host}{port}{self.target.partition('?')[0]}"

    def host_header(self) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (f"{host}:{self.port}" if self.explicit_port else host).encode("idna" if not host.isascii() else "ascii")


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The TLS context of every https upstream, built once per process (reading the certificate store takes
    ~16 ms with the event loop stopped): certificates verified against `SSL_CERT_FILE` or `SSL_CERT_DIR` when
    set, else the system's store (through truststore on Windows and macOS, as httpx2 did)."""
    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    if platform.system() in ("Windows", "Darwin"):
        try:
            import truststore  # pyright: ignore[reportMissingImports]
        except ImportError:
            pass
        else:
            return cast(ssl.SSLContext, truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT))  # pyright: ignore
    return ssl.create_default_context()


class BodySink(Protocol):
    """Where a streamed response's body goes (`Response.stream`), from the connection's callbacks."""

    def body(self, chunk: bytes) -> None:
        """One chunk of the body, as it came."""
        ...

    def ended(self, error: TransportError | None) -> None:
        """The body's end: None when it came whole, else what cut it short (`ReadError`, `ReadTimeout`, a
        `ProtocolError`)."""
        ...


class Response(Wakeable):
    """One response: its head, then its body as it arrives (`chunks`, or `read` whole, or handed to a `BodySink`
    as it comes with `stream`). `close` when done: a response not read to its end closes its connection; one that
    ended already gave it back to the pool."""

    __slots__ = (
        "status", "headers", "url", "connection", "eof_framed", "_chunks", "_buffered", "_ended", "_error",
        "_read_timeout", "_sink", "_reads",
    )

    def __init__(self, url: Url, read_timeout: float | None, reads: StreamedReads | None = None) -> None:
        self._waiter = None  # `Wakeable.__init__`'s, without a call of its own (a response is made for every request)
        self.status = 0
        self.headers: dict[str, str] = {}
        """Names in lower case; a repeated header's values joined with ", "."""
        self.url = url
        self.connection: _Connection | None = None
        self.eof_framed = False
        """The body is framed by the end of the connection (no Content-Length, not chunked): set with the head."""
        self._chunks: deque[bytes] | None = None
        """Received, not yet read; made at the first chunk a reader has not taken (a deque is 600 bytes)."""
        self._buffered = 0
        self._ended = False
        self._error: TransportError | None = None
        self._read_timeout = read_timeout
        self._sink: BodySink | None = None
        self._reads = reads
        """The clock of a streamed body's read timeout (`stream`): its client's, shared by all its streams."""

    # -- the connection's side (from its callbacks) -------------------------------------------------

    def receive(self, chunk: bytes, last: bool = False) -> None:
        """A chunk of the body; `last`: the body's end follows at once (`finish`), so no read timeout starts over."""
        sink = self._sink
        if sink is not None:
            reads = self._reads
            if reads is not None and not last:
                reads.came(self)
            sink.body(chunk)
            return
        chunks = self._chunks
        if chunks is None:
            chunks = self._chunks = deque()
        chunks.append(chunk)
        self._buffered += len(chunk)
        connection = self.connection
        if self._buffered >= HIGH_WATER and connection is not None:
            connection.pause()
        self._wake()

    def finish(self, error: TransportError | None = None) -> None:
        if not self._ended:
            self._ended = True
            self._error = error
            self.connection = None
            sink = self._sink
            if sink is not None:
                self._sink = None  # `_stop_streaming`, written out: every streamed body's end
                if self._reads is not None:
                    self._reads.forget(self)
                sink.ended(error)
            else:
                self._wake()

    # -- the reader's side ---------------------------------------------------------------------------

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks as they come, until its end; raises `ReadError` if the connection ends first,
        `ReadTimeout` if nothing comes for the read timeout."""
        while True:
            chunks = self._chunks
            while chunks:
                chunk = chunks.popleft()
                self._buffered -= len(chunk)
                connection = self.connection
                if connection is not None and connection.paused and self._buffered < HIGH_WATER // 2:
                    connection.resume()
                yield chunk
            if self._ended:
                if self._error is not None:
                    raise self._error
                return
            await self._read_more()

    async def _read_more(self) -> None:
        timeout = self._read_timeout
        if not await self._wait(timeout) and not self._chunks and not self._ended:  # the timer fired
            self.close()
            raise ReadTimeout(f"nothing received from {self.url.shown()} for {timeout} s")

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body (what is left of it); `ProtocolError` once it grows past `limit` bytes."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            size += len(chunk)
            if limit is not None and size > limit:
                self.close()
                raise self.too_large(limit)
            parts.append(chunk)
        return b"".join(parts)

    def too_large(self, limit: int) -> BodyTooLarge:
        """The error for this response's body past `limit` bytes (`read`, or a sink reading it whole)."""
        return BodyTooLarge(f"the response from {self.url.shown()} is larger than {limit} bytes")

    def stream(self, sink: BodySink) -> None:
        """Hand the rest of the body to `sink` in the connection's callbacks, with no task reading it: what came
        already at once, then each chunk as it comes, then its end. Its read timeout holds (a `ReadTimeout` ends
        it, and closes the connection); `sink` takes each chunk as it comes (nothing waits in the response, so
        reading from the socket never pauses for it). The head's headers are let go of: read what you need of
        them first. `close` stops it, and nothing more is said to `sink`."""
        self._sink = sink
        self.headers = _LET_GO
        chunks, self._chunks = self._chunks, None
        self._buffered = 0
        connection = self.connection
        if connection is not None and connection.paused:
            connection.resume()
        for chunk in chunks or ():
            sink.body(chunk)
            if self._sink is not sink:  # the sink closed the response
                return
        if self._ended:
            self._stop_streaming()
            sink.ended(self._error)
        elif connection is not None and connection.whole_in_hand:
            self._reads = None  # its end comes in this very callback of the connection's: nothing to time
        elif self._read_timeout is not None:
            reads = self._reads
            if reads is None or reads.timeout != self._read_timeout:
                reads = self._reads = StreamedReads(self._read_timeout)
            reads.came(self)

    def expire(self) -> None:
        """A streamed body's read timeout ran out (`StreamedReads`): nothing came for that long."""
        if self._sink is None or self._ended:
            return
        connection = self.connection
        self.finish(ReadTimeout(f"nothing received from {self.url.shown()} for {self._read_timeout} s"))
        if connection is not None:
            connection.close()

    def _stop_streaming(self) -> None:
        if self._sink is not None:
            self._sink = None
            if self._reads is not None:
                self._reads.forget(self)

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    @property
    def finished(self) -> bool:
        """Whether the body ended, whole or not (nothing more will come)."""
        return self._ended

    @property
    def complete(self) -> bool:
        """Whether the whole body was received (read or not)."""
        return self._ended and self._error is None

    def close(self) -> None:
        """Done with the response: a body still coming closes its connection (its rest would come first on it).
        A streamed body's sink hears nothing more."""
        connection = self.connection
        self._chunks = None
        self._buffered = 0
        self._stop_streaming()
        if connection is not None:
            self.finish(ReadError("the response was closed"))
            connection.close()


class Expiring(Protocol):
    """What a `StreamedReads` times out."""

    def expire(self) -> None:
        """Nothing came for it for the timeout."""
        ...


class StreamedReads:
    """The read timeout of every streamed body of one client (and of each request written at once until its head
    came: `Started`), on one loop timer: the streams in the order their last chunk came (a stream that reads moves
    to the end), the timer at the first one's due, moved on when it fires.
    A timer per stream held open (an elicitation's POST, for as long as a person takes) was a handle, its context
    and a bound method, ~0.3 KB (~0.5 KB on uvloop) per pending question; an entry here is ~0.1 KB. The timer is
    left to run out when the last stream goes (it then finds none): cancelled and armed again for every request whose
    answer is streamed, it was two of the loop's heap operations and a handle per call (`stop` when done)."""

    __slots__ = ("timeout", "_streams", "_timer", "_loop")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._streams: dict[Expiring, float] = {}
        """Each streamed body and when its last chunk came (the event loop's clock), the least recent first."""
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The client's event loop, asked for at the first stream (`get_running_loop` is a `getpid` system call on
        Python 3.11, and this runs twice for every request written at once)."""

    def came(self, response: Expiring) -> None:
        """Something came for `response` (or it began streaming): its timeout starts over."""
        streams = self._streams
        streams.pop(response, None)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        now = streams[response] = loop.time()
        if self._timer is None:
            self._timer = loop.call_at(now + self.timeout, self._expire, context=_TIMER_CONTEXT)

    def forget(self, response: Expiring) -> None:
        self._streams.pop(response, None)

    def stop(self) -> None:
        """No more streams will come: the timer is cancelled (if none is left to time out)."""
        if not self._streams and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        streams = self._streams
        loop = self._loop or asyncio.get_running_loop()
        now = loop.time()
        while streams:
            response, last = next(iter(streams.items()))
            if last + self.timeout > now:
                if self._timer is None:
                    self._timer = loop.call_at(last + self.timeout, self._expire, context=_TIMER_CONTEXT)
                return
            del streams[response]
            response.expire()

    def __len__(self) -> int:
        return len(self._streams)


class HeadListener(Protocol):
    """Who hears of a request written at once (`HttpClient.start`), from the connection's callbacks."""

    def head(self, response: Response) -> None:
        """Its response's head came (its body follows: `read` it, `stream` it, or `close` it)."""
        ...

    def failed(self, error: TransportError, retry: bool) -> None:
        """No head came: the connection failed or the read timeout ran out (`error`); `retry` when the kept-alive
        connection ended before any byte of a response came (the server closed it as idle as we wrote): the request
        may be sent again, on a new connection, as `HttpClient.request` does."""
        ...


class Started:
    """A request written at once on an idle kept-alive connection (`HttpClient.start`), in its caller's step: its
    head (or what ended the connection first) goes to its listener from the connection's callbacks, with no task
    awaiting it. `cancel` to abandon it: its connection closes (its response would come first on it)."""

    __slots__ = ("connection", "response", "listener", "reads")

    def __init__(
        self, connection: _Connection, response: Response, listener: HeadListener, reads: StreamedReads | None
    ) -> None:
        self.connection = connection
        self.response = response
        self.listener: HeadListener | None = listener
        self.reads = reads
        """Its client's read timeout, until the head came."""
        if reads is not None:
            reads.came(self)

    def settle(self) -> None:
        """The head came, or the connection ended first (`_Connection._settle_head`)."""
        reads = self.reads
        if reads is not None:
            self.reads = None
            reads.forget(self)
        listener = self.listener
        if listener is None:
            return
        self.listener = None
        response = self.response
        if response.status:
            listener.head(response)
            return
        connection = self.connection
        error = connection.failure or ReadError(f"the connection to {response.url.shown()} was closed")
        listener.failed(error, isinstance(error, ReadError) and not connection.received)

    def expire(self) -> None:
        """The read timeout ran out before the head came."""
        self.reads = None
        listener = self.listener
        if listener is None:
            return
        self.listener = None
        self.connection.close()
        response = self.response
        listener.failed(ReadTimeout(f"no response from {response.url.shown()} within {response.read_timeout} s"), False)

    def cancel(self) -> None:
        """Abandon the request: nothing more is said to its listener, and its connection closes unless its head
        came already (then close its response)."""
        self.listener = None
        reads = self.reads
        if reads is not None:
            self.reads = None
            reads.forget(self)
        if not self.response.status:
            self.connection.close()


_TIMER_CONTEXT = contextvars.Context()
"""What the read timers run in: not a copy of the context of whoever armed them, made for each (an expiry's effects,
a resumed stream's task, belong to no one call, as those of the connection's own callbacks do not)."""


_LENGTH, _CHUNKED, _TO_EOF = 0, 1, 2
"""How a body is framed (`_Connection.framing`)."""

_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3
"""Where a chunked body is (`_Connection.chunk_state`): at a chunk's size line, in its data, at the CRLF after its
data, in the trailer (the lines after the last chunk, up to an empty one)."""

_PLAIN_SIZE_LINE = re.compile(rb"([0-9a-fA-F]{1,15})\r\n")
"""A chunk-size line with no extensions and no whitespace (what `_chunk_size` reads the same way, and takes)."""

MAX_CHUNK_LINE = 4096
"""The longest chunk-size line (its size and any extensions) read."""


_EAGER_EXTRA = ("peername", "sockname")


def _forget_addresses(transport: asyncio.BaseTransport) -> None:
    """Drop the peer's and our address that asyncio's socket transport reads into its extra info as it is made (two
    tuples, ~0.3 KB for as long as the connection is open: a held POST's whole life, a person's answer). The client
    never asks for them; `get_extra_info` then answers None, as on a transport that never had them. uvloop reads
    them when asked (no `_extra`), and a TLS transport's own extra info is not this one."""
    extra: object = getattr(transport, "_extra", None)
    if isinstance(extra, dict):
        for name in _EAGER_EXTRA:
            cast("dict[str, object]", extra).pop(name, None)


class _Connection(asyncio.Protocol):
    """One keep-alive connection to an origin: writes a request and reads its response as it comes. The head is
    httptools' (llhttp's), fed the head's bytes alone; the body is framed here (Content-Length, chunked, or the end
    of the connection), and the parser let go of at the head's end: a POST whose event stream stays open while a
    person answers holds no parser (~0.8 KB: llhttp's state and settings, a bound method per callback)."""

    __slots__ = (
        "pool", "origin", "transport", "parser", "response", "head", "head_bytes", "head_tail", "in_head", "received",
        "paused", "writing_paused", "drained", "closed", "failure", "uses", "keep_alive", "framing", "body_left",
        "chunk_state", "chunk_line", "raw_headers", "whole_in_hand",
    )

    def __init__(self, pool: HttpClient, origin: tuple[str, str, int]) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpResponseParser | None = None
        """Reads the current response's head (made by `start`, let go of at the head's end)."""
        self.response: Response | None = None
        """The response being received; None while idle."""
        self.head: asyncio.Future[None] | Started | None = None
        """Settled once the response's head came (or the connection failed first): a request's task waits on a
        future, a request written at once (`HttpClient.start`) has its head handed on by a `Started`."""
        self.head_bytes = 0
        self.head_tail = b""
        """The last bytes of the head so far (at most 3): its end, an empty line, may begin in them."""
        self.in_head = False
        self.keep_alive = False
        """The response's head allows the connection to be reused after its body."""
        self.framing = _LENGTH
        self.body_left = 0
        """Bytes of the body still to come (`_LENGTH`), or of the current chunk's data (`_CHUNKED`)."""
        self.chunk_state = _SIZE
        self.chunk_line = b""
        """A chunk-size or trailer line whose end has not come yet."""
        self.raw_headers: list[bytes] = _NO_RAW_HEADERS
        """The head's header names and values so far, in turn, as the parser gave them (a list of its own while a head
        comes)."""
        self.received = False
        """Whether any byte of the current response came (a reused connection that ends before is retried)."""
        self.whole_in_hand = False
        """While the head's end is settled (`_head`): the rest of the read holds the whole body, framed by its
        Content-Length, which goes to the response in the same callback (a stream of it needs no read timeout)."""
        self.paused = False
        self.writing_paused = False
        self.drained: asyncio.Future[None] | None = None
        self.closed = False
        self.failure: TransportError | None = None
        self.uses = 0

    # -- asyncio --------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # bytes on an idle connection: nothing they could answer, so not reusable
            self.close()
            return
        self.received = True
        try:
            while data and self.in_head:
                data = self._head(data)
            if data and self.response is not None:  # still coming (the head may have ended it: no body)
                data = self._body(data)
            if data and not self.closed:  # bytes past the response's end: nothing asked for them
                self.close()
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"not an HTTP/1.1 response from {self._where()}: {exc}"))
        except ProtocolError as exc:
            self._fail(exc)

    def _head(self, data: bytes) -> bytes:
        """Feed the parser the head's bytes in `data` (up to its end, an empty line); what follows is returned."""
        parser = self.parser
        assert parser is not None
        tail = self.head_tail
        cut = -1
        if tail:  # an end that began in the last bytes
            end = (tail + data[:3]).find(b"\r\n\r\n")
            if end >= 0:
                cut = end + 4 - len(tail)
        if cut < 0:
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                cut = end + 4
        head, rest = (data, b"") if cut < 0 else (data[:cut], data[cut:])
        self.head_bytes += len(head)
        if self.head_bytes > MAX_HEAD_BYTES:
            raise ProtocolError(f"the response head from {self._where()} is over {MAX_HEAD_BYTES} bytes")
        self.head_tail = (tail + head[-3:])[-3:] if cut < 0 else b""
        parser.feed_data(head)
        if not self.in_head:  # its end: the body is ours to frame
            self.parser = None
            self.head_bytes = 0  # a small int, not one of its own for as long as the connection is held
            # Settled once the parser is done with the head (a `Started` hands it on here, and what is done with
            # it may close the connection), and before a body-less response completes: let go of it, the
            # request's task holds it, and a stream may stay open for hours.
            self.whole_in_hand = self.framing == _LENGTH and len(rest) >= self.body_left
            try:
                self._settle_head()
            finally:
                self.whole_in_hand = False
            response = self.response
            if response is not None and self.framing == _LENGTH and not self.body_left:
                self._complete()
        return rest

    def _body(self, data: bytes) -> bytes:
        """Hand the body's bytes in `data` to the response; returns what follows its end (if it ended)."""
        framing = self.framing
        if framing == _TO_EOF:
            self._receive(data)
            return b""
        if framing == _LENGTH:
            take = self.body_left
            if len(data) < take:
                self.body_left -= len(data)
                self._receive(data)
                return b""
            self.body_left = 0
            response = self.response
            if response is not None and take:  # `_receive`, written out: the end of every body framed by its length
                response.receive(data[:take] if len(data) > take else data, True)
            if self.response is not None:
                self._complete()
            return data[take:]
        return self._chunks(data)

    def _chunks(self, data: bytes) -> bytes:
        at, size = 0, len(data)
        while at < size and self.response is not None:
            state = self.chunk_state
            if state == _DATA:
                left, rest = self.body_left, size - at
                take = left if left < rest else rest
                self.body_left = left - take
                self._receive(data[at:at + take] if take < size else data)
                at += take
                if not self.body_left:
                    self.chunk_state = _DATA_END
                continue
            if not self.chunk_line:  # the usual lines, whole in this read, taken in a call or none
                if state == _SIZE:
                    if (match := _PLAIN_SIZE_LINE.match(data, at)) is not None:
                        self.body_left = int(match[1], 16)
                        self.chunk_state = _DATA if self.body_left else _TRAILER
                        at = match.end()
                        continue
                elif data[at : at + 2] == b"\r\n":
                    if state == _DATA_END:
                        self.chunk_state = _SIZE
                        at += 2
                        continue
                    if self.head_bytes + 2 <= MAX_HEAD_BYTES:  # the trailer's end (`_check_line`'s limit)
                        self._complete()
                        return data[at + 2 :]
            end = data.find(b"\n", at)
            if end < 0:
                self.chunk_line += data[at:]
                self._check_line(state)
                return b""
            line = self.chunk_line + data[at:end + 1]
            self.chunk_line = b""
            at = end + 1
            self._check_line(state, line)
            if not line.endswith(b"\r\n"):
                raise ProtocolError(f"a chunked body from {self._where()} has a line that does not end with CRLF")
            line = line[:-2]
            if state == _DATA_END:
                if line:
                    raise ProtocolError(f"a chunk from {self._where()} is longer than its size said")
                self.chunk_state = _SIZE
            elif state == _SIZE:
                self.body_left = _chunk_size(line, self)
                self.chunk_state = _DATA if self.body_left else _TRAILER
            elif line:  # a trailer field: dropped
                self.head_bytes += len(line)
                if self.head_bytes > MAX_HEAD_BYTES:
                    raise ProtocolError(f"the trailer from {self._where()} is over {MAX_HEAD_BYTES} bytes")
            else:
                self._complete()
                return data[at:]
        return b""

    def _check_line(self, state: int, line: bytes | None = None) -> None:
        length = len(self.chunk_line if line is None else line)
        if state == _DATA_END:
            if length > 2:
                raise ProtocolError(f"a chunk from {self._where()} is longer than its size said")
        elif state == _TRAILER:
            if self.head_bytes + length > MAX_HEAD_BYTES:
                raise ProtocolError(f"the trailer from {self._where()} is over {MAX_HEAD_BYTES} bytes")
        elif length > MAX_CHUNK_LINE:
            raise ProtocolError(f"a chunk-size line from {self._where()} is over {MAX_CHUNK_LINE} bytes")

    def _receive(self, chunk: bytes, last: bool = False) -> None:
        response = self.response
        if response is not None and chunk:
            response.receive(chunk, last)

    def eof_received(self) -> bool:
        self._lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)
        drained = self.drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        drained = self.drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    # -- httptools' callbacks (no `on_message_begin`: `start` begins each head, and the parser keeps a bound method
    # for every callback the protocol has, for as long as a stream held open lives) ----------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.in_head:
            self.raw_headers += (name, value)  # into the response's headers at the head's end (`_headers`)

    def on_headers_complete(self) -> None:
        response = self.response
        parser = self.parser
        self.in_head = False
        raw, self.raw_headers = self.raw_headers, _NO_RAW_HEADERS
        if response is None or parser is None:
            return
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # informational (100 Continue): the real head follows
            self.head_bytes = 0
            self.in_head = True
            self.raw_headers = []
            return
        headers = response.headers
        _headers(headers, raw)
        response.status = status
        response.connection = self
        self.keep_alive = parser.should_keep_alive()
        # How the body is framed, by the head (llhttp checked it: one Content-Length, digits only, not with a
        # Transfer-Encoding); the rules are llhttp's for a response.
        self.body_left = 0
        self.chunk_state = _SIZE
        self.chunk_line = b""
        if status in (204, 304):
            self.framing = _LENGTH
        elif (coding := headers.get("transfer-encoding")) is not None:
            chunked = coding.rpartition(",")[2].strip().lower() == "chunked"
            self.framing = _CHUNKED if chunked else _TO_EOF
        elif (length := headers.get("content-length")) is not None:
            self.framing = _LENGTH
            self.body_left = int(length)
        else:
            self.framing = _TO_EOF
        response.eof_framed = self.framing == _TO_EOF

    def _complete(self) -> None:
        """The response's body came whole."""
        response = self.response
        if response is None:
            return
        self.response = None
        self.head = None
        keep = self.keep_alive and not self.closed
        response.finish()
        if self.paused:  # the body's last chunk came with the buffer full: the next response reads again
            self.resume()
        if keep:
            self.pool.release(self)
        else:
            self.close()

    # -- the client's side -------------------------------------------------------------------------------

    def start(self, request: bytes, response: Response) -> asyncio.Future[None]:
        """Write one request; the future settles when its response's head came."""
        head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.write(request, response, head)
        return head

    def write(self, request: bytes, response: Response, head: asyncio.Future[None] | Started) -> None:
        """Write one request; `head` is settled when its response's head came, or the connection failed first."""
        assert self.transport is not None
        self.response = response
        self.received = False
        self.head_bytes = 0
        self.head_tail = b""
        self.in_head = True
        self.raw_headers = []
        self.parser = httptools.HttpResponseParser(self)
        self.uses += 1
        self.head = head
        self.transport.write(request)

    async def drain(self, timeout: float | None) -> None:
        """Wait until the transport takes writes again (the request is in the socket's buffers)."""
        if not self.writing_paused or self.closed:
            return
        drained = self.drained = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await drained
        except TimeoutError:
            self._fail(WriteTimeout(f"{self._where()} took none of the request for {timeout} s"))
        finally:
            self.drained = None

    def pause(self) -> None:
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.forget(self)
            if self.transport is not None:
                self.transport.close()
        response = self.response
        if response is not None:
            self.response = None
            response.finish(self.failure or ReadError(f"the connection to {self._where()} was closed"))
        self._settle_head()

    def _lost(self, exc: Exception | None) -> None:
        response = self.response
        if response is not None and response.status and not self.in_head and response.eof_framed:
            self.response = None  # a body framed by the end of the connection: this is its end
            response.finish()
        elif response is not None:
            why = f": {exc}" if exc else ""
            self.failure = ReadError(f"the connection to {self._where()} ended before the response did{why}")
        self.close()

    def _fail(self, error: TransportError) -> None:
        self.failure = error
        response = self.response
        if response is not None and response.status:
            self.response = None
            response.finish(error)
        self.close()

    def _settle_head(self) -> None:
        head = self.head
        if head is None:
            return
        self.head = None
        if isinstance(head, Started):
            head.settle()
        elif not head.done():
            head.set_result(None)

    def _where(self) -> str:
        scheme, host, port = self.origin
        return f"{scheme}://{host}:{port}"


_NO_RAW_HEADERS: list[bytes] = []
"""`_Connection.raw_headers` outside a head: never added to (a connection held open for a stream keeps no list of its
own)."""


_LET_GO: dict[str, str] = {}
"""A streamed response's headers once let go of (`Response.stream`): one empty dict for all of them, never written to
(a response's headers are written only while its head comes)."""


def _headers(headers: dict[str, str], raw: list[bytes]) -> None:
    """A head's header names (in lower case) and values, `raw` in turn, into `headers`, a repeated name's values joined
    with ", ": the names and the values each joined, decoded and split again, a few calls for the head rather than
    two for each header (the parser let no line break into a name or a value)."""
    if not raw:
        return
    names = b"\n".join(raw[0::2]).decode("latin-1").lower().split("\n")
    texts = b"\n".join(raw[1::2]).decode("latin-1").split("\n")
    for key, text in zip(names, texts, strict=True):
        headers[key] = f"{headers[key]}, {text}" if key in headers else text


def _chunk_size(line: bytes, connection: _Connection) -> int:
    """A chunk-size line's size (hexadecimal; any extensions after a `;` are dropped)."""
    size = line.partition(b";")[0].rstrip(b" \t")
    if not size or len(size) > 15 or size.strip(b"0123456789abcdefABCDEF"):
        where = connection._where()  # pyright: ignore[reportPrivateUsage]
        raise ProtocolError(f"a chunked body from {where} has a chunk size that is not hexadecimal: {line[:40]!r}")
    return int(size, 16)


def _request_head(method: str, url: Url, headers: Mapping[str, str], body: bytes | None) -> bytes:
    return _with_body(_head_lines(method, url, headers), body)


def _head_lines(method: str, url: Url, headers: Mapping[str, str]) -> bytes:
    """A request head's lines up to its content length: the request line, `host` and `headers` (raises `HttpError`
    for a header that cannot be sent)."""
    host = url.host_line
    if host is None:
        host = f"host: {url.host_header().decode('ascii')}"
        object.__setattr__(url, "host_line", host)
    lines = [f"{method} {url.target} HTTP/1.1", host]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise HttpError(f"the header {name!r} has a line break or colon where none may be")
        if name.lower() not in ("host", "content-length", "transfer-encoding", "connection"):
            lines.append(f"{name}: {value}")
    return "\r\n".join(lines).encode("latin-1")


def _with_body(lines: bytes, body: bytes | None) -> bytes:
    """The whole request: its head's `lines`, its content length (with a body), the empty line, its body."""
    head = lines + b"\r\ncontent-length: %d\r\n\r\n" % len(body) if body is not None else lines + b"\r\n\r\n"
    return head + body if body else head


MAX_KEPT_HEADS = 64
"""Request heads `HttpClient.start` keeps rendered, one for each headers dict it was given (then all are let go)."""

_V = TypeVar("_V")


class MadeFor(Generic[_V]):
    """Values made from an object that its giver hands again and again, never written to (one headers dict for every
    request alike), and from a few other inputs: kept by the object's identity (the object held, so that its id is
    not another's) with those inputs, at most `limit` (then all are let go)."""

    __slots__ = ("_kept", "_limit")

    def __init__(self, limit: int) -> None:
        self._kept: dict[int, tuple[object, tuple[object, ...], _V]] = {}
        self._limit = limit

    def get(self, given: object, inputs: tuple[object, ...]) -> _V | None:
        """The value made for `given` and `inputs`, if kept."""
        kept = self._kept.get(id(given))
        return kept[2] if kept is not None and kept[0] is given and kept[1] == inputs else None

    def keep(self, given: object, inputs: tuple[object, ...], value: _V) -> _V:
        """`value`, kept as made for `given` and `inputs`."""
        if len(self._kept) >= self._limit:
            self._kept.clear()
        self._kept[id(given)] = (given, inputs, value)
        return value


class HttpClient:
    """Requests to one upstream's origins, on kept-alive connections (at most `max_idle` idle per origin)."""

    def __init__(
        self, *, timeouts: Timeouts = Timeouts(), tls: ssl.SSLContext | None = None,
        max_idle: int = MAX_IDLE_PER_ORIGIN,
    ) -> None:
        self._timeouts = timeouts
        self._tls = tls
        self._max_idle = max_idle
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._closed = False
        self._reads = StreamedReads(timeouts.read) if timeouts.read is not None else None
        self._connecting: dict[tuple[str, str, int], int] = {}
        """Connections being opened per origin (`MAX_CONNECTING_PER_ORIGIN`)."""
        self._waiting: dict[tuple[str, str, int], deque[asyncio.Future[None]]] = {}
        """Requests waiting for a connection to come free or a connect to end, per origin, the first first."""
        self._heads: MadeFor[bytes] = MadeFor(MAX_KEPT_HEADS)
        """`start`'s request heads' lines (`_head_lines`) by their headers dict, method and URL."""

    async def request(
        self, method: str, url: Url, headers: Mapping[str, str], body: bytes | None = None
    ) -> Response:
        """Send one request and return its response once its head came (read its body, then `close` it)."""
        if self._closed:
            raise TransportError("the client is closed")
        data = _request_head(method, url, headers, body)
        timeout = self._timeouts.read
        while True:
            connection, reused = await self._take(url)
            response = Response(url, timeout, self._reads)
            try:
                await self._exchange(connection, data, response, timeout)
            except ReadError:
                if reused and not connection.received:
                    continue  # the server closed it as idle as we wrote: once more, on a new connection
                raise
            return response

    def start(
        self, method: str, url: Url, headers: Mapping[str, str], body: bytes | None, listener: HeadListener
    ) -> Started | None:
        """Write a request at once, in the caller's step, on a kept-alive connection to its origin that is idle:
        its head goes to `listener` from the connection's callbacks (a read timeout holds until it comes). None, and
        nothing written, when no connection is idle or the request would not fit the transport's buffer whole (a
        write that has to wait for the socket is `request`'s, with its write timeout): `request` it then. `headers`
        is never written to afterwards: its head's lines are rendered once for it (`wire.http.HttpWire` gives one dict
        for every request alike)."""
        if self._closed:
            return None
        idle = self._idle.get(url.origin)
        if not idle:
            return None
        lines = self._heads.get(headers, (method, url))
        if lines is None:
            lines = self._heads.keep(headers, (method, url), _head_lines(method, url, headers))
        data = _with_body(lines, body)
        while idle:
            connection = idle[-1]
            transport = connection.transport
            if connection.closed or transport is None or transport.is_closing():
                idle.pop()
                continue
            if transport.get_write_buffer_size() + len(data) > transport.get_write_buffer_limits()[1] // 2:
                return None  # well below the high-water mark: the write never pauses (TLS adds its records)
            idle.pop()
            response = Response(url, self._timeouts.read, self._reads)
            started = Started(connection, response, listener, self._reads)
            connection.write(data, response, started)
            return started
        return None

    async def _exchange(self, connection: _Connection, data: bytes, response: Response, timeout: float | None) -> None:
        head = connection.start(data, response)
        try:
            await connection.drain(self._timeouts.write)
            async with asyncio.timeout(timeout):
                await head
        except TimeoutError:
            connection.close()
            raise ReadTimeout(f"no response from {response.url.shown()} within {timeout} s") from None
        except BaseException:
            connection.close()  # cancelled: its response would come first on it
            raise
        if not response.status:
            raise connection.failure or ReadError(f"the connection to {response.url.shown()} was closed")

    async def _take(self, url: Url) -> tuple[_Connection, bool]:
        """An idle connection to the origin, else a new one; while `MAX_CONNECTING_PER_ORIGIN` are being opened
        already, the first of the two to come free."""
        origin = url.origin
        while True:
            if self._closed:
                raise TransportError("the client is closed")
            idle = self._idle.get(origin)
            while idle:
                connection = idle.pop()
                if not connection.closed and connection.transport is not None and not connection.transport.is_closing():
                    return connection, True
            connecting = self._connecting.get(origin, 0)
            if connecting < MAX_CONNECTING_PER_ORIGIN:
                break
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(origin, deque()).append(waiter)
            try:
                await waiter
            except BaseException:  # cancelled: a waiter cancelled in its place is skipped when the turn comes
                if waiter.done() and not waiter.cancelled():  # its turn came as it was cancelled: the next one's
                    self._wake_one(origin)
                raise
        self._connecting[origin] = connecting + 1
        try:
            return await self._connect(url), False
        finally:
            self._connecting[origin] -= 1
            if not self._connecting[origin]:
                del self._connecting[origin]
            self._wake_one(origin)

    def _wake_one(self, origin: tuple[str, str, int]) -> None:
        """A connection to `origin` came free or a connect ended: the first request waiting for either looks again."""
        waiting = self._waiting.get(origin)
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break
        if waiting is not None and not waiting:
            del self._waiting[origin]

    async def _connect(self, url: Url) -> _Connection:
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if url.scheme == "https":
            tls = self._tls or default_tls()
        timeout = self._timeouts.connect
        origin = url.origin
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, origin), url.host, url.port, ssl=tls,
                    server_hostname=url.host if tls is not None else None,
                )
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {url.host}:{url.port} within {timeout} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise HttpConnectError(str(exc) or type(exc).__name__) from exc
        assert connection.transport is not None
        sock = connection.transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _forget_addresses(connection.transport)
        self._open.add(connection)
        if self._closed:
            connection.close()
            raise TransportError("the client is closed")
        return connection

    def release(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.origin, [])
        if self._closed or len(idle) >= self._max_idle:
            connection.close()
        else:
            idle.append(connection)
            if self._waiting:  # nobody waits for a connection, the usual case: nothing to wake
                self._wake_one(connection.origin)

    def forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)

    @property
    def connections(self) -> int:
        """Connections open now, idle or in use."""
        return len(self._open)

    async def aclose(self) -> None:
        """Close every connection; a response still coming ends with `ReadError`."""
        self._closed = True
        for connection in list(self._open):
            connection.close()
        self._idle.clear()
        if self._reads is not None:
            self._reads.stop()
        for waiting in list(self._waiting.values()):  # each looks again, and finds the client closed
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)
        self._waiting.clear()

