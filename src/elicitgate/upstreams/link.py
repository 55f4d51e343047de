"""`UpstreamLink`: one configured server, kept connected, with its connection policy.

The link's *primary* connection serves the catalog, health and (under `shared`) every call. Under
`per_session` each downstream session gets its own connection on first use, so that an upstream's
`elicitation/create` on a wire that cannot name its request (stdio, SSE, the standalone GET stream of
streamable HTTP) still has exactly one downstream session it can belong to. A client that is one call
(`DownstreamPeer.per_call`: an unauthenticated 2026-07-28 client) borrows an idle connection from the
link's pool for that call. The link keeps at most `max_upstream_sessions` of them and closes idle ones, and
at most `max_upstream_sessions_per_principal` owned by one principal's sessions (with `http.auth`), so that
one principal's calls never hold them all.
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

from elicitgate import errors
from elicitgate.config import StdioServer, HttpServer, UpstreamRetryConfig
from elicitgate.fixable import warn_once
from elicitgate.metrics import UPSTREAM_UP
from elicitgate.seams import DownstreamPeer, HostedModes, declared_capabilities
from elicitgate.upstreams.connection import ConnectError, InboundHandler, UpstreamConnection
from elicitgate.upstreams.dual_era import DualEra, era_reason

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
        hosting: HostedModes | None = None,
    ) -> None:
        self.name = name
        self.hosting = hosting
        """The gateway's own hosting, if it has a web server: per-client connections declare its modes."""
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
        self.sessions: set[UpstreamConnection] = set()
        """Every open per-client connection (owned or idle in the pool); never more than the cap."""
        self._idle: dict[str, list[UpstreamConnection]] = {}
        """The pool: free connections by what they declared to the server, oldest first."""
        self._opening = 0
        self._opening_for: dict[str, int] = {}
        """Connections being opened, per principal (`_opening` counts them all)."""
        self.dual = DualEra(name, config.era, self._open_modern)
        """A server that also serves 2026-07-28: the calls that need that era (`upstreams.dual_era`)."""

    @property
    def policy(self) -> str:
        """`shared` or `per_session`, as configured; per_session unless said otherwise. What a 2026-07-28
        upstream gets is always the primary connection (it never asks on a stream): see `per_client`."""
        return self.config.session_policy or "per_session"

    @property
    def per_client(self) -> bool:
        """Whether clients get connections of their own: `per_session` and an upstream that can ask."""
        return self.policy == "per_session" and self.primary is not None and self.primary.era != "modern"

    def status(self) -> dict[str, Any]:
        negotiated = self.primary.negotiated if self.primary else None
        return {
            "state": str(self.state),
            "transport": "stdio" if isinstance(self.config, StdioServer) else self.config.transport,
            "policy": self.policy if negotiated is None or negotiated.era != "modern" else "shared",
            "sessions": len(self.sessions),
            "era": negotiated.era if negotiated else None,
            "protocolVersion": negotiated.protocol_version if negotiated else None,
            "eraReason": era_reason(self.config.era, negotiated.era if negotiated else None, self.dual),
            "modernCalls": self.dual.modern_calls(),
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
            await self.dual.reset()
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
            reaper = anyio.CancelScope()
            task_group.start_soon(self._reap_idle, reaper, name=f"upstream:{self.name}:reaper")
            await conn.closed.wait()
            reaper.cancel()
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

    async def open_connection(self, *, owner: DownstreamPeer | None, capabilities: dict[str, Any]) -> UpstreamConnection:
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

    async def _open_modern(self) -> UpstreamConnection:
        """A 2026-07-28 connection to a server the primary speaks the handshake with (`self.dual`)."""
        assert self._task_group is not None, "the link is not running"
        return await UpstreamConnection.open(
            self.name,
            self.config.model_copy(update={"era": "modern"}),
            self.handler,
            self._task_group,
            advertised_capabilities=RELAYABLE,
            connect_timeout=self.retry.connect_timeout,
        )

    async def connection_for(self, peer: DownstreamPeer | None) -> UpstreamConnection:
        """The connection a request from `peer` travels on, per the link's policy."""
        primary = self.primary
        if primary is None or self.state is not LinkState.UP:
            raise self.unavailable()
        if peer is None or not self.per_client:
            return primary
        existing = peer.upstreams.get(self.name)
        if existing is not None and not existing.closed.is_set():
            return existing
        lock = peer.upstream_locks.setdefault(self.name, anyio.Lock())
        async with lock:
            existing = peer.upstreams.get(self.name)
            if existing is not None and not existing.closed.is_set():
                return existing
            capabilities = capabilities_for(peer, self._hosted(peer))
            conn = self._borrow(capabilities) if peer.per_call else None
            if conn is None:
                conn = await self._open_for(peer, capabilities)
            conn.owner = peer
            peer.upstreams[self.name] = conn
            return conn

    async def _open_for(self, peer: DownstreamPeer, capabilities: dict[str, Any]) -> UpstreamConnection:
        principal = peer.principal
        if principal is not None:
            self._keep_share(principal)
        await self._make_room()
        self._opening += 1
        if principal is not None:
            self._opening_for[principal] = self._opening_for.get(principal, 0) + 1
        try:
            conn = await self.open_connection(owner=peer, capabilities=capabilities)
        except ConnectError as exc:
            self.suspect()
            raise errors.gateway_error(
                errors.UPSTREAM_UNAVAILABLE, f"upstream {self.name!r} is not available", server=self.name,
                reason=str(exc),
            ) from None
        finally:
            self._opening -= 1
            if principal is not None:
                if (left := self._opening_for[principal] - 1) > 0:
                    self._opening_for[principal] = left
                else:
                    del self._opening_for[principal]
        conn.pool_key = _pool_key(capabilities)
        conn.touch()
        self.sessions.add(conn)
        assert self._task_group is not None
        self._task_group.start_soon(self._watch, conn, name=f"upstream:{self.name}:watch")
        return conn

    async def _watch(self, conn: UpstreamConnection) -> None:
        """A client's connection that ends without the link closing it: the upstream may be gone."""
        await conn.closed.wait()
        if conn in self.sessions:
            self.sessions.discard(conn)
            self.suspect()

    def suspect(self) -> None:
        """Check the primary connection (a ping) now: with per-client connections carrying the calls, it
        would otherwise not notice the upstream going away or forgetting its sessions, and health and
        reconnection hang on it."""
        primary = self.primary
        if primary is None or self._task_group is None or primary.probing:
            return
        primary.probing = True

        async def probe() -> None:
            try:
                with anyio.fail_after(self.retry.connect_timeout):
                    await primary.request("ping", None)
            except Exception as exc:  # the primary is as gone as the client's: reconnect
                logger.warning("upstream %r: no answer to a ping (%s); reconnecting", self.name, exc)
                await primary.close()
            finally:
                primary.probing = False

        self._task_group.start_soon(probe, name=f"upstream:{self.name}:probe")

    async def release(self, conn: UpstreamConnection, *, reuse: bool) -> None:
        """A client is done with `conn`: back to the pool (`reuse`, a per-call client's), else closed."""
        conn.owner = None
        if reuse and not conn.closed.is_set() and not conn.in_flight_origins():
            conn.touch()
            self._idle.setdefault(conn.pool_key, []).append(conn)
            return
        await self._close(conn)

    def _borrow(self, capabilities: dict[str, Any]) -> UpstreamConnection | None:
        free = self._idle.get(_pool_key(capabilities), [])
        while free:
            conn = free.pop()  # the most recently used: the oldest ones are the reaper's
            if not conn.closed.is_set():
                return conn
            self.sessions.discard(conn)
        return None

    async def _make_room(self) -> None:
        """Keep the cap: close the least recently used idle connection, or refuse at once."""
        cap = self.config.session_cap
        self._forget_closed()
        if len(self.sessions) + self._opening < cap:
            return
        idle = [c for c in self.sessions
                if not c.in_flight_origins() and not _has_open_elicitations(c) and not c.runs_tasks()]
        if idle:
            self._evict(min(idle, key=lambda c: c.last_active))
            return
        raise warn_once(
            logger,
            errors.gateway_error(
                errors.UPSTREAM_UNAVAILABLE,
                f"upstream {self.name!r} has all its {cap} upstream sessions busy (max_upstream_sessions)",
                server=self.name,
                limit=f"mcpServers.{self.name}.max_upstream_sessions",
                value=cap,
                fix=f"raise max_upstream_sessions of server {self.name!r} (each session of a stdio server is one "
                "process), or retry when a call has finished",
            ),
            key=("max_upstream_sessions", self.name),
        )

    def _keep_share(self, principal: str) -> None:
        """Keep `principal` within its share: close its least recently used idle connection, or refuse at once."""
        share = self.config.principal_share
        self._forget_closed()
        owned = [c for c in self.sessions if c.owner is not None and c.owner.principal == principal]
        if len(owned) + self._opening_for.get(principal, 0) < share:
            return
        idle = [c for c in owned if not c.in_flight_origins() and not _has_open_elicitations(c) and not c.runs_tasks()]
        if idle:
            self._evict(min(idle, key=lambda c: c.last_active))
            return
        raise warn_once(
            logger,
            errors.gateway_error(
                errors.UPSTREAM_UNAVAILABLE,
                f"upstream {self.name!r} has all {share} upstream sessions of this principal busy "
                "(max_upstream_sessions_per_principal)",
                server=self.name,
                limit=f"mcpServers.{self.name}.max_upstream_sessions_per_principal",
                value=share,
                fix="retry when one of this principal's calls has finished (or its question is answered), or raise "
                f"max_upstream_sessions_per_principal of server {self.name!r}",
            ),
            key=("max_upstream_sessions_per_principal", self.name),
        )

    def _evict(self, victim: UpstreamConnection) -> None:
        """Detach at once (the cap holds), stop the process or session in the background."""
        self._detach(victim)
        assert self._task_group is not None
        self._task_group.start_soon(self._close, victim, name=f"upstream:{self.name}:close")

    async def _reap_idle(self, scope: anyio.CancelScope) -> None:
        """Close per-client connections that had no call for `idle_session_timeout` seconds."""
        timeout = self.config.idle_session_timeout
        with scope:
            while True:
                await anyio.sleep(min(timeout, 30.0))
                now = anyio.current_time()
                self._forget_closed()
                for conn in list(self.sessions):
                    if (now - conn.last_active > timeout and not conn.in_flight_origins()
                            and not _has_open_elicitations(conn) and not conn.runs_tasks()):
                        logger.info("upstream %r: closing a connection idle for %.0fs", self.name, now - conn.last_active)
                        await self._close(conn)

    def _detach(self, conn: UpstreamConnection) -> None:
        self.sessions.discard(conn)  # first: its watcher then knows the link closed it
        free = self._idle.get(conn.pool_key)
        if free is not None and conn in free:
            free.remove(conn)
        owner, conn.owner = conn.owner, None
        if owner is not None and owner.upstreams.get(self.name) is conn:
            del owner.upstreams[self.name]

    async def _close(self, conn: UpstreamConnection) -> None:
        self._detach(conn)
        with anyio.move_on_after(5, shield=True):
            await conn.close()

    def _forget_closed(self) -> None:
        for conn in [c for c in self.sessions if c.closed.is_set()]:
            self.sessions.discard(conn)

    def _hosted(self, peer: DownstreamPeer) -> frozenset[str]:
        return self.hosting.modes_for(self.name, peer) if self.hosting is not None else frozenset()

    def unavailable(self) -> Exception:
        return errors.gateway_error(
            errors.UPSTREAM_UNAVAILABLE,
            f"upstream {self.name!r} is not available",
            server=self.name,
            state=str(self.state),
            reason=self.last_error,
        )


def capabilities_for(peer: DownstreamPeer, hosted: frozenset[str] = frozenset()) -> dict[str, Any]:
    """What the gateway can deliver to an upstream on behalf of this one client (`hosted`: the modes its
    own hosted page / inbox takes for this client, see docs/hosting.md)."""
    return declared_capabilities(peer.modes | hosted, peer.raw_capabilities())


def _pool_key(capabilities: dict[str, Any]) -> str:
    return json.dumps(capabilities, sort_keys=True, separators=(",", ":"))


def _has_open_elicitations(conn: UpstreamConnection) -> bool:
    owner = conn.owner
    return owner is not None and bool(owner.elicitations)
