"""Mounting the web surface: routes for the HTTP face, or a side server next to the stdio face."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from importlib import resources
from typing import Any

import anyio
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from elicitgate.web.access_log import uvicorn_log_config
from elicitgate.web.admin import AdminRoutes
from elicitgate.web.hosting import Hosting
from elicitgate.web.pages import PageRoutes

logger = logging.getLogger(__name__)

STATIC = {
    "hosted.css": "text/css; charset=utf-8",
    "form.js": "text/javascript; charset=utf-8",
    "host-ui.js": "text/javascript; charset=utf-8",
    "inbox.js": "text/javascript; charset=utf-8",
}


def attach_hosting(gateway: Any, base_url: str | None = None) -> Hosting:
    """Give the broker a web surface (idempotent: the face that starts the web server calls it)."""
    hosting = gateway.broker.hosting
    if hosting is None:
        hosting = gateway.broker.hosting = Hosting(gateway, base_url)
    return hosting


def _static_files() -> dict[str, bytes]:
    folder = resources.files("elicitgate.web") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC}


def web_routes(hosting: Hosting) -> list[BaseRoute]:
    pages = PageRoutes(hosting)
    admin = AdminRoutes(hosting)
    files = _static_files()

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in files:
            return Response("not found", status_code=404, media_type="text/plain")
        response = Response(files[name], media_type=STATIC[name])
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    return [
        Route("/static/{name}", static),
        Route("/e/{token}", pages.show, methods=["GET"]),
        Route("/e/{token}", pages.post, methods=["POST"]),
        Route("/e/{token}/ui", pages.ui_resource, methods=["GET"]),
        Route("/e/{token}/ui-answer", pages.ui_answer, methods=["POST"]),
        Route("/inbox", admin.inbox, methods=["GET"]),
        Route("/inbox", admin.login, methods=["POST"]),
        Route("/api/openapi.json", admin.openapi, methods=["GET"]),
        Route("/api/audit", admin.audit, methods=["GET"]),
        Route("/api/elicitations", admin.list, methods=["GET"]),
        Route("/api/elicitations/events", admin.events, methods=["GET"]),
        Route("/api/elicitations/{id}", admin.show, methods=["GET"]),
        Route("/api/elicitations/{id}/answer", admin.answer, methods=["POST"]),
        Route("/api/elicitations/{id}/cancel", admin.cancel, methods=["POST"]),
        Route("/api/elicitations/{id}/release", admin.release, methods=["POST"]),
        Route("/inbox/release/{id}", admin.inbox_release, methods=["POST"]),
    ]


def metrics_route() -> Route:
    """`/metrics` in Prometheus' text format (docs/operations.md)."""

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", metrics, methods=["GET"])


class LearnBaseUrl:
    """Until the gateway knows its public address, take it from the first request's socket."""

    def __init__(self, app: ASGIApp, hosting: Hosting) -> None:
        self.app = app
        self.hosting = hosting

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hosting.base_url is None:
            self.hosting.learn_base_url(scope)
        await self.app(scope, receive, send)


class _QuietServer(uvicorn.Server):
    """A uvicorn server inside the gateway's own event loop: the gateway owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def side_server(gateway: Any, listen: str):  # type: ignore[no-untyped-def]
    """`http.hosted_listen` for the stdio face: the hosted pages, inbox, admin API and `/metrics` on their own port."""
    from elicitgate.faces.http import HostGuard
    from mcp.server.transport_security import TransportSecuritySettings

    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    hosting = attach_hosting(gateway, f"http://{shown}:{port}")
    app: ASGIApp = Starlette(routes=[metrics_route(), *web_routes(hosting)])
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=gateway.config.http.allowed_hosts,
        allowed_origins=gateway.config.http.allowed_origins,
    )
    app = HostGuard(app, settings=security)
    server = _QuietServer(uvicorn.Config(app, host=host, port=int(port), log_level="warning", lifespan="off",
                                         log_config=uvicorn_log_config()))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            yield hosting
        finally:
            server.should_exit = True
