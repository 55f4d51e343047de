"""`/mcp` of the HTTP face: streamable HTTP sessions of handshake-era clients, served by the gateway's own
JSON-RPC layer (`faces.dispatch`) under the SDK's server runner, as the stdio face is. A request whose
`MCP-Protocol-Version` header names a 2026-07-28-era revision goes to the SDK's stateless handler.

The SDK's session manager moves each message through memory streams and a task of its own, answers
every POST with an SSE response that runs a task group, and models each message with pydantic on the
way in and out: most of what the face cost per request (bench/README.md, "Hop by hop"). Here a POST's
body is parsed once and handed to the session's `Endpoint`, and the answer comes back on that POST as
one JSON body; only when something is sent on the request's behalf before its answer (an elicitation,
progress, a log line) does the POST answer with an SSE stream, which carries those and ends with the
answer. Messages that belong to no request (list changes, questions of a server asking on its session)
go on the session's GET stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import json
import logging
import secrets
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from types import CoroutineType
from typing import Any, cast

import anyio
import anyio.abc
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, RequestId
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.transport_context import TransportContext

from elicitgate import sdk
from elicitgate.faces.dispatch import RequestContext, serve_handshake
from elicitgate.faces.server import GatewayServer
from elicitgate.jsonrpc import Inbound, NotAMessage, is_request_id, parse_message
from elicitgate.json_shapes import is_object

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
STREAMABLE_HTTP = TransportContext(kind="streamable-http", can_send_request=True)

JSON_WINDOW = 0.25
"""Seconds a request's answer may take to go back as one JSON body. A slower request's POST turns into an
SSE stream at once: a wait for a person (an elicitation) then has a response under way, which proxies keep
open (with `SSE_PING_INTERVAL`) and which clients survive losing (the `mcp` SDK's client fails its whole
session when a POST's connection drops before any response header)."""

SSE_PING_INTERVAL = 15.0
"""Seconds between keep-alive comments on an idle SSE stream, so that proxies keep a long wait (a person
answering a form) open."""

_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def encode(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class _Late(enum.Enum):
    LATE = enum.auto()


LATE = _Late.LATE


def _expire(waiter: asyncio.Future[_Late | None]) -> None:
    if not waiter.done():
        waiter.set_result(LATE)


class _Channel:
    """The messages one HTTP response carries, in order: a POST's (what is sent on behalf of its request,
    then the answer, which closes it) or the session's GET stream."""

    __slots__ = ("_items", "_waiter", "closed")

    def __init__(self) -> None:
        self._items: deque[dict[str, Any]] = deque()
        self._waiter: asyncio.Future[_Late | None] | None = None
        self.closed = False

    def put(self, message: dict[str, Any], *, last: bool = False) -> bool:
        """Queue `message` (False if the channel is closed: its response has ended)."""
        if self.closed:
            return False
        self._items.append(message)
        self.closed = last
        self._wake()
        return True

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def get(self, timeout: float | None = None) -> dict[str, Any] | None | _Late:
        """The next message; None once the channel is closed and drained; `LATE` when `timeout` seconds
        pass first."""
        while not self._items:
            if self.closed:
                return None
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if waiter.result() is LATE and not self._items:
                return LATE
        return self._items.popleft()


class SessionWire:
    """One session's `MessageWire`: POSTs hand in the client's messages; what the gateway sends goes to the
    response stream of the request it answers or is sent on behalf of, else to the GET stream."""

    def __init__(self) -> None:
        self._inbox: deque[Inbound] = deque()
        self._reader: asyncio.Future[None] | None = None
        self.closed = False
        self.answers: dict[RequestId, _Channel] = {}
        """The client's requests being served, each with its POST's channel."""
        self.standalone: _Channel | None = None
        self._carriers: dict[RequestId, RequestId] = {}
        """Our requests to the client that were sent on behalf of one of its requests: that request's id."""

    def hand_in(self, inbound: Inbound) -> None:
        message = inbound.message
        if isinstance(message, dict) and "method" not in message:  # the client answers one of ours
            answered = message.get("id")
            if is_request_id(answered):
                self._carriers.pop(answered, None)
        self._inbox.append(inbound)
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    async def messages(self) -> AsyncGenerator[Inbound]:
        while True:
            while self._inbox:
                yield self._inbox.popleft()
            if self.closed:
                return
            self._reader = asyncio.get_running_loop().create_future()
            try:
                await self._reader
            finally:
                self._reader = None

    def carry(self, request_id: RequestId, on_behalf_of: RequestId | None) -> None:
        if on_behalf_of is not None:
            self._carriers[request_id] = on_behalf_of

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        if "method" not in message:  # our answer to one of the client's requests
            answered = message.get("id")
            channel = self.answers.pop(answered, None) if is_request_id(answered) else None
            if channel is None or not channel.put(message, last=True):
                logger.debug("the answer to %r has no response stream any more: dropped", answered)
            return
        request_id = message.get("id")
        carrier: RequestId | None = None
        if is_request_id(request_id):
            carrier = self._carriers.get(request_id)
        elif message["method"] == "notifications/cancelled" and is_object(params := message.get("params")):
            cancelled = params.get("requestId")
            carrier = self._carriers.pop(cancelled, None) if is_request_id(cancelled) else None
        self.send_on_behalf(message, carrier)

    def send_on_behalf(self, message: dict[str, Any], request_id: RequestId | None) -> None:
        """Send `message` on the response stream of the client's request `request_id` while it is open, else
        on the GET stream; with neither open it is dropped (as the SDK's transport does, without resumption)."""
        channel = self.answers.get(request_id) if request_id is not None else None
        if channel is not None and channel.put(message):
            return
        if self.standalone is not None and self.standalone.put(message):
            return
        logger.debug("no stream open for %s: dropped", message.get("method"))

    def close(self) -> None:
        """End the session: every request still waiting for its answer gets `Connection closed`."""
        self.closed = True
        for request_id, channel in self.answers.items():
            channel.put(_error(request_id, CONNECTION_CLOSED, "Connection closed: the session ended"), last=True)
        self.answers.clear()
        if self.standalone is not None:
            self.standalone.close()
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)


class HttpRequestContext(RequestContext):
    """A client message's context on an HTTP session: what is sent on its behalf goes on its POST."""

    __slots__ = ()

    transport: TransportContext = STREAMABLE_HTTP

    @property
    def _wire(self) -> SessionWire:
        return cast(SessionWire, self._dispatcher.wire)

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> CoroutineType[Any, Any, dict[str, Any]]:
        if self.closed:
            raise NoBackChannelError(method)
        options: CallOptions = {**(opts or {})}
        request_id = options.get("request_id")
        if request_id is None:
            request_id = options["request_id"] = self._dispatcher.next_request_id()
        self._wire.carry(request_id, self.request_id)
        return self._dispatcher.send_raw_request(method, params, options)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if not self.closed and not self._wire.closed:
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
            if params:
                message["params"] = params
            self._wire.send_on_behalf(message, self.request_id)


class _Session:
    __slots__ = ("id", "owner", "wire", "in_flight", "idle_since")

    def __init__(self, owner: AuthorizationContext | None) -> None:
        self.id = secrets.token_hex(16)
        self.owner = owner
        self.wire = SessionWire()
        self.in_flight = 0
        """HTTP requests of this session being served (an open GET stream among them)."""
        self.idle_since = anyio.current_time()


class StreamableHttpEndpoint:
    """The ASGI app at `/mcp`. `run()` must be entered (the HTTP face's lifespan) before it serves.

    A session ends when the client deletes it, after `idle_timeout` seconds with no request in flight and
    no GET stream open, or when the face stops; `max_sessions` are open at most (`http.session_idle_timeout`,
    `http.max_sessions`)."""

    def __init__(
        self,
        server: GatewayServer,
        security: TransportSecuritySettings,
        *,
        idle_timeout: float | None,
        max_sessions: int,
        max_body_size: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ) -> None:
        self._server = server
        self._security = security
        self._idle_timeout = idle_timeout
        self._max_sessions = max_sessions
        self._max_body_size = max_body_size
        self._init_options = server.create_initialization_options()
        self._sessions: dict[str, _Session] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._lifespan_state: Any = None
        self._modern = RequestBodyLimitMiddleware(self._serve_modern, max_body_size)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncGenerator[None]:
        async with self._server.lifespan(self._server) as lifespan_state, anyio.create_task_group() as tasks:
            self._lifespan_state = lifespan_state
            self._tasks = tasks
            if self._idle_timeout is not None:
                tasks.start_soon(self._sweep_idle, self._idle_timeout)
            try:
                yield
            finally:
                self._tasks = None
                for session in list(self._sessions.values()):
                    self._end(session)
                tasks.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._modern(scope, receive, send)
            return
        if self._tasks is None:
            await _reply(send, 503, _error(None, INTERNAL_ERROR, "The gateway is not serving (starting or stopping)"))
            return
        method = scope["method"]
        if method == "POST":
            await self._post(scope, receive, send, headers)
        elif method == "GET":
            await self._get(scope, receive, send, headers)
        elif method == "DELETE":
            await self._delete(scope, send, headers)
        else:
            await _reply(send, 405, _error(None, INVALID_REQUEST, "Method Not Allowed", method=method),
                         extra=[(b"allow", b"GET, POST, DELETE")])

    async def _serve_modern(self, scope: Scope, receive: Receive, send: Send) -> None:
        await sdk.serve_modern_http(self._server, self._security, self._lifespan_state, scope, receive, send)

    # -- POST: the client's messages -----------------------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        has_json, has_sse = check_accept_headers(Request(scope))
        if not (has_json and has_sse):
            await _reply(send, 406, _error(None, INVALID_REQUEST, "Not Acceptable: Client must accept both "
                                           "application/json and text/event-stream", accept=headers.get("accept")))
            return
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            await _reply(send, 415, _error(None, INVALID_REQUEST, "Unsupported Media Type: Content-Type must be "
                                           "application/json", contentType=headers.get("content-type")))
            return
        session_id = headers.get(SESSION_HEADER)
        session = None
        if session_id is not None:
            session = self._session(scope, session_id)
            if session is None:
                await _reply(send, 404, _error(None, INVALID_REQUEST, "Session not found", sessionId=session_id[:64]))
                return
        body = await _read_body(receive, self._max_body_size)
        if body is None:
            await _reply(send, 413, _error(None, INVALID_REQUEST, "Request body too large",
                                           limit=self._max_body_size), session=session)
            return
        message = parse_message(body)
        if isinstance(message, Exception):
            if isinstance(message, NotAMessage):
                error = _error(None, INVALID_REQUEST, f"Invalid request: {message}")
            else:
                error = _error(None, PARSE_ERROR, f"Parse error: {message}")
            await _reply(send, 400, error, session=session)
            return
        method, request_id = message.get("method"), message.get("id")
        is_request = isinstance(method, str) and is_request_id(request_id)
        if session is None:
            if not (is_request and method == "initialize"):
                await _reply(send, 400, _error(None, INVALID_REQUEST, "Bad Request: Missing session ID",
                                               header=SESSION_HEADER))
                return
            session = self._open(scope)
            if session is None:
                await _reply(send, 503, _error(None, INTERNAL_ERROR, "Too many open sessions",
                                               limit=self._max_sessions))
                return
        if not is_request:
            await _reply(send, 202, None, session=session)
            session.wire.hand_in(Inbound(message))
            return
        await self._answer(session, cast(RequestId, request_id), message, receive, send)

    async def _answer(
        self, session: _Session, request_id: RequestId, message: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        """Serve one request of the client's and write its answer (and what comes before it) on this POST."""
        wire = session.wire
        if request_id in wire.answers:
            await _reply(send, 409, _error(request_id, INVALID_REQUEST, "A request with this id is already in "
                                           "flight on this session", id=request_id), session=session)
            return
        channel = wire.answers[request_id] = _Channel()
        session.in_flight += 1
        try:
            wire.hand_in(Inbound(message, context=contextvars.copy_context()))
            first = await channel.get(JSON_WINDOW)
            if first is None:  # not reached: only an SSE stream's disconnect closes a channel unanswered
                await _reply(send, 500, _error(request_id, INTERNAL_ERROR, "The request ended unanswered"))
                return
            if first is LATE:
                await _stream(channel, send, receive, session, None)
                return
            if channel.closed and "method" not in first:
                await _reply(send, 200, first, session=session)
                if message.get("method") == "initialize" and "error" in first:
                    self._end(session)  # nothing was established
                return
            await _stream(channel, send, receive, session, first)
        finally:
            if wire.answers.get(request_id) is channel:
                del wire.answers[request_id]
            self._release(session)

    # -- GET: the session's own stream; DELETE: its end ---------------------------------------------

    async def _get(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        if not check_accept_headers(Request(scope))[1]:
            await _reply(send, 406, _error(None, INVALID_REQUEST, "Not Acceptable: Client must accept "
                                           "text/event-stream", accept=headers.get("accept")))
            return
        session = await self._known_session(scope, send, headers)
        if session is None:
            return
        wire = session.wire
        if wire.standalone is not None and not wire.standalone.closed:
            await _reply(send, 409, _error(None, INVALID_REQUEST, "Conflict: Only one SSE stream is allowed per "
                                           "session"), session=session)
            return
        channel = wire.standalone = _Channel()
        session.in_flight += 1
        try:
            await _stream(channel, send, receive, session, None)
        finally:
            if wire.standalone is channel:
                wire.standalone = None
            self._release(session)

    async def _delete(self, scope: Scope, send: Send, headers: Headers) -> None:
        session = await self._known_session(scope, send, headers)
        if session is not None:
            self._end(session)
            await _reply(send, 200, None)

    async def _known_session(self, scope: Scope, send: Send, headers: Headers) -> _Session | None:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await _reply(send, 400, _error(None, INVALID_REQUEST, "Bad Request: Missing session ID",
                                           header=SESSION_HEADER))
            return None
        session = self._session(scope, session_id)
        if session is None:
            await _reply(send, 404, _error(None, INVALID_REQUEST, "Session not found", sessionId=session_id[:64]))
        return session

    # -- sessions ------------------------------------------------------------------------------------

    def _session(self, scope: Scope, session_id: str) -> _Session | None:
        """The session, if it exists and was opened with the credential this request presents (a session
        used with another answers as if it did not exist)."""
        session = self._sessions.get(session_id)
        if session is None or session.owner != _requestor(scope):
            return None
        return session

    def _open(self, scope: Scope) -> _Session | None:
        if len(self._sessions) >= self._max_sessions or self._tasks is None:
            return None
        session = _Session(_requestor(scope))
        self._sessions[session.id] = session
        self._tasks.start_soon(self._serve, session)
        logger.debug("opened session %s", session.id)
        return session

    async def _serve(self, session: _Session) -> None:
        try:
            await serve_handshake(self._server, session.wire, self._lifespan_state, self._init_options,
                                  self._server.routes, HttpRequestContext)
        except Exception:
            logger.exception("session %s failed", session.id)
        finally:
            self._end(session)

    def _end(self, session: _Session) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            logger.debug("ended session %s", session.id)
        if not session.wire.closed:
            session.wire.close()

    def _release(self, session: _Session) -> None:
        session.in_flight -= 1
        if not session.in_flight:
            session.idle_since = anyio.current_time()

    async def _sweep_idle(self, timeout: float) -> None:
        while True:
            await anyio.sleep(min(timeout / 4, 60.0))
            now = anyio.current_time()
            for session in list(self._sessions.values()):
                if not session.in_flight and now - session.idle_since >= timeout:
                    logger.info("session %s idle for %.0fs: ended", session.id, now - session.idle_since)
                    self._end(session)


def _requestor(scope: Scope) -> AuthorizationContext | None:
    user = scope.get("user")
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None


def _error(request_id: RequestId | None, code: int, message: str, **data: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = {"source": "elicitgate", **data}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def _reply(
    send: Send,
    status: int,
    message: Mapping[str, Any] | None,
    *,
    session: _Session | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A whole response: one JSON-RPC message (or none) as JSON."""
    body = encode(message) if message is not None else b""
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    if session is not None:
        headers.append((SESSION_HEADER.encode(), session.id.encode()))
    if extra:
        headers.extend(extra)
    with contextlib.suppress(OSError):  # the client has gone
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None once it is longer than `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] != "http.request":
            break
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not event.get("more_body", False):
            break
    return b"".join(chunks)


async def _stream(
    channel: _Channel, send: Send, receive: Receive, session: _Session, first: dict[str, Any] | None
) -> None:
    """Write `channel` as an SSE response until it closes (or the client goes away, which closes it)."""
    headers = [*_SSE_HEADERS, (SESSION_HEADER.encode(), session.id.encode())]

    async def watch_disconnect() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        channel.close()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch_disconnect)
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            message = first
            while True:
                if message is not None:
                    await send({"type": "http.response.body", "body": b"event: message\r\ndata: " + encode(message)
                                + b"\r\n\r\n", "more_body": True})
                message = None
                next_message = await channel.get(SSE_PING_INTERVAL)
                if next_message is None:
                    break
                if next_message is LATE:
                    await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                else:
                    message = next_message
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            tasks.cancel_scope.cancel()
    except OSError:  # the client has gone
        channel.close()
