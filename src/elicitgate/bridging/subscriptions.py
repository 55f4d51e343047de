"""Resource subscriptions of handshake-era clients, carried to 2026-07-28 upstreams.

2026-07-28 has no `resources/subscribe`: a client opens `subscriptions/listen` with the URIs it wants,
and `notifications/resources/updated` arrive on that request's stream until it ends. The gateway
opens one such listen per (client, server, URI) on the client's connection to that upstream, and
ends it on `resources/unsubscribe` or when the client goes away; the updates reach clients the same
way as a handshake-era upstream's.
"""

from __future__ import annotations

import logging

import anyio
import anyio.abc

from elicitgate.contracts import DownstreamPeer
from elicitgate.json_shapes import JsonObject
from elicitgate.upstreams.link import UpstreamLink

logger = logging.getLogger(__name__)


async def subscribe(
    task_group: anyio.abc.TaskGroup, peer: DownstreamPeer, link: UpstreamLink, uri: str
) -> JsonObject:
    listens = peer.listens
    if (link.name, uri) in listens:
        return {}
    conn = await link.connection_for(peer)
    scope = anyio.CancelScope()
    listens[(link.name, uri)] = scope

    async def listen() -> None:
        with scope:
            try:
                await conn.request("subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}})
            except Exception as exc:  # the subscription is gone; say why, the client keeps working
                logger.warning("upstream %r: listening for %s ended: %s", link.name, uri, exc)
        listens.pop((link.name, uri), None)

    task_group.start_soon(listen, name=f"listen:{link.name}:{uri}")
    return {}


def unsubscribe(peer: DownstreamPeer, server: str, uri: str) -> JsonObject:
    scope = peer.listens.pop((server, uri), None)
    if scope is not None:
        scope.cancel()
    return {}


def remember(peer: DownstreamPeer, server: str, uri: str, *, subscribed: bool) -> None:
    """A handshake-era upstream accepted this client's `resources/subscribe` (or `unsubscribe`)."""
    if subscribed:
        peer.subscribed.add((server, uri))
    else:
        peer.subscribed.discard((server, uri))


def subscribed(peer: DownstreamPeer, server: str, uri: str) -> bool:
    """Whether `notifications/resources/updated` for `uri` of `server` is for this client."""
    key = (server, uri)
    return key in peer.subscribed or key in peer.listens


def close_all(peer: DownstreamPeer) -> None:
    listens, peer.listens = peer.listens, {}
    for scope in listens.values():
        scope.cancel()
