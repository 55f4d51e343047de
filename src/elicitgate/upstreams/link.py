"""`UpstreamLink`: one configured server, kept connected, with its connection policy.

The link's *primary* connection serves the catalog, health and (under `shared`) every call. Under
`per_session` each downstream session gets its own connection on first use, so that an upstream's
`elicitation/create` on a wire that cannot name its request (stdio, SSE, the standalone GET stream of
streamable HTTP) still has exactly one downstream session it can belong to. A client that is one call
(`DownstreamPeer.per_call`: an unauthenticated 2026-07-28 client) borrows an idle connection from the
link's pool for that call. The link keeps at most `max_upstream_sessions` of them and closes idle ones, and
at most `max_upstream_sessions_per_principal` owned by one principal's sessions (with `http.auth`), so that
one principal's calls never hold them all.

An HTTP or SSE upstream is pinged every `probe_interval` (the process's exit tells a stdio one's death), so
one that stops answering is shown down within `probe_interval + probe_timeout`. A streamable HTTP server
that restarted answers 404 to the session ids it no longer knows: the request that got it was never
processed, so `rejoin` opens a new session in its place and the caller sends it again (docs/operations.md,
"When an upstream goes away").
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import anyio.abc

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.capabilities import capabilities_dict, declared_capabilities, elicitation_modes
from elicitgate.config import HttpServer, StdioServer, UpstreamRetryConfig
from elicitgate.contracts import DownstreamPeer, HostedModes, InboundHandler
from elicitgate.errors import ConnectError, PeerLost
from elicitgate.fixable import warn_once
from elicitgate.json_shapes import JsonObject
from elicitgate.metrics import UPSTREAM_UP
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.dual_era import DualEra, era_reason
from elicitgate.upstreams.transports import STANDALONE_WAIT
from elicitgate.wire.endpoint import SESSION_LOST

logger = logging.getLogger(__name__)

RELAYABLE: JsonObject = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
"""What the primary (and so every `shared`) connection declares: all the gateway can relay. Whether the
client behind a given call can take it is checked per call (elicitation modes by the broker, sampling
by `router.inbound`), as a shared connection cannot declare per client."""


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
        handler: InboundHandler[UpstreamConnection],
        on_connected: Callable[[UpstreamLink], Awaitable[None]],
        hosting: HostedModes | None = None,
        *,
        asking: Callable[[DownstreamPeer], bool],
    ) -> None:
        self.name = name
        self.hosting = hosting
        """The gateway's own hosting, if it has a web server: per-client connections declare its modes."""
        self.asking = asking
        """Whether a client has a question open (`Broker.asking`): its connection is not idle meanwhile."""
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
        self._owned: weakref.WeakKeyDictionary[DownstreamPeer, UpstreamConnection] = weakref.WeakKeyDictionary()
        """The connection each client's calls travel on (`connection_for`), while it has one; an entry goes
        with its client."""
        self._owning: weakref.WeakKeyDictionary[DownstreamPeer, anyio.Lock] = weakref.WeakKeyDictionary()
        """Held while a client's connection is being found or opened: one per client at a time."""
        self._opening = 0
        self._opening_for: dict[str, int] = {}
        """Connections being opened, per principal (`_opening` counts them all)."""
        self.dual = DualEra(name, config.era, self._open_modern)
        """A server that also serves 2026-07-28: the calls that need that era (`upstreams.dual_era`)."""
        self._opening_turns = anyio.Semaphore(config.max_opening_sessions)
        """Per-client connections opened at once (`max_opening_sessions`): the rest wait their turn."""
        self._retry_now = anyio.Event()
        """Set to end the wait between two reconnection attempts (a call wants the server)."""
        self._attempted = anyio.Event()
        """Set when the current connection attempt of the primary has ended (then replaced)."""

    @property
    def policy(self) -> str:
        """`shared` or `per_session`, as configured; per_session unless said otherwise. What a 2026-07-28
        upstream gets is always the primary connection (it never asks on a stream): see `per_client`."""
        return self.config.session_policy or "per_session"

    @property
    def per_client(self) -> bool:
        """Whether clients get connections of their own: `per_session` and an upstream that can ask."""
        return self.policy == "per_session" and self.primary is not None and self.primary.era != "modern"

    def status(self) -> JsonObject:
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
                self._attempt_ended()
                wait = self._retry_wait(backoff)
                logger.error("%s; retrying in %.1fs", exc, wait)
                with anyio.move_on_after(wait):
                    await self._retry_now.wait()
                self._retry_now = anyio.Event()
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
            self._attempt_ended()
            if conn.era == "modern":
                task_group.start_soon(self._listen, conn, name=f"upstream:{self.name}:listen")
            reaper, prober = anyio.CancelScope(), anyio.CancelScope()
            task_group.start_soon(self._reap_idle, reaper, name=f"upstream:{self.name}:reaper")
            if isinstance(self.config, HttpServer):
                task_group.start_soon(self._probe, conn, self.config, prober, name=f"upstream:{self.name}:probe")
            await conn.closed.wait()
            reaper.cancel()
            prober.cancel()
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

    def _attempt_ended(self) -> None:
        ended, self._attempted = self._attempted, anyio.Event()
        ended.set()

    def _retry_wait(self, backoff: float) -> float:
        """Seconds until the next attempt: the backoff, but for an HTTP or SSE server at most its
        `probe_interval` (an attempt is one refused connection), so it is up again that soon after it is back."""
        if isinstance(self.config, HttpServer):
            return min(backoff, self.config.probe_interval)
        return backoff

    async def _probe(self, conn: UpstreamConnection, config: HttpServer, scope: anyio.CancelScope) -> None:
        """Ping the primary connection every `probe_interval`, traffic or not: a server that went away or
        hangs would otherwise be shown up until a call failed. One that does not answer is closed (`run`
        marks the link down and reconnects)."""
        with scope:
            while not conn.closed.is_set():
                await anyio.sleep(config.probe_interval)
                await self._ping_or_close(conn, config.probe_timeout)

    async def _ping_or_close(self, conn: UpstreamConnection, timeout: float) -> None:
        """Ping `conn`; close it (`run` reconnects) unless the server shows it is there: it answers the ping,
        even with an error, or, busy, answers another request on it meanwhile."""
        if conn.probing:
            return
        conn.probing = True
        started = anyio.current_time()
        try:
            with anyio.fail_after(timeout):
                await conn.request("ping", None)
        except PeerLost as exc:
            if forgot_session(exc):
                await _settled(conn)
            await self._reconnect(conn, exc.error.message)
        except MCPError:
            pass  # an error *answer* is an answer: the server is there
        except TimeoutError:
            if conn.last_answer < started:
                await self._reconnect(conn, f"none within {timeout}s")
        except Exception as exc:  # noqa: BLE001 - whatever it was, this connection is not to be trusted
            await self._reconnect(conn, str(exc) or type(exc).__name__)
        finally:
            conn.probing = False

    async def _reconnect(self, conn: UpstreamConnection, why: str) -> None:
        if not conn.closed.is_set():
            logger.warning("upstream %r: no answer to a ping (%s); reconnecting", self.name, why)
        await conn.close()

    def _set_down(self, reason: str) -> None:
        self.state, self.last_error, self.since = LinkState.DOWN, reason, time.time()
        self.failures += 1
        UPSTREAM_UP.labels(server=self.name).set(0)

    async def open_connection(
        self, *, owner: DownstreamPeer | None, capabilities: JsonObject
    ) -> UpstreamConnection:
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
        primary = await self._ready_primary()
        if peer is None or not self.per_client:
            return primary
        existing = self._owned.get(peer)
        if existing is not None and not existing.closed.is_set():
            return existing
        lock = self._owning.get(peer)
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

    async def _ready_primary(self) -> UpstreamConnection:
        """The primary connection if the link is up. An HTTP or SSE link that is down (or just lost its
        connection) tries to reconnect now rather than at the end of its backoff, and the caller waits for
        that attempt (at most `connect_timeout` + 5 s): a server that came back serves this call, one still
        away fails it (-32010)."""
        if (primary := self._up()) is not None:
            return primary
        if isinstance(self.config, HttpServer) and self.state is not LinkState.STARTING:
            with anyio.move_on_after(self.retry.connect_timeout + STANDALONE_WAIT):
                for _ in range(2):  # an attempt under way may have started before the server was back
                    attempt = self._attempted
                    self._retry_now.set()
                    await attempt.wait()
                    if (primary := self._up()) is not None:
                        return primary
        raise self.unavailable()

    def _up(self) -> UpstreamConnection | None:
        primary = self.primary
        if primary is not None and self.state is LinkState.UP and not primary.closed.is_set():
            return primary
        return None

    async def rejoin(self, peer: DownstreamPeer | None, lost: UpstreamConnection) -> UpstreamConnection:
        """The connection to send a request on again after the server forgot `lost`'s session (see
        `forgot_session`): a new session in its place, with what `peer` declares, as `connection_for`
        would open it. The server restarted, so the idle pooled sessions are as stale: they are closed,
        and the primary connection is checked at once."""
        await _settled(lost)
        await self._close(lost)
        for conn in [c for free in self._idle.values() for c in free]:
            self._evict(conn)
        self.suspect()
        return await self.connection_for(peer)

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
            self.suspect()

    def suspect(self) -> None:
        """Check the primary connection (a ping) now: with per-client connections carrying the calls, it
        would otherwise not notice the upstream going away or forgetting its sessions until its next probe
        (a stdio one never), and health and reconnection hang on it."""
        primary = self.primary
        if primary is None or self._task_group is None or primary.probing:
            return
        self._task_group.start_soon(
            self._ping_or_close, primary, self.retry.connect_timeout, name=f"upstream:{self.name}:suspect"
        )

    async def release(self, conn: UpstreamConnection, *, reuse: bool) -> None:
        """A client is done with `conn`: back to the pool (`reuse`, a per-call client's), else closed."""
        conn.owner = None
        if reuse and not conn.closed.is_set() and not conn.in_flight_origins():
            conn.touch()
            self._idle.setdefault(conn.pool_key, []).append(conn)
            return
        await self._close(conn)

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

    def unavailable(self) -> Exception:
        return errors.gateway_error(
            errors.UPSTREAM_UNAVAILABLE,
            f"upstream {self.name!r} is not available",
            server=self.name,
            state=str(self.state),
            reason=self.last_error,
        )


