"""Every replica's pending elicitations, readable by all: what `GET /api/elicitations` and the inbox list.

Each replica keeps its own list under one key that lives with its lease (`pending:<replica>`, rewritten
every `RENEW_EVERY` and at once on a change, expiring `LEASE_SECONDS` after the replica stops), and says
"changed" on the broadcast channel when the list differs from the last one it wrote. Where an elicitation
or a hosted page lives (`el:<id>`, `tok:<sha256 of the page token>` → replica) is kept longer
(`OWNER_TTL`), so that a late answer is told the replica that held it stopped, not "unknown". All of it is
written again when Redis lost it (`announce`, run by `Replicas.announce`), so that answers and pages keep
reaching this replica through the others after Redis restarted empty.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import anyio
from redis.exceptions import RedisError

from elicitgate.cluster.bus import LEASE_SECONDS, RENEW_EVERY, Replicas
from elicitgate.cluster.redis_client import Pipeline
from elicitgate.json_shapes import JsonObject

logger = logging.getLogger(__name__)

OWNER_TTL = 3600
PENDING_CHANGED = "pending"
Snapshot = Callable[[], list[JsonObject]]
"""This replica's pending elicitations as the admin API shows them, without their page links: each hosted
one with `token_digest` (and, with an admin token, its link sealed: `page_links`)."""


class PendingBoard:
    def __init__(self, replicas: Replicas, snapshot: Snapshot, on_others_changed: Callable[[], None]) -> None:
        self.replicas = replicas
        self.snapshot = snapshot
        self._on_others_changed = on_others_changed
        self._dirty = anyio.Event()
        self._written: set[str] = set()
        """Ids (and token digests) whose owner key this replica wrote, while they are pending."""
        self._last: str | None = None
        self._live: list[str] = []
        replicas.on_broadcast.append(self._heard)
        replicas.announcements.append(self.announce)

    def mark(self) -> None:
        """Something local changed: publish soon."""
        self._dirty.set()

    def _heard(self, message: JsonObject) -> None:
        if message.get("kind") == PENDING_CHANGED and message.get("from") != self.replicas.id:
            self._on_others_changed()

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(RENEW_EVERY):
                await self._dirty.wait()
            self._dirty = anyio.Event()
            try:
                await self._publish()
                live = await self.replicas.live_replicas()
                if live != self._live:  # one joined, or one's lease lapsed: its list went with it
                    self._live = live
                    self._on_others_changed()
            except RedisError as exc:
                logger.debug("pending board not published: %s", exc)

    async def _publish(self) -> None:
        items = self.snapshot()
        shown = json.dumps(sorted(
            [i["id"], i["state"], i.get("token_digest"), i.get("claimed_at")] for i in items
        ))
        owners = _owners(items)
        async with self.replicas.redis.pipeline(transaction=False) as pipe:
            self._write(pipe, items, owners - self._written)
            await pipe.execute()
        self._written = owners
        if shown != self._last:
            self._last = shown
            await self.replicas.broadcast({"kind": PENDING_CHANGED})

    def announce(self, pipe: Pipeline) -> None:
        """The whole board: the pending list and every owner key, whatever was written before; the others
        are told it changed at the next `run` (the announcement's pipeline ran by then)."""
        items = self.snapshot()
        owners = _owners(items)
        self._write(pipe, items, owners)
        self._written = owners  # should the pipeline fail, the next renewal announces all of it again
        self._last = None
        self.mark()

    def _write(self, pipe: Pipeline, items: list[JsonObject], owners: set[str]) -> None:
        rid = self.replicas.id
        pipe.set(self.replicas.key("pending", rid), json.dumps(items), ex=LEASE_SECONDS)
        for name in owners:
            pipe.set(self.replicas.key(name), rid, ex=OWNER_TTL)

    async def others(self) -> list[JsonObject]:
        """The pending elicitations of the other live replicas."""
        live = [r for r in await self.replicas.live_replicas() if r != self.replicas.id]
        if not live:
            return []
        lists = await self.replicas.redis.mget([self.replicas.key("pending", r) for r in live])
        items: list[JsonObject] = []
        for raw in lists:
            items += json.loads(raw) if raw else []
        return items

    async def owner(self, kind: str, value: str) -> str | None:
        """The replica that holds elicitation `value` (`kind` "el") or the page of token digest `value` ("tok")."""
        return await self.replicas.redis.get(self.replicas.key(f"{kind}:{value}"))


def _owners(items: list[JsonObject]) -> set[str]:
    """The owner keys of these pending items: each one's id, and its page's token digest."""
    return {f"el:{i['id']}" for i in items} | {f"tok:{i['token_digest']}" for i in items if i.get("token_digest")}
