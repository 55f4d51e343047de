"""Servers that serve both eras: the handshake for everything, 2026-07-28 for the calls that need it.

An `mcp` SDK server answers `initialize` and `server/discover` alike, whatever style its tools ask in:
push-style tools (`ctx.elicit`, `ctx.session.elicit_form`) can ask only on a handshake-era connection,
tools that *return* a hand-written `InputRequiredResult` only on a 2026-07-28 one (on a handshake-era
connection the SDK replaces their result with -32603 "Handler returned an invalid result"), and tools
with `Resolve(...)` / `Elicit[...]` markers in both. So the link keeps its handshake-era connection
(`era: auto`), and a call that comes back with exactly that error is made once more over a 2026-07-28
connection to the same server; its tool (prompt, resource) then goes 2026-07-28 from then on.

Making a call again is safe only for a handler that is re-executable: a 2026-07-28 handler is by design
(each round of a multi round-trip runs it again), a push-style one is not. So the call is made again
only when all of these hold: the server's own words for a handler that returned a result its connection
could not carry, no request from the server during the call (a handler that asked by push is
push-style), `era: auto`, a server that answers `server/discover`, and a tool not already found not to
work in 2026-07-28 either. Each tool is tried so at most once until the link reconnects: what the
2026-07-28 attempt answers decides where its later calls go (docs/routing.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio
from mcp_types import INTERNAL_ERROR

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.errors import ConnectError
from elicitgate.upstreams.connection import UpstreamConnection

logger = logging.getLogger(__name__)

INVALID_RESULT = "Handler returned an invalid result"
"""The `mcp` SDK's message (with -32603) for a handler's result its connection's era cannot carry:
what a handler returning `InputRequiredResult` gets on a handshake-era connection."""

REISSUABLE: dict[str, str] = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The methods whose result may be `input_required` in 2026-07-28, and the parameter naming what is called."""

CallKey = tuple[str, str]
"""(method, the tool or prompt name or the resource URI as the server knows it)."""

Learned = Literal["modern", "handshake"]


def call_key(method: str, params: Mapping[str, Any]) -> CallKey | None:
    """What the era is learned for: the tool, prompt or resource a request calls; None for other methods."""
    field = REISSUABLE.get(method)
    called = params.get(field) if field is not None else None
    return (method, called) if isinstance(called, str) else None


def needs_2026(exc: MCPError) -> bool:
    """Whether an upstream error is the SDK's answer to a handler whose result the handshake era cannot carry."""
    return exc.error.code == INTERNAL_ERROR and exc.error.message == INVALID_RESULT


class DualEra:
    """One server's second era: whether it serves 2026-07-28 besides the handshake, its 2026-07-28
    connection (opened on first need, shared by every client: that era has no session), and where each
    call learned to go."""

    def __init__(self, server: str, era: str, open_modern: Callable[[], Awaitable[UpstreamConnection]]) -> None:
        self.server = server
        self.enabled = era == "auto"
        """`era: handshake` (or `modern`) in the config: one era for every call, nothing made again."""
        self._open = open_modern
        self.serves_modern: bool | None = None
        """None until asked (the first call that needs it, or `doctor`)."""
        self.refusal: str | None = None
        """Why the server does not serve 2026-07-28, when it does not."""
        self.learned: dict[CallKey, Learned] = {}
        self._conn: UpstreamConnection | None = None
        self._lock = anyio.Lock()

    def goes_modern(self, key: CallKey | None) -> bool:
        return key is not None and self.learned.get(key) == "modern"

    def may_reissue(self, key: CallKey | None, exc: MCPError, asked: list[str]) -> bool:
        """Whether a call on the handshake-era connection that failed with `exc` is made again in 2026-07-28
        (the module's docstring says why each condition)."""
        return (
            self.enabled
            and key is not None
            and needs_2026(exc)
            and not asked
            and self.serves_modern is not False
            and key not in self.learned
        )

    async def connection(self) -> UpstreamConnection | None:
        """The 2026-07-28 connection to the server, opened (`server/discover`) on first need; None when the
        server does not serve 2026-07-28."""
        if not self.enabled or self.serves_modern is False:
            return None
        conn = self._conn
        if conn is not None and not conn.closed.is_set():
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and not conn.closed.is_set():
                return conn
            try:
                conn = await self._open()
            except ConnectError as exc:
                if self.serves_modern:  # it did before: gone for now, not a server of one era
                    raise errors.gateway_error(
                        errors.UPSTREAM_UNAVAILABLE, f"upstream {self.server!r} is not available in 2026-07-28",
                        server=self.server, reason=str(exc),
                    ) from None
                self.serves_modern, self.refusal = False, str(exc).removeprefix(f"upstream {self.server!r}: ")
                logger.info("upstream %r serves no 2026-07-28 besides the handshake: %s", self.server, self.refusal)
                return None
            self._conn, self.serves_modern = conn, True
            return conn

    def learn(self, key: CallKey, era: Learned, why: str) -> None:
        if self.learned.get(key) != era:
            self.learned[key] = era
            logger.info("upstream %r: %s %r goes %s from now on (%s)", self.server, key[0], key[1],
                        "2026-07-28" if era == "modern" else "handshake", why)

    async def reset(self) -> None:
        """The link connected anew (the server may have changed): forget what was learned."""
        conn, self._conn = self._conn, None
        self.serves_modern, self.refusal = None, None
        self.learned.clear()
        if conn is not None:
            with anyio.move_on_after(5, shield=True):
                await conn.close()

    def modern_calls(self) -> list[str]:
        """What goes 2026-07-28, as `method name` (for `/healthz` and `doctor`)."""
        return sorted(f"{method} {name}" for (method, name), era in self.learned.items() if era == "modern")


def era_reason(config_era: str, negotiated_era: str | None, dual: DualEra) -> str | None:
    """Which era the server gets, and why, in words (`doctor`, `/healthz`)."""
    if negotiated_era is None:
        return None
    if config_era == "modern":
        return "2026-07-28 (era: modern in the config)"
    if negotiated_era == "modern":
        return "2026-07-28 (refused initialize, answered server/discover)"
    if config_era == "handshake":
        return "handshake (era: handshake in the config: every call, none in 2026-07-28)"
    if dual.serves_modern is None:
        return "handshake (answers initialize; whether it also serves 2026-07-28 is asked when a call first needs it)"
    if dual.serves_modern is False:
        return f"handshake (answers initialize; does not serve 2026-07-28: {dual.refusal})"
    learned = dual.modern_calls()
    return ("handshake (answers initialize; also serves 2026-07-28: tools that return input_required go 2026-07-28, "
            "learned per tool" + (f"; so far: {', '.join(learned)}" if learned else "") + ")")
