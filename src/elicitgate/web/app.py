"""Mounting the web surface: routes for the HTTP face, or a side server next to the stdio face."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Generator
from importlib import resources

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from elicitgate.elicitation.hosting import Hosting
from elicitgate.gateway import Gateway
from elicitgate.hostport import http_url, parse_hostport
from elicitgate.web.access_log import uvicorn_log_config
from elicitgate.web.admin import AdminRoutes
from elicitgate.web.admin_auth import AdminAuth
from elicitgate.web.body_limit import BodyLimit
from elicitgate.web.client_address import ClientAddress
from elicitgate.web.guard import HostGuard, security_settings
from elicitgate.web.http_protocol import HttpLimits, limited_protocol
from elicitgate.web.inbox_page import InboxPage
from elicitgate.web.pages import PageRoutes
from elicitgate.web.responses import nosniff

logger = logging.getLogger(__name__)

STATIC = {
    "hosted.css": "text/css; charset=utf-8",
    "form.js": "text/javascript; charset=utf-8",
    "host-ui.js": "text/javascript; charset=utf-8",
    "inbox.js": "text/javascript; charset=utf-8",
}


def _static_files() -> dict[str, bytes]:
    folder = resources.files("elicitgate.web") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC}


def web_routes(gateway: Gateway) -> list[Route]:
    """The hosted pages, the inbox and the admin API of the gateway's `hosting`."""
    hosting = _hosting_of(gateway)
    auth = AdminAuth(hosting.admin_token, gateway.config.http.public_url)
    pages = PageRoutes(hosting)
    admin = hosting.admin = AdminRoutes(hosting, gateway.broker, gateway.audit, auth)
    inbox = InboxPage(admin)
    files = _static_files()

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in files:
            return Response("not found", status_code=404, media_type="text/plain")
        return nosniff(Response(files[name], media_type=STATIC[name]), cache="no-cache")

    return [
        Route("/static/{name}", static),
        Route("/e/{token}", pages.show, methods=["GET"]),
        Route("/e/{token}", pages.post, methods=["POST"]),
        Route("/e/{token}/ui", pages.ui_resource, methods=["GET"]),
        Route("/e/{token}/ui-answer", pages.ui_answer, methods=["POST"]),
        Route("/inbox", inbox.inbox, methods=["GET"]),
        Route("/inbox", inbox.login, methods=["POST"]),
        Route("/api/openapi.json", admin.openapi, methods=["GET"]),
        Route("/api/audit", admin.audit, methods=["GET"]),
        Route("/api/elicitations", admin.list, methods=["GET"]),
        Route("/api/elicitations/events", admin.events, methods=["GET"]),
        Route("/api/elicitations/{id}", admin.show, methods=["GET"]),
        Route("/api/elicitations/{id}/answer", admin.answer, methods=["POST"]),
        Route("/api/elicitations/{id}/cancel", admin.cancel, methods=["POST"]),
        Route("/api/elicitations/{id}/release", admin.release, methods=["POST"]),
        Route("/inbox/release/{id}", inbox.inbox_release, methods=["POST"]),
    ]


def metrics_route() -> Route:
    """`/metrics` in Prometheus' text format (docs/operations.md)."""

    async def metrics(request: Request) -> Response:
        # prometheus_client's package (its exposition: http.server, urllib.request; ~0.9 MiB) at the first scrape
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", metrics, methods=["GET"])


class LearnBaseUrl:
    """Until the gateway knows its public address, take it from the first request's socket."""

    def __init__(self, app: ASGIApp, hosting: Hosting) -> None:
        self.app = app
        self.hosting = hosting

    def learn(self, scope: Scope) -> None:
        """From an HTTP request's scope, while the address is not known."""
        if self.hosting.base_url is None:
            self.hosting.learn_base_url(scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.learn(scope)
        await self.app(scope, receive, send)


def _hosting_of(gateway: Gateway) -> Hosting:
    assert gateway.hosting is not None, "a gateway serving web pages is built with face='http' or http.hosted_listen"
    return gateway.hosting


class _QuietServer(uvicorn.Server):
    """A uvicorn server inside the gateway's own event loop: the gateway owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


@contextlib.asynccontextmanager
async def side_server(gateway: Gateway, listen: str) -> AsyncGenerator[Hosting]:
    """`http.hosted_listen` for the stdio face: the hosted pages, inbox, admin API and `/metrics` on their own port."""
    host, port = parse_hostport(listen)
    hosting = _hosting_of(gateway)
    hosting.serve_at(http_url(host, port))
    http = gateway.config.http
    app: ASGIApp = Starlette(routes=[metrics_route(), *web_routes(gateway)],
                             middleware=[Middleware(BodyLimit, limit=http.max_body_bytes)])
    app = ClientAddress(HostGuard(app, settings=security_settings(http)))
    server = _QuietServer(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off",
                                         log_config=uvicorn_log_config(), proxy_headers=False,
                                         http=limited_protocol(HttpLimits.of(http))))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            yield hosting
        finally:
            server.should_exit = True
