"""A request's headers as the gateway's own middleware and `/mcp` read them: made once per request and kept on its
scope, so that the Host / Origin guard and the endpoint behind it share one (each built Starlette's `Headers` of its
own, which copies the header list and scans all of it for every lookup)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.types import Scope

HEADERS = "elicitgate.headers"
"""The scope key under which a request's `RequestHeaders` is kept once made."""


class RequestHeaders(Headers):
    """Starlette's `Headers` of a request, with lookups by name in a dict made once: Starlette's scan every header
    for each lookup, and a name not sent (most of the five `/mcp` looks for) costs it a `KeyError` too. The first of
    a repeated name wins, as in Starlette's. It reads the scope's header list as it is (Starlette's copies it)."""

    def __init__(self, *, scope: Scope) -> None:  # pyright: ignore[reportMissingSuperCall]  # its `_list`, uncopied
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        if type(raw) is not list:  # pyright: ignore[reportUnnecessaryComparison]  # ASGI allows any iterable
            raw = scope["headers"] = list(raw)  # a list, as Starlette's makes it
        self._list = raw
        self.named: dict[bytes, bytes] = dict(reversed(raw))
        """The first value of each header by its lower-case name, as sent (a hot path's look-ups with no call)."""

    @classmethod
    def of(cls, scope: Scope) -> RequestHeaders:
        """The request's headers, made at the first call for its scope and kept there (made again when the scope's
        header list is not the one they were made of: a middleware's copy of the scope with other headers)."""
        headers: Any = scope.get(HEADERS)
        if type(headers) is not cls or headers._list is not scope["headers"]:
            headers = scope[HEADERS] = cls(scope=scope)
        return headers

    def first(self, name: bytes) -> str | None:
        """The first value of a header by its lower-case name, or None."""
        value = self.named.get(name)
        return None if value is None else value.decode("latin-1")

    def __getitem__(self, key: str) -> str:
        value = self.named.get(key.lower().encode("latin-1"))
        if value is None:
            raise KeyError(key)
        return value.decode("latin-1")

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower().encode("latin-1") in self.named

    def get(self, key: str, default: Any = None) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        value = self.named.get(key.lower().encode("latin-1"))
        return default if value is None else value.decode("latin-1")
