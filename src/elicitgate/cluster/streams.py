"""Resumable streams across replicas (`redis_url`): a client whose stream broke may come back through another
replica, which replays the stream from Redis and follows it there until its end.

Only a stream that broke is copied, so the streams that never break (nearly all) cost Redis nothing: at the
break the replica holding the session writes the stream's kept events, then each new one, to a Redis stream
(`XADD`, at most `max_events`, expiring `ttl` seconds after the last), with who may resume it (its session and
principal) and which replica holds the session. Writes go in order from one task, in pipelines; Redis out of
reach loses the copy (a warning), never the call: the client can still resume on the replica that holds it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable

from redis.exceptions import RedisError

from elicitgate.cluster.bus import Replicas
from elicitgate.cluster.redis_client import Pipeline
from elicitgate.contracts import NamedStream
from elicitgate.json_shapes import JsonObject, is_object

logger = logging.getLogger(__name__)


class SharedStreams:
    """This replica's copies of its broken streams, and reading the copies other replicas made."""

    def __init__(self, replicas: Replicas, *, max_events: int, ttl: float) -> None:
        self.replicas = replicas
        self._max_events = max_events
        self._ttl = max(int(ttl), 1)
        self._queue: deque[Callable[[Pipeline], object]] = deque()
        self._wake = asyncio.Event()
        replicas.workers.append(self._write)

    def _events(self, stream: str) -> str:
        return self.replicas.key("events", stream)

    def _about(self, stream: str) -> str:
        return self.replicas.key("events-of", stream)

    def _session(self, session_id: str) -> str:
        return self.replicas.key("session", session_id)

    # -- the replica holding the session ------------------------------------------------------------

    def share(
        self, stream: NamedStream, events: Iterable[tuple[int, JsonObject]], last_seq: int | None, *,
        session: str, principal: str,
    ) -> None:
        """`stream` broke: copy what it keeps (`last_seq`: the seq of its end, if it came) and say who may resume it."""
        about = {"session": session, "principal": principal, "replica": self.replicas.id}

        def meta(pipe: Pipeline) -> None:
            pipe.hset(self._about(stream.name), mapping=about)
            pipe.expire(self._about(stream.name), self._ttl)
            pipe.set(self._session(session), self.replicas.id, ex=self._ttl)

        self._push(meta)
        for seq, message in events:
            self.appended(stream, seq, message, seq == last_seq)

    def appended(self, stream: NamedStream, seq: int, message: JsonObject, last: bool) -> None:
        key = self._events(stream.name)
        fields = {"seq": seq, "data": json.dumps(message, separators=(",", ":")), "last": int(last)}

        def add(pipe: Pipeline) -> None:
            pipe.xadd(key, fields, maxlen=self._max_events, approximate=True)
            pipe.expire(key, self._ttl)

        self._push(add)

    def forget(self, stream: NamedStream) -> None:
        name = stream.name
        self._push(lambda pipe: pipe.delete(self._events(name), self._about(name)))

    def session_ended(self, session_id: str) -> None:
        self._push(lambda pipe: pipe.delete(self._session(session_id)))

    def _push(self, command: Callable[[Pipeline], object]) -> None:
        self._queue.append(command)
        self._wake.set()

    async def _write(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), 256))]
                try:
                    async with self.replicas.redis.pipeline(transaction=False) as pipe:
                        for command in batch:
                            command(pipe)
                        await pipe.execute()
                except RedisError as exc:
                    logger.warning("broken streams not copied to Redis (%s): their clients can resume them only "
                                   "on this replica", exc)

    # -- another replica ----------------------------------------------------------------------------

    async def holder_of_session(self, session_id: str) -> str | None:
        """The replica holding a session whose stream broke, if Redis knows one (raises `MCPError` when Redis
        is out of reach)."""
        try:
            return await self.replicas.redis.get(self._session(session_id))
        except RedisError as exc:
            raise self.replicas.failure(exc) from None

    async def about(self, stream: str) -> dict[str, str]:
        """Who may resume `stream` (`session`, `principal`) and the replica holding it; empty when unknown."""
        try:
            return await self.replicas.redis.hgetall(self._about(stream))
        except RedisError as exc:
            raise self.replicas.failure(exc) from None

    async def events_after(
        self, stream: str, after: int, wait: float
    ) -> AsyncGenerator[tuple[int, JsonObject, bool] | None]:
        """The copied events of `stream` after seq `after`, then each new one as it comes, until its last; None
        each time `wait` seconds pass with none. Ends early when the copy is gone (the session ended, or its
        replica stopped and the copy expired)."""
        key = self._events(stream)
        redis = self.replicas.redis
        cursor = "0-0"
        while True:
            try:
                found = await redis.xread({key: cursor}, count=256, block=int(wait * 1000))
            except RedisError as exc:
                raise self.replicas.failure(exc) from None
            entries = found[0][1] if found else []
            if not entries:
                if not await redis.exists(key):
                    return
                yield None
                continue
            for entry_id, fields in entries:
                cursor = entry_id
                seq = int(fields.get("seq", "0"))
                if seq <= after:
                    continue
                message = json.loads(fields.get("data", "{}"))
                last = fields.get("last") == "1"
                yield seq, message if is_object(message) else {}, last
                if last:
                    return
