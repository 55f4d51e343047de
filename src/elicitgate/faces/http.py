"""The streamable HTTP face: `/mcp`, plus `/healthz` and `/metrics`, behind a Host / Origin check."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp.server.transport_security import TransportSecuritySettings

from elicitgate.faces.server import build_server
from elicitgate.gateway import Gateway


def build_http_app(gateway: Gateway) -> Starlette:
    server = build_server(gateway)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=gateway.config.http.allowed_hosts,
        allowed_origins=gateway.config.http.allowed_origins,
    )
    guard = _HostGuard(security)

    async def healthz(request: Request) -> Response:
        if (refusal := guard.check(request)) is not None:
            return refusal
        healthy, body = gateway.health()
        return JSONResponse(body, status_code=200 if healthy else 503)

    async def metrics(request: Request) -> Response:
        if (refusal := guard.check(request)) is not None:
            return refusal
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    app = server.streamable_http_app(
        transport_security=security,
        custom_starlette_routes=[Route("/healthz", healthz), Route("/metrics", metrics)],
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with gateway.running(), server.session_manager.run():
            yield

    app.router.lifespan_context = lifespan
    return app


class _HostGuard:
    """The same DNS-rebinding rule `/mcp` gets, for the plain routes beside it."""

    def __init__(self, settings: TransportSecuritySettings) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self._middleware = TransportSecurityMiddleware(settings)

    def check(self, request: Request) -> Response | None:
        host_ok = self._middleware._validate_host(request.headers.get("host"))  # noqa: SLF001
        origin = request.headers.get("origin")
        origin_ok = origin is None or self._middleware._validate_origin(origin)  # noqa: SLF001
        if host_ok and origin_ok:
            return None
        return JSONResponse({"error": "host or origin not allowed"}, status_code=403)
