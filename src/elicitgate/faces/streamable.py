"""`/mcp` of the HTTP face: streamable HTTP sessions of handshake-era clients, served by the gateway's own
JSON-RPC layer (`faces.dispatch`) under the SDK's server runner, as the stdio face is. A request whose
`MCP-Protocol-Version` header names a 2026-07-28-era revision is one of its own (`faces.stateless`).

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

import contextlib
import contextvars
import functools
import json
import logging
import secrets
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, RequestId
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

from elicitgate.errors import NonFiniteParams, NotAMessage
from elicitgate.faces.dispatch import serve_handshake
from elicitgate.faces.elsewhere import FORWARD_OP, READER_OP, ElsewhereSessions, serve_forwarded
from elicitgate.faces.event_streams import (
    PRIMING_SINCE_SENT,
    EventLimits,
    EventStream,
    ParkedEnd,
    protocol_at_least_2025_11_25,
)
from elicitgate.faces.http_answers import (
    JSON_WINDOW,
    LATE,
    Late,
    error_message,
    lean_cycle,
    read_body,
    reply,
    reply_app,
    reply_in_step,
)
from elicitgate.faces.http_session import HttpRequestContext, SessionWire
from elicitgate.faces.server import GatewayServer
from elicitgate.faces.stateless import StatelessRequests
from elicitgate.json_shapes import JsonObject
from elicitgate.metrics import STREAM_RESUMPTIONS, labelled
from elicitgate.web.http_protocol import LeanCycle, Raising, Starts
from elicitgate.web.request_headers import RequestHeaders
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import is_request_id
from elicitgate.wire.framing import parse_message

if TYPE_CHECKING:
    from elicitgate.cluster.streams import SharedStreams  # redis-py only with replicas (test_startup)

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
_VERSION_SENT = MCP_PROTOCOL_VERSION_HEADER.lower().encode("latin-1")
LAST_EVENT_ID = "last-event-id"

Principal = tuple[str, str | None, str | None]
"""Who opened a session under `http.auth`: the token's client, issuer and subject (`AuthorizationContext`)."""


class _Session:
    __slots__ = ("id", "header", "owner", "principal", "wire", "in_flight", "idle_since", "broke", "shared")

    def __init__(self, owner: AuthorizationContext | None, limits: EventLimits) -> None:
        self.id = secrets.token_hex(16)
        self.header = [(SESSION_HEADER.encode(), self.id.encode())]
        """What every response of the session carries."""
        self.owner = owner
        self.principal: Principal | None = (
            (owner["client_id"], owner["issuer"], owner["subject"]) if owner is not None else None
        )
        self.wire = SessionWire(limits)
        self.in_flight = 0
        """HTTP requests of this session being served (an open GET stream among them)."""
        self.idle_since = anyio.current_time()
        self.shared = False
        """A broken stream of it was copied to Redis (`cluster.streams`)."""
        self.broke = False
        """A stream of it broke before its end and the client has sent nothing since: it may be gone for good,
        and the session ends after the grace period instead of the idle timeout."""


