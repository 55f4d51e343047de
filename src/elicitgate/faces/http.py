"""The streamable HTTP face: `/mcp`, plus `/healthz`, `/metrics` and the web surface (hosted elicitation
pages, inbox, admin API: `elicitgate.web`), behind a Host / Origin check."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from mcp_types import INVALID_REQUEST
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

from elicitgate.faces.auth import McpAuth, RequireBearer
from elicitgate.faces.server import build_server
from elicitgate.gateway import Gateway
from elicitgate.web.app import LearnBaseUrl, attach_hosting, metrics_route, web_routes


def build_http_app(gateway: Gateway, base_url: str | None = None) -> Starlette:
    """`base_url` is where the gateway listens (the OAuth resource default when `http.public_url` is unset)."""
    server = build_server(gateway, face="http")
    auth = McpAuth(gateway.config.http.auth, gateway.config.http.public_url or base_url)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=gateway.config.http.allowed_hosts,
        allowed_origins=gateway.config.http.allowed_origins,
    )

    async def healthz(request: Request) -> Response:
        healthy, body = gateway.health()
        return JSONResponse(body, status_code=200 if healthy else 503)

    hosting = attach_hosting(gateway)
    app = server.streamable_http_app(
        transport_security=security,
        custom_starlette_routes=[Route("/healthz", healthz), metrics_route(), *auth.routes(), *web_routes(hosting)],
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with gateway.running(), server.session_manager.run():
            yield

    app.router.lifespan_context = lifespan
    if gateway.config.http.auth.enabled:
        app.add_middleware(RequireBearer, auth=auth)
    app.add_middleware(LearnBaseUrl, hosting=hosting)
    app.add_middleware(HostGuard, settings=security)
    return app


class HostGuard:
    """DNS-rebinding guard for every route: a Host or Origin outside the allow-list gets 403.

    The SDK checks `/mcp` itself but answers a bad Host with 421; one rule and one status for all routes
    is easier to operate behind proxies, and `/healthz` and `/metrics` need the same protection.
    """

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self._rules = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host, origin = headers.get("host"), headers.get("origin")
            problem = None
            if not self._rules._validate_host(host):  # noqa: SLF001 - the SDK's own allow-list matching
                problem = ("host", host)
            elif origin is not None and not self._rules._validate_origin(origin):  # noqa: SLF001
                problem = ("origin", origin)
            if problem is not None:
                header, value = problem
                body = {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {
                        "code": INVALID_REQUEST,
                        "message": f"{header.capitalize()} header not allowed",
                        "data": {"source": "elicitgate", header: value, "setting": f"http.allowed_{header}s"},
                    },
                }
                await JSONResponse(body, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
