"""Streamable HTTP to one upstream on the gateway's own wire: JSON-RPC dicts straight onto the gateway's own
HTTP/1.1 client (`wire.http_client`: asyncio Protocols and httptools' parser), with no SDK transport, memory
stream, pydantic model or httpx2 between.

The SDK's client transport spent about 2 ms of gateway CPU per upstream request (a task group and a
task per message, two memory streams, a pydantic validation of every message, three layers of SSE
decoding, the client's auth, redirect, cookie and logging hooks). Here a request on an idle kept-alive
connection is written in the caller's own step, and its head and its answer (one JSON body, or an event stream)
are read in the connection's callbacks (`_PostHead`, `_PostStream`): no task, so a call whose stream is held open
(an elicitation waiting for a person) holds none here. A request that must wait first (a connection to open) has a
POST task until its head came. A notification or an answer of ours is POSTed in the caller's own task. Each body
is parsed once (`codec.loads`).

The protocol is the SDK client's (`mcp.client.streamable_http`), including what the gateway added on
top of it:
- a request or notification the server sends on a POST's response stream is tagged with that POST's
  request id (`Inbound.related_request_id`), so an upstream `elicitation/create` names the call that
  caused it (design invariant 1);
- a POST's stream that ends without its answer (and cannot be resumed with `Last-Event-ID`) gives a lost
  answer (`Inbound.lost`: the endpoint raises `PeerLost`), never an error the server could have sent;
- a 404 to a message that carried our session id means the server forgot the session (it restarted):
  the wire ends, so the link reconnects;
- the standalone GET stream opens after `notifications/initialized` (its messages name no call);
  `standalone_answered` is set once it was answered or given up;
- each response is read to its end, so its connection goes back to the pool;
- a response's JSON body, like each event of a stream, is at most `max_event_bytes`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any, Protocol

import anyio
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.client.streamable_http import (
    DEFAULT_RECONNECTION_DELAY_MS,
    LAST_EVENT_ID,
    MAX_RECONNECTION_ATTEMPTS,
    MCP_SESSION_ID,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

from elicitgate import __version__, _compat
from elicitgate.config import DEFAULT_MAX_EVENT_BYTES
from elicitgate.errors import BodyTooLarge, HttpError, PeerLost, SseEventTooLarge, TransportError
from elicitgate.json_shapes import JsonObject, is_mapping, is_object
from elicitgate.wire import codec
from elicitgate.wire.base import Inbound, PushedInbox, Sink
from elicitgate.wire.endpoint import SESSION_LOST
from elicitgate.wire.framing import parse_message
from elicitgate.wire.http_client import HttpClient, MadeFor, Response, Started, StreamedReads, Timeouts, Url
from elicitgate.wire.sse import SseParser

logger = logging.getLogger(__name__)

_TIMEOUT, _SSE_READ_TIMEOUT = _compat.http_client_timeouts()
TIMEOUTS = Timeouts(connect=_TIMEOUT, write=_TIMEOUT, read=_SSE_READ_TIMEOUT)
"""The SDK client's: 30 s to connect or write; 5 minutes between two reads of a response, which may be a
stream held open while a tool (or the person it asks) works. Connections are not capped (see
`http_client.MAX_IDLE_PER_ORIGIN`)."""

DRAIN_WAIT = 1.0
"""Seconds a POST's stream may take to end after it carried its answer. The server ends it right after;
reading it to its end lets the connection go back to the pool. One that stays open longer is closed
(and its connection with it)."""

CLOSE_WAIT = 2.0
"""Seconds the session's DELETE, and then the end of the wire's tasks, may take when the wire closes."""

ANSWER_RETRY_DELAYS = (0.1, 0.5, 2.0)
"""Seconds before each new POST of an answer to the server's request whose POST failed on the way."""

MAX_KEPT_HEADERS = 64
"""Headers dicts `HttpWire.send` keeps for the messages it POSTs (then all are let go)."""

MAX_REDIRECTS = 20
"""Redirects followed for one request at most (httpx2's bound)."""

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
METHOD_KEEPING_REDIRECTS = frozenset({307, 308})
"""A POST follows only these: HTTP clients (and browsers) turn a POST into a body-less GET on the others,
which would drop the message."""


