"""Notice receivers for the notice tests: real HTTP servers on 127.0.0.1 that Apprise's `json://` (and
`ntfy://`) posts reach, one that answers 500, and one that takes the connection and never answers."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import free_port

LINK = re.compile(r"https?://\S+/e/[A-Za-z0-9_-]+")


class Receiver:
    """What one receiver got: the JSON bodies posted to it, in order."""

    def __init__(self, port: int, status: int) -> None:
        self.port = port
        self.status = status
        self.posts: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._changed = anyio.Event()

    def url(self, scheme: str = "json", path: str = "notices") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    async def take(self, request: Request) -> Response:
        body = await request.body()
        self.paths.append(request.url.path)
        self.posts.append(json.loads(body) if body else {})
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        return JSONResponse({"ok": self.status < 400}, status_code=self.status)

    async def wait(self, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        """Until `count` posts have come in."""
        with anyio.fail_after(timeout):
            while len(self.posts) < count:
                await self._changed.wait()
        return self.posts


def text_of(post: dict[str, Any]) -> str:
    """A json:// notice's title and body (Apprise posts `{"title", "message", ...}`)."""
    return f"{post.get('title', '')}\n{post.get('message', '')}"


def link_in(post: dict[str, Any]) -> str:
    match = LINK.search(text_of(post))
    assert match, post
    return match.group(0)


@asynccontextmanager
async def receiver(status: int = 200) -> AsyncIterator[Receiver]:
    port = free_port()
    got = Receiver(port, status)
    app = Starlette(routes=[Route("/{path:path}", got.take, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.02)
        try:
            yield got
        finally:
            server.should_exit = True


class Silent:
    """A `json://` target whose server takes the connection and never answers (a target that hangs)."""

    def __init__(self, port: int) -> None:
        self.url = f"json://127.0.0.1:{port}/hangs"
        self.connected = anyio.Event()


@asynccontextmanager
async def silent_receiver() -> AsyncIterator[Silent]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    silent = Silent(listener.extra(anyio.abc.SocketAttribute.local_port))
    held: list[anyio.abc.SocketStream] = []

    async def hold(stream: anyio.abc.SocketStream) -> None:
        held.append(stream)
        silent.connected.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        try:
            yield silent
        finally:
            tg.cancel_scope.cancel()


def closed_port_url() -> str:
    """A `json://` URL at a port nothing listens on (connection refused)."""
    return f"json://127.0.0.1:{free_port()}/closed"
