"""2026-07-28 requests on the gateway's own JSON-RPC layer, for both faces (`faces.dispatch` over stdio,
`faces.stateless` over HTTP), in place of the SDK's per-request kernel (`mcp.server.runner.serve_one`).

The kernel built, for every request, a `ServerRunner`, a `Connection` from the envelope (three pydantic
models), the `_meta` model, the params checked against the spec's schema and modelled once more, a chain of
middleware closures, the result checked and dumped again, and a shielded cancel scope to close the connection:
about a dozen validations and ten cancel scopes for a call the gateway mostly passes on (bench/README.md). Here
the face has classified the envelope already (the SDK's `classify_inbound_request`: dict reads); what is modelled
is the client's capabilities (the gateway acts on them); and the request goes to its handler in
`ModernMethods`, the one table of what a 2026-07-28 client can call.

The kernel's rules that stay: a method the table does not hold is -32601; the params the gateway reads of a
relayed call (`RELAYED_PARAMS`) are checked by hand, -32602 "Invalid request parameters" when one is not of its
type, and the rest is the upstream's to judge; the methods the gateway answers itself (the merged lists,
`server/discover`) and the rare relayed ones have their params checked against the spec's schema and their result
sieved to it, as before, and so has every `input_required` result (the gateway's rounds make them); every result
gets its cache hints, `resultType` and the `serverInfo` stamp. A relayed call's result otherwise goes back as the
upstream sent it (design invariant 5).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import anyio
import orjson
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    SERVER_INFO_META_KEY,
    ClientCapabilities,
    Implementation,
    InitializeRequestParams,
    RequestParamsMeta,
)
from mcp_types import methods as spec_methods
from pydantic import BaseModel, ValidationError

from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import DispatchContext, Outbound
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext

from elicitgate.bridging.sealing import RequestsOnly
from elicitgate.capabilities import Declared, capabilities_dict, elicitation_modes
from elicitgate.faces.observe import RequestObserver
from elicitgate.json_memo import JsonMemo
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.logs import request_context

ModernHandler = Callable[[ServerRequestContext[Any, Any]], Awaitable[JsonObject]]
"""A 2026-07-28 request's handler: reads the raw params off its context, returns the result as a dict."""



class Middleware(Protocol):
    """A server middleware of the SDK's shape (`ServerMiddleware`): `(ctx, call_next) -> result`."""

    def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, /) -> Awaitable[HandlerResult]: ...


ParamRule = tuple[str, type | tuple[type, ...], bool]
"""(key, its JSON type, required): one param the gateway reads. An absent key or a null is "not given"."""

RELAYED_PARAMS: dict[str, tuple[ParamRule, ...]] = {
    "tools/call": (("name", str, True), ("arguments", dict, False), ("requestState", str, False),
                   ("inputResponses", dict, False)),
    "prompts/get": (("name", str, True), ("arguments", dict, False), ("requestState", str, False),
                    ("inputResponses", dict, False)),
    "resources/read": (("uri", str, True), ("requestState", str, False), ("inputResponses", dict, False)),
}
"""What the gateway reads of a relayed call: routing (`name`, `uri`), the upstream's arguments as a whole, and
a 2026-07-28 round (`requestState`, `inputResponses`). Everything else in the params is the upstream's."""

_INVALID_PARAMS = "Invalid request parameters"
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ModernMethod:
    handler: ModernHandler
    reads: tuple[ParamRule, ...] | None
    """A relayed method: the params the gateway reads, checked by hand, and its result passed on as the upstream
    sent it. None: params checked against the spec's schema, result sieved to it (the kernel's rule), for a method
    the spec defines; a method it does not (an extension's, such as tasks') is its handler's to check."""


