"""The MCP server clients talk to: the SDK's `Server`, with every request handed to the gateway.

Handlers read the raw params (`ctx.params`) and return plain dicts, so what the gateway only routes
is never re-modelled; the SDK still owns the handshake, sessions and transports.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from mcp_types import METHOD_NOT_FOUND, RequestParams, ServerCapabilities, ServerTasksCapability
from mcp_types import methods as spec_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict

from mcp.server.caching import CACHEABLE_METHODS, CacheableMethod, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import MCPError

from elicitgate import __version__, _compat
from elicitgate._compat import connection_of
from elicitgate.bridging.envelope import without_envelope
from elicitgate.bridging.rounds import GoesOn, ParkedCall
from elicitgate.bridging.sealing import RequestsOnly, authenticated_principal_of, state_boundary
from elicitgate.bridging.task_extension import EXTENSION_METHODS
from elicitgate.capabilities import TASKS_EXTENSION, capabilities_dict, knows_tasks
from elicitgate.contracts import DownstreamPeer
from elicitgate.elicitation.headless import HEADER_MARKED
from elicitgate.faces.dispatch import DirectHandler
from elicitgate.faces.known_shapes import sieved_tool_result
from elicitgate.faces.modern import RELAYED_PARAMS, EnvelopeConnection, ModernHandler, ModernMethods
from elicitgate.faces.observe import RequestObserver
from elicitgate.faces.peer import DownstreamCall, peer_for
from elicitgate.faces.task_extension import TaskExtension, listens_for_tasks
from elicitgate.faces.task_relay import TaskRelay
from elicitgate.gateway import Gateway
from elicitgate.json_shapes import JsonObject
from elicitgate.logs import name_request
from elicitgate.router.forward import Resumed, asks_only_in_answers, forward
from elicitgate.router.task_runner import seen_by
from elicitgate.router.tasks import TASK_METHODS
from elicitgate.upstreams.link import UpstreamLink

LISTS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
ROUTED = (
    "tools/call",
    "prompts/get",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
)
MODERN_ROUTED = ("tools/call", "prompts/get", "resources/read", "completion/complete")
"""The routed methods 2026-07-28 defines (`mcp_types.methods.CLIENT_REQUESTS`, not read at start-up: it loads the
spec's schemas, `sdk_packages.LAZY_MODULES`; tests/test_startup.py checks the two agree)."""

MAX_DECLARED = 8
OBSERVED = ("initialize", "ping", "server/discover", "subscriptions/listen")
"""Further methods with their own label in the request-latency metric."""


class RawParams(RequestParams):
    """Accepts whatever the SDK's own surface validation let through; handlers use `ctx.params`."""

    model_config = ConfigDict(extra="allow")


class GatewayServer(Server[Any]):
    modern: ModernMethods
    """What a 2026-07-28 client can call, each method with its handler: both faces serve this era's requests
    from it, past the SDK's kernel (`faces.modern`)."""
    routes: dict[str, DirectHandler]
    """The routed methods (`ROUTED`), observed like through the middleware: the stdio face serves a
    handshake-era client's requests for them without the SDK's handler kernel (`faces.dispatch`)."""
    tasks_capability: Callable[[], ServerTasksCapability | None] = staticmethod(lambda: None)
    """What the face declares under `tasks` (2025-11-25) now; read at each `initialize`."""
    declared: list[ServerCapabilities]
    """The capabilities of every initialization options made (one per face), kept to follow the upstreams."""
    task_extension: Callable[[], bool] = staticmethod(lambda: False)
    """Whether `server/discover` declares the tasks extension now (something behind the face serves it)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, JsonObject] | None = None,
        extensions: dict[str, JsonObject] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version in MODERN_PROTOCOL_VERSIONS and self.task_extension():
            capabilities.extensions = {**(capabilities.extensions or {}), TASKS_EXTENSION: {}}
        return capabilities

    def refresh_tasks_capability(self) -> None:
        """An upstream connected: the `tasks` of every face's initialization options follows what is up."""
        for capabilities in self.declared:
            capabilities.tasks = self.tasks_capability()

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, JsonObject] | None = None,
        extensions: dict[str, JsonObject] | None = None,
    ) -> InitializationOptions:
        options = super().create_initialization_options(
            notification_options
            or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )
        # The faces build their options once, before the upstreams are up: they are kept to follow them.
        options.capabilities.tasks = self.tasks_capability()
        # Each face makes its options once; bounded all the same, should something make them per connection.
        self.declared = [*self.declared[-(MAX_DECLARED - 1):], options.capabilities]
        return options


