"""Where an upstream's `notifications/elicitation/complete` goes: the client that accepted the URL-mode
elicitation (or a 2026-07-28 client's parked call), or the one that got the -32042 listing it.

Bounded, since an upstream may never send the completion and a -32042 may list any number of items:
an entry lives at most `ttl` seconds, the table holds at most `limit` entries (the oldest go first),
and one -32042 adds at most `per_error` of its items (the rest get no completion relayed).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elicitgate.contracts import DownstreamPeer, UrlCompletionTarget

URL_ROUTE_TTL = 3600.0
MAX_URL_ROUTES = 10_000
MAX_ROUTES_PER_ERROR = 32


@dataclass(frozen=True, slots=True)
class SessionTarget:
    """A handshake-era client's session as a `UrlCompletionTarget`: it outlives the call that accepted the
    interaction (or got the -32042). Equal for the same client, so that its routes go with it (`drop_target`)."""

    peer: DownstreamPeer

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """A URL-mode elicitation this client accepted is done: `notifications/elicitation/complete`."""
        if not self.peer.closed:
            await self.peer.connection.outbound.notify("notifications/elicitation/complete", params)


class UrlRoutes:
    def __init__(
        self, *, ttl: float = URL_ROUTE_TTL, limit: int = MAX_URL_ROUTES, per_error: int = MAX_ROUTES_PER_ERROR
    ) -> None:
        self.ttl, self.limit, self.per_error = ttl, limit, per_error
        self._routes: OrderedDict[tuple[str, str], tuple[UrlCompletionTarget, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._routes)

    def add(self, server: str, elicitation_id: str, target: UrlCompletionTarget) -> None:
        now = time.monotonic()
        key = (server, elicitation_id)
        self._routes.pop(key, None)
        self._routes[key] = (target, now + self.ttl)
        # Entries are in the order they expire (one ttl for all): the expired and the excess are in front.
        while self._routes:
            _, (_, expires) = next(iter(self._routes.items()))
            if expires > now and len(self._routes) <= self.limit:
                break
            self._routes.popitem(last=False)

    def get(self, server: str, elicitation_id: str, *, pop: bool) -> UrlCompletionTarget | None:
        key = (server, elicitation_id)
        entry = self._routes.pop(key, None) if pop else self._routes.get(key)
        if entry is None or entry[1] <= time.monotonic():
            return None
        return entry[0]

    def drop_target(self, target: UrlCompletionTarget) -> None:
        for key in [k for k, (t, _) in self._routes.items() if t == target]:
            del self._routes[key]
