"""This replica among the others: its lease, its channel, and asking another replica something.

Each replica has a random id. Its lease is a Redis key with a TTL (`LEASE_SECONDS`) renewed every
`RENEW_EVERY`: a replica that stops (SIGKILL included) is gone from Redis within the TTL, and with it
everything it published under its lease. Requests to a replica travel on its pub/sub channel; the
answer comes back on the asker's channel. `PUBLISH` says how many subscribers got a message, so a
replica whose process died (its subscription closed with its socket) is known gone at once; one that
hangs is known gone when its lease lapses. Nobody waits on a replica that is not there.

Redis unreachable: what needs it fails at once (`unavailable`), what this replica can do alone goes on
(its own clients and pages, limits counted here: `limits.py`), and the connection pool, the lease and the
subscription reconnect by themselves when it is back. Whenever Redis does not know this replica (at start,
and when it comes back without the lease: restarted empty, or away longer than the lease), the replica
publishes everything the others need to reach its elicitations at once (`announce`).
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
from mcp_types import INTERNAL_ERROR
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.cluster import redis_client
from elicitgate.cluster.redis_client import Pipeline, RedisClient
from elicitgate.json_shapes import JsonObject, is_object
from elicitgate.metrics import REDIS_UP, labelled

logger = logging.getLogger(__name__)

PREFIX = "elicitgate:"
LEASE_SECONDS = 3
RENEW_EVERY = 1.0
CONNECT_TIMEOUT = 2.0
RECONNECT_WAIT = 0.5
LIVENESS_CHECK = 1.0
"""While waiting for another replica's answer: how often to check that its lease still holds."""

Handler = Callable[[JsonObject], Awaitable[Any]]


def connect(url: str) -> RedisClient:
    """A client that fails fast (no long retries: a caller waits at most a couple of seconds) and
    reconnects by itself (the pool opens a new connection for the next command)."""
    return redis_client.connect(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=10.0,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
        health_check_interval=5,
    )


def where(url: str) -> str:
    """The Redis address without credentials, for messages."""
    rest = url.split("://", 1)[-1]
    return rest.rsplit("@", 1)[-1]


def unavailable(url: str, exc: BaseException) -> errors.GatewayError:
    return errors.gateway_error(
        errors.CLUSTER_UNAVAILABLE,
        f"Redis at {where(url)} is unreachable; the gateway's replicas cannot share this request (it reconnects "
        "by itself)",
        redis=where(url),
        reason=f"{type(exc).__name__}: {exc}",
    )


def replica_gone(replica: str, what: str) -> errors.GatewayError:
    return errors.gateway_error(
        errors.REPLICA_GONE,
        f"the gateway replica that held {what} stopped; it has ended",
        replica=replica,
    )