def build_server(gateway: Gateway, face: str) -> GatewayServer:
    server = GatewayServer(
        "elicitgate",
        version=__version__,
        instructions="elicitgate fronts several MCP servers; names are <server>"
        f"{gateway.config.namespacing.separator}<name>.",
        # 2026-07-28 results carry freshness hints; the merged catalog can change whenever an upstream's
        # does, so nothing is fresh for long. An upstream's own hints on what it returns win.
        cache_hints={
            cast("CacheableMethod", method): CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE_METHODS
        },
        get_tool_input_schema=gateway.catalog.tool_input_schema,
    )
    server.middleware.clear()  # no per-message tracing span on the pass-through path
    server.declared = []
    server.tasks_capability = gateway.task_requests.tasks_capability
    gateway.face_listeners.append(server.refresh_tasks_capability)
    observer = RequestObserver(face, {*LISTS, *ROUTED, *OBSERVED, *TASK_METHODS, *EXTENSION_METHODS})
    server.middleware.append(observer)
    boundary = state_boundary(gateway.config.bridging)
    server.middleware.append(boundary)
    server.middleware.append(TaskRelay(gateway, lambda ctx: _handshake_peer(gateway, ctx)))
    server.middleware.append(TaskExtension(gateway))
    server.task_extension = gateway.task_requests.task_extension_served
    if gateway.replicas is not None:
        from elicitgate.cluster import retries

        retries.install(gateway.rounds, gateway.replicas)

    def make_list(kind: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], _params: RawParams) -> JsonObject:
            items = gateway.catalog.merged(kind)
            if kind == "tools":  # a `required` tool is `optional` to a client that knows no tasks (task_runner)
                capabilities = capabilities_dict(connection_of(ctx).client_capabilities)
                items = seen_by(items, knows_tasks=knows_tasks(capabilities))
            if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                _handshake_peer(gateway, ctx)
                return {kind: items}
            return {kind: items, "resultType": "complete"}

        return handle

    def make_routed(method: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], _params: RawParams) -> JsonObject:
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return await _serve_modern(gateway, method, ctx)
            peer = _handshake_peer(gateway, ctx)
            call = DownstreamCall(peer=peer, ctx=ctx, method=method)
            peer.calls.add(call)
            try:
                return _handshake_result(await gateway.requests.call(call, method, ctx.params or {}))
            finally:
                peer.calls.discard(call)

        return handle

    def make_direct(method: str) -> DirectHandler:
        timer = observer.timer(method)

        async def serve(ctx: ServerRequestContext[Any, Any], runner: ServerRunner[Any]) -> JsonObject:
            # The observer's work, the routed handler's and the kernel's outbound pass in this one coroutine: the
            # frame every call in flight holds of the face (a call waiting on a human holds it for minutes).
            # The request's task is its own (`wire.endpoint`) and ends with it: its ids are named in its context
            # for good, as the observer's `request_context` names them for the while it lasts.
            start = time.perf_counter()
            try:
                peer = _handshake_peer(gateway, ctx)
                name_request(request_id=ctx.request_id, method=method, client=peer.id)
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    result = await _serve_modern(gateway, method, ctx)
                else:
                    call = DownstreamCall(peer=peer, ctx=ctx, method=method)
                    peer.calls.add(call)
                    try:
                        calling = gateway.requests.call(call, method, ctx.params or {})
                        # The call has what it reads of the request: the SDK's context (the decoded params, a session
                        # of its own) is not held while the call waits, on a human for as long as a question takes.
                        del ctx
                        result = await calling
                        if "resultType" in result:  # `_handshake_result`'s own test: most results have none
                            result = _handshake_result(result)
                    finally:
                        peer.calls.discard(call)
                    if method == "tools/call" and (sieved := sieved_tool_result(result)) is not None:
                        return sieved  # the sieve's own output for the commonest results (`faces.known_shapes`)
                return _compat.shaped_result(runner, method, result)
            finally:
                timer.observe(time.perf_counter() - start)

        return serve

    def make_task(method: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], _params: RawParams) -> JsonObject:
            # A handshake-era client's are served by the TaskRelay middleware; 2026-07-28 has no `tasks/*` of
            # 2025-11-25 (its tasks are an extension the gateway does not offer yet, docs/tasks.md).
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)

        return handle

    for method, kind in LISTS.items():
        server.add_request_handler(method, RawParams, make_list(kind))
    for method in TASK_METHODS:  # 2025-11-25 only: the SDK refuses them on a 2026-07-28 request
        server.add_request_handler(method, RawParams, make_task(method))
    server.routes = {}
    for method in ROUTED:
        server.add_request_handler(method, RawParams, make_routed(method))
        server.routes[method] = make_direct(method)
    server.modern = _modern_methods(gateway, server, observer, boundary)
    return server