class HttpWire(PushedInbox):
    """One streamable HTTP session (or stateless 2026-07-28 connection) as a `wire.base.MessageWire`.

    `send` POSTs a message; what comes back is queued for `messages`, which the endpoint's read loop
    consumes. `aclose` DELETEs the session and stops the wire's tasks.
    """

    def __init__(
        self, url: str, headers: Mapping[str, str] | None = None, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    ) -> None:
        self._url = Url.parse(url)
        self.max_event_bytes = max_event_bytes
        """The largest event read from a stream, and the largest body read whole
        (`mcpServers.<name>.max_event_bytes`); read for every chunk of a JSON answer (an attribute, not a property)."""
        self._client = HttpClient(timeouts=TIMEOUTS)
        self._base: dict[str, str] = {"user-agent": f"elicitgate/{__version__}"}
        self._base.update({name.lower(): value for name, value in (headers or {}).items()})
        self._base["accept"] = "application/json, text/event-stream"
        self._base["content-type"] = "application/json"
        self.session_id: str | None = None
        self._version: str | None = None
        """The negotiated `mcp-protocol-version`, as the last stamped message said (the SDK's cache): it
        goes on messages that carry no header of their own (answers, the GET stream, the DELETE)."""
        self._start_inbox()
        self._wakeup: asyncio.Future[None] | None = None
        self._ended = False
        self._forgotten = False
        """The server answered 404 to our session id: nothing more is sent, the wire ends once the POSTs on
        their way settled (`_forget_session`)."""
        self._failure: BaseException | None = None
        self._failed = anyio.Event()
        self._watched = False
        self._sent_headers: MadeFor[dict[str, str]] = MadeFor(MAX_KEPT_HEADERS)
        """What `send` POSTs with, by the message's own headers (the connection gives one dict for every request of a
        method and name, `upstreams.connection`), session and version: one dict for every message alike, never
        written to, whose request head the client renders once (`HttpClient.start`)."""
        self._posts: dict[RequestId, tuple[_Exchange, bool]] = {}
        """Each request's POST: its task while its head comes (and while a broken stream is resumed), then its
        stream read in callbacks (`_PostStream`); and whether it was sent in the 2026-07-28 era (a cancel aborts
        it)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.standalone_answered = anyio.Event()
        self.drains = StreamedReads(DRAIN_WAIT)
        """The `DRAIN_WAIT` of each POST's stream read past its answer (`_PostStream`), on one loop timer: a timer
        each was armed and cancelled again for nearly every call (the stream ends right after its answer)."""

    @property
    def url(self) -> Url:
        return self._url

    # -- to the server ----------------------------------------------------------------------

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        """POST one message: a request written at once where a kept-alive connection is idle, else in a task of its
        own (its answer comes through `messages` / `push`); an answer of ours written at once where a connection is
        idle (its 202 read in callbacks), else here, as a notification is. Raises `anyio.ClosedResourceError` once the
        wire ended, and for a request `PeerLost` (`SESSION_LOST`) once the server forgot the session."""
        method = message.get("method")
        if self._forgotten:  # not sent: a request is refused as the server's 404 would refuse it, unread
            if method is not None and message.get("id") is not None:
                raise PeerLost(code=CONNECTION_CLOSED, message=SESSION_LOST)
            return
        if self._ended:
            raise anyio.ClosedResourceError
        if method == "notifications/cancelled" and self._cancels_by_abort(message):
            return
        if method == "initialize":
            self._version = None  # the negotiation itself: no version stamped by an earlier probe
        elif headers is not None and (version := headers.get(MCP_PROTOCOL_VERSION_HEADER)) is not None:
            self._version = version
        sent = self._message_headers(headers)
        body = codec.dumps(message)
        request_id = message.get("id")
        if method is not None and request_id is not None:
            self._start_exchange(request_id, body, sent, initialize=method == "initialize")
            return
        if method == "notifications/initialized":
            self._spawn(self._listen())
        elif method is None and self._answer_at_once(body, sent):
            return
        await self._post_unanswered(body, sent, answer=method is None)

    def send_now(self, message: JsonObject) -> bool:
        """An answer of ours POSTed at once on an idle kept-alive connection (`wire.base.SendsAtOnce`,
        `_answer_at_once`); False, nothing sent, for anything else, or when no connection is idle (`send` it then)."""
        if "method" in message or self._forgotten or self._ended:
            return False
        try:
            body = codec.dumps(message)
        except (ValueError, TypeError):
            return False  # `send` says why
        return self._answer_at_once(body, self._message_headers(None))

    def _message_headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        """`_headers` of a message `send` POSTs: made once for each of its own headers dict, session and version."""
        made_with = (self.session_id, self._version)
        headers = self._sent_headers.get(extra, made_with)
        if headers is None:
            headers = self._sent_headers.keep(extra, made_with, self._headers(extra))
        return headers

    def _headers(self, extra: Mapping[str, str] | None, *, body: bool = True) -> dict[str, str]:
        """Every message's headers: the config's, the session's, then the message's own (no content type
        for a request without a `body`)."""
        headers = dict(self._base)
        if not body:
            del headers["content-type"]
        if self.session_id is not None:
            headers[MCP_SESSION_ID] = self.session_id
        if self._version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self._version
        if extra:
            headers.update(extra)
        return headers

    def _cancels_by_abort(self, message: JsonObject) -> bool:
        """Whether a `notifications/cancelled` is said by closing the request's POST instead (the SDK's
        rule): 2026-07-28 has no client-to-server notifications over HTTP, closing the response stream is
        the cancellation. A request sent in the handshake era is cancelled with the notification."""
        params = message.get("params")
        cancelled = params.get("requestId") if is_mapping(params) else None
        post = self._posts.get(cancelled) if isinstance(cancelled, str | int) else None
        if post is None:
            return self._version in MODERN_PROTOCOL_VERSIONS
        exchange, modern = post
        if modern:
            exchange.cancel()
        return modern

    def _start_exchange(self, request_id: RequestId, body: bytes, headers: dict[str, str], *, initialize: bool) -> None:
        """A request's POST: written here, in the caller's step, on an idle kept-alive connection, its head and
        answer then read in the connection's callbacks (`_PostHead`); in a task of its own when a connection must
        be opened (or waited for) first. A task started here ran a loop turn later, and so did the request's write."""
        superseded = self._posts.get(request_id)
        if superseded is not None:  # the id is reused: the old POST must not answer for the new request
            superseded[0].cancel()
        modern = self._version in MODERN_PROTOCOL_VERSIONS
        if not initialize:
            post = _PostHead(self, request_id, body, headers)
            try:
                started = self._client.start("POST", self._url, headers, body, post)
            except HttpError:
                started = None  # a header that cannot be sent: the task's request says so, and ends the wire
            if started is not None:
                post.started = started
                self._posts[request_id] = (post, modern)
                return
        self._posts[request_id] = (self._spawn(self._exchange(request_id, body, headers, initialize)), modern)

    def head_came(self, post: _PostHead, response: Response) -> None:
        """The head of a request's POST written at once (`_PostHead`): an event stream goes to a `_PostStream`, a JSON
        answer is read in the connection's callbacks (by `post`); the rest (a redirect, an error, 202, another
        content type) in a task, as `_exchange` reads it."""
        request_id = post.request_id
        status = response.status
        if 200 <= status < 300 and status != 202:
            content_type = response.headers.get("content-type", "").lower()
            if content_type.startswith("text/event-stream"):
                self._stream_post(request_id, response, post.headers, post)
                return
            if content_type.startswith("application/json"):
                post.read_json(response)
                return
        self._replace(request_id, post, self._spawn(
            self._exchange(request_id, post.sent, post.headers, False, response)))

    def head_failed(self, post: _PostHead, error: TransportError, retry: bool) -> None:
        """No head came for a request's POST written at once: sent again in a task, on a new connection, when the
        kept-alive one was closed by the server as we wrote (`retry`); else the wire ends, as `_exchange` ends it."""
        request_id = post.request_id
        if retry and not self._ended:
            self._replace(request_id, post, self._spawn(self._exchange(request_id, post.sent, post.headers, False)))
            return
        self._end(error)
        self.settled(request_id, post)

    def _replace(self, request_id: RequestId, exchange: object, by: _Exchange) -> None:
        """`by` reads the answer to `request_id` in `exchange`'s place."""
        post = self._posts.get(request_id)
        if post is not None and post[0] is exchange:
            self._posts[request_id] = (by, post[1])

    async def _post_unanswered(
        self, body: bytes, headers: dict[str, str], *, answer: bool, failed: HttpError | OSError | None = None
    ) -> None:
        """POST a notification or an answer (202, nothing to read). An answer whose POST failed on the way (a
        reset connection, a refused or slow connect) is sent again after each of `ANSWER_RETRY_DELAYS`: the
        server's request waits for it, and a copy that arrives twice is an answer to no request, which servers
        drop. Past those, or for a notification, a failure loses only this message; a 404 to our session id
        ends the wire, as for a request. `failed`: the answer's first POST, written at once, failed so
        (`_AnswerPost`): the next one is the first retry."""
        delays = iter(ANSWER_RETRY_DELAYS if answer else ())
        while True:
            if failed is None:
                try:
                    response = await self._send("POST", headers, body)
                    await self._read_to_end(response)
                    self.unanswered_status(response.status, headers)
                    return
                except (HttpError, OSError) as exc:
                    failed = exc
            delay = next(delays, None)
            if delay is None or self._ended or self._forgotten:
                logger.warning("a message to %s was not delivered: %s", self._url.shown(), _describe(failed))
                return
            logger.info("an answer to %s was not delivered (%s); sending it again in %g s",
                        self._url.shown(), _describe(failed), delay)
            await anyio.sleep(delay)
            failed = None

    def unanswered_status(self, status: int, headers: Mapping[str, str]) -> None:
        """What the status of a notification's or an answer's POST says: a 404 to our session id ends the wire."""
        if status == 404 and MCP_SESSION_ID in headers:
            self._forget_session()
        elif status >= 400:
            logger.debug("%s refused a message with HTTP %s", self._url.shown(), status)

    def _answer_at_once(self, body: bytes, headers: dict[str, str]) -> bool:
        """POST an answer of ours in the caller's step on an idle kept-alive connection, its 202 read in the
        connection's callbacks (`_AnswerPost`): the caller does not wait for the server's 202, and no task is made for
        it. False, and nothing sent, when no connection is idle (or the answer would not fit the transport's buffer
        whole): `_post_unanswered` sends it then. One that fails on the way is sent again in a task, as
        `_post_unanswered` would have."""
        post = _AnswerPost(self, body, headers)
        try:
            return self._client.start("POST", self._url, headers, body, post) is not None
        except HttpError:
            return False  # a header that cannot be sent: `_post_unanswered` says so

    def answer_failed(self, body: bytes, headers: dict[str, str], error: HttpError, retry: bool) -> None:
        """An answer POSTed at once did not reach the server: sent again on a new connection at once when the
        kept-alive one was closed as we wrote (`retry`, as `HttpClient.request` does), else after the first of
        `ANSWER_RETRY_DELAYS`, in a task; lost (and said so) once the wire ended."""
        if self._ended or self._forgotten:
            logger.warning("a message to %s was not delivered: %s", self._url.shown(), _describe(error))
            return
        self._spawn(self._post_unanswered(body, headers, answer=True, failed=None if retry else error))

    def answer_redirected(self, body: bytes, headers: dict[str, str], response: Response) -> None:
        """An answer POSTed at once was redirected: followed in a task, as `_send` follows it."""
        self._spawn(self._follow_answer(body, headers, response))

    async def _follow_answer(self, body: bytes, headers: dict[str, str], response: Response) -> None:
        try:
            response = await self._follow("POST", headers, body, response)
            await self._read_to_end(response)
        except (HttpError, OSError) as exc:
            await self._post_unanswered(body, headers, answer=True, failed=exc)
            return
        self.unanswered_status(response.status, headers)

    async def _exchange(
        self, request_id: RequestId, body: bytes, headers: dict[str, str], initialize: bool,
        response: Response | None = None,
    ) -> None:
        """One request's POST until its head came (or from the head of one written at once: `response`) and, for a
        JSON answer or an error, read to its end; an event stream is handed to a `_PostStream`, read in callbacks,
        and the task ends (a call pending on a person holds no task here). Failing to reach the server at all ends
        the wire (as the SDK's transport does): the link reconnects, or reports why it cannot."""
        try:
            if response is None:
                response = await self._send("POST", headers, body)
            else:
                response = await self._follow("POST", headers, body, response)
            streamed = False
            try:
                streamed = await self._take_answer(request_id, response, headers, initialize)
            finally:
                if not streamed:
                    response.close()
        except (HttpError, OSError) as exc:
            self._end(exc)
        except Exception as exc:  # a bug of ours must not leave the caller waiting for ever
            logger.exception("the exchange of %r with %s failed", request_id, self._url.shown())
            self.lose(request_id, f"the gateway failed to read the answer: {_describe(exc)}")
        finally:
            self.settled(request_id, asyncio.current_task())

    def settled(self, request_id: RequestId, exchange: object) -> None:
        """`exchange` (a task, a `_PostStream`) is done with `request_id`'s POST."""
        post = self._posts.get(request_id)
        if post is not None and post[0] is exchange:
            del self._posts[request_id]
        if self._forgotten:
            self._end_once_settled()

    async def _take_answer(
        self, request_id: RequestId, response: Response, headers: dict[str, str], initialize: bool
    ) -> bool:
        """Read the answer to a request; True when its event stream was handed to a `_PostStream` (which closes
        the response), False when it was read here."""
        status = response.status
        if status == 202:
            # A request's answer comes on this POST's body; 202 says none will.
            self._fail(request_id, INVALID_REQUEST, "server answered a request with 202 Accepted")
            return False
        if status in REDIRECT_STATUSES:
            await self._read_body(response)
            self._fail(request_id, INVALID_REQUEST, _unfollowed(response))
            return False
        if status >= 400:
            await self._refused(request_id, response, headers)
            return False
        if initialize and (session_id := response.headers.get(MCP_SESSION_ID)):
            self.session_id = session_id
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("text/event-stream"):
            self._stream_post(request_id, response, headers, asyncio.current_task())
            return True
        if content_type.startswith("application/json"):
            await self._read_json_answer(request_id, response)
        else:
            await self._read_body(response)
            self._fail(request_id, INVALID_REQUEST, f"Unexpected content type: {content_type}")
        return False

    async def _refused(self, request_id: RequestId, response: Response, headers: dict[str, str]) -> None:
        """An HTTP error for a request: the JSON-RPC error in its body if it has one, else the SDK's
        stand-in for the status; a 404 to our session id ends the wire instead."""
        body = await self._read_body(response)
        if response.status == 404 and MCP_SESSION_ID in headers:
            self.lose(request_id, SESSION_LOST)
            self._forget_session()
            return
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            message = parse_message(body)
            if is_object(message) and is_object(error := message.get("error")):
                # The server may have set `id: null` (it refused before reading the id): ours it is.
                self._deliver(Inbound({"jsonrpc": "2.0", "id": request_id, "error": error}))
                return
        if response.status == 404:  # no session yet: the HTTP spelling of "no such method"
            self._fail(request_id, METHOD_NOT_FOUND, "Not Found")
        else:
            self._fail(request_id, INTERNAL_ERROR, "Server returned an error response")

    async def _read_json_answer(self, request_id: RequestId, response: Response) -> None:
        try:
            body = await response.read(self.max_event_bytes)
        except BodyTooLarge as exc:
            self.lose(request_id, _json_too_large(exc))
            return
        except TransportError as exc:
            self.lose(request_id, _ended_early(exc))
            return
        self.json_answer(request_id, body)

    def json_answer(self, request_id: RequestId, body: bytes) -> None:
        """A request's answer, a JSON body read whole."""
        message = parse_message(body)
        if type(message) is not dict and isinstance(message, Exception):  # a message is a plain dict: no call
            self._fail(request_id, PARSE_ERROR, f"Failed to parse JSON response: {message}")
            return
        if "method" not in message:
            message["id"] = request_id
        self._deliver(Inbound(message))

    def _stream_post(self, request_id: RequestId, response: Response, headers: dict[str, str], sender: object) -> None:
        """A POST's event stream: server messages (tagged with `request_id`), then the answer, read by a
        `_PostStream` in the connection's callbacks. It takes the POST's place in `_posts` (`sender`: the task
        that sent it, which ends, or the `_PostHead` of one written at once)."""
        stream = _PostStream(self, request_id, response, headers.get(MCP_PROTOCOL_VERSION_HEADER))
        self._replace(request_id, sender, stream)
        response.stream(stream)

    def stream_ended(
        self, stream: _PostStream, events: SseParser, version: str | None, error: TransportError | None
    ) -> None:
        """A POST's stream ended without its answer: resumed with `Last-Event-ID` if its events had ids (in a task,
        which takes its place in `_posts`), else the answer is lost."""
        request_id = stream.request_id
        if error is not None:
            logger.debug("the response stream of %r ended: %s", request_id, _describe(error))
        if events.last_id is None or self._ended:
            self.lose(request_id, "SSE stream ended without a response")
            self.settled(request_id, stream)
            return
        headers = {MCP_PROTOCOL_VERSION_HEADER: version} if version is not None else {}
        task = self._spawn(self._resumed(request_id, events, headers))
        post = self._posts.get(request_id)
        if post is not None and post[0] is stream:
            self._posts[request_id] = (task, post[1])

    async def _resumed(self, request_id: RequestId, events: SseParser, headers: dict[str, str]) -> None:
        try:
            await self._resume(request_id, events, headers)
        except (HttpError, OSError) as exc:
            self._end(exc)
        except Exception as exc:  # a bug of ours must not leave the caller waiting for ever
            logger.exception("resuming the stream of %r with %s failed", request_id, self._url.shown())
            self.lose(request_id, f"the gateway failed to read the answer: {_describe(exc)}")
        finally:
            self.settled(request_id, asyncio.current_task())

    async def _relay_until_answer(self, request_id: RequestId, response: Response, events: SseParser) -> bool:
        """Deliver the stream's messages until its answer; True once the answer came (the rest of the
        stream is read, briefly, so the connection can be reused)."""
        chunks = response.chunks()
        async for chunk in chunks:
            for data in events.feed(chunk):
                if self.relay(request_id, data):
                    with anyio.move_on_after(DRAIN_WAIT):
                        async for _ in chunks:
                            pass
                    return True
        return False

    def relay(self, request_id: RequestId, data: bytes) -> bool:
        """One event of a request's stream; True if it was the answer (a server message is not)."""
        message = parse_message(data)
        if type(message) is not dict and isinstance(message, Exception):  # a message is a plain dict: no call
            self._fail(request_id, PARSE_ERROR, f"Failed to parse SSE message: {message}")
            return True
        if "method" in message:
            self._deliver(Inbound(message, request_id))
            return False
        message["id"] = request_id  # the server's id for it may not be ours (the SDK's rule)
        self._deliver(Inbound(message))
        return True

    async def _resume(self, request_id: RequestId, events: SseParser, headers: dict[str, str]) -> None:
        """Reconnect a broken request stream with `Last-Event-ID` (a GET), as the SDK does: each attempt
        after the server's `retry` (or 1 s); one that opens and ends again starts the count over."""
        attempt = 0
        while attempt < MAX_RECONNECTION_ATTEMPTS:
            await anyio.sleep(events.retry if events.retry is not None else DEFAULT_RECONNECTION_DELAY_MS / 1000)
            assert events.last_id is not None
            try:
                response = await self._send("GET", self._stream_headers(headers, events.last_id))
                try:
                    if response.status >= 300 or not _is_event_stream(response):
                        attempt += 1
                        continue
                    if await self._relay_until_answer(request_id, response, events):
                        return
                finally:
                    response.close()
            except SseEventTooLarge as exc:
                self.lose(request_id, f"SSE stream failed: {exc}")
                return
            except (HttpError, OSError) as exc:
                logger.debug("resuming the stream of %r failed: %s", request_id, _describe(exc))
                attempt += 1
                continue
            attempt = 0
        self.lose(request_id, "SSE stream ended and reconnection attempts were exhausted")

    def _stream_headers(self, sent: Mapping[str, str] | None, last_id: str | None) -> dict[str, str]:
        """A GET's headers: an event stream wanted, from where the last one left off."""
        headers = self._headers(None, body=False)
        if sent is not None and (version := sent.get(MCP_PROTOCOL_VERSION_HEADER)) is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = version
        headers["accept"] = "text/event-stream"
        headers["cache-control"] = "no-store"
        if last_id is not None:
            headers[LAST_EVENT_ID] = last_id
        return headers

    # -- the standalone stream --------------------------------------------------------------------

    async def _listen(self) -> None:
        """The session's standalone GET stream: what the server sends unasked, tied to no call. 405 says
        the server has none; a stream that ends is reopened (from its last event id), one that fails is
        tried once more, as the SDK does."""
        events = SseParser(self.max_event_bytes)
        attempt = 0
        try:
            while attempt < MAX_RECONNECTION_ATTEMPTS and self.session_id is not None:
                try:
                    if not await self._listen_once(events):
                        return
                    attempt = 0
                except (HttpError, OSError, SseEventTooLarge) as exc:
                    logger.debug("the standalone stream of %s failed: %s", self._url.shown(), _describe(exc))
                    attempt += 1
                    if attempt >= MAX_RECONNECTION_ATTEMPTS:
                        return
                await anyio.sleep(events.retry if events.retry is not None else DEFAULT_RECONNECTION_DELAY_MS / 1000)
        finally:
            self.standalone_answered.set()

    async def _listen_once(self, events: SseParser) -> bool:
        """Open the standalone stream once and relay it to its end; False if it is not to be reopened."""
        response = await self._send("GET", self._stream_headers(None, events.last_id))
        try:
            self.standalone_answered.set()
            if response.status == 405:
                logger.debug("%s has no standalone stream", self._url.shown())
                return False
            if response.status in REDIRECT_STATUSES:
                logger.warning("standalone stream not opened: %s", _unfollowed(response))
                return False
            if response.status >= 400:
                raise HttpError(f"the standalone stream was refused with HTTP {response.status}")
            if not _is_event_stream(response):
                raise HttpError(f"the standalone stream is {response.headers.get('content-type')!r}")
            async for chunk in response.chunks():
                for data in events.feed(chunk):
                    self._deliver(Inbound(parse_message(data)))
            return True
        finally:
            response.close()

    # -- from the server ----------------------------------------------------------------------

    async def messages(self) -> AsyncIterator[Inbound]:
        """What the server sent, in order, until the wire ends. A request that could not reach the
        server at all ends it with that error: raised here unless `watch` runs."""
        inbox = self._inbox
        while True:
            while inbox:
                yield inbox.popleft()
            if await self._ended_else_waited():
                return

    async def _ended_else_waited(self) -> bool:
        """True once the wire ended (its failure raised, if one ended it and nobody `watch`es); else False after a wait
        for what comes next (`_wake`)."""
        if self._ended:
            if self._failure is not None:
                raise self._failure
            return True
        self._wakeup = asyncio.get_running_loop().create_future()
        try:
            await self._wakeup
        finally:
            self._wakeup = None
        return False

    async def push(self, sink: Sink) -> None:
        """Hand every message to `sink` as it is read (`wire.base.PushWire`): from the connection's callbacks, with no
        task woken per message, as `wire.stdio.LineReader.push` does; a handling `sink` returns (an inline request) is
        awaited before the next. Ends as `messages` does."""
        self._sink, self._sink_context = sink, contextvars.copy_context()
        try:
            while True:
                await self._hand_out(sink)
                if await self._ended_else_waited():
                    return
        finally:
            self._sink = self._sink_context = self._held = None

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    def _fail(self, request_id: RequestId, code: int, message: str) -> None:
        """Answer our own request with an error that stands for what the HTTP exchange said."""
        self._deliver(Inbound({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}))

    def lose(self, request_id: RequestId, reason: str) -> None:
        """The answer to `request_id` can no longer come: the endpoint raises `PeerLost`."""
        error = {"code": CONNECTION_CLOSED, "message": reason}
        self._deliver(Inbound({"jsonrpc": "2.0", "id": request_id, "error": error}, lost=True))

    def _forget_session(self) -> None:
        """The server no longer knows our session: the wire ends (the link opens a new one), with no
        DELETE for it and no more tries of its standalone stream. Not before the other requests already on
        their way have their own answers: each is refused with its own 404 (so it is sent again on the new
        session, `upstreams.link.forgot_session`), where ending now would take them for lost in the middle."""
        self.session_id = None
        self._forgotten = True
        self._end_once_settled()

    def _end_once_settled(self) -> None:
        current = asyncio.current_task()
        if all(task is current or task.done() for task, _ in self._posts.values()):
            self._end()

    def _end(self, failure: BaseException | None = None) -> None:
        """No more messages: `messages` returns once it has handed over the rest. A `failure` goes to the
        watcher (`watch`) if there is one, else `messages` raises it."""
        if not self._ended:
            self._ended = True
            self._failure = failure
            if failure is not None and self._watched:
                self._failed.set()
            else:
                self._wake()

    async def watch(self) -> None:
        """Raise the error that ended the wire, if one does; run it in the task group around the
        connection (`transports._streamable_http`).

        It tears the whole connection down, as the SDK's transport did: the caller of the request that
        could not reach the server is cancelled rather than told `PeerLost`, so the link reports why (an
        upstream that is down says `ConnectError`, and is not taken for one that refused the handshake).
        """
        self._watched = True
        await self._failed.wait()
        assert self._failure is not None
        raise self._failure

    # -- plumbing -----------------------------------------------------------------------------

    async def _send(self, method: str, headers: dict[str, str], body: bytes | None = None) -> Response:
        """One HTTP exchange on the pool, following a redirect only within the endpoint's origin and only
        where it keeps the method (`mcp.shared._httpx_utils.stream_within_origin`'s rule); any other
        redirect is returned as it is."""
        return await self._follow(method, headers, body, await self._client.request(method, self._url, headers, body))

    async def _follow(self, method: str, headers: dict[str, str], body: bytes | None, response: Response) -> Response:
        """`response`, or where its redirects lead (`_send`'s rule)."""
        redirects = 0
        while (target := _redirect_target(method, response)) is not None and redirects < MAX_REDIRECTS:
            redirects += 1
            await self._read_to_end(response)
            response = await self._client.request(method, target, headers, body)
        return response

    async def _read_body(self, response: Response) -> bytes:
        """A response's body read whole, at most `max_event_bytes` (`ProtocolError` past it)."""
        return await response.read(self.max_event_bytes)

    async def _read_to_end(self, response: Response) -> None:
        """Read a response whole and close it: its connection goes back to the pool."""
        try:
            await response.read(self.max_event_bytes)
        finally:
            response.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        """End the wire: DELETE the session (bounded, and even when the caller is cancelled), then stop
        the POST and GET tasks and close the pool."""
        self._end()
        with anyio.move_on_after(CLOSE_WAIT, shield=True):
            if self.session_id is not None:
                await self._terminate()
            for exchange, _ in list(self._posts.values()):
                if not isinstance(exchange, asyncio.Task):  # read in callbacks: no task to cancel
                    exchange.cancel()
            self.drains.stop()
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.wait(self._tasks)
        await self._client.aclose()

    async def _terminate(self) -> None:
        try:
            response = await self._send("DELETE", self._headers(None, body=False))
            await self._read_to_end(response)
        except (HttpError, OSError) as exc:
            logger.warning("ending the session with %s failed: %s", self._url.shown(), _describe(exc))
            return
        if response.status not in (200, 204, 405):
            logger.warning("ending the session with %s failed: HTTP %s", self._url.shown(), response.status)


