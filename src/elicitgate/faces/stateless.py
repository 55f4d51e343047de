"""2026-07-28 POSTs on `/mcp`: one self-contained request each (its `_meta` envelope says who asks and
what they can do), no session, no request to the client; its answer as one JSON body, or as an SSE stream
when it sends notifications first (progress, log lines) or takes longer than `http.json_wait` (15 s). The
client cancels by closing its connection: the request's handling is cancelled with it.

The envelope is checked as the SDK's own handler for this era checks it (the classification ladder of
`mcp.shared.inbound`, duplicated routing headers, `Mcp-Param-*` headers against the tool's schema, the
HTTP status per JSON-RPC error code), so the verdicts stay the SDK's; what differs is the cost: the body is
parsed once and not modelled, and the request runs in one task, with no task group, memory stream, watcher or
second task until a stream is needed (`_Answer`). On the face's own server a POST whose body came with its head is
vetted in the connection's step (`at_body`): a refusal or a 202 is written there, with no task, and a request's
task is its handling itself (`_answered`), not uvicorn's `run_asgi` around the endpoint; elsewhere (a body still
coming, `http.auth`, headless marks, `redis_url`) the POST's own task (uvicorn's) runs it. `subscriptions/listen`
(a stream of notifications by nature) goes to the SDK's handler.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Any, final

import anyio
from mcp_types import HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ProgressToken, RequestId
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp.server.runner import modern_error_data
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    InboundLadderRejection,
    classify_inbound_request,
    find_invalid_x_mcp_header,
    unsupported_protocol_version_rejection,
    validate_mcp_param_headers,
    x_mcp_header_map,
)
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.transport_context import TransportContext

from elicitgate import _compat
from elicitgate.errors import NonFiniteParams, NotFinite
from elicitgate.faces.dispatch import fitting_envelope
from elicitgate.faces.http_answers import (
    JSON_WINDOW,
    Cancellable,
    Channel,
    error_message,
    on_disconnect,
    reply,
    reply_in_step,
    stream,
)
from elicitgate.faces.modern import EnvelopeConnection
from elicitgate.faces.server import GatewayServer
from elicitgate.json_shapes import JsonObject, is_mapping, is_object
from elicitgate.web.http_protocol import LeanCycle
from elicitgate.wire import codec
from elicitgate.wire.endpoint import is_request_id, progress_params
from elicitgate.wire.framing import with_non_finite

logger = logging.getLogger(__name__)

NO_CHANNEL = _compat.no_channel()
STATELESS_HTTP = TransportContext(kind="streamable-http", can_send_request=False)
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()
_NOT_ONE_MESSAGE = "Body must be a single JSON-RPC request or notification object"

Envelope = tuple[str, Any, Any]
"""A request's envelope the SDK's ladder let through: its protocol version, client info and capabilities (as sent)."""


class StatelessContext:
    """The SDK's `DispatchContext` for one 2026-07-28 POST: notifications go on its response stream; a
    request to the client cannot be sent (this era has none)."""

    __slots__ = ("request_id", "_answer", "_progress_token", "_cancel_requested")

    transport: TransportContext = STATELESS_HTTP
    message_metadata: None = None
    can_send_request = False

    def __init__(self, request_id: RequestId, answer: _Answer, progress_token: ProgressToken | None) -> None:
        self.request_id = request_id
        self._answer = answer
        self._progress_token = progress_token
        self._cancel_requested: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        """Never set: the client cancels by closing the stream, which cancels the handling itself."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> JsonObject:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        message: JsonObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._answer.put(message)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress_token is not None:
            await self.notify("notifications/progress", progress_params(self._progress_token, progress, total, message))


