"""tests/peers/py_server.py over streamable HTTP at `/mcp`, with an `initialize` that is slow and one at a
time: each takes `--initialize-seconds`, after the ones before it (a server whose session set-up is
costly, on a busy machine). `GET /initializes` says how many were at most waiting or running at once.

Run: `python -m tests.peers.slow_init_server --http HOST:PORT [--initialize-seconds S]`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitgate.hostport import parse_hostport
from tests.peers import py_server

SEEN = {"now": 0, "most": 0, "total": 0}


class SlowInitialize:
    """ASGI middleware: a POST whose body is an `initialize` request waits for its turn, then `seconds`."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds
        self.turn = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in messages)
        try:
            initialize = json.loads(body).get("method") == "initialize"
        except (ValueError, AttributeError):
            initialize = False

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        if not initialize:
            await self.app(scope, replay, send)
            return
        SEEN["now"] += 1
        SEEN["total"] += 1
        SEEN["most"] = max(SEEN["most"], SEEN["now"])
        try:
            async with self.turn:
                await anyio.sleep(self.seconds)
        finally:
            SEEN["now"] -= 1
        await self.app(scope, replay, send)


async def initializes(request: Request) -> Response:
    return JSONResponse(SEEN)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT", required=True)
    parser.add_argument("--initialize-seconds", type=float, default=0.1)
    args = parser.parse_args()
    host, port = parse_hostport(args.http)
    routes: list[Any] = [Route("/initializes", initializes)]
    app = py_server.build().streamable_http_app(host=host, custom_starlette_routes=routes)
    uvicorn.run(SlowInitialize(app, args.initialize_seconds), host=host, port=port, log_level="warning")


if __name__ == "__main__":
    main()