class _Exchange(Protocol):
    """A request's POST in flight: a task, or its stream read in callbacks (`_PostStream`)."""

    def cancel(self) -> object: ...

    def done(self) -> bool: ...


class _PostHead:
    """A request's POST written at once on an idle kept-alive connection (`HttpWire._start_exchange`), until its head
    came and, for a JSON answer, until that is read: all in the connection's callbacks, with no task. Hears of the
    head as a `HeadListener`, and reads a JSON body as a `BodySink` (at most `max_event_bytes`)."""

    __slots__ = ("wire", "request_id", "sent", "headers", "started", "response", "parts", "size", "finished")

    def __init__(self, wire: HttpWire, request_id: RequestId, body: bytes, headers: dict[str, str]) -> None:
        self.wire = wire
        self.request_id = request_id
        self.sent = body
        """The request's body, kept until the head came: the POST is sent again (in a task) if the kept-alive
        connection was closed as we wrote, and followed with it if it is redirected."""
        self.headers = headers
        self.started: Started | None = None
        self.response: Response | None = None
        """The JSON answer being read."""
        self.parts: list[bytes] = []
        self.size = 0
        self.finished = False

    # -- `HeadListener` ------------------------------------------------------------------------------

    def head(self, response: Response) -> None:
        if self.finished:
            return
        try:
            self.wire.head_came(self, response)
        except Exception as exc:  # a bug of ours must not leave the caller waiting for ever
            wire = self.wire
            logger.exception("reading the answer to %r from %s failed", self.request_id, wire.url.shown())
            self.response = response
            self._settle(f"the gateway failed to read the answer: {_describe(exc)}")

    def failed(self, error: TransportError, retry: bool) -> None:
        if not self.finished:
            self.wire.head_failed(self, error, retry)

    # -- the JSON answer, as a `BodySink` --------------------------------------------------------------

    def read_json(self, response: Response) -> None:
        self.response = response
        self.sent = b""  # nothing sends it again now
        response.stream(self)

    def body(self, chunk: bytes) -> None:
        self.size += len(chunk)
        limit = self.wire.max_event_bytes
        if self.size > limit:
            response = self.response
            assert response is not None
            self._settle(_json_too_large(response.too_large(limit)))
            return
        self.parts.append(chunk)

    def ended(self, error: TransportError | None) -> None:
        if self.finished:
            return
        if error is not None:
            self._settle(_ended_early(error))
            return
        self.finished = True
        wire = self.wire
        body = b"".join(self.parts)
        self.parts = []
        try:
            wire.json_answer(self.request_id, body)
        except Exception as exc:  # a bug of ours must not leave the caller waiting for ever
            logger.exception("reading the answer to %r from %s failed", self.request_id, wire.url.shown())
            wire.lose(self.request_id, f"the gateway failed to read the answer: {_describe(exc)}")
        wire.settled(self.request_id, self)

    def _settle(self, lost: str) -> None:
        """The answer cannot be read: lost, and the response closed (its connection with it)."""
        self.finished = True
        self.parts = []
        if self.response is not None:
            self.response.close()
        self.wire.lose(self.request_id, lost)
        self.wire.settled(self.request_id, self)

    # -- `_Exchange` -------------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Abandon the POST: its connection closes (unless its answer came whole)."""
        if self.finished:
            return
        self.finished = True
        self.parts = []
        if self.response is not None:
            self.response.close()
        elif self.started is not None:
            self.started.cancel()
        self.wire.settled(self.request_id, self)

    def done(self) -> bool:
        return self.finished