def _modern_methods(
    gateway: Gateway, server: GatewayServer, observer: RequestObserver, boundary: RequestsOnly
) -> ModernMethods:
    """The 2026-07-28 table: the merged lists, `server/discover`, and the routed methods this era defines (no
    `ping`, `resources/subscribe` or `logging/setLevel` in it: -32601, as from the SDK's kernel)."""
    modern = ModernMethods(server, (observer, boundary), relay=(observer, boundary))

    def listing(kind: str) -> ModernHandler:
        async def handle(ctx: ServerRequestContext[Any, Any]) -> JsonObject:
            items = gateway.catalog.merged(kind)
            if kind == "tools":  # a `required` tool is `optional` to a client that knows no tasks (task_runner)
                capabilities = capabilities_dict(connection_of(ctx).client_capabilities)
                items = seen_by(items, knows_tasks=knows_tasks(capabilities))
            return {kind: items, "resultType": "complete"}

        return handle

    def relayed(method: str) -> ModernHandler:
        # Its coroutine, with no frame around it: a frame less per call, and none for the handler itself (a partial).
        return functools.partial(_serve_modern, gateway, method)

    for method, kind in LISTS.items():
        modern.add(method, listing(kind))
    modern.add_sdk_handler("server/discover")
    for method in MODERN_ROUTED:
        modern.add(method, relayed(method), reads=RELAYED_PARAMS.get(method))
    extension = TaskExtension(gateway)  # the tasks extension's methods (served only to a request declaring it)
    for method in EXTENSION_METHODS:
        modern.add(method, extension.serve)
    if server.get_request_handler("subscriptions/listen") is not None:
        others = modern.sdk_handler("subscriptions/listen")

        async def listen(ctx: ServerRequestContext[Any, Any]) -> JsonObject:
            return await (extension.listen(ctx) if listens_for_tasks(ctx.params) else others(ctx))

        modern.add("subscriptions/listen", listen)
    return modern


def _handshake_result(result: JsonObject) -> JsonObject:
    """`resultType` is 2026-07-28's (a modern upstream sends it): a handshake-era client's strict schemas refuse it
    (the TypeScript SDK's EmptyResult for resources/subscribe, logging/setLevel). A result without it is returned
    as it is: the upstream's answer, parsed for this call alone, and copied again by whatever shapes it next."""
    if "resultType" not in result:
        return result
    return {k: v for k, v in result.items() if k != "resultType"}


def _handshake_peer(gateway: Gateway, ctx: ServerRequestContext[Any, Any]) -> DownstreamPeer:
    """The client's session; with `http.auth` it carries the principal (the SDK keeps a session to it)."""
    peer = peer_for(ctx, gateway.peers.add)
    if peer.principal is None:
        peer.principal = authenticated_principal_of(ctx)
    if HEADER_MARKED.get():
        peer.headless = True
    return peer


