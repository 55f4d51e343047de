"""Run an `mcp` SDK low-level server over stdio, streamable HTTP or legacy SSE (demo and test peers)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
from mcp_types import methods

from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from elicitgate import codecache, heap
from elicitgate.hostport import parse_hostport

if TYPE_CHECKING:
    from starlette.applications import Starlette

# uvicorn, the SSE transport and the gateway's starlette helpers are imported by the HTTP and SSE modes only: a demo
# upstream over stdio (the usual one, and the bench's) answers its handshake without them.


def sse_app(server: Server) -> Starlette:
    """The 2024-11-05 HTTP+SSE transport: `GET /sse` opens the stream, `POST /messages/` carries requests."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    from mcp.server.sse import SseServerTransport

    from elicitgate._compat import raw_send

    transport = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, raw_send(request)) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(routes=[Route("/sse", handle_sse), Mount("/messages/", app=transport.handle_post_message)])


def run_server(server: Server, *, http: str | None = None, sse: str | None = None) -> None:
    """Serve until killed: streamable HTTP at `/mcp` with `http`, SSE at `/sse` with `sse`, else stdio."""
    # The SDK's server checks every request against the spec's schemas per protocol version (`mcp_types.methods`,
    # which `elicitgate.sdk_packages` defers to the first read): load them now, before the heap settles and while
    # the client is still starting, not as its first request waits. The 2026-07-28 schemas are not among them: they
    # are built at the first 2026-07-28 request (`sdk_packages.ROWS_BUILT_WHEN_READ`), which a gateway does not send
    # to a server that accepts its handshake.
    _ = methods.CLIENT_REQUESTS  # not one of the names seeded there: reading it loads the module
    codecache.finish()
    heap.settle()  # what the start-up built lives for the process (and collections resume if `hold` paused them)
    if http:
        import uvicorn

        host, port = parse_hostport(http)
        uvicorn.run(server.streamable_http_app(host=host), host=host, port=port, log_level="warning")
        return
    if sse:
        import uvicorn

        host, port = parse_hostport(sse)
        uvicorn.run(sse_app(server), host=host, port=port, log_level="warning")
        return

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def serve_main(build: Callable[[], Server], description: str | None) -> None:
    """The command line of a bundled demo server: stdio, or `--http HOST:PORT`."""
    if not sys.argv[1:]:  # stdio, as a gateway starts it: argparse (~1% of its start-up) only to read options
        run_server(build())
        return
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")
    args = parser.parse_args()
    run_server(build(), http=args.http)