def forgot_session(exc: BaseException) -> bool:
    """Whether `exc` says the server did not know the session the request was sent on (streamable HTTP's
    404 to an `Mcp-Session-Id`: it restarted). The server refused the request before processing it, so
    sending it again on a new session is safe whatever its method: it will run once."""
    return isinstance(exc, PeerLost) and exc.error.message == SESSION_LOST


async def _settled(forgotten: UpstreamConnection) -> None:
    """Until the connection whose session the server forgot has ended by itself, which it does once the other
    requests on their way on it had their own answers (`wire.http`), so that closing it loses none of them."""
    with anyio.move_on_after(STANDALONE_WAIT):
        await forgotten.closed.wait()


def capabilities_for(peer: DownstreamPeer, hosted: frozenset[str] = frozenset()) -> JsonObject:
    """What the gateway can deliver to an upstream on behalf of this one client (`hosted`: the modes its
    own hosted page / inbox takes for this client, see docs/hosting.md)."""
    return declared_capabilities(elicitation_modes(peer.capabilities) | hosted, capabilities_dict(peer.capabilities))


def _pool_key(capabilities: JsonObject) -> str:
    return json.dumps(capabilities, sort_keys=True, separators=(",", ":"))


def _idle(conn: UpstreamConnection, asking: Callable[[DownstreamPeer], bool]) -> bool:
    """Nothing holds `conn`: no call in flight, no question of its client open (`asking`), no task alive on it;
    it may be closed to make room."""
    owner = conn.owner
    return not conn.in_flight_origins() and not (owner is not None and asking(owner)) and not conn.runs_tasks()