async def _serve_modern(gateway: Gateway, method: str, ctx: ServerRequestContext[Any, Any]) -> JsonObject:
    """A 2026-07-28 client's request: a first round starts a parked call, a retry resumes one."""
    params = dict(ctx.params or {})
    asking = method in spec_methods.INPUT_REQUIRED_METHODS
    state = params.get("requestState") if asking else None
    resumed = gateway.rounds.parked_for(state) if state is not None else None
    connection = connection_of(ctx)
    peer = gateway.peers.modern_peer(authenticated_principal_of(ctx), connection, resuming=resumed)
    if HEADER_MARKED.get():
        peer.headless = True
    declared = connection.declared if type(connection) is EnvelopeConnection else None
    call = DownstreamCall(peer=peer, ctx=ctx, method=method, connection=connection, declared=declared)
    if not asking:
        peer.calls.add(call)
        try:
            return {"resultType": "complete", **await gateway.requests.call_once(call, method, params)}
        finally:
            peer.calls.discard(call)
    if state is not None and resumed is None and gateway.replicas is not None:
        result = await _resume_elsewhere(gateway, ctx, call, method, params, state)
    elif state is not None:
        result = await gateway.rounds.resume(call, method, state, params.get("inputResponses"))
    else:
        kept = without_envelope(params)  # the client's description is the request's, not the parked call's
        first = _FirstRequest(gateway, method, kept)
        result = await gateway.rounds.start(call, method, first.here, first.then, first.parks_at_once)
    return result if result.get("resultType") == "input_required" else {"resultType": "complete", **result}


class _FirstRequest:
    """A 2026-07-28 client's call, from its first request: in that request's own coroutine while the call asks nothing
    (`here`: a call `forward` alone serves, toward a server that asks only in its answers), parked from where it
    stopped once it asks or could (`then`, in the parked call's task)."""

    __slots__ = ("_gateway", "_method", "_params", "_route", "_routed")

    def __init__(self, gateway: Gateway, method: str, params: JsonObject) -> None:
        self._gateway = gateway
        self._method = method
        self._params = params
        self._route: tuple[UpstreamLink, JsonObject] | None = None
        self._routed = False

    def parks_at_once(self, park: ParkedCall) -> bool:
        """Whether `here` would go on parked before anything is sent (`GoesOn(None)`): no route of `forward`'s alone,
        or toward a server that asks by requests of its own (a handshake-era one), never only in its answers. Routes
        the call for `here` and `then`; raises as `here` would for a name or URI no upstream has."""
        route = self._routed_for(park)
        return route is None or not asks_only_in_answers(route[0])

    def _routed_for(self, park: ParkedCall) -> tuple[UpstreamLink, JsonObject] | None:
        if not self._routed:
            self._route, self._routed = self._gateway.requests.plain(park, self._method, self._params), True
        return self._route

    async def here(self, park: ParkedCall) -> JsonObject:
        requests = self._gateway.requests
        route = self._route if self._routed else self._routed_for(park)  # routed by `parks_at_once`, mostly
        if route is None:
            raise GoesOn(None)  # the gateway asks first, or the call runs apart: all of it parked
        link, params = route
        return await forward(requests.inbound, link, park, self._method, params,
                             max_rounds=requests.config.bridging.max_rounds, until_asked=True)

    def then(self, park: ParkedCall, state: object) -> Awaitable[JsonObject]:
        resume = state if isinstance(state, Resumed) else None
        route, self._route = self._route, None
        return self._gateway.requests.call_once(park, self._method, self._params, route, resume)


async def _resume_elsewhere(
    gateway: Gateway, ctx: ServerRequestContext[Any, Any], call: DownstreamCall, method: str,
    params: JsonObject, state: Any,
) -> JsonObject:
    """With `redis_url`: a retry for a call parked on another replica is answered there (cluster.retries)."""
    from elicitgate.cluster import retries

    replicas = gateway.replicas
    assert replicas is not None  # only called with `redis_url`
    home = retries.home_of(state)
    if home is None or home == replicas.id:
        return await gateway.rounds.resume(call, method, state, params.get("inputResponses"))
    return await retries.forward(replicas, home, call, authenticated_principal_of(ctx), method, params)
