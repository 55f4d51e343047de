"""`ClientConnections`: the connections a link's clients own under `per_session`, and the pool they come from.

Under `per_session` each downstream session gets its own connection to the server on first use, so that an
upstream's `elicitation/create` on a wire that cannot name its request (stdio, SSE, the standalone GET stream of
streamable HTTP) still has exactly one downstream session it can belong to. A client that is one call
(`DownstreamPeer.per_call`: an unauthenticated 2026-07-28 client) borrows an idle connection from the pool for
that call. The link keeps at most `max_upstream_sessions` of them and closes idle ones, and at most
`max_upstream_sessions_per_principal` owned by one principal's sessions (with `http.auth`), so that one
principal's calls never hold them all. The link's primary connection is not among them (`upstreams.link`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import anyio.abc
import orjson

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.capabilities import capabilities_dict, declared_capabilities, elicitation_modes
from elicitgate.config import HttpServer, StdioServer
from elicitgate.contracts import DownstreamPeer, HostedModes
from elicitgate.errors import ConnectError
from elicitgate.fixable import warn_once
from elicitgate.json_shapes import JsonObject
from elicitgate.upstreams.connection import UpstreamConnection

logger = logging.getLogger(__name__)


class ClientConnections:
    """The per-client connections of one link (`UpstreamLink.client_connections`): owned, pooled, capped."""

    def __init__(
        self,
        name: str,
        config: StdioServer | HttpServer,
        open_connection: Callable[[DownstreamPeer, JsonObject], Awaitable[UpstreamConnection]],
        suspect: Callable[[], None],
        hosting: HostedModes | None,
        asking: Callable[[DownstreamPeer], bool],
    ) -> None:
        self.name = name
        self.config = config
        self._open = open_connection
        """Opens a connection owned by a client, declaring what it was given (`UpstreamLink.open_connection`)."""
        self._suspect = suspect
        """Has the link check its primary connection now (`UpstreamLink.suspect`)."""
        self.hosting = hosting
        self.asking = asking
        self.task_group: anyio.abc.TaskGroup | None = None
        """The link's, once it runs: each connection's watcher and background closes run in it."""
        self.sessions: set[UpstreamConnection] = set()
        """Every open per-client connection (owned or idle in the pool); never more than the cap."""
        self._idle: dict[str, list[UpstreamConnection]] = {}
        """The pool: free connections by what they declared to the server, oldest first."""
        self._owned: weakref.WeakKeyDictionary[DownstreamPeer, UpstreamConnection] = weakref.WeakKeyDictionary()
        """The connection each client's calls travel on (`connection_for`), while it has one; an entry goes
        with its client."""
        self._owning: weakref.WeakKeyDictionary[DownstreamPeer, anyio.Lock] = weakref.WeakKeyDictionary()
        """Held while a client's connection is being found or opened: one per client at a time."""
        self._opening = 0
        self._opening_for: dict[str, int] = {}
        """Connections being opened, per principal (`_opening` counts them all)."""
        self._opening_turns = anyio.Semaphore(config.max_opening_sessions)
        """Per-client connections opened at once (`max_opening_sessions`): the rest wait their turn."""

    async def connection_for(self, peer: DownstreamPeer) -> UpstreamConnection:
        """`peer`'s own connection: the one it has, else one borrowed from the pool (a per-call client's) or
        opened for it."""
        existing = self._owned.get(peer)
        if existing is not None and not existing.closed.is_set():
            return existing
        lock = self._owning.get(peer)
        if lock is None and peer.per_call:
            # Nobody is finding one for this client (its lock is made before that starts): a pooled connection free
            # now is taken at once, with no lock made and no loop turn to take it (a 2026-07-28 client's every call).
            conn = self._borrow(capabilities_for(peer, self._hosted(peer)))
            if conn is not None:
                conn.owner = peer
                self._owned[peer] = conn
                return conn
        if lock is None:
            lock = self._owning[peer] = anyio.Lock()
        async with lock:
            existing = self._owned.get(peer)
            if existing is not None and not existing.closed.is_set():
                return existing
            capabilities = capabilities_for(peer, self._hosted(peer))
            conn = self._borrow(capabilities) if peer.per_call else None
            if conn is None:
                conn = await self._open_for(peer, capabilities)
            conn.owner = peer
            self._owned[peer] = conn
            return conn

    def connection_of(self, peer: DownstreamPeer) -> UpstreamConnection | None:
        """The connection of `peer`'s own (under `per_session`), if it has one now."""
        return self._owned.get(peer)

    async def release_peer(self, peer: DownstreamPeer) -> None:
        """`peer` is done with its connection: a per-call client's goes back to the pool, the others' is closed
        (its upstream session state was that client's)."""
        conn = self._owned.pop(peer, None)
        if conn is not None:
            await self.release(conn, reuse=peer.per_call)

    def give_back(self, peer: DownstreamPeer) -> bool:
        """`release_peer` where it needs no wait: a per-call client's connection, still good, back to the pool now.
        False: `peer` has one that `release_peer` must close (or it holds none and there is nothing to do: True)."""
        conn = self._owned.get(peer)
        if conn is None:
            return True
        if not (peer.per_call and self._reusable(conn)):
            return False
        del self._owned[peer]
        self._pool(conn)
        return True

    async def drop_stale(self, lost: UpstreamConnection) -> None:
        """The server forgot `lost`'s session (it restarted): close it, and the idle pooled sessions, as stale."""
        await self._close(lost)
        for conn in [c for free in self._idle.values() for c in free]:
            self._evict(conn)

    async def _open_for(self, peer: DownstreamPeer, capabilities: JsonObject) -> UpstreamConnection:
        principal = peer.principal
        if principal is not None:
            self._keep_share(principal)
        await self._make_room()
        self._opening += 1
        if principal is not None:
            self._opening_for[principal] = self._opening_for.get(principal, 0) + 1
        try:
            async with self._opening_turn():
                conn = await self._open(peer, capabilities)
        except ConnectError as exc:
            self._suspect()
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
        assert self.task_group is not None
        self.task_group.start_soon(self._watch, conn, name=f"upstream:{self.name}:watch")
        await self._restore(conn, peer)
        return conn

    @contextlib.asynccontextmanager
    async def _opening_turn(self) -> AsyncGenerator[None]:
        """A turn to open a per-client connection: at most `max_opening_sessions` at once, so that each
        one's `connect_timeout` (which starts when its own opening does) is spent on it, not on hundreds of
        others opening beside it. A turn that does not come within `request_timeout` fails the call."""
        wait = self.config.request_timeout
        with anyio.move_on_after(wait) as waiting:
            await self._opening_turns.acquire()
        if waiting.cancelled_caught:
            limit = self.config.max_opening_sessions
            raise errors.gateway_error(
                errors.UPSTREAM_UNAVAILABLE,
                f"upstream {self.name!r}: no turn to open a session within {wait}s ({limit} are opened at once, "
                "max_opening_sessions)",
                server=self.name,
                limit=f"mcpServers.{self.name}.max_opening_sessions",
                value=limit,
                fix="retry; if the server opens sessions this slowly, raise max_opening_sessions of server "
                f"{self.name!r}",
            )
        try:
            yield
        finally:
            self._opening_turns.release()

    async def _restore(self, conn: UpstreamConnection, peer: DownstreamPeer) -> None:
        """Give a client's new session of this server what it set on the one before (a session the server
        forgot, or one closed while idle): its resource subscriptions and its log level. A refusal is
        logged; the call goes on."""
        negotiated = conn.negotiated
        if negotiated is None or negotiated.era == "modern":
            return  # a 2026-07-28 upstream keeps nothing per session (`subscriptions.subscribe` listens)
        for server, uri in sorted(peer.subscribed):
            if server == self.name:
                await self._reapply(conn, "resources/subscribe", {"uri": uri})
        if peer.log_level is not None and "logging" in negotiated.capabilities:
            await self._reapply(conn, "logging/setLevel", {"level": peer.log_level})

    async def _reapply(self, conn: UpstreamConnection, method: str, params: JsonObject) -> None:
        try:
            await conn.request(method, params, timeout=self.config.request_timeout)
        except (MCPError, TimeoutError) as exc:
            logger.warning("upstream %r: %s on a new session failed: %s", self.name, method, exc)

    async def _watch(self, conn: UpstreamConnection) -> None:
        """A client's connection that ends without the link closing it: the upstream may be gone."""
        await conn.closed.wait()
        if conn in self.sessions:
            self.sessions.discard(conn)
            self._suspect()

    async def release(self, conn: UpstreamConnection, *, reuse: bool) -> None:
        """A client is done with `conn`: back to the pool (`reuse`, a per-call client's), else closed."""
        conn.owner = None
        if reuse and self._reusable(conn):
            self._pool(conn)
            return
        await self._close(conn)

    @staticmethod
    def _reusable(conn: UpstreamConnection) -> bool:
        return not conn.closed.is_set() and not conn.in_flight_origins()

    def _pool(self, conn: UpstreamConnection) -> None:
        conn.owner = None
        conn.touch()
        self._idle.setdefault(conn.pool_key, []).append(conn)

    def _borrow(self, capabilities: JsonObject) -> UpstreamConnection | None:
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
        idle = [c for c in self.sessions if _idle(c, self.asking)]
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
        idle = [c for c in owned if _idle(c, self.asking)]
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
        assert self.task_group is not None
        self.task_group.start_soon(self._close, victim, name=f"upstream:{self.name}:close")

    async def reap_idle(self, scope: anyio.CancelScope) -> None:
        """Close per-client connections that had no call for `idle_session_timeout` seconds."""
        timeout = self.config.idle_session_timeout
        with scope:
            while True:
                await anyio.sleep(min(timeout, 30.0))
                now = anyio.current_time()
                self._forget_closed()
                for conn in list(self.sessions):
                    if now - conn.last_active > timeout and _idle(conn, self.asking):
                        logger.info(
                            "upstream %r: closing a connection idle for %.0fs", self.name, now - conn.last_active
                        )
                        await self._close(conn)

    def _detach(self, conn: UpstreamConnection) -> None:
        self.sessions.discard(conn)  # first: its watcher then knows the link closed it
        free = self._idle.get(conn.pool_key)
        if free is not None and conn in free:
            free.remove(conn)
        owner, conn.owner = conn.owner, None
        if owner is not None and self._owned.get(owner) is conn:
            del self._owned[owner]

    async def _close(self, conn: UpstreamConnection) -> None:
        self._detach(conn)
        with anyio.move_on_after(5, shield=True):
            await conn.close()

    def _forget_closed(self) -> None:
        for conn in [c for c in self.sessions if c.closed.is_set()]:
            self.sessions.discard(conn)

    def _hosted(self, peer: DownstreamPeer) -> frozenset[str]:
        return self.hosting.modes_for(self.name, peer) if self.hosting is not None else frozenset()


def capabilities_for(peer: DownstreamPeer, hosted: frozenset[str] = frozenset()) -> JsonObject:
    """What the gateway can deliver to an upstream on behalf of this one client (`hosted`: the modes its
    own hosted page / inbox takes for this client, see docs/hosting.md)."""
    return declared_capabilities(elicitation_modes(peer.capabilities) | hosted, capabilities_dict(peer.capabilities))


def _pool_key(capabilities: JsonObject) -> str:
    """What a pooled connection declared, as a key: orjson's (the standard library's was ~20 us of each borrow), or
    the standard library's for what orjson does not write (a client's sampling or roots capability holding an integer
    beyond 64 bits, or nested deeper than 254 levels: the codec reads those)."""
    try:
        return orjson.dumps(capabilities, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(capabilities, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _idle(conn: UpstreamConnection, asking: Callable[[DownstreamPeer], bool]) -> bool:
    """Nothing holds `conn`: no call in flight, no question of its client open (`asking`), no task alive on it;
    it may be closed to make room."""
    owner = conn.owner
    return not conn.in_flight_origins() and not (owner is not None and asking(owner)) and not conn.runs_tasks()
