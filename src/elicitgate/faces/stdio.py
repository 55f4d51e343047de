"""The stdio face: one client on our stdin / stdout.

With `http.hosted_listen` set, a side web server serves the hosted elicitation pages, the inbox, the
admin API and `/metrics` (stdio itself has no web server), see docs/hosting.md.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from elicitgate.faces.dispatch import serve_connection
from elicitgate.faces.server import build_server
from elicitgate.faces.stdio_pipes import stdio_wire
from elicitgate.gateway import Gateway


async def serve_stdio(gateway: Gateway, on_ready: Callable[[], None] | None = None) -> None:
    server = build_server(gateway, face="stdio")
    async with AsyncExitStack() as stack:
        listen = gateway.config.http.hosted_listen
        if listen is not None:
            from elicitgate.web.app import side_server

            await stack.enter_async_context(side_server(gateway, listen))
        await stack.enter_async_context(gateway.running())
        if on_ready is not None:
            on_ready()
        wire = await stack.enter_async_context(stdio_wire())
        await serve_connection(server, wire, server.create_initialization_options(), server.routes)
