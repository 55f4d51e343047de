"""Per request, once: how long the gateway took (a histogram by method and face) and the request's ids
on every log line written while serving it. No logging of its own: the pass-through path stays quiet."""

from __future__ import annotations

import time
from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext

from elicitgate.faces.peer import known_peer
from elicitgate.logs import request_context
from elicitgate.metrics import Tally, request_tally


class RequestObserver:
    """Server middleware for one face (`stdio` or `http`)."""

    def __init__(self, face: str, methods: set[str]) -> None:
        self.face = face
        # Children made once: a method the gateway does not serve is counted as "other" (no unbounded labels).
        self._timers = {method: request_tally(method, face) for method in methods}
        self._other = request_tally("other", face)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        start = time.perf_counter()
        peer = known_peer(ctx)
        try:
            client = peer.id if peer is not None else None
            with request_context(request_id=ctx.request_id, method=ctx.method, client=client):
                return await call_next(ctx)
        finally:
            self._timers.get(ctx.method, self._other).observe(time.perf_counter() - start)

    def timer(self, method: str) -> Tally:
        """The histogram child's tally `method`'s requests are observed in, for a path past the middleware chain that
        observes them itself (`faces.server`'s direct routes: one coroutine per request, not this one around it)."""
        return self._timers.get(method, self._other)
