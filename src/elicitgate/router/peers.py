"""The clients on the face: the handshake-era ones by their connection, the 2026-07-28 ones by principal.

A handshake-era client is added when its session opens and removed when it ends (its connection's exit
stack). A 2026-07-28 client has no connection that could end: its peer is kept while it is active and closed
once it has been idle for `bridging.state_ttl` with nothing in flight (`expire_idle`). Removing a peer ends
what it held: its questions, subscriptions, tasks and per-client upstream connections.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import anyio

from mcp.server.connection import Connection

from elicitgate.bridging import subscriptions
from elicitgate.contracts import DownstreamPeer, Origin
from elicitgate.elicitation.broker import Broker
from elicitgate.router.tasks import TaskTable
from elicitgate.upstreams.link import UpstreamLink


class Peers:
    """The peer registry: who is on the face, and what a client that leaves gives back."""

    def __init__(
        self, broker: Broker, links: Mapping[str, UpstreamLink], tasks: TaskTable, *, idle_after: float
    ) -> None:
        self._broker = broker
        self._links = links
        self._tasks = tasks
        self._idle_after = idle_after
        self.connected: set[DownstreamPeer] = set()
        """The handshake-era clients on the face: whom a broadcast reaches (`router.inbound`)."""
        self.modern: dict[str, DownstreamPeer] = {}
        """2026-07-28 clients, by principal (they have no connection that could end)."""
        self._modern_ids = itertools.count(1)

    def add(self, peer: DownstreamPeer) -> None:
        """A handshake-era client's session opened; it is removed when its connection ends."""
        self.connected.add(peer)
        peer.connection.exit_stack.push_async_callback(self.remove, peer)

    async def remove(self, peer: DownstreamPeer) -> None:
        peer.closed = True
        self.connected.discard(peer)
        self._broker.stop_for_peer(peer, "the client disconnected")
        subscriptions.close_all(peer)
        self._tasks.peer_gone(peer)
        await self.release_upstreams(peer)

    async def release_upstreams(self, peer: DownstreamPeer) -> None:
        """Give back the per-client upstream connections of `peer`: a per-call client's to the pool, the
        others closed (their upstream session state was that client's)."""
        for link in self._links.values():
            await link.release_peer(peer)

    def give_back_upstreams(self, peer: DownstreamPeer) -> bool:
        """`release_upstreams` for a per-call client whose connections all go back to the pool as they are: done now,
        with no coroutine, no shielded scope and no loop turn (a 2026-07-28 client's every call). False: some need
        closing, and `release_upstreams` must still run."""
        done = True
        for link in self._links.values():
            done = link.give_back(peer) and done
        return done

    def modern_peer(
        self, principal: str | None, connection: Connection, *, resuming: Origin | None = None
    ) -> DownstreamPeer:
        """The peer of a 2026-07-28 client: one per authenticated principal, kept while it is active;
        without one (`principal` None, see `bridging.sealing.authenticated_principal_of`), one per call: a first request
        gets a new peer, a retry the one of the call it resumes."""
        if principal is None:
            if resuming is not None and resuming.peer.per_call:
                peer = resuming.peer
            else:
                peer = DownstreamPeer(id=f"m{next(self._modern_ids)}", connection=connection, per_call=True)
            peer.connection = connection
            return peer
        peer = self.modern.get(principal)
        if peer is None or peer.closed:
            peer = self.modern[principal] = DownstreamPeer(
                id=f"m{next(self._modern_ids)}", connection=connection, principal=principal
            )
        peer.connection = connection
        peer.last_seen = anyio.current_time()
        return peer

    async def expire_idle(self) -> None:
        """Close what an idle 2026-07-28 client held (its per-session upstream connections); runs until cancelled."""
        idle = self._idle_after
        while True:
            await anyio.sleep(min(idle, 60.0))
            now = anyio.current_time()
            for principal, peer in list(self.modern.items()):
                if now - peer.last_seen > idle and not self._broker.asking(peer) and not peer.calls:
                    del self.modern[principal]
                    await self.remove(peer)