class _AnswerPost:
    """An answer of ours POSTed at once on an idle kept-alive connection (`HttpWire._answer_at_once`): its head (a 202)
    and its body (read to its end, at most `max_event_bytes`, so that the connection goes back to the pool) in the
    connection's callbacks, as a `HeadListener` and a `BodySink`, with no task. What went wrong on the way goes back to
    the wire, which sends the answer again (`HttpWire.answer_failed`); a redirect is followed in a task."""

    __slots__ = ("wire", "sent", "headers", "response", "status", "size")

    def __init__(self, wire: HttpWire, body: bytes, headers: dict[str, str]) -> None:
        self.wire = wire
        self.sent = body
        """Kept until the response ended: sent again if the POST fails on the way."""
        self.headers = headers
        self.response: Response | None = None
        self.status = 0
        self.size = 0

    # -- `HeadListener` ------------------------------------------------------------------------------

    def head(self, response: Response) -> None:
        if _redirect_target("POST", response) is not None:
            self.wire.answer_redirected(self.sent, self.headers, response)
            return
        self.response = response
        self.status = response.status
        response.stream(self)

    def failed(self, error: TransportError, retry: bool) -> None:
        self.wire.answer_failed(self.sent, self.headers, error, retry)

    # -- the body, as a `BodySink` ------------------------------------------------------------------

    def body(self, chunk: bytes) -> None:
        self.size += len(chunk)
        limit = self.wire.max_event_bytes
        if self.size > limit:  # read whole as `_read_to_end` reads it: past its limit, a failed POST
            response = self.response
            assert response is not None
            error = response.too_large(limit)
            response.close()  # nothing more is said to this sink
            self.wire.answer_failed(self.sent, self.headers, error, False)

    def ended(self, error: TransportError | None) -> None:
        if error is not None:
            self.wire.answer_failed(self.sent, self.headers, error, False)
            return
        self.wire.unanswered_status(self.status, self.headers)