class EnvelopeConnection(Connection):
    """The `Connection` of one 2026-07-28 request, from its envelope: born ready, capabilities modelled, the
    `clientInfo` modelled only when something reads `client_params` (`Connection.from_envelope` models both,
    and an `InitializeRequestParams` besides, for every request).

    `declared`: the capabilities as the envelope gave them, read (`Declared`), for the request's call to take
    without reading them again (`faces.peer.DownstreamCall`)."""

    def __init__(self, outbound: Outbound, protocol_version: str, client_info: Any, capabilities: Any) -> None:
        # Not the base's __init__: its event, exit stack and scratch dict are made at their first use
        # (`__getattr__`). A 2026-07-28 request uses none of them, and a parked call's per-call peer holds its
        # latest request's connection for as long as the call waits for a retry (~1.5 KB each, bench/README.md).
        self.outbound = outbound
        self.protocol_version = protocol_version
        self.session_id = None
        self._client_info = client_info
        self._client_params = None
        declared = self.declared = _UNDECLARED if capabilities is None else _CAPABILITIES(capabilities)
        self.client_capabilities = declared[0]

    def __getattr__(self, name: str) -> Any:
        """The base's per-connection state, made when first read: `initialized` (born set), `exit_stack`, `state`."""
        value: Any
        if name == "initialized":
            value = _initialized()
        elif name == "exit_stack":
            value = AsyncExitStack()
        elif name == "state":
            value = {}
        else:
            raise AttributeError(name)
        setattr(self, name, value)
        return value

    @property
    def client_params(self) -> InitializeRequestParams | None:
        params = self._client_params
        if params is None and self._client_info is not None:
            info, self._client_info = _IMPLEMENTATIONS(self._client_info), None
            if info is not None and self.client_capabilities is not None:
                params = self._client_params = _client_params(self.protocol_version, info, self.client_capabilities)
        return params

    @client_params.setter
    def client_params(self, value: InitializeRequestParams | None) -> None:
        self._client_params = value
        if value is not None:
            self.client_capabilities = value.capabilities


_ready: anyio.Event | None = None


def _initialized() -> anyio.Event:
    """An event already set: every envelope connection is born initialized."""
    global _ready
    if _ready is None:
        _ready = anyio.Event()
        _ready.set()
    return _ready


