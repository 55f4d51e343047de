"""`http.max_body_bytes` on the web surface (hosted pages, inbox, admin API, a request forwarded to another
replica): Starlette reads a form or a body whole, however long it is. `/mcp` checks its own (its 413 is a
JSON-RPC error, faces/streamable.py)."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class _OverLimit(Exception):
    """Raised from `receive` once the body passes the limit (not a ValueError: handlers catch those)."""


class BodyLimit:
    """ASGI middleware: a body over `limit` bytes gets 413, at once when its `Content-Length` says so.

    Added inside Starlette's own error middleware (`add_middleware`, or `Starlette(middleware=...)`), so that
    the refusal raised from `receive` reaches it rather than becoming a 500."""

    def __init__(self, app: ASGIApp, limit: int, exempt: str | None = None) -> None:
        self.app = app
        self.limit = limit
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == self.exempt:
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _OverLimit
            return message

        async def watching(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, watching)
        except _OverLimit:
            if not started:  # else the answer is cut short, and the server closes the connection
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = f"Content Too Large: the request body is over http.max_body_bytes ({self.limit} bytes)\n".encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
            (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"),
        ]})
        await send({"type": "http.response.body", "body": body})
