"""The stdio face's JSON-RPC layer: the gateway's own `Endpoint` (`elicitgate.wire.endpoint`) under the SDK's
server runner, in place of the SDK's `JSONRPCDispatcher`.

The runner (handshake, capabilities, era rules, middleware) only needs a `Dispatcher`: something that
hands it `(context, method, params)` for each request and sends what it sends. The SDK's own models every
message with pydantic on the way in and out and keeps memory streams and tasks per request in flight;
here a message is parsed once into a dict and written once from one, and a request the face sends the
client (an elicitation) is one future.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    RequestId,
)
from mcp_types import methods as spec_methods
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data, serve_one
from mcp.shared.dispatcher import CallOptions, DispatchContext, OnNotify, OnNotifyIntercept, OnRequest
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.transport_context import TransportContext

from elicitgate import _compat
from elicitgate.faces.known_shapes import tool_call_params_fit
from elicitgate.faces.modern import EnvelopeConnection, ModernMethods
from elicitgate.json_shapes import JsonObject
from elicitgate.wire.base import Inbound, MessageWire, PushWire, SendsAtOnce, Sink
from elicitgate.wire.endpoint import Endpoint, progress_params

if TYPE_CHECKING:
    from elicitgate.elicitation.model import Elicitation

STDIO = TransportContext(kind="stdio", can_send_request=True)
MODERN_STDIO = TransportContext(kind="stdio", can_send_request=False)

DirectHandler = Callable[[ServerRequestContext[Any, Any], ServerRunner[Any]], Awaitable[JsonObject]]
"""A request handler that reads the raw params off its context and returns the result as a dict, shaped for the
client's version by the kernel's outbound pass (`_compat.shaped_result(runner, ...)`): its own coroutine is all a
request in flight holds of the face, no coroutine around it to shape the result."""


class EndpointDispatcher:
    """The SDK's `Dispatcher` protocol over an `Endpoint` (one client connection)."""

    def __init__(
        self,
        wire: MessageWire,
        *,
        inline: frozenset[str] = frozenset(),
        context_type: type[RequestContext] | None = None,
    ) -> None:
        self.wire = wire
        self.endpoint = Endpoint(wire, "the client", serving=True, inline=inline)
        self.context_type = context_type or RequestContext
        """What each of the client's messages is served with (the HTTP face's routes sends to the message's
        own response stream)."""
        self._ids = itertools.count(1)

    def next_request_id(self) -> int:
        return next(self._ids)

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> CoroutineType[Any, Any, JsonObject]:
        """The endpoint's request itself, not a coroutine around it: one frame less for every request that
        waits on the client (an elicitation waits on a human)."""
        opts = opts or {}
        request_id = opts.get("request_id")
        return self.endpoint.request(
            request_id if request_id is not None else self.next_request_id(),
            method,
            params,
            on_progress=opts.get("on_progress"),
            timeout=opts.get("timeout"),
            cancel_on_abandon=opts.get("cancel_on_abandon", True),
        )

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        await self.endpoint.notify(method, params)

    async def run(
        self,
        on_request: OnRequest,
        on_notify: OnNotify,
        on_notify_intercept: OnNotifyIntercept | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        context_type = self.context_type

        def request(inbound: Inbound, method: str, params: JsonObject | None) -> Awaitable[JsonObject]:
            return on_request(context_type(self, inbound), method, params)

        await self.serve(request, on_notify, on_notify_intercept, task_status=task_status)

    async def serve(
        self,
        request: Callable[[Inbound, str, JsonObject | None], Awaitable[JsonObject]],
        on_notify: OnNotify,
        on_notify_intercept: OnNotifyIntercept | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """`run` with a request handler that makes the request's context itself, from its `Inbound`: no frame of
        the dispatcher's between the endpoint and the handler."""
        context_type = self.context_type

        async def notification(inbound: Inbound, method: str, params: JsonObject | None) -> None:
            if on_notify_intercept is not None and on_notify_intercept(method, params):
                return
            await on_notify(context_type(self, inbound), method, params)

        await self.endpoint.run(request, notification, task_status=task_status)


class RequestContext:
    """The SDK's `DispatchContext` for one message of the client's: its id, its cancellation, and the
    channel back to the client while it is served."""

    __slots__ = ("_dispatcher", "_inbound", "_cancel_requested")

    transport: TransportContext = STDIO
    message_metadata: None = None

    def __init__(self, dispatcher: EndpointDispatcher, inbound: Inbound) -> None:
        self._dispatcher = dispatcher
        self._inbound = inbound
        self._cancel_requested: anyio.Event | None = None

    @property
    def closed(self) -> bool:
        """The request was answered (or abandoned): nothing more is sent on its behalf."""
        return self._inbound.served

    @property
    def request_id(self) -> RequestId | None:
        inbound = self._inbound
        if inbound.served_id is not None:  # its message let go of while it is served (`wire.endpoint`)
            return inbound.served_id
        message = inbound.message
        return message.get("id") if isinstance(message, dict) else None

    @property
    def can_send_request(self) -> bool:
        return not self.closed

    @property
    def cancel_requested(self) -> anyio.Event:
        """Made when first asked for (most requests never are): one event less per request in flight."""
        if self._cancel_requested is None:
            event = self._cancel_requested = anyio.Event()
            if self._inbound.cancel_requested:
                event.set()
            else:
                self._inbound.on_cancel = event.set
        return self._cancel_requested

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> CoroutineType[Any, Any, JsonObject]:
        if self.closed:
            raise NoBackChannelError(method)
        return self._dispatcher.send_raw_request(method, params, opts)

    def asking(self, method: str, params: Mapping[str, Any] | None, request_id: RequestId) -> Awaitable[JsonObject]:
        """`send_raw_request` with no timeout, as the endpoint's future for its answer (`Endpoint.asking`), not a
        coroutine: nothing of the request's is suspended while the client's human answers it."""
        if self._inbound.served:  # `can_send_request`, read without its two properties (a subclass says otherwise)
            raise NoBackChannelError(method)
        return self._dispatcher.endpoint.asking(request_id, method, params)

    def carry(self, elicitation: Elicitation) -> None:
        """One pipe carries every request (stdio): its closing ends the session and its questions with it."""

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if not self.closed:
            await self._dispatcher.notify(method, params, opts)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        request = self._inbound.message
        token = progress_token_from_params(request.get("params")) if isinstance(request, dict) else None
        if token is not None:
            await self.notify("notifications/progress", progress_params(token, progress, total, message))


class ModernRequestContext(RequestContext):
    """A 2026-07-28 connection's `RequestContext`: the era has no request to the client (the SDK's
    `_NoServerRequestsDispatchContext`, without a wrapper around each request's context)."""

    __slots__ = ()

    transport: TransportContext = MODERN_STDIO

    @property
    def can_send_request(self) -> bool:
        return False

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> CoroutineType[Any, Any, JsonObject]:
        raise NoBackChannelError(method)

    def asking(self, method: str, params: Mapping[str, Any] | None, request_id: RequestId) -> Awaitable[JsonObject]:
        raise NoBackChannelError(method)


async def serve_connection(
    server: Server[Any],
    wire: MessageWire,
    init_options: InitializationOptions,
    direct: Mapping[str, DirectHandler] | None = None,
    modern: ModernMethods | None = None,
) -> None:
    """`Server.run` on one client connection over `wire`, in the era the client opens with.

    The SDK's rule (`serve_dual_era_loop`): a first request other than `initialize` that carries the
    2026-07-28 envelope opens a 2026-07-28 connection, anything else a handshake one; what came before
    that request is served too. A later claim from the other era is refused.

    On a handshake connection, once `initialize` is accepted, the methods in `direct` are served by
    their handler without the SDK's kernel (`_serve_directly`); a 2026-07-28 connection's requests are served
    from `modern` (`faces.modern`), or by the SDK's kernel without it.
    """
    async with server.lifespan(server) as lifespan_state:
        replay = _Replay(wire)
        opening = await replay.opening_request()
        if opening is not None and opening.get("method") != "initialize" and _compat.has_modern_envelope(
            opening.get("params")
        ):
            await _serve_modern(server, replay, lifespan_state, modern)
        else:
            await serve_handshake(server, replay, lifespan_state, init_options, direct or {})


async def serve_handshake(
    server: Server[Any],
    wire: MessageWire,
    lifespan_state: Any,
    init_options: InitializationOptions,
    direct: Mapping[str, DirectHandler],
    context_type: type[RequestContext] | None = None,
) -> None:
    """One handshake-era client connection over `wire` until it ends (`serve_connection` once the era is
    known; the HTTP face's sessions start here)."""
    # `initialize` is answered before the next message is read: the requests after it depend on it.
    dispatcher = EndpointDispatcher(wire, inline=frozenset({"initialize"}), context_type=context_type)
    connection = Connection.for_loop(dispatcher)
    runner = ServerRunner(server, connection, lifespan_state, init_options=init_options)
    accepted = False
    """The connection's `initialize_accepted`, read until it is True (it stays so: the SDK derives it from what
    `initialize` recorded, or from the `initialized` event, neither of which is undone)."""

    def on_request(
        context: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> Awaitable[JsonObject]:
        nonlocal accepted
        # `_meta` looked for here first: without it there is no envelope (`_compat.has_modern_envelope`), and most
        # requests have none.
        if method != "initialize" and params and "_meta" in params and _compat.has_modern_envelope(params):
            raise MCPError(
                code=INVALID_REQUEST,
                message="this connection serves the handshake protocol era; "
                "requests carrying the 2026-07-28 envelope are not accepted on it",
            )
        handler = direct.get(method)
        if handler is not None and not accepted:
            accepted = connection.initialize_accepted
        # A `requestState` goes through the kernel's middleware, whose boundary unseals it.
        # A task-augmented `tools/call` goes through the kernel's middleware too: its result is no CallToolResult.
        if (handler is not None and accepted and not (params and "requestState" in params)
                and not (params and "task" in params)):
            return _serve_directly(handler, runner, context, method, params)
        return runner.on_request(context, method, params)

    try:
        await dispatcher.run(on_request, runner.on_notify)
    finally:
        await aclose_shielded(connection)


async def _serve_modern(
    server: Server[Any], wire: MessageWire, lifespan_state: Any, modern: ModernMethods | None
) -> None:
    """Every request carries its own envelope; the client is never sent a request of the server's."""
    dispatcher = EndpointDispatcher(wire, context_type=ModernRequestContext)
    outbound = NotifyOnlyOutbound(dispatcher)

    async def on_request(inbound: Inbound, method: str, params: JsonObject | None) -> JsonObject:
        context = ModernRequestContext(dispatcher, inbound)
        if method == "initialize":
            raise MCPError(
                code=UNSUPPORTED_PROTOCOL_VERSION,
                message="connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
                data=_compat.initialize_after_modern_data(params),
            )
        envelope = fitting_envelope(params) if modern is not None else None
        if envelope is None:
            route = classify_inbound_request({"method": method, "params": params})
            if isinstance(route, InboundLadderRejection):
                raise MCPError(code=route.code, message=route.message, data=route.data)
            envelope = (route.protocol_version, route.client_info, route.client_capabilities)
        try:
            if modern is not None:
                connection = EnvelopeConnection(outbound, *envelope)
                return await modern.serve(context, method, params, connection, lifespan_state)
            connection = Connection.from_envelope(*envelope, outbound=outbound)
            return await serve_one(
                server, context, method, params,
                connection=connection, lifespan_state=lifespan_state,
            )
        except (MCPError, ValidationError):
            raise
        except Exception as exc:
            error = modern_error_data(exc)
            raise MCPError(code=error.code, message=error.message, data=error.data) from exc

    async def on_notify(
        context: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> None:
        # The envelope is request-only, so a notification runs at the latest version served.
        connection = Connection.from_envelope(LATEST_MODERN_VERSION, None, None, outbound=outbound)
        try:
            await ServerRunner(server, connection, lifespan_state).on_notify(context, method, params)
        finally:
            await aclose_shielded(connection)

    await dispatcher.serve(on_request, on_notify)


def fitting_envelope(params: Any) -> tuple[str, Any, Any] | None:
    """The envelope of a request the SDK's ladder (`classify_inbound_request`, no headers: stdio) lets through, read
    with dict reads: `_meta` an object holding a served protocol version and the client's capabilities; its
    protocol version, client info (None when absent) and capabilities. None for anything else, which the ladder
    then judges and refuses in its own words."""
    fields: JsonObject = params  # typed before it is checked: no `cast` (a Python call each)
    if type(fields) is not dict:
        return None
    found: Any = fields.get("_meta")
    meta: JsonObject = found  # typed before it is checked, as `fields`
    if type(meta) is not dict:
        return None
    version: Any = meta.get(PROTOCOL_VERSION_META_KEY)
    if type(version) is not str or version not in MODERN_PROTOCOL_VERSIONS or CLIENT_CAPABILITIES_META_KEY not in meta:
        return None
    return version, meta.get(CLIENT_INFO_META_KEY), meta[CLIENT_CAPABILITIES_META_KEY]


def _serve_directly(
    handler: DirectHandler,
    runner: ServerRunner[Any],
    context: DispatchContext[TransportContext],
    method: str,
    params: Mapping[str, Any] | None,
) -> Awaitable[JsonObject]:
    """One request of an initialized handshake-era client, as the SDK's kernel (`ServerRunner`) serves it
    but without its middleware chain, params model and per-request closures: the params are checked
    against the spec's schema for the client's version (-32602 when they do not fit), and the handler shapes its
    result with the kernel's own outbound pass (sieved to what that version defines). The handler's coroutine
    itself, not one around it: one frame less for every request in flight (a call waiting on a human)."""
    if not (method == "tools/call" and tool_call_params_fit(params)):  # the commonest params, checked by hand
        try:
            spec_methods.validate_client_request(method, runner.connection.protocol_version, params)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method) from None
    return handler(_compat.request_context(runner, context, method, params), runner)


class _Replay:
    """A wire whose first messages were read ahead (to see the client's first request) and are handed
    out again before the rest."""

    def __init__(self, wire: MessageWire) -> None:
        self._wire = wire
        self.send = wire.send
        """The wire's own: no coroutine of this one's around every message written."""
        if isinstance(wire, SendsAtOnce):
            self.send_now = wire.send_now
            """The wire's own too, where it has one: the endpoint writes its answers at once with it."""
        self._source: AsyncIterator[Inbound] = wire.messages()
        self._lead: list[Inbound] = []

    async def opening_request(self) -> JsonObject | None:
        """Read up to the client's first request; None if the wire ends first. Up to
        `_compat.PRE_REQUEST_REPLAY_LIMIT` messages before it are kept, the rest dropped (the SDK's bound)."""
        while True:
            try:
                inbound = await anext(self._source)
            except StopAsyncIteration:
                return None
            message = inbound.message
            request = message if isinstance(message, dict) and _is_request(message) else None
            if request is not None or len(self._lead) < _compat.PRE_REQUEST_REPLAY_LIMIT:
                self._lead.append(inbound)
            if request is not None:
                return request

    async def messages(self) -> AsyncGenerator[Inbound]:
        while self._lead:
            yield self._lead.pop(0)
        async for inbound in self._source:
            yield inbound

    async def push(self, sink: Sink) -> None:
        """The messages read ahead, then the rest: pushed as they are read where the wire can (`PushWire`)."""
        while self._lead:
            if (held := sink(self._lead.pop(0))) is not None:
                await held
        if isinstance(self._wire, PushWire):
            aclose: Callable[[], Awaitable[None]] | None = getattr(self._source, "aclose", None)
            if aclose is not None:  # it holds nothing: the wire queues what it read
                await aclose()
            await self._wire.push(sink)
            return
        async for inbound in self._source:
            if (held := sink(inbound)) is not None:
                await held


def _is_request(message: JsonObject) -> bool:
    request_id = message.get("id")
    has_id = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return isinstance(message.get("method"), str) and has_id