class ModernMethods:
    """What a 2026-07-28 client can call on a face, and the serving of one such request.

    `add` is the one place a method joins: `faces.server.build_server` adds the gateway's methods."""

    def __init__(
        self,
        server: Server[Any],
        middleware: Sequence[Middleware] = (),
        *,
        relay: tuple[RequestObserver, RequestsOnly] | None = None,
    ) -> None:
        self._server = server
        self._methods: dict[str, ModernMethod] = {}
        self._stamp: JsonObject | None = None
        chain: CallNext = self._inner
        for layer in reversed(middleware):  # outermost first, composed once (the kernel composed per request)
            chain = _around(layer, chain)
        self._chain = chain
        assert relay is None or tuple(middleware) == relay, "a relayed call does the chain's work itself"
        self._relay = relay
        """When the chain is the face's observer and requestState boundary, and only then: a relayed call does their
        work in its own coroutine (`_relayed`)."""

    def add(self, method: str, handler: ModernHandler, *, reads: tuple[ParamRule, ...] | None = None) -> None:
        """Serve `method` with `handler`; `reads` (see `ModernMethod`) makes it a relayed method."""
        self._methods[method] = ModernMethod(handler, reads)

    def add_sdk_handler(self, method: str) -> None:
        """Serve `method` with the handler the SDK's `Server` registers for it (`server/discover`)."""
        self.add(method, self.sdk_handler(method))

    def sdk_handler(self, method: str) -> ModernHandler:
        """The handler the SDK's `Server` registers for `method`, as a handler of this table."""
        entry = self._server.get_request_handler(method)
        assert entry is not None, method

        async def handle(ctx: ServerRequestContext[Any, Any]) -> JsonObject:
            result = await entry.handler(ctx, entry.params_type.model_validate(ctx.params or {}, by_name=False))
            if isinstance(result, BaseModel):
                return result.model_dump(by_alias=True, mode="json", exclude_none=True)
            return dict(cast(Mapping[str, Any], result or {}))

        return handle

    def __contains__(self, method: str) -> bool:
        return method in self._methods

    def serve(
        self,
        context: DispatchContext[TransportContext],
        method: str,
        params: Mapping[str, Any] | None,
        connection: Connection,
        lifespan_state: Any,
    ) -> Awaitable[JsonObject]:
        """One request whose envelope was classified (`connection` made from it): what to await for its result, or
        `MCPError` (raised here for a method or params refused before any handler runs). A relayed call's coroutine
        is `_relayed`'s own, with nothing around it: one frame less resumed at each of its steps."""
        entry = self._methods.get(method)
        if entry is None:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)
        version = connection.protocol_version
        if entry.reads is not None:
            if not _reads_fit(entry.reads, params):
                raise MCPError(code=INVALID_PARAMS, message=_INVALID_PARAMS, data="")
        elif method in spec_methods.SPEC_CLIENT_METHODS:  # a method the spec does not define is its handler's
            try:
                spec_methods.validate_client_request(method, version, params)
            except KeyError:
                raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method) from None
            except ValidationError:
                raise MCPError(code=INVALID_PARAMS, message=_INVALID_PARAMS, data="") from None
        meta: Any = params.get("_meta") if params is not None else None
        request_meta: RequestParamsMeta | None = meta  # typed before it is checked: no `cast` (a Python call)
        # A dict or None told without `is_mapping`'s call: most requests' `_meta` is either.
        if type(meta) is not dict and meta is not None and not is_mapping(meta):
            request_meta = None
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(context, connection, request_meta=request_meta),
            lifespan_context=lifespan_state,
            protocol_version=version,
            method=method,
            params=params,
            request_id=context.request_id,
            meta=request_meta,
        )
        if entry.reads is not None and self._relay is not None:
            return self._relayed(ctx, entry, *self._relay, connection)
        return self._chained(ctx, connection)

    async def _chained(self, ctx: ServerRequestContext[Any, Any], connection: Connection) -> JsonObject:
        try:
            return cast(JsonObject, await self._chain(ctx))
        finally:
            await _closed(connection)

    async def _relayed(
        self,
        ctx: ServerRequestContext[Any, Any],
        entry: ModernMethod,
        observer: RequestObserver,
        boundary: RequestsOnly,
        connection: Connection,
    ) -> JsonObject:
        """A relayed call (most requests): the chain's work in this one coroutine, in its order, with no coroutine of
        the observer's, the boundary's and `_inner`'s around the handler's (each resumed again when the call's
        answer comes). The observer's: the request's time in its histogram and its ids on log lines, with no client
        (a 2026-07-28 request's connection is its own, so no peer is known for it yet); the boundary's: the request's
        `requestState` unsealed before the handler, an `input_required` result's sealed after."""
        start = time.perf_counter()
        try:
            with request_context(request_id=ctx.request_id, method=ctx.method, client=None):
                bound = boundary.open(ctx)
                result = self._shaped(ctx.method, ctx.protocol_version, await entry.handler(ctx), sieve=False)
                # `close`'s own test, on the dict it always is here (`_shaped` sets its `resultType`)
                if result["resultType"] != "input_required":
                    return result
                return boundary.close_round(ctx, result, bound)
        finally:
            observer.timer(ctx.method).observe(time.perf_counter() - start)
            if "exit_stack" in connection.__dict__:  # `_closed`'s own test, without its coroutine
                await _closed(connection)

    async def _inner(self, ctx: ServerRequestContext[Any, Any]) -> JsonObject:
        entry = self._methods[ctx.method]
        return self._shaped(ctx.method, ctx.protocol_version, await entry.handler(ctx), sieve=entry.reads is None)

    def _shaped(self, method: str, version: str, result: JsonObject, *, sieve: bool) -> JsonObject:
        """The kernel's outbound pass (`ServerRunner._serialize`): cache hints the result left unset (not on an
        `input_required` one), the sieve for the gateway's own results, `resultType`, the `serverInfo` stamp."""
        kind = result.get("resultType")
        asking = kind == "input_required"
        hint = self._server.cache_hints.get(method)
        if hint is not None and not asking:
            result = {"ttlMs": hint.ttl_ms, "cacheScope": hint.scope, **result}
        # An `input_required` result is the gateway's own (its rounds): shaped to this era. A method the spec does
        # not define (an extension's) has no schema here: its handler shapes its result.
        if (sieve or asking) and method in spec_methods.SPEC_CLIENT_METHODS:
            try:
                sieved = _round_sieved(method, version, result) if asking else None
                result = sieved if sieved is not None else spec_methods.serialize_server_result(method, version, result)
            except ValidationError:
                raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
            kind = result.get("resultType")
        if kind is None:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._stamp or self._server_info()}
        elif is_mapping(meta) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._stamp or self._server_info()}
        return result

    def _server_info(self) -> JsonObject:
        """The server's stamp, dumped once: results are written as soon as they are made, so one dict serves all
        (the SDK copies it deeply for each)."""
        if self._stamp is None:
            self._stamp = self._server.server_info_stamp
        return self._stamp


async def _closed(connection: Connection) -> None:
    """A request's connection done with: its exit stack closed, if one was made. Nothing is pushed on it today: no
    shielded scope for nothing, and none made for an envelope's."""
    if (stack := vars(connection).get("exit_stack")) is not None:
        await stack.aclose()


def _around(layer: Middleware, call_next: CallNext) -> CallNext:
    def call(ctx: ServerRequestContext[Any, Any]) -> Awaitable[HandlerResult]:
        return layer(ctx, call_next)

    return call


