"""`UpstreamLink`: one configured server, kept connected, with its connection policy.

The link's *primary* connection serves the catalog, health and (under `shared`) every call. Under
`per_session` each downstream session gets its own connection on first use, and a client that is one call
borrows an idle one from a pool: those are the link's `ClientConnections` (`upstreams.client_connections`:
why, and their caps).

An HTTP or SSE upstream is pinged every `probe_interval` (the process's exit tells a stdio one's death), so
one that stops answering is shown down within `probe_interval + probe_timeout`. A streamable HTTP server
that restarted answers 404 to the session ids it no longer knows: the request that got it was never
processed, so `rejoin` opens a new session in its place and the caller sends it again (docs/operations.md,
"When an upstream goes away").
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import HttpServer, StdioServer, UpstreamRetryConfig
from elicitgate.contracts import DownstreamPeer, HostedModes, InboundHandler
from elicitgate.errors import ConnectError, PeerLost
from elicitgate.json_shapes import JsonObject
from elicitgate.metrics import UPSTREAM_UP
from elicitgate.upstreams.client_connections import ClientConnections
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
        self.client_connections = ClientConnections(
            name, config, lambda peer, capabilities: self.open_connection(owner=peer, capabilities=capabilities),
            self.suspect, hosting, asking,
        )
        """The connections clients own under `per_session`, and the pool (`upstreams.client_connections`)."""
        self.dual = DualEra(name, config.era, self._open_modern)
        """A server that also serves 2026-07-28: the calls that need that era (`upstreams.dual_era`)."""
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
        # `policy` read without its property's call: every call upstream asks this.
        per_session = (self.config.session_policy or "per_session") == "per_session"
        return per_session and self.primary is not None and self.primary.era != "modern"

    @property
    def sessions(self) -> set[UpstreamConnection]:
        """Every open per-client connection (owned or idle in the pool)."""
        return self.client_connections.sessions

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
        self._task_group = self.client_connections.task_group = task_group
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
            task_group.start_soon(self.client_connections.reap_idle, reaper, name=f"upstream:{self.name}:reaper")
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
        return await self.client_connections.connection_for(peer)

    def connection_of(self, peer: DownstreamPeer) -> UpstreamConnection | None:
        """The connection of `peer`'s own (under `per_session`), if it has one now."""
        return self.client_connections.connection_of(peer)

    async def release_peer(self, peer: DownstreamPeer) -> None:
        """`peer` is done with its connection: a per-call client's goes back to the pool, the others' is closed
        (its upstream session state was that client's)."""
        await self.client_connections.release_peer(peer)

    def give_back(self, peer: DownstreamPeer) -> bool:
        """`release_peer` done now, where it needs no wait (`ClientConnections.give_back`); False: it needs one."""
        return self.client_connections.give_back(peer)

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
        await self.client_connections.drop_stale(lost)
        self.suspect()
        return await self.connection_for(peer)

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