class _PostStream:
    """A request's event stream once its head came, read in the connection's callbacks (`Response.stream`), as
    `wire.stdio.LineReader` reads a pipe: each event parsed as its bytes come and handed to the wire's inbox,
    with no task (a call whose elicitation waits for a person holds this, its response and its connection).
    After the answer the rest of the stream is read for at most `DRAIN_WAIT`, so that the connection goes back
    to the pool; a stream that ends first is resumed, or its answer lost (`HttpWire.stream_ended`)."""

    __slots__ = ("wire", "request_id", "response", "events", "version", "answered", "finished")

    def __init__(self, wire: HttpWire, request_id: RequestId, response: Response, version: str | None) -> None:
        self.wire = wire
        self.request_id = request_id
        self.response = response
        self.events: SseParser | None = None
        """Made at the first bytes of the body (the server may send the head long before them), let go of between
        events while it holds nothing a later chunk or a resume needs (`SseParser.blank`)."""
        self.version = version
        """The `mcp-protocol-version` the POST carried, for the GET that resumes the stream."""
        self.answered = False
        self.finished = False

    def body(self, chunk: bytes) -> None:
        if self.answered or self.finished:
            return  # what follows the answer: read only so that the connection can be reused
        events = self.events
        if events is None:
            events = self.events = SseParser(self.wire.max_event_bytes)
        wire = self.wire
        try:
            for data in events.feed(chunk):
                if wire.relay(self.request_id, data):
                    self.answered = True
                    wire.drains.came(self)
                    return
            if events.blank:  # between events with no id to resume from: let go of it while the stream is held
                self.events = None
        except SseEventTooLarge as exc:
            wire.lose(self.request_id, f"SSE stream failed: {exc}")
            self.cancel()
        except Exception as exc:  # a bug of ours must not leave the caller waiting for ever
            logger.exception("reading the stream of %r from %s failed", self.request_id, wire.url.shown())
            wire.lose(self.request_id, f"the gateway failed to read the answer: {_describe(exc)}")
            self.cancel()

    def ended(self, error: TransportError | None) -> None:
        if self.finished:
            return
        self.finished = True
        if self.answered:
            self.wire.drains.forget(self)
            self.wire.settled(self.request_id, self)
        else:
            self.wire.stream_ended(self, self.events or SseParser(self.wire.max_event_bytes), self.version, error)

    def cancel(self) -> None:
        """Stop reading: the response closes (its connection with it, unless it had ended)."""
        if self.finished:
            return
        self.finished = True
        if self.answered:
            self.wire.drains.forget(self)
        self.response.close()
        self.wire.settled(self.request_id, self)

    def expire(self) -> None:
        """Its `DRAIN_WAIT` ran out: the stream still had not ended after its answer."""
        self.cancel()

    def done(self) -> bool:
        return self.finished


