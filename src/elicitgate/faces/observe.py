"""Per request, once: how long the gateway took (a histogram by method and face) and the request's ids
on every log line written while serving it. No logging of its own: the pass-through path stays quiet."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from prometheus_client import Histogram

from mcp.server.context import HandlerResult, ServerRequestContext

from elicitgate.faces.peer import known_peer
from elicitgate.logs import request_context
from elicitgate.metrics import REQUEST_DURATION

Handler = Callable[[ServerRequestContext[Any, Any]], Awaitable[dict[str, Any]]]


class RequestObserver:
    """Server middleware for one face (`stdio` or `http`)."""

    def __init__(self, face: str, methods: set[str]) -> None:
        self.face = face
        # Children made once: a method the gateway does not serve is counted as "other" (no unbounded labels).
        self._timers = {method: REQUEST_DURATION.labels(method=method, face=face) for method in methods}
        self._other = REQUEST_DURATION.labels(method="other", face=face)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        return await self._observed(self._timers.get(ctx.method, self._other), call_next, ctx)

    def around(self, method: str, handler: Handler) -> Handler:
        """`handler` of `method` observed as through this middleware, for a path past the middleware chain
        (one coroutine per request, not one for the observer and one for the handler)."""
        return partial(self._observed, self._timers.get(method, self._other), handler)

    @staticmethod
    async def _observed(timer: Histogram, handler: Any, ctx: ServerRequestContext[Any, Any]) -> Any:
        start = time.perf_counter()
        peer = known_peer(ctx)
        try:
            with request_context(request_id=ctx.request_id, method=ctx.method, client=peer.id if peer is not None else None):
                return await handler(ctx)
        finally:
            timer.observe(time.perf_counter() - start)
