"""The streamable HTTP face: `/mcp`, plus `/healthz`, `/metrics` and the web surface (hosted elicitation
pages, inbox, admin API: `elicitgate.web`), behind a Host / Origin check."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncGenerator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.logging import TRACE_LOG_LEVEL

from elicitgate.config import HeadlessConfig
from elicitgate.elicitation.headless import HEADER_MARKED, header_matches
from elicitgate.faces.auth import MCP_PATH, McpAuth, RequireBearer
from elicitgate.faces.server import build_server
from elicitgate.faces.streamable import StreamableHttpEndpoint
from elicitgate.gateway import Gateway
from elicitgate.web.app import LearnBaseUrl, metrics_route, web_routes
from elicitgate.web.body_limit import BodyLimit
from elicitgate.web.client_address import ClientAddress
from elicitgate.web.guard import HostGuard, security_settings
from elicitgate.web.http_protocol import DirectRoute, LimitedHttpTools


class HttpFaceServer(uvicorn.Server):
    """uvicorn for the HTTP face: as it starts to shut down, `/mcp` ends its sessions and streams first, so
    that its wait for open connections does not wait on a client's GET stream or on a person."""

    def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
        super().__init__(config)
        self._mcp: StreamableHttpEndpoint = app.state.mcp
        _route_mcp_directly(config, app)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        protocol = self.config.http_protocol_class
        if issubclass(protocol, LimitedHttpTools):
            protocol.server_loop = asyncio.get_running_loop()  # each connection's, without asking asyncio each time
        await super().startup(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._mcp.stop()
        await super().shutdown(sockets)


class HttpFaceApp(Starlette):
    """The HTTP face's app. A request to `/mcp` itself goes straight through the middleware that applies to it
    (Host / Origin, base URL, bearer auth, headless marks) to its endpoint, past Starlette's error and exception
    middleware and router, whose wrapped `send`s and lookups were a good part of what each `/mcp` request cost the
    face; everything else, `/mcp/` (redirected) and the lifespan go through Starlette as built. Not with
    `redis_url`: `ToOwner` sees every request there."""

    mcp_direct: ASGIApp | None = None
    mcp_front: McpFront | None = None
    """`mcp_direct`'s pieces, for the connection's protocol to run its checks before the request's task starts."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct = self.mcp_direct
        if direct is not None and scope["type"] == "http" and scope["path"] == MCP_PATH:
            scope["app"] = self
            await direct(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def build_http_app(gateway: Gateway, base_url: str | None = None) -> Starlette:
    """`base_url` is where the gateway listens (the OAuth resource default when `http.public_url` is unset)."""
    server = build_server(gateway, face="http")
    auth = McpAuth(gateway.config.http.auth, gateway.config.http.public_url or base_url)
    security = security_settings(gateway.config.http)

    async def healthz(request: Request) -> Response:
        healthy, body = gateway.health()
        return JSONResponse(body, status_code=200 if healthy else 503)

    hosting = gateway.hosting
    assert hosting is not None, "the HTTP face serves the hosted pages: build its Gateway with face='http'"
    hosting.serve_at(base_url)
    http = gateway.config.http
    shared = None
    if gateway.replicas is not None:  # broken streams resumable on any replica
        from elicitgate.cluster.streams import SharedStreams

        shared = SharedStreams(gateway.replicas, max_events=http.resume_events_per_session,
                               ttl=http.session_idle_timeout)
    mcp = StreamableHttpEndpoint(server, security, idle_timeout=http.session_idle_timeout,
                                 max_sessions=http.max_sessions, json_wait=http.json_wait,
                                 per_principal=http.principal_share if http.auth.enabled else None,
                                 max_body_size=http.max_body_bytes,
                                 grace=gateway.config.elicitation.abandoned_grace,
                                 end_broken=gateway.config.elicitation.abandoned == "cancel",
                                 events_per_session=http.resume_events_per_session,
                                 events_total=http.resume_events_total, shared=shared)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None]:
        async with gateway.running(), mcp.run():
            yield

    at_mcp = _mark_headless(mcp, gateway.config.elicitation.headless)
    app = HttpFaceApp(
        routes=[
            Route(MCP_PATH, at_mcp),
            Route("/healthz", healthz), metrics_route(), *auth.routes(), *web_routes(gateway),
        ],
        lifespan=lifespan,
    )
    app.state.mcp = mcp
    mcp.app = app  # a request of a session held here that another replica received runs through it all
    if gateway.replicas is not None:  # innermost: below the Host check and the auth, like the routes
        from elicitgate.web.replicas import ToOwner, WebReplica

        app.add_middleware(ToOwner, web=WebReplica(gateway.replicas, hosting, gateway.broker))
    app.add_middleware(BodyLimit, limit=http.max_body_bytes, exempt=MCP_PATH)  # outside ToOwner: it reads bodies
    if gateway.config.http.auth.enabled:
        app.add_middleware(RequireBearer, auth=auth)
        at_mcp = RequireBearer(at_mcp, auth=auth)
    app.add_middleware(LearnBaseUrl, hosting=hosting)
    app.add_middleware(HostGuard, settings=security)
    if gateway.replicas is None:  # the same middleware as `add_middleware`'s, in the same order, for `/mcp` alone
        front = app.mcp_front = McpFront(HostGuard(LearnBaseUrl(at_mcp, hosting=hosting), settings=security))
        app.mcp_direct = front.guard
    if gateway.replicas is not None:
        app.middleware_stack = app.build_middleware_stack()  # other replicas' requests may come before any here
    return app


def _route_mcp_directly(config: uvicorn.Config, app: Starlette) -> None:
    """Requests to `/mcp` go from the connection's protocol to `HttpFaceApp.mcp_direct`, past `ClientAddress` and the
    app's own dispatch (`DirectRoute` does their work on the scope), when the server is the face's as `serve` builds
    it: `LimitedHttpTools` in front of `ClientAddress(app)`, no proxy-header or message-logging middleware of
    uvicorn's own in between."""
    protocol, outer = config.http, config.app
    front = app.mcp_front if isinstance(app, HttpFaceApp) else None
    if (front is None or not isinstance(protocol, type) or not issubclass(protocol, LimitedHttpTools)
            or not isinstance(outer, ClientAddress) or outer.inner.app is not app or config.proxy_headers
            or config.log_level in ("trace", TRACE_LOG_LEVEL)):
        return
    endpoint = front.endpoint
    at_body = endpoint.at_body if isinstance(endpoint, StreamableHttpEndpoint) else None  # not behind auth or marks
    protocol.direct = DirectRoute(MCP_PATH.encode(), endpoint, app, outer.inner, admit=front.admit, at_body=at_body)


class McpFront:
    """What stands in front of `/mcp`'s endpoint (`HostGuard`, then `LearnBaseUrl`), taken apart so that the
    connection's protocol runs its checks as the request's head is parsed (`DirectRoute.admit`) and starts the
    endpoint itself: two fewer frames for every resumption of the request's task."""

    __slots__ = ("guard", "learn", "endpoint")

    def __init__(self, guard: HostGuard) -> None:
        assert isinstance(guard.app, LearnBaseUrl), "HostGuard(LearnBaseUrl(endpoint)), as build_http_app makes it"
        self.guard = guard
        self.learn = guard.app
        self.endpoint = guard.app.app

    def admit(self, scope: dict[str, Any]) -> ASGIApp | None:
        """`guard`'s 403 for the request, or None with the base URL learnt (the two middlewares' work, in order)."""
        refusal = self.guard.refusal(scope)
        if refusal is None:
            self.learn.learn(scope)
        return refusal


def _mark_headless(app: ASGIApp, config: HeadlessConfig) -> ASGIApp:
    """`/mcp`, as it is when no `elicitation.headless.headers` are configured, else behind `_MarkHeadless`."""
    return _MarkHeadless(app, config) if config.headers else app


class _MarkHeadless:
    """Marks each request to `/mcp` that carries an `elicitation.headless.headers` header while it is served
    (the client's peer keeps the mark: `faces.server`). A class: Starlette serves a plain function as a
    request handler, not as an ASGI app."""

    def __init__(self, app: ASGIApp, config: HeadlessConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        token = HEADER_MARKED.set(header_matches(self.config, headers))
        try:
            await self.app(scope, receive, send)
        finally:
            HEADER_MARKED.reset(token)