class Replicas:
    """This replica's presence in Redis, and its requests to the others."""

    def __init__(self, url: str, *, prefix: str = PREFIX) -> None:
        self.url = url
        self.redis = connect(url)
        self.prefix = prefix
        self.id = secrets.token_hex(6)
        self.handlers: dict[str, Handler] = {}
        """Operations other replicas may ask of this one, by name."""
        self.on_broadcast: list[Callable[[JsonObject], None]] = []
        self.renewals: list[Callable[[Pipeline], None]] = []
        """Further commands for the lease renewal's pipeline (each replica's counts for the shared limits)."""
        self.workers: list[Callable[[], Coroutine[Any, Any, None]]] = []
        """Tasks that run while the replica does (publishing its pending board)."""
        self.announcements: list[Callable[[Pipeline], None]] = []
        """Commands that publish everything the others need to reach this replica's elicitations (its pending
        list, where each one and its page live, the shared requestState key): run by `announce`."""
        self.reachable = False
        self.down_since: float | None = None
        """`anyio.current_time()` when Redis was found out of reach (None while it is reachable)."""
        self.started = anyio.Event()
        """Set once the first attempt to join (lease and subscription) is over, whether it worked or not."""
        self._subscribed = anyio.Event()
        self._replies: dict[str, tuple[anyio.Event, list[JsonObject]]] = {}
        self._cids = itertools.count(1)
        self._tg: anyio.abc.TaskGroup | None = None
        self._said_down = False
        self._listening = False
        self._announced = False
        self._up_metric = labelled(REDIS_UP, where(url))

    # -- keys and channels ---------------------------------------------------------------------

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def channel(self, replica: str) -> str:
        return self.key("replica", replica)

    @property
    def broadcast_channel(self) -> str:
        return self.key("broadcast")

    def lease_key(self, replica: str) -> str:
        return self.key("lease", replica)

    def failure(self, exc: BaseException) -> errors.GatewayError:
        return unavailable(self.url, exc)

    # -- running -------------------------------------------------------------------------------

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._listen, name="replicas-listen")
            tg.start_soon(self._renew, name="replicas-lease")
            for worker in self.workers:
                tg.start_soon(worker)

    async def close(self) -> None:
        """Leave at once (a clean stop): the others need not wait for the lease to lapse."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            try:
                await self.redis.delete(self.lease_key(self.id))
                await self.redis.srem(self.key("replicas"), self.id)
            except RedisError:
                pass
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        await self.redis.aclose()

    async def _renew(self) -> None:
        await self._subscribed.wait()  # listening before anyone learns this replica exists
        while True:
            try:
                async with self.redis.pipeline(transaction=True) as pipe:
                    pipe.exists(self.lease_key(self.id))
                    pipe.set(self.lease_key(self.id), "1", ex=LEASE_SECONDS)
                    pipe.sadd(self.key("replicas"), self.id)
                    for renewal in self.renewals:
                        renewal(pipe)
                    known = (await pipe.execute())[0]
                if not known or not self._announced:
                    await self.announce(again=self._announced)
                if self._listening:  # reachable means the others can also ask this replica
                    self._up()
            except RedisError as exc:
                self._down(exc)
            self.started.set()
            await anyio.sleep(RENEW_EVERY)

    async def announce(self, *, again: bool = False) -> None:
        """Publish everything the others need to reach this replica's elicitations, all of it: at start, and
        whenever Redis has lost this replica's lease (a restart without persistence, or an absence longer
        than the lease). One place, so that nothing is left out when Redis comes back."""
        self._announced = False  # until it is done: a failure has the next renewal try it all again
        async with self.redis.pipeline(transaction=False) as pipe:
            for announcement in self.announcements:
                announcement(pipe)
            await pipe.execute()
        self._announced = True
        if again:
            logger.warning("replica %s: Redis at %s had lost this replica's keys (restarted empty?); published "
                           "them again", self.id, where(self.url))

    def _up(self) -> None:
        if not self.reachable:
            logger.info("replica %s: Redis at %s reachable", self.id, where(self.url))
        self.reachable, self._said_down, self.down_since = True, False, None
        self._up_metric.set(1)

    def _down(self, exc: BaseException) -> None:
        self.reachable = False
        self._up_metric.set(0)
        if self.down_since is None:
            self.down_since = anyio.current_time()
        if not self._said_down:
            self._said_down = True
            logger.warning("replica %s: Redis at %s unreachable (%s); this replica serves its own clients and "
                           "pages alone, and retries every %g s", self.id, where(self.url), exc, RENEW_EVERY)

    async def _listen(self) -> None:
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel(self.id), self.broadcast_channel)
                self._listening = True
                self._subscribed.set()
                while True:
                    message = await pubsub.get_message(timeout=RENEW_EVERY)
                    if message is not None:
                        self._dispatch(message.get("channel"), message.get("data"))
            except (RedisError, OSError) as exc:
                self._listening = False
                self._down(exc)
                self._subscribed.set()  # the lease loop tries (and reports) too
                self.started.set()
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await pubsub.aclose()
                    except (RedisError, OSError):
                        pass
            await anyio.sleep(RECONNECT_WAIT)

    def _dispatch(self, channel: Any, data: Any) -> None:
        try:
            message = json.loads(data)
        except (TypeError, ValueError):
            return
        if not is_object(message):
            return
        if channel == self.broadcast_channel:
            for listener in self.on_broadcast:
                listener(message)
        elif "op" in message:
            assert self._tg is not None
            self._tg.start_soon(self._serve, message)
        elif (waiting := self._replies.get(str(message.get("cid")))) is not None:
            waiting[1].append(message)
            waiting[0].set()

    async def _serve(self, message: JsonObject) -> None:
        handler = self.handlers.get(str(message.get("op")))
        reply: JsonObject = {"cid": message.get("cid")}
        try:
            if handler is None:
                raise errors.gateway_error(INTERNAL_ERROR, f"unknown replica operation {message.get('op')!r}")
            reply["ok"] = await handler(message.get("args") or {})
        except MCPError as exc:
            reply["error"] = exc.error.model_dump(mode="json", exclude_none=True)
        except Exception as exc:  # the asker gets an answer, never a hang
            logger.exception("replica operation %s failed", message.get("op"))
            reply["error"] = {"code": INTERNAL_ERROR, "message": f"internal error: {type(exc).__name__}"}
        try:
            await self.redis.publish(self.channel(str(message.get("from"))), json.dumps(reply))
        except RedisError as exc:
            self._down(exc)

    # -- asking the others ---------------------------------------------------------------------

    async def alive(self, replica: str) -> bool:
        try:
            return bool(await self.redis.exists(self.lease_key(replica)))
        except RedisError as exc:
            raise self.failure(exc) from None

    async def ask(self, replica: str, op: str, args: JsonObject, *, what: str, timeout: float) -> Any:
        """Run `op` on `replica` and return its result; its `MCPError` is raised here as it was there.

        Raises `replica_gone` as soon as the replica is known gone (at once when its process died, within
        its lease otherwise), `unavailable` when Redis is, and a timeout error after `timeout` seconds."""
        cid = f"{self.id}-{next(self._cids)}"
        arrived = anyio.Event()
        replies: list[JsonObject] = []
        self._replies[cid] = (arrived, replies)
        try:
            message = json.dumps({"op": op, "args": args, "cid": cid, "from": self.id})
            try:
                received = await self.redis.publish(self.channel(replica), message)
            except RedisError as exc:
                raise self.failure(exc) from None
            if not received:
                raise replica_gone(replica, what)
            with anyio.move_on_after(timeout):
                while True:
                    with anyio.move_on_after(LIVENESS_CHECK):
                        await arrived.wait()
                        break
                    if not await self.alive(replica):
                        raise replica_gone(replica, what)
            if not replies:
                raise errors.gateway_error(
                    errors.REPLICA_GONE, f"the gateway replica that holds {what} did not answer within {timeout:g} s",
                    replica=replica,
                )
        finally:
            del self._replies[cid]
        reply = replies[0]
        if "error" in reply:
            error = reply["error"]
            raise MCPError(code=error.get("code", INTERNAL_ERROR), message=error.get("message", ""),
                           data=error.get("data"))
        return reply.get("ok")

    async def broadcast(self, message: JsonObject) -> None:
        await self.redis.publish(self.broadcast_channel, json.dumps({**message, "from": self.id}))

    async def live_replicas(self) -> list[str]:
        """The replicas whose lease holds (the others are dropped from the set as they are found)."""
        members = sorted(await self.redis.smembers(self.key("replicas")))
        if not members:
            return []
        leases = await self.redis.mget([self.lease_key(m) for m in members])
        gone = [m for m, lease in zip(members, leases, strict=True) if lease is None]
        if gone:
            await self.redis.srem(self.key("replicas"), *gone)
        return [m for m, lease in zip(members, leases, strict=True) if lease is not None]
