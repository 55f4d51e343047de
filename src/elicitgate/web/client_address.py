"""Who connected, beside whom a trusted proxy says the request is for.

uvicorn replaces the request's client address with the one a trusted proxy's `X-Forwarded-For` names
(`FORWARDED_ALLOW_IPS`, 127.0.0.1 by default), and the connecting address is gone. The admin-token
throttle needs both: the client's, so that one guesser does not slow everyone behind the same proxy,
and the connecting one, which no header can change, so that a new `X-Forwarded-For` per guess does not
start a fresh count. `ClientAddress` keeps the connecting address in the scope, then applies uvicorn's own
proxy-header rules (the server runs with `proxy_headers=False`, so they apply once).
"""

from __future__ import annotations

import os

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

PEER = "elicitgate.peer"
"""Scope key: the address of the TCP peer (a proxy, or the client itself)."""


def trusted_proxies() -> str:
    """The addresses whose proxy headers are believed, as uvicorn reads them."""
    return os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


class ClientAddress:
    """ASGI middleware, outermost: keep the connecting address, then read the trusted proxy headers."""

    def __init__(self, app: ASGIApp, trusted: str | None = None) -> None:
        # uvicorn's middleware is typed with its own ASGI aliases, which starlette's app satisfies at run time
        self.inner = ProxyHeadersMiddleware(app, trusted_hosts=trusted or trusted_proxies())  # pyright: ignore[reportArgumentType]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            scope[PEER] = client[0] if client else None  # in place, as uvicorn's: its access log reads this scope
        await self.inner(scope, receive, send)  # pyright: ignore[reportArgumentType]


def client_address(request: Request) -> str:
    """The client's address (a trusted proxy's `X-Forwarded-For` applied)."""
    return request.client.host if request.client is not None else "?"


def connecting_address(request: Request) -> str | None:
    """The TCP peer's address, when `ClientAddress` runs (None otherwise)."""
    peer = request.scope.get(PEER)
    return peer if isinstance(peer, str) else None
