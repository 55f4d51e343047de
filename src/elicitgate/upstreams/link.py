"""`UpstreamLink`: one configured server, kept connected, with its connection policy.

The link's *primary* connection serves the catalog, health and (under `shared`) every call. Under
`per_session` each downstream session gets its own connection on first use, so that an upstream's
`elicitation/create` on a wire that cannot name its request (stdio, SSE) still has exactly one
downstream session it can belong to.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

from elicitgate import errors
from elicitgate.config import HttpServer, StdioServer, UpstreamRetryConfig
from elicitgate.metrics import UPSTREAM_UP
from elicitgate.upstreams.connection import ConnectError, InboundHandler, UpstreamConnection

logger = logging.getLogger(__name__)

RELAYABLE: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
"""What the primary (and so every `shared`) connection declares: all the gateway can relay. Whether the
client behind a given call can take it is checked per call (elicitation modes by the broker, sampling
by `Gateway.on_server_request`), as a shared connection cannot declare per client."""


class LinkState(enum.StrEnum):
    STARTING = "starting"
    UP = "up"
    DOWN = "down"


class UpstreamLink:
    def __init__(
        self,
        name: str,
        config: StdioServer | HttpServer,
        retry: UpstreamRetryConfig,
        handler: InboundHandler,
        on_connected: Callable[[UpstreamLink], Awaitable[None]],
    ) -> None:
        self.name = name
        self.config = config
        self.retry = retry
        self.handler = handler
        self.on_connected = on_connected
        self.state = LinkState.STARTING
        self.primary: UpstreamConnection | None = None
        self.last_error: str | None = None
        self.stderr_tail: list[str] = []
        """What a stdio server wrote to stderr last, when it failed (for `doctor`)."""
        self.failures = 0
        self.since = time.time()
        self.first_attempt_done = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None

    @property
    def policy(self) -> str:
        if self.config.session_policy is not None:
            return self.config.session_policy
        if isinstance(self.config, HttpServer) and self.config.transport == "http":
            return "shared"
        return "per_session"

    def status(self) -> dict[str, Any]:
        negotiated = self.primary.negotiated if self.primary else None
        return {
            "state": str(self.state),
            "transport": "stdio" if isinstance(self.config, StdioServer) else self.config.transport,
            "policy": self.policy,
            "era": negotiated.era if negotiated else None,
            "protocolVersion": negotiated.protocol_version if negotiated else None,
            "error": self.last_error,
            "failures": self.failures,
        }

    async def run(self, task_group: anyio.abc.TaskGroup) -> None:
        """Keep the primary connection up, reconnecting with exponential backoff."""
        self._task_group = task_group
        backoff = self.retry.initial_backoff
        while True:
            try:
                conn = await self.open_connection(owner=None, capabilities=RELAYABLE)
            except ConnectError as exc:
                self._set_down(str(exc))
                self.stderr_tail = exc.stderr_tail
                self.first_attempt_done.set()
                logger.error("%s; retrying in %.1fs", exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self.retry.max_backoff)
                continue
            self.primary, self.state, self.last_error, self.since = conn, LinkState.UP, None, time.time()
            UPSTREAM_UP.labels(server=self.name).set(1)
            backoff = self.retry.initial_backoff
            try:
                await self.on_connected(self)
            except Exception:
                logger.exception("upstream %r: catalog refresh failed", self.name)
            self.first_attempt_done.set()
            if conn.era == "modern":
                task_group.start_soon(self._listen, conn, name=f"upstream:{self.name}:listen")
            await conn.closed.wait()
            self.primary = None
            self.stderr_tail = list(conn.stderr_tail)
            said = next((line.strip() for line in reversed(self.stderr_tail) if line.strip()), None)
            self._set_down("the connection closed" + (f"; its stderr ended with: {said}" if said else ""))
            logger.error("upstream %r went away (%s); reconnecting", self.name, self.last_error)

    async def _listen(self, conn: UpstreamConnection) -> None:
        """Open `subscriptions/listen` on a 2026-07-28 primary connection for the list changes it offers.

        That era has no session stream for notifications: this request's response stream carries them to
        the handler like any other server notification.
        """
        offered = conn.negotiated.capabilities if conn.negotiated else {}
        wanted = {
            f"{kind}ListChanged": True
            for kind in ("tools", "prompts", "resources")
            if isinstance(offered.get(kind), dict) and offered[kind].get("listChanged")
        }
        if not wanted:
            return
        try:
            await conn.request("subscriptions/listen", {"notifications": wanted})
        except Exception as exc:  # the link stays up without change notifications; say why once
            if not conn.closed.is_set():
                logger.warning("upstream %r: subscriptions/listen failed: %s", self.name, exc)

    def _set_down(self, reason: str) -> None:
        self.state, self.last_error, self.since = LinkState.DOWN, reason, time.time()
        self.failures += 1
        UPSTREAM_UP.labels(server=self.name).set(0)

    async def open_connection(self, *, owner: Any | None, capabilities: dict[str, Any]) -> UpstreamConnection:
        assert self._task_group is not None, "the link is not running"
        return await UpstreamConnection.open(
            self.name,
            self.config,
            self.handler,
            self._task_group,
            advertised_capabilities=capabilities,
            connect_timeout=self.retry.connect_timeout,
            owner=owner,
        )

    async def connection_for(self, peer: Any | None) -> UpstreamConnection:
        """The connection a request from `peer` travels on, per the link's policy."""
        primary = self.primary
        if primary is None or self.state is not LinkState.UP:
            raise self.unavailable()
        if peer is None or self.policy == "shared":
            return primary
        existing = peer.upstreams.get(self.name)
        if existing is not None and not existing.closed.is_set():
            return existing
        lock = peer.upstream_locks.setdefault(self.name, anyio.Lock())
        async with lock:
            existing = peer.upstreams.get(self.name)
            if existing is not None and not existing.closed.is_set():
                return existing
            try:
                conn = await self.open_connection(owner=peer, capabilities=capabilities_for(peer, self._hosted(peer)))
            except ConnectError as exc:
                raise errors.gateway_error(
                    errors.UPSTREAM_UNAVAILABLE, f"upstream {self.name!r} is not available", server=self.name,
                    reason=str(exc),
                ) from None
            peer.upstreams[self.name] = conn
            return conn

    def _hosted(self, peer: Any) -> frozenset[str]:
        hosting = getattr(getattr(self.handler, "broker", None), "hosting", None)
        return hosting.modes_for(self.name, peer) if hosting is not None else frozenset()

    def unavailable(self) -> Exception:
        return errors.gateway_error(
            errors.UPSTREAM_UNAVAILABLE,
            f"upstream {self.name!r} is not available",
            server=self.name,
            state=str(self.state),
            reason=self.last_error,
        )


def capabilities_for(peer: Any, hosted: frozenset[str] = frozenset()) -> dict[str, Any]:
    """What the gateway can deliver to an upstream on behalf of this one client (`hosted`: the modes its
    own hosted page / inbox takes for this client, see docs/hosting.md)."""
    caps: dict[str, Any] = {}
    modes = peer.modes | hosted
    if modes:
        caps["elicitation"] = {mode: {} for mode in sorted(modes)}
    raw = peer.raw_capabilities()
    for passthrough in ("sampling", "roots"):
        if passthrough in raw:
            caps[passthrough] = raw[passthrough]
    return caps