class StatelessRequests:
    """Serves the 2026-07-28 POSTs of the HTTP face (`StreamableHttpEndpoint` hands them here)."""

    def __init__(self, server: GatewayServer, security: TransportSecuritySettings, *, json_wait: float) -> None:
        self._server = server
        self._security = security
        self._json_wait = json_wait
        """Seconds an answer may take and still go back as JSON (`http.json_wait`). Longer than a session's
        `JSON_WINDOW`: this era's client has no session to lose with a connection, and the `mcp` SDK's client
        refuses an SSE event over 1 MiB, so a large result that took a moment would fail as an event."""
        self.lifespan_state: Any = None
        self._streaming: dict[Channel, _Answer] = {}
        """The POSTs answering with an SSE stream now, or waiting past `JSON_WINDOW` for their answer."""
        self._annotated = HeaderAnnotations()

    def stop(self) -> None:
        """Close every open stream (the face is stopping): each one's request is cancelled."""
        for answer in list(self._streaming.values()):
            answer.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send, headers: Headers, body: bytes) -> None:
        """One POST whose body has been read, in its own task: its answer."""
        vetted = self._vetted(scope, headers, body)
        if isinstance(vetted, _Reply):
            await reply(send, vetted.status, vetted.message)
            return
        request, route = vetted
        if route is None:
            await self._listen(scope, receive, send, body)
            return
        await self._answered(request, route, send, receive, None)

    def at_body(self, cycle: LeanCycle, headers: Headers, fallback: ASGIApp) -> ASGIApp | None:
        """A POST whose whole body is in, in the connection's step (`StreamableHttpEndpoint.at_body`): a refusal or a
        notification's 202 written at once, a request served in a task of its own that writes its answer (no
        `run_asgi`, endpoint or `__call__` frames around the handler's at each of its steps). What to run in the
        POST's task instead (`DirectRoute.at_body`): `fallback` when its body cannot be taken whole, a reply that must
        wait to be written, `subscriptions/listen`."""
        body = cycle.whole_body()
        if body is None:
            return fallback
        # Typed as the ASGI names them without `cast`s (a Python call each): uvicorn's own types for the same.
        scope: Scope = cycle.scope  # pyright: ignore[reportAssignmentType]
        receive: Receive = cycle.receive  # pyright: ignore[reportAssignmentType]
        vetted = self._vetted(scope, headers, body)
        if type(vetted) is _Reply:
            return reply_in_step(cycle, vetted.status, vetted.message)
        request, route = vetted
        if route is None:
            return functools.partial(self._listen_app, body)
        asyncio.get_running_loop().create_task(self._answered(request, route, cycle.send, receive, cycle))
        return None

    def _vetted(self, scope: Scope, headers: Headers, body: bytes) -> _Reply | tuple[JsonObject, Envelope | None]:
        """The POST's request and its classified envelope (None for `subscriptions/listen`, the SDK's), or the reply
        it gets instead (a refusal, a notification's 202), as the SDK's handler checks them."""
        try:
            decoded = codec.loads(body)
        except NotFinite as exc:  # passes only in the answers of inputResponses: the answer check refuses it
            decoded = with_non_finite(exc.value, "message", body)
            if isinstance(decoded, NonFiniteParams):
                named = decoded.request_id if is_request_id(decoded.request_id) else None
                return _refusal(named, INVALID_PARAMS, str(decoded))
            if isinstance(decoded, Exception):
                return _refusal(None, PARSE_ERROR, "Parse error", reason=str(decoded)[:200])
        except ValueError as exc:  # not JSON, not UTF-8, or nested too deep (`TooDeep`)
            return _refusal(None, PARSE_ERROR, "Parse error", reason=str(exc)[:200])
        message: JsonObject = decoded  # typed before it is checked: a dict told without a call
        if (type(message) is dict or is_object(decoded)) and "id" not in message:
            return _notification(headers, message)
        request = _request_of(decoded)
        if request is None:
            return _refusal(None, INVALID_REQUEST, _NOT_ONE_MESSAGE)
        request_id = request["id"]
        if request["method"] == "subscriptions/listen":
            return request, None
        routing, duplicated, param_headers = _routing_headers(scope["headers"])
        if duplicated is not None:
            return _refusal(request_id, HEADER_MISMATCH, f"{duplicated} header appears more than once")
        envelope = _fitting_route(request, routing)
        if envelope is None:
            route = classify_inbound_request(request, headers=routing)
            if isinstance(route, InboundLadderRejection):
                return _refusal(request_id, route.code, route.message, data=route.data)
            envelope = (route.protocol_version, route.client_info, route.client_capabilities)
        rejection = self._param_headers_rejection(request, headers, param_headers)
        if rejection is not None:
            return _refusal(request_id, rejection.code, rejection.message, data=rejection.data)
        return request, envelope

    async def _answered(
        self, request: JsonObject, envelope: Envelope, send: Send, receive: Receive, cycle: LeanCycle | None
    ) -> None:
        """The request served and answered: in its POST's task (`cycle` None), or as a task of its own on the face's
        server (`cycle`), which then answers its own failure as uvicorn's `run_asgi` answers an app's."""
        request_id, method = request["id"], request["method"]
        params: JsonObject | None = request["params"] if "params" in request else None
        answer = _Answer(send, receive, self._json_wait, self._streaming)
        context = StatelessContext(request_id, answer, _progress_token(params))
        connection = EnvelopeConnection(NO_CHANNEL, *envelope)
        try:
            try:
                try:
                    result = await self._server.modern.serve(context, method, params, connection, self.lifespan_state)
                except Exception as exc:  # the SDK's boundary for this era: its ladder's codes, else a generic -32603
                    error = modern_error_data(exc).model_dump(mode="json", exclude_none=True)
                    message: JsonObject | None = {"jsonrpc": "2.0", "id": request_id, "error": error}
                else:
                    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
            except asyncio.CancelledError:
                if not answer.stopped_serving():
                    raise
                message = None  # the client has gone or the face stops: nothing to answer
            finally:
                answer.served()
            if answer.stream_task is None:
                if message is not None and (answer.channel is None or not answer.channel.closed):
                    # On the face's own server `send` is the cycle's: `reply` writes it in this step.
                    await reply(send, _status_of(message), message)
            else:
                if message is not None:
                    answer.put(message, last=True)
                await answer.streamed()
        except Exception as exc:
            if cycle is None:
                raise
            await _failed(cycle, exc)
        finally:
            if answer.channel is not None:  # else nothing was opened: no stream, not among the open answers
                answer.close()
        if cycle is not None and not cycle.response_complete and not cycle.disconnected:
            await _unanswered(cycle)

    def _param_headers_rejection(
        self, request: JsonObject, headers: Headers, param_headers: bool
    ) -> InboundLadderRejection | None:
        """A `tools/call`'s `Mcp-Param-*` headers checked against the called tool's input schema (`param_headers`:
        the request has one)."""
        if request["method"] != "tools/call" or "params" not in request:
            return None
        params: JsonObject = request["params"]  # None or an object (`_request_of`): typed before it is checked
        if type(params) is not dict and not is_mapping(params):
            return None
        name: Any = params["name"] if "name" in params else None
        arguments: JsonObject | None = params["arguments"] if "arguments" in params else None  # typed, then checked
        if type(name) is not str and not isinstance(name, str):
            return None
        if not arguments and not param_headers:  # the commonest case first: nothing to check
            return None
        if arguments is not None and type(arguments) is not dict and not is_mapping(arguments):
            return None
        lookup = self._server.get_tool_input_schema
        try:
            schema = lookup(name) if lookup is not None else None
        except Exception:  # fail open, as the SDK does: the check must never break a call that works
            logger.exception("Mcp-Param header validation skipped: the tool's schema could not be read")
            return None
        if schema is None or not self._annotated.declares(schema):
            return None
        return validate_mcp_param_headers(schema, arguments or {}, headers)

    async def _listen_app(self, body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        await self._listen(scope, receive, send, body)

    async def _listen(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
        """`subscriptions/listen` is the SDK handler's, with the body read here handed to it again."""
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await _compat.serve_modern_http(self._server, self._security, self.lifespan_state, scope, replay, send)


class _Answer:
    """How a 2026-07-28 POST served in its own task is answered: as one JSON body when its answer comes within
    `JSON_WINDOW` (within `http.json_wait`, while the client stays), else as an SSE stream written by a task of
    its own, started only then (the request's first notification starts it too). Most requests are answered at
    once, with one task per POST (the request's), not two.

    The request (its task) is cancelled when the client goes away after `JSON_WINDOW`, when its stream
    ends before the answer (the client gone, the face stopping), and when the face stops while it waits past
    `JSON_WINDOW`."""

    __slots__ = ("channel", "_send", "_receive", "_json_wait", "_open", "_task", "_timer", "_watch", "stream_task",
                 "_serving", "_cancelled")

    def __init__(self, send: Send, receive: Receive, json_wait: float, open_answers: dict[Channel, _Answer]) -> None:
        self.channel: Channel | None = None
        """What the request sends before its answer (notifications), then the answer, when it streams: made with the
        first notification or when the stream starts (most POSTs are answered as JSON and never make one)."""
        self._send = send
        self._receive = receive
        self._json_wait = json_wait
        self._open = open_answers
        """`StatelessRequests._streaming`: the answers that `stop` ends."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)  # the loop in hand: asked of asyncio once, not twice
        assert task is not None
        self._task = task
        self._watch: Cancellable | None = None
        self.stream_task: asyncio.Task[None] | None = None
        """The task writing the answer as an SSE stream, once one is needed."""
        self._serving = True
        self._cancelled = False
        """Whether this answer cancelled the request (not whoever else may cancel the POST's task)."""
        window = json_wait if json_wait < JSON_WINDOW else JSON_WINDOW  # `min(JSON_WINDOW, json_wait)` without its call
        self._timer: asyncio.TimerHandle | None = loop.call_later(window, self._window_passed)

    def _channel(self) -> Channel:
        channel = self.channel
        if channel is None:
            channel = self.channel = Channel()
        return channel

    def put(self, message: JsonObject, *, last: bool = False) -> bool:
        """Queue `message` on the POST's channel (False once it is closed); the first one, while the request is
        served, turns the response into an SSE stream."""
        put = self._channel().put(message, last=last)
        if put and self.stream_task is None and self._serving:
            self._start_stream()
        return put

    def _window_passed(self) -> None:
        self._timer = None
        if self._json_wait <= JSON_WINDOW:
            self._start_stream()
            return
        self._open[self._channel()] = self
        self._watch = on_disconnect(self._receive, self._gone)
        self._timer = asyncio.get_running_loop().call_later(self._json_wait - JSON_WINDOW, self._start_stream)

    def _gone(self) -> None:
        """The client went away before the answer's stream started."""
        self._channel().close()
        self._cancel()

    def stop(self) -> None:
        """The face stops: the stream ends, at once if it has not started (the request is cancelled)."""
        self._channel().close()
        self._start_stream()

    def _cancel(self) -> None:
        if self._serving and not self._cancelled:
            self._cancelled = True
            self._task.cancel()

    def stopped_serving(self) -> bool:
        """Whether the request was cancelled by this answer (its task is not cancelled any more): the request
        ends there, and its POST is answered as far as it still can be (a stream ended, or nothing)."""
        if not self._cancelled or self._task.cancelling() != 1:
            return False
        self._task.uncancel()
        return True

    def _start_stream(self) -> None:
        if self.stream_task is not None or not self._serving:
            return
        self._stop_waiting()
        channel = self._channel()
        self._open[channel] = self
        self.stream_task = stream_task = asyncio.get_running_loop().create_task(
            stream(channel, self._send, self._receive, None, on_gone=self._cancel))
        stream_task.add_done_callback(self._stream_ended)

    def _stream_ended(self, _: asyncio.Task[None]) -> None:
        self._cancel()  # nothing left to answer to (a no-op once the request has its answer)

    def _stop_waiting(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def served(self) -> None:
        """The request has its answer, or has ended without one."""
        self._serving = False
        if self._timer is not None or self._watch is not None:
            self._stop_waiting()
        if self._cancelled and self._task.cancelling():
            self._task.uncancel()  # the request took its cancellation and answered all the same: nobody to tell

    def close(self) -> None:
        """The POST's task ends (cancelled, maybe): no stream goes on without it."""
        if self.channel is not None:
            self._open.pop(self.channel, None)
        if self.stream_task is not None:
            self.stream_task.cancel()

    async def streamed(self) -> None:
        """Once the stream has written the channel to its end (the answer put last), or the client has gone."""
        if self.stream_task is not None:
            await self.stream_task


_ROUTING_HEADERS = {name.encode("latin-1"): name for name in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER,
                                                                MCP_NAME_HEADER)}
_PARAM_PREFIX_BYTES = _PARAM_PREFIX.encode("latin-1")
_PARAM_PREFIX_SIZE = len(_PARAM_PREFIX_BYTES)


def _routing_headers(raw: Iterable[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None, bool]:
    """One pass over the request's raw header lines: the routing headers the classification ladder reads (by
    lowercase name, as `classify_inbound_request` takes them), the first routing header given twice (the SDK's
    `find_duplicated_routing_header`), and whether any `Mcp-Param-*` header came. Only those few values are
    decoded (a folded `Headers` mapping decoded every line, and looked each name up with a scan of them all).
    Names already lowercase (an ASGI server's, the face's own) are read without a call per line."""
    lines = list(raw)  # read twice
    names = b"\n".join([name for name, _ in lines])
    if names != names.lower():
        return _routing_headers_lowered(lines)
    routing: dict[str, str] = {}
    duplicated: str | None = None
    param_headers = False
    prefix, size = _PARAM_PREFIX_BYTES, _PARAM_PREFIX_SIZE
    for name, value in lines:
        if name in _ROUTING_HEADERS:
            key = _ROUTING_HEADERS[name]
            if key in routing:
                duplicated = duplicated or key
            else:
                routing[key] = value.decode("latin-1")
        elif name[:size] == prefix:
            param_headers = True
    return routing, duplicated, param_headers


def _routing_headers_lowered(raw: Iterable[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None, bool]:
    """`_routing_headers` of lines whose names are not all lowercase: each name lowered."""
    routing: dict[str, str] = {}
    duplicated: str | None = None
    param_headers = False
    for name, value in raw:
        lowered = name.lower()
        key = _ROUTING_HEADERS.get(lowered)
        if key is not None:
            if key in routing:
                duplicated = duplicated or key
            else:
                routing[key] = value.decode("latin-1")
        elif lowered.startswith(_PARAM_PREFIX_BYTES):
            param_headers = True
    return routing, duplicated, param_headers


class HeaderAnnotations:
    """Whether a tool's input schema declares any `x-mcp-header` (valid ones: the SDK validates nothing against a
    schema with an invalid one), by schema, so that the schema is walked once and not on every call: a tool that
    declares none has no `Mcp-Param-*` header to check (`validate_mcp_param_headers` would find nothing to compare).
    The catalog hands out the same schema object until the tool's server lists it again."""

    LIMIT = 1024

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Mapping[str, Any], bool]] = {}
        """By the schema's id, with the schema itself (held, so that its id is not reused meanwhile)."""

    def declares(self, schema: Mapping[str, Any]) -> bool:
        seen = self._seen.get(id(schema))
        if seen is not None and seen[0] is schema:
            return seen[1]
        verdict = find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))
        if len(self._seen) >= self.LIMIT:
            self._seen.clear()
        self._seen[id(schema)] = (schema, verdict)
        return verdict


def _request_of(message: object) -> JsonObject | None:
    """`message` if it is one JSON-RPC request (what the SDK's `JSONRPCRequest` model accepts). Read and typed without
    a call where its fields are of their commonest types (a dict, a string method, an int or string id)."""
    fields: JsonObject = message  # pyright: ignore[reportAssignmentType]  # typed before it is checked, no `cast`
    if type(fields) is not dict and not is_object(fields):
        return None
    if "jsonrpc" not in fields or fields["jsonrpc"] != "2.0" or "method" not in fields:
        return None
    method: Any = fields["method"]
    if type(method) is not str and not isinstance(method, str):
        return None
    params: Any = fields["params"] if "params" in fields else None
    request_id: Any = fields["id"] if "id" in fields else None
    if type(request_id) is not int and type(request_id) is not str and not is_request_id(request_id):
        return None
    return fields if params is None or type(params) is dict or is_mapping(params) else None


def _fitting_route(request: JsonObject, routing: Mapping[str, str]) -> Envelope | None:
    """The envelope of a request the SDK's ladder (`classify_inbound_request` with the routing headers) lets through
    as it comes from the commonest clients, read with dict reads: a well-formed envelope (`fitting_envelope`), the
    protocol version and method headers equal to the body's, and the name header, where the method names something,
    equal to the body's name as sent (not encoded). None for anything else, which the ladder then judges."""
    envelope = fitting_envelope(request["params"] if "params" in request else None)
    if envelope is None:
        return None
    if MCP_PROTOCOL_VERSION_HEADER not in routing or routing[MCP_PROTOCOL_VERSION_HEADER] != envelope[0]:
        return None
    method = request["method"]
    if MCP_METHOD_HEADER not in routing or routing[MCP_METHOD_HEADER] != method:
        return None
    if method in NAME_BEARING_METHODS:
        params: JsonObject = request["params"]
        key = NAME_BEARING_METHODS[method]
        named: Any = params[key] if key in params else None
        if named is not None:
            header = routing[MCP_NAME_HEADER] if MCP_NAME_HEADER in routing else None
            if header is None or header != named or header[:2] == "=?":  # an encoded value is the ladder's to decode
                return None
    return envelope


def _progress_token(params: JsonObject | None) -> ProgressToken | None:
    """`progress_token_from_params`, not called for a request whose `_meta` is an object without a progress token
    (most requests)."""
    if params is not None and "_meta" in params:
        meta: Any = params["_meta"]
        if type(meta) is not dict or "progressToken" in meta:
            return progress_token_from_params(params)
    return None


def _status_of(message: JsonObject) -> int:
    """The HTTP status of an answer: 200 for a result, the SDK's table's for an error's code."""
    if "error" not in message:
        return 200
    error = message["error"]
    code = error.get("code") if is_mapping(error) else None
    return ERROR_CODE_HTTP_STATUS.get(code, 200) if isinstance(code, int) else 200


@final
class _Reply:
    """What a POST is answered with instead of being served: a refusal, or a notification's 202 (`message` None)."""

    __slots__ = ("status", "message")

    def __init__(self, status: int, message: JsonObject | None) -> None:
        self.status = status
        self.message = message


def _refusal(request_id: RequestId | None, code: int, message: str, data: Any = None, **details: Any) -> _Reply:
    """A JSON-RPC error with the HTTP status the SDK's table gives its code."""
    error = error_message(request_id, code, message, **details)
    if data is not None:
        error["error"]["data"] = data
    return _Reply(ERROR_CODE_HTTP_STATUS.get(code, 400), error)


_ACCEPTED = _Reply(202, None)


def _notification(headers: Headers, notification: JsonObject) -> _Reply:
    """Acknowledged (202) and dropped, as the SDK's handler does: this era defines no notification from the client
    over HTTP (a client cancels by closing the stream)."""
    if notification.get("jsonrpc") != "2.0" or not isinstance(notification.get("method"), str):
        return _refusal(None, INVALID_REQUEST, _NOT_ONE_MESSAGE)
    unsupported = unsupported_protocol_version_rejection(headers.get(MCP_PROTOCOL_VERSION_HEADER, ""))
    if unsupported is not None:
        return _refusal(None, unsupported.code, unsupported.message, data=unsupported.data)
    return _ACCEPTED


async def _failed(cycle: LeanCycle, exc: Exception) -> None:
    """What uvicorn's `run_asgi` does when an app fails: logged, a 500 when no response started, else the close."""
    cycle.logger.error("Exception in ASGI application\n", exc_info=exc)
    if not cycle.response_started:
        await cycle.send_500_response()
    else:
        cycle.transport.close()


async def _unanswered(cycle: LeanCycle) -> None:
    """What uvicorn's `run_asgi` does when an app returns with its client still there and its response not written
    whole (not reached: a request is answered, or cancelled once its client has gone)."""
    if not cycle.response_started:
        cycle.logger.error("ASGI callable returned without starting response.")
        await cycle.send_500_response()
    else:
        cycle.logger.error("ASGI callable returned without completing response.")
        cycle.transport.close()
