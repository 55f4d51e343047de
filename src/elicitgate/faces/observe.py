"""Per request, once: how long the gateway took (a histogram by method and face) and the request's ids
on every log line written while serving it. No logging of its own: the pass-through path stays quiet."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, cast

from mcp.server.context import HandlerResult, ServerRequestContext

from elicitgate.faces.dispatch import DirectHandler
from elicitgate.faces.peer import known_peer
from elicitgate.logs import request_context
from elicitgate.metrics import REQUEST_DURATION


class RequestObserver:
    """Server middleware for one face (`stdio` or `http`)."""

    def __init__(self, face: str, methods: set[str]) -> None:
        self.face = face
        # Children made once: a method the gateway does not serve is counted as "other" (no unbounded labels).
        self._timers = {method: REQUEST_DURATION.labels(method=method, face=face) for method in methods}
        self._other = REQUEST_DURATION.labels(method="other", face=face)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        start = time.perf_counter()
        peer = known_peer(ctx)
        try:
            client = peer.id if peer is not None else None
            with request_context(request_id=ctx.request_id, method=ctx.method, client=client):
                return await call_next(ctx)
        finally:
            self._timers.get(ctx.method, self._other).observe(time.perf_counter() - start)

    def around(self, handler: DirectHandler) -> DirectHandler:
        """`handler` observed as through this middleware, for a path past the middleware chain: this
        middleware's own coroutine with `handler` as the rest of the chain (one coroutine per request)."""
        return cast(DirectHandler, partial(self.__call__, call_next=handler))