def _is_event_stream(response: Response) -> bool:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower() == "text/event-stream"


def _redirect_target(method: str, response: Response) -> Url | None:
    """Where to follow `response`, if it is a redirect the MCP transports follow: one that keeps the
    method (any for a GET, 307/308 for the rest), stays within the origin (or upgrades it to https on
    the default ports) and brings no userinfo of its own."""
    if response.status not in REDIRECT_STATUSES or "location" not in response.headers:
        return None
    if method != "GET" and response.status not in METHOD_KEEPING_REDIRECTS:
        return None
    try:
        target = response.url.join(response.headers["location"])
    except ValueError:
        return None
    sent = response.url
    if target.userinfo and target.userinfo != sent.userinfo:
        return None
    same = sent.origin == target.origin
    upgrade = (
        sent.host == target.host and sent.scheme == "http" and target.scheme == "https"
        and not sent.explicit_port and not target.explicit_port
    )
    return target if same or upgrade else None


def _unfollowed(response: Response) -> str:
    location = response.headers.get("location", "")
    try:
        shown = response.url.join(location).shown()
    except ValueError:
        shown = "an invalid location"
    return f"Redirect to {shown} not followed; use that URL as the endpoint if it is the intended server"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _json_too_large(exc: BodyTooLarge) -> str:
    """Why a JSON answer past `max_event_bytes` is lost (read in a task, or in callbacks)."""
    return f"JSON response failed: {exc} (max_event_bytes)"


def _ended_early(exc: TransportError) -> str:
    """Why an answer whose response ended before its end is lost."""
    return f"the response ended early: {_describe(exc)}"