def _reads_fit(reads: tuple[ParamRule, ...], params: Mapping[str, Any] | None) -> bool:
    if params is None:
        return not any(required for _, _, required in reads)
    for key, kind, required in reads:  # read and typed without a call: a relayed call's params have a few keys
        value = params[key] if key in params else None
        if value is None:
            if required:
                return False
        elif type(value) is not kind and not isinstance(value, kind):
            return False
    return True


def _declaration(raw: Any) -> Declared:
    model = _typed(ClientCapabilities, raw)
    return model, capabilities_dict(model), elicitation_modes(model)


_CAPABILITIES = JsonMemo(_declaration, max_key=2048)
"""Modelled capabilities by their JSON, with their dump and elicitation modes: a client declares the same ones with
every request, and nothing changes a model once made (each is ~1.3 KB, held as long as a parked call's peer holds
its latest request's connection)."""
_UNDECLARED: Declared = (None, {}, frozenset())


_ROUND_KEYS = frozenset({"resultType", "inputRequests", "requestState"})
_STATE_STANDIN = "\x00state"


def _sieve_round(key: Any) -> tuple[JsonObject, bytes]:
    """A round's result sieved (`serialize_server_result`) with a stand-in state, and its `inputRequests` as JSON."""
    method, version, requests = key
    sieved = spec_methods.serialize_server_result(
        method, version, {"resultType": "input_required", "inputRequests": requests, "requestState": _STATE_STANDIN}
    )
    return sieved, orjson.dumps(sieved.get("inputRequests"))


_ROUNDS_SIEVED = JsonMemo(_sieve_round, max_key=16384, ordered=True)  # a form shows its fields in order
"""Sieved rounds by what they ask: a round's questions are mostly the same form asked again, and only its state (a
plain string, which the sieve passes as it is) differs."""


def _round_sieved(method: str, version: str, result: JsonObject) -> JsonObject | None:
    """`serialize_server_result` of a round of the gateway's (`bridging.rounds`: `inputRequests` and a string
    `requestState`, nothing else), from the memo; None for any other `input_required` result (sieved in full)."""
    state = result.get("requestState")
    requests = result.get("inputRequests")
    if not isinstance(state, str) or not _ROUND_KEYS.issuperset(result):
        return None
    if type(requests) is not dict and not is_mapping(requests):  # a dict told without a call
        return None
    sieved, written = _ROUNDS_SIEVED([method, version, requests])
    if sieved.get("requestState") != _STATE_STANDIN:
        return None
    return {
        key: state if key == "requestState" else orjson.loads(written) if key == "inputRequests" else value
        for key, value in sieved.items()
    }


_IMPLEMENTATIONS = JsonMemo(lambda raw: _typed(Implementation, raw), max_key=2048)
"""Modelled `clientInfo` by its JSON: read for every elicitation a 2026-07-28 client's call makes (who asks, in the
audit trail and the log), and the same with every request of one client."""


_PARAMS: dict[tuple[str, int, int], InitializeRequestParams] = {}
"""`client_params` by version and the identities of its two models (each one per JSON value, `_IMPLEMENTATIONS` and
`_CAPABILITIES`): `model_construct` was ~10% of the gateway's CPU per elicitation of a 2026-07-28 client, read once
for the audit trail's client name (`bench/README.md`, "The stdio hot path's bookkeeping")."""
_PARAMS_MAX = 1024


def _client_params(
    version: str, info: Implementation, capabilities: ClientCapabilities
) -> InitializeRequestParams:
    """The two models put together (both validated already, or kept by their JSON: not validated again), one for
    every request of a client that declares the same; nothing changes one once made."""
    key = (version, id(info), id(capabilities))
    params = _PARAMS.get(key)
    if params is None or params.client_info is not info or params.capabilities is not capabilities:
        params = InitializeRequestParams.model_construct(
            protocol_version=version, capabilities=capabilities, client_info=info
        )
        if len(_PARAMS) >= _PARAMS_MAX:  # ids whose models the memos let go of: made again when next asked
            _PARAMS.clear()
        _PARAMS[key] = params
    return params


def _typed(model: type[_M], raw: Any) -> _M | None:
    """`raw` as `model`, or None when it does not fit (a mis-shaped envelope value is "not given", as in the SDK)."""
    if raw is None:
        return None
    try:
        return model.model_validate(raw, by_name=False)
    except ValidationError:
        return None