class StreamableHttpEndpoint:
    """The ASGI app at `/mcp`. `run()` must be entered (the HTTP face's lifespan) before it serves.

    A session ends when the client deletes it, after `idle_timeout` seconds with no request in flight and
    no GET stream open (`grace` seconds once a stream of it broke and the client sent nothing since, unless
    `end_broken` is off: `elicitation.abandoned: keep`), or when the face stops; `max_sessions` are open at
    most (`http.session_idle_timeout`, `http.max_sessions`), and under `http.auth` `per_principal` of them by
    one principal (`http.max_sessions_per_principal`)."""

    def __init__(
        self,
        server: GatewayServer,
        security: TransportSecuritySettings,
        *,
        idle_timeout: float | None,
        max_sessions: int,
        per_principal: int | None = None,
        json_wait: float = JSON_WINDOW,
        max_body_size: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
        grace: float = 20.0,
        end_broken: bool = True,
        events_per_session: int = 1000,
        events_total: int = 100_000,
        shared: SharedStreams | None = None,
    ) -> None:
        self._server = server
        self._grace = grace
        self._end_broken = end_broken
        self._shared = shared
        self._elsewhere = ElsewhereSessions(shared) if shared is not None else None
        self._limits = EventLimits(events_per_session, events_total, f"{shared.replicas.id}-" if shared else "")
        self.app: ASGIApp | None = None
        """The HTTP face's whole app, which runs the requests of sessions held here that another replica received
        (set by `faces.http`)."""
        if shared is not None:
            shared.replicas.handlers[READER_OP] = self._reader_elsewhere
            shared.replicas.handlers[FORWARD_OP] = self._serve_forwarded
        self._security = security
        self._idle_timeout = idle_timeout
        self._max_sessions = max_sessions
        self._per_principal = per_principal
        self._held: dict[Principal, int] = {}
        """Open sessions per principal (sessions without one are not counted here)."""
        self._max_body_size = max_body_size
        self._init_options = server.create_initialization_options()
        self._sessions: dict[str, _Session] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._lifespan_state: Any = None
        self._stateless = StatelessRequests(server, security, json_wait=json_wait)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncGenerator[None]:
        async with self._server.lifespan(self._server) as lifespan_state, anyio.create_task_group() as tasks:
            self._lifespan_state = self._stateless.lifespan_state = lifespan_state
            self._tasks = tasks
            tasks.start_soon(self._sweep_idle, self._idle_timeout)
            try:
                yield
            finally:
                self._tasks = None
                for session in list(self._sessions.values()):
                    self._end(session)
                tasks.cancel_scope.cancel()

    def stop(self) -> None:
        """End every session and open stream now (uvicorn calls it as it starts to shut down, before it waits
        for open connections, which a client's GET stream would otherwise hold for ever); what still waits
        for an answer is told `Connection closed`. Requests that arrive later get 503."""
        self._tasks = None
        for session in list(self._sessions.values()):
            self._end(session)
        self._stateless.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = RequestHeaders.of(scope)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if self._tasks is None:
            await reply(
                send, 503, error_message(None, INTERNAL_ERROR, "The gateway is not serving (starting or stopping)")
            )
            return
        method = scope["method"]
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            if method != "POST":  # this era has no session: nothing to GET or DELETE
                await reply(send, 405, error_message(None, INVALID_REQUEST, "Method Not Allowed", method=method),
                            extra=[(b"allow", b"POST")])
                return
            body = await self._read_post(scope, receive, send, headers, None)
            if body is not None:
                await self._stateless(scope, receive, send, headers, body)
        elif self._elsewhere is not None and await self._held_elsewhere(scope, receive, send, headers):
            return
        elif method == "POST":
            await self._post(scope, receive, send, headers)
        elif method == "GET":
            await self._get(scope, receive, send, headers)
        elif method == "DELETE":
            await self._delete(scope, send, headers)
        else:
            await reply(send, 405, error_message(None, INVALID_REQUEST, "Method Not Allowed", method=method),
                        extra=[(b"allow", b"GET, POST, DELETE")])

    async def _read_post(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, session: _Session | None
    ) -> bytes | None:
        """A POST's body, once its headers say it can be served; else None, with the refusal sent."""
        has_json, has_sse = _accepts(headers.get("accept", ""))
        if not (has_json and has_sse):
            refusal = "Not Acceptable: Client must accept both application/json and text/event-stream"
            await reply(send, 406, error_message(None, INVALID_REQUEST, refusal, accept=headers.get("accept")))
            return None
        if not _is_json(headers.get("content-type")):
            await reply(send, 415, error_message(None, INVALID_REQUEST, "Unsupported Media Type: Content-Type must "
                                                 "be application/json", contentType=headers.get("content-type")))
            return None
        body = await read_body(receive, self._max_body_size)
        if body is None:
            await reply(send, 413, error_message(None, INVALID_REQUEST, "Request body too large",
                                                 limit=self._max_body_size), extra=_header_of(session))
        return body

    # -- POST: the client's messages -----------------------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        session_id = headers.get(SESSION_HEADER)
        session = None
        if session_id is not None:
            session = self._session(scope, session_id)
            if session is None:
                await reply(send, 404, error_message(None, INVALID_REQUEST, "Session not found",
                                                     sessionId=session_id[:64]))
                return
        body = await self._read_post(scope, receive, send, headers, session)
        if body is None:
            return
        message = _parsed(body)
        if isinstance(message, _Refusal):
            await reply(send, 400, message.error, extra=_header_of(session))
            return
        method, request_id = message.get("method"), message.get("id")
        is_request = isinstance(method, str) and is_request_id(request_id)
        if session is None:
            if not (is_request and method == "initialize"):
                await reply(send, 400, error_message(None, INVALID_REQUEST, "Bad Request: Missing session ID",
                                               header=SESSION_HEADER))
                return
            session = self._open(scope)
            if isinstance(session, int):
                await reply(send, 429, error_message(
                    None, INVALID_REQUEST, "Too many open sessions for this principal",
                    limit="http.max_sessions_per_principal", value=session,
                    fix="end sessions this principal no longer uses (DELETE /mcp), let them reach "
                    "http.session_idle_timeout, or raise http.max_sessions_per_principal"))
                return
            if session is None:
                await reply(send, 503, error_message(None, INTERNAL_ERROR, "Too many open sessions",
                                               limit=self._max_sessions))
                return
        if not is_request:
            session.wire.hand_in(Inbound(message))
            # The 202 after what the message sets off has gone on its way (two event-loop turns, a margin: the message
            # reaches the endpoint in `hand_in` itself (`SessionWire.push`), and the task awaiting the answer writes
            # what it sends upstream in its next step, e.g. a 2026-07-28 upstream's retry with the answer on an HTTP
            # wire's kept-alive connection): written first, it woke the client, which took the CPU from the gateway
            # before the retry left.
            for _ in range(2):
                await anyio.lowlevel.checkpoint()
            await reply(send, 202, None, extra=session.header)
            return
        await self._answer(session, cast(RequestId, request_id), message, receive, send, headers)

    def at_body(self, scope: Scope, cycle: LeanCycle, connection: Starts) -> ASGIApp | None:
        """A POST whose whole body is in, in the connection's step (`DirectRoute.at_body`): on a session, what
        `_post` does, with no task while nothing must wait. The client's answer or notification is handed in and
        answered 202 from callbacks; a request is handed in and waits for its answer with no task
        (`_answer_in_steps`); a 2026-07-28 POST is `StatelessRequests.at_body`'s; anything else (no session yet, a
        refusal, `redis_url`) is the endpoint's, in the request's task, as it comes (None: nothing to start now)."""
        if self._tasks is None or self._elsewhere is not None:
            return self
        headers = RequestHeaders.of(scope)
        named = headers.named
        version = named.get(b"mcp-protocol-version")
        session_id = named.get(b"mcp-session-id")
        stateless = version is not None and version not in _HANDSHAKE_VERSIONS
        if (session_id is None and not stateless) or len(cycle.body) > self._max_body_size:
            return self
        has_json, has_sse = _accepts_raw(named.get(b"accept", b""))
        if not (has_json and has_sse) or not _is_json_raw(named.get(b"content-type")):
            return self
        if session_id is None or stateless:  # a 2026-07-28 POST: `faces.stateless`, from here too
            return self._stateless.at_body(cycle, headers, self)
        session = self._session(scope, session_id.decode("latin-1"))
        if session is None or (body := cycle.whole_body()) is None:
            return self
        message = _parsed(body)
        if isinstance(message, _Refusal):
            return functools.partial(reply_app, 400, message.error, session.header)
        method, request_id = message.get("method"), message.get("id")
        if not (type(method) is str or isinstance(method, str)) or not (
                type(request_id) is int or type(request_id) is str or is_request_id(request_id)):
            session.wire.hand_in(Inbound(message))
            loop = cycle.transport.loop  # the 202 two turns later, as `_post` writes it
            loop.call_soon(loop.call_soon, _accepted, cycle, connection, session.header)
            return None
        return self._answer_in_steps(session, request_id, message, headers, cycle, connection)

    def _answer_in_steps(self, session: _Session, request_id: RequestId, message: JsonObject, headers: Headers,
                         cycle: LeanCycle, connection: Starts) -> ASGIApp | None:
        """`_answer` with no task while the answer may still go as one JSON body: the request is handed in now, the
        answer written by `put` as it comes (`EventStream.window`); a task starts only for what else the window ends
        with (an event before the answer: an SSE stream; the window passing; an answer that must wait to be
        written)."""
        wire = session.wire
        if request_id in wire.answers:
            return functools.partial(reply_app, 409, _in_flight(request_id), session.header)
        channel = self._opened(session, request_id, message)
        try:
            channel.window(JSON_WINDOW, cycle, session.header, functools.partial(
                self._window_ended, session, request_id, message, channel, headers, cycle, connection))
        except BaseException:
            self._served(session, request_id, channel, True)
            raise
        return None

    def _window_ended(self, session: _Session, request_id: RequestId, message: JsonObject, channel: EventStream,
                      headers: Headers, cycle: LeanCycle, connection: Starts) -> None:
        try:
            first = channel.first_now()
            if first is not LATE and first is not None and channel.complete(first[0]) and channel.written >= first[0]:
                session.wire.events.forget(channel)  # answered as one JSON body, by `put`
                self._served(session, request_id, channel, True)
                if message.get("method") == "initialize" and "error" in first[1]:
                    self._end(session)  # as `_respond` ends it
                return
            begun = None
            if first is not None and first is not LATE and "method" in first[1]:  # an SSE stream: begun here
                begun = channel.begin(cycle, after=0, priming=self._primes(headers), headers=session.header)
                if begun is not None and channel.park(cycle, begun, functools.partial(
                        self._unparked, session, request_id, message, channel, headers, cycle, connection)):
                    cycle.write_held()  # the stream's head and first events: out before the step goes on
                    return  # what comes next is written by `put`, with no task while it can be
            app: ASGIApp = functools.partial(self._respond_app, session, request_id, message, channel, first, headers,
                                             begun, False)
        except Exception as exc:  # answered as uvicorn answers an app's failure
            channel.unread()
            app = Raising(exc)
        connection.start(cycle, app)

    def _unparked(self, session: _Session, request_id: RequestId, message: JsonObject, channel: EventStream,
                  headers: Headers, cycle: LeanCycle, connection: Starts, how: ParkedEnd, at: int) -> None:
        """The request's SSE stream, parked with no task (`EventStream.park`), ended: served, its client gone, taken
        over by a resuming client's response, or going on in a task from seq `at`."""
        if how == "done" or how == "gone":
            self._served(session, request_id, channel, how == "done")
        elif how == "taken":
            connection.start(cycle, functools.partial(self._taken_over, session, request_id, channel))
        else:
            connection.start(cycle, functools.partial(self._respond_app, session, request_id, message, channel, None,
                                                      headers, at, how == "ping"))

    async def _taken_over(self, session: _Session, request_id: RequestId, channel: EventStream, scope: Scope,
                          receive: Receive, send: Send) -> None:
        """What a stream's `write` taken over by a newer response does: the request let go, not done, and the
        response left unended, which uvicorn's `run_asgi` logs and closes."""
        self._served(session, request_id, channel, False)

    async def _respond_app(self, session: _Session, request_id: RequestId, message: JsonObject, channel: EventStream,
                           first: tuple[int, JsonObject] | None | Late, headers: Headers, begun: int | None,
                           ping: bool, scope: Scope, receive: Receive, send: Send) -> None:
        done = True
        try:
            if begun is not None:  # an SSE stream, its start written as the window ended
                done = await channel.write(send, receive, after=begun, priming=False, headers=session.header,
                                           begun=True, ping=ping)
            else:
                done = await self._respond(session, request_id, message, channel, first, receive, send, headers)
        finally:
            self._served(session, request_id, channel, done)

    async def _answer(
        self,
        session: _Session,
        request_id: RequestId,
        message: JsonObject,
        receive: Receive,
        send: Send,
        headers: Headers,
    ) -> None:
        """Serve one request of the client's and write its answer (and what comes before it) on this POST."""
        wire = session.wire
        if request_id in wire.answers:
            await reply(send, 409, _in_flight(request_id), extra=session.header)
            return
        channel = self._opened(session, request_id, message)
        done = True
        try:
            first = await channel.first(JSON_WINDOW, lean_cycle(send), session.header)
            done = await self._respond(session, request_id, message, channel, first, receive, send, headers)
        finally:
            self._served(session, request_id, channel, done)

    def _opened(self, session: _Session, request_id: RequestId, message: JsonObject) -> EventStream:
        """The request's response stream, opened, and the request handed in."""
        wire = session.wire
        channel = wire.answers[request_id] = wire.events.open()
        session.in_flight += 1
        try:
            wire.hand_in(Inbound(message, context=contextvars.copy_context()))
        except BaseException:
            self._served(session, request_id, channel, True)
            raise
        return channel

    async def _respond(self, session: _Session, request_id: RequestId, message: JsonObject, channel: EventStream,
                       first: tuple[int, JsonObject] | None | Late, receive: Receive, send: Send,
                       headers: Headers) -> bool:
        """The answer to the request, from its stream's `first` event: one JSON body when that is the answer, else
        the stream as SSE. False when the client went away before the stream's end."""
        if first is None:  # not reached: a stream is closed unanswered only as its session ends
            await reply(send, 500, error_message(request_id, INTERNAL_ERROR, "The request ended unanswered"))
            return True
        if first is not LATE and channel.complete(first[0]) and "method" not in first[1]:
            session.wire.events.forget(channel)
            if channel.written < first[0]:  # else written by `put`, as it came
                await reply(send, 200, first[1], extra=session.header)
            if message.get("method") == "initialize" and "error" in first[1]:
                self._end(session)  # nothing was established
            return True
        return await channel.write(send, receive, after=0, priming=self._primes(headers), headers=session.header)

    def _served(self, session: _Session, request_id: RequestId, channel: EventStream, done: bool) -> None:
        if channel.unseen:
            channel.unread()
        wire = session.wire
        if done and wire.answers.get(request_id) is channel:
            del wire.answers[request_id]
        self._release(session, broke=not done, stream=channel)

    # -- GET: the session's own stream; DELETE: its end ---------------------------------------------

    async def _get(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        if not _accepts(headers.get("accept", ""))[1]:
            await reply(send, 406, error_message(None, INVALID_REQUEST, "Not Acceptable: Client must accept "
                                           "text/event-stream", accept=headers.get("accept")))
            return
        session = await self._known_session(scope, send, headers)
        if session is None:
            return
        wire = session.wire
        last_event_id = headers.get(LAST_EVENT_ID)
        if last_event_id is not None:
            await self._resume(session, last_event_id, receive, send)
            return
        if wire.standalone is not None and wire.standalone.attached:
            await reply(send, 409, error_message(None, INVALID_REQUEST, "Conflict: Only one SSE stream is allowed per "
                                           "session"), extra=session.header)
            return
        channel = wire.standalone = wire.events.open()
        session.in_flight += 1
        done = False
        try:
            done = await channel.write(send, receive, after=0, priming=self._primes(headers), headers=session.header)
        finally:
            self._release(session, broke=not done, stream=channel)

    async def _resume(self, session: _Session, last_event_id: str, receive: Receive, send: Send) -> None:
        """A client whose stream broke comes back: what followed `last_event_id` on that stream, then the rest."""
        found = session.wire.events.find(last_event_id)
        if isinstance(found, ValueError) or found is None:
            malformed = isinstance(found, ValueError)
            labelled(STREAM_RESUMPTIONS, "malformed" if malformed else "unknown").inc()
            await reply(send, 400 if malformed else 404, error_message(
                None, INVALID_REQUEST,
                "Bad Request: malformed Last-Event-ID" if malformed else "Last-Event-ID not found in this session",
                header=LAST_EVENT_ID, value=last_event_id[:64],
                fix=str(found) if malformed else "resume with the id of an event this session sent on a stream not "
                "yet ended (events of ended streams, other sessions or past http.resume_events_per_session are gone), "
                "or send the request again",
            ), extra=session.header)
            return
        stream, seq = found
        labelled(STREAM_RESUMPTIONS, "resumed").inc()
        logger.debug("session %s resumes stream %s after event %d", session.id, stream.name, seq)
        session.in_flight += 1
        done = False
        try:
            done = await stream.write(send, receive, after=seq, priming=False, headers=session.header)
        finally:
            if done:
                for request_id, answered in list(session.wire.answers.items()):
                    if answered is stream:
                        del session.wire.answers[request_id]
            self._release(session, broke=not done, stream=stream)

    @staticmethod
    def _primes(headers: Headers) -> bool:
        if type(headers) is RequestHeaders:  # the header as sent: no look-up by a name lowered and encoded, no decode
            sent = headers.named.get(_VERSION_SENT)
            return sent is not None and sent >= PRIMING_SINCE_SENT
        return protocol_at_least_2025_11_25(headers, MCP_PROTOCOL_VERSION_HEADER)

    async def _delete(self, scope: Scope, send: Send, headers: Headers) -> None:
        session = await self._known_session(scope, send, headers)
        if session is not None:
            self._end(session)
            await reply(send, 200, None)

    async def _known_session(self, scope: Scope, send: Send, headers: Headers) -> _Session | None:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await reply(send, 400, error_message(None, INVALID_REQUEST, "Bad Request: Missing session ID",
                                           header=SESSION_HEADER))
            return None
        session = self._session(scope, session_id)
        if session is None:
            await reply(send, 404, error_message(None, INVALID_REQUEST, "Session not found", sessionId=session_id[:64]))
        return session

    # -- sessions ------------------------------------------------------------------------------------

    def _session(self, scope: Scope, session_id: str) -> _Session | None:
        """The session, if it exists and was opened with the credential this request presents (a session
        used with another answers as if it did not exist)."""
        session = self._sessions.get(session_id)
        if session is None or session.owner != _requestor(scope):
            return None
        return session

    def _open(self, scope: Scope) -> _Session | int | None:
        """A new session; the principal's share (an int) when it holds that many already; None when the face is
        full or stopping."""
        if self._tasks is None:
            return None
        session = _Session(_requestor(scope), self._limits)
        principal = session.principal
        if principal is not None and self._per_principal is not None:
            if self._held.get(principal, 0) >= self._per_principal:
                return self._per_principal
        if len(self._sessions) >= self._max_sessions and not self._make_room(principal):
            return None
        self._sessions[session.id] = session
        if principal is not None:
            self._held[principal] = self._held.get(principal, 0) + 1
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

    def _make_room(self, newcomer: Principal | None) -> bool:
        """At `max_sessions`: end the longest idle session of the principal holding the most, when it holds more
        than `newcomer` does, so that sessions a flood left idle do not lock others out until they time out."""
        if newcomer is None or not self._held:
            return False
        biggest = max(self._held, key=self._held.__getitem__)
        if self._held[biggest] <= self._held.get(newcomer, 0) + 1:  # never two principals taking turns
            return False
        idle = [s for s in self._sessions.values() if s.principal == biggest and not s.in_flight]
        if not idle:
            return False
        victim = min(idle, key=lambda s: s.idle_since)
        logger.info("session %s ended to make room (max_sessions reached; its principal holds %d)",
                    victim.id, self._held[biggest])
        self._end(victim)
        return True

    def _end(self, session: _Session) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            logger.debug("ended session %s", session.id)
            principal = session.principal
            if principal is not None:
                if (left := self._held[principal] - 1) > 0:
                    self._held[principal] = left
                else:
                    del self._held[principal]
        if not session.wire.closed:
            session.wire.close()
        if session.shared and self._shared is not None:
            session.shared = False
            self._shared.session_ended(session.id)

    def _release(self, session: _Session, *, broke: bool = False, stream: EventStream | None = None) -> None:
        session.in_flight -= 1
        session.broke = broke
        if not session.in_flight:
            session.idle_since = anyio.current_time()
        if broke and stream is not None and self._shared is not None and stream.mirror is None:
            if stream.name in session.wire.events.streams:  # not ended meanwhile
                session.shared = True
                stream.mirror = self._shared
                last = stream.next_seq - 1 if stream.closed else None
                self._shared.share(stream, list(stream.events), last, session=session.id,
                                   principal=_principal_key(session.principal))

    # -- sessions another replica holds (`redis_url`) ------------------------------------------------

    async def _held_elsewhere(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> bool:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None or session_id in self._sessions or self._elsewhere is None:
            return False
        owner = _requestor(scope)
        principal = _principal_key((owner["client_id"], owner["issuer"], owner["subject"]) if owner else None)
        return await self._elsewhere.serve(scope, receive, send, headers, session_id, principal)

    async def _serve_forwarded(self, args: JsonObject) -> JsonObject:
        assert self.app is not None, "faces.http sets the app before serving"
        return await serve_forwarded(self.app, args)

    async def _reader_elsewhere(self, args: JsonObject) -> bool:
        """Another replica's response starts (`attached`) or stops reading a stream of a session held here."""
        session = self._sessions.get(str(args.get("session")))
        stream = session.wire.events.streams.get(str(args.get("stream"))) if session is not None else None
        if session is None or stream is None:
            return False
        if args.get("attached"):
            stream.reader_elsewhere(True)
            session.in_flight += 1
            return True
        stream.reader_elsewhere(False)
        complete = bool(args.get("complete"))
        if complete:
            session.wire.events.forget(stream)
        self._release(session, broke=not complete)
        return True

    async def _sweep_idle(self, timeout: float | None) -> None:
        """End sessions idle for `timeout`, and sooner, after the grace period, those whose last stream broke
        (a client killed, or gone off the network, without DELETE): what they held upstream is freed."""
        every = min(self._grace / 4, timeout / 4 if timeout is not None else 60.0, 60.0)
        while True:
            await anyio.sleep(every)
            now = anyio.current_time()
            for session in list(self._sessions.values()):
                if session.in_flight:
                    continue
                idle = now - session.idle_since
                if session.broke and self._end_broken and idle >= self._grace:
                    logger.info("session %s: its stream broke %.0fs ago and it did not come back: ended",
                                session.id, idle)
                    self._end(session)
                elif timeout is not None and idle >= timeout:
                    logger.info("session %s idle for %.0fs: ended", session.id, idle)
                    self._end(session)


class _Refusal:
    """A POST's body that is not a message to serve: the 400's JSON-RPC error."""

    __slots__ = ("error",)

    def __init__(self, error: JsonObject) -> None:
        self.error = error


def _parsed(body: bytes) -> JsonObject | _Refusal:
    """A POST's message, or the error that says why its body is not one."""
    message = parse_message(body)
    if type(message) is dict or not isinstance(message, Exception):  # a message: a plain dict, with no call
        return message
    if isinstance(message, NonFiniteParams):
        named = message.request_id if is_request_id(message.request_id) else None
        return _Refusal(error_message(named, INVALID_PARAMS, str(message)))
    if isinstance(message, NotAMessage):
        return _Refusal(error_message(None, INVALID_REQUEST, f"Invalid request: {message}"))
    return _Refusal(error_message(None, PARSE_ERROR, f"Parse error: {message}"))


def _accepted(cycle: LeanCycle, connection: Starts, extra: list[tuple[bytes, bytes]]) -> None:
    """The 202 to a POST that carried the client's answer or notification, written from a callback; from a task when
    writing must wait (or fails: answered there as uvicorn answers an app's failure)."""
    try:
        app = reply_in_step(cycle, 202, None, extra)
    except Exception as exc:
        app = Raising(exc)
    if app is not None:
        connection.start(cycle, app)


@functools.lru_cache(maxsize=64)
def _is_json(content_type: str | None) -> bool:
    """Whether a POST's `Content-Type` is JSON (its media type, parameters aside), as the transport requires. Kept
    for the few values a gateway's clients send."""
    return content_type is not None and content_type.split(";")[0].strip().lower() == "application/json"


@functools.lru_cache(maxsize=64)
def _is_json_raw(content_type: bytes | None) -> bool:
    """`_is_json` of the header as sent (bytes): no decode for the values kept."""
    return _is_json(None if content_type is None else content_type.decode("latin-1"))


@functools.lru_cache(maxsize=64)
def _accepts_raw(accept: bytes) -> tuple[bool, bool]:
    """`_accepts` of the header as sent (bytes): no decode for the values kept."""
    return _accepts(accept.decode("latin-1"))


_HANDSHAKE_VERSIONS = frozenset(version.encode("latin-1") for version in HANDSHAKE_PROTOCOL_VERSIONS)
"""The handshake-era protocol versions as an `mcp-protocol-version` header sends them."""


@functools.lru_cache(maxsize=64)
def _accepts(accept: str) -> tuple[bool, bool]:
    """Whether an `Accept` header takes JSON, and SSE (RFC 9110 wildcards): the SDK's `check_accept_headers`,
    without a Starlette `Request` built per request for it. Kept for the few values a gateway's clients send,
    each of them with every request."""
    types = {media.split(";", 1)[0].strip().lower() for media in accept.split(",")}
    anything = "*/*" in types
    return (anything or not types.isdisjoint(("application/json", "application/*")),
            anything or not types.isdisjoint(("text/event-stream", "text/*")))


def _principal_key(principal: Principal | None) -> str:
    """How a session's principal is written in Redis, to be compared when another replica resumes its stream."""
    return json.dumps(principal)


def _in_flight(request_id: RequestId) -> JsonObject:
    return error_message(request_id, INVALID_REQUEST, "A request with this id is already in flight on this session",
                         id=request_id)


def _header_of(session: _Session | None) -> list[tuple[bytes, bytes]] | None:
    return session.header if session is not None else None


def _requestor(scope: Scope) -> AuthorizationContext | None:
    user = scope.get("user")  # none without `http.auth`: no type check for it
    return authorization_context(user) if user is not None and isinstance(user, AuthenticatedUser) else None


