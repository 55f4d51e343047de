"""The bundled demo server over streamable HTTP at `/mcp`, plus endpoints that answer the way no well-behaved
server does, for the gateway's HTTP wire to meet (`tests/test_upstream_http_wire.py`):

- `/moved`: 307 to `/mcp` (same origin: followed, keeping the method and body);
- `/elsewhere`: 307 to another port (not followed);
- `/accepted`: 202 to every POST, requests included;
- `/html`: 200 with an HTML page.

Run: `python -m tests.peers.odd_http_server --http HOST:PORT`.
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from elicitgate.demo.server import build_demo_server
from elicitgate.hostport import parse_hostport

ANY = ["GET", "POST", "DELETE"]


async def moved(request: Request) -> Response:
    return RedirectResponse("/mcp", status_code=307)


async def elsewhere(request: Request) -> Response:
    port = (request.url.port or 80) + 1
    return RedirectResponse(f"http://127.0.0.1:{port}/mcp", status_code=307)


async def accepted(request: Request) -> Response:
    await request.body()
    return Response(status_code=202)


async def html(request: Request) -> Response:
    await request.body()
    return HTMLResponse("<html><body>a login page</body></html>")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT", required=True)
    host, port = parse_hostport(parser.parse_args().http)
    routes = [Route("/moved", moved, methods=ANY), Route("/elsewhere", elsewhere, methods=ANY),
              Route("/accepted", accepted, methods=["POST"]), Route("/html", html, methods=["POST"])]
    app = build_demo_server().streamable_http_app(host=host, custom_starlette_routes=routes)
    uvicorn.run(app, host=host, port=port, log_level="warning")


if __name__ == "__main__":
    main()
