"""Rate limits and pending limits over all replicas, counted in Redis.

One Lua script admits an elicitation atomically: the client identity's pending count and the total
(summed over the replicas whose lease holds), then its token bucket (`elicitation.rate_limit_per_minute`,
`rate_limit_burst`, on Redis' clock), then counts it as pending on this replica. Each replica rewrites
its own counts from what it holds on every lease renewal (`open:<replica>`, expiring with the lease),
so an end is counted within a second and a dead replica's counts vanish with it, and a Redis that restarted
empty has them again within a second.

Redis out of reach: the replica admits as a gateway without replicas does, counting what it holds itself
(`local`: the same per-identity and total limits, a token bucket of its own), rather than refusing what it
can serve alone; its counts reach Redis with the first renewal that gets through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from redis.exceptions import RedisError

from elicitgate.cluster.bus import LEASE_SECONDS, Replicas
from elicitgate.cluster.redis_client import Pipeline
from elicitgate.config import ElicitationConfig
from elicitgate.contracts import DownstreamPeer
from elicitgate.elicitation.limits import pending_limit, rate_limited

logger = logging.getLogger(__name__)

TOTAL = ""
"""The field of `open:<replica>` holding the replica's total."""

ADMIT = """
local prefix, identity, me = ARGV[1], ARGV[2], ARGV[3]
local max_per, max_total = tonumber(ARGV[4]), tonumber(ARGV[5])
local rate, burst = tonumber(ARGV[6]), tonumber(ARGV[7])
local mine, total = 0, 0
for _, r in ipairs(redis.call('SMEMBERS', prefix .. 'replicas')) do
  if r == me or redis.call('EXISTS', prefix .. 'lease:' .. r) == 1 then
    local counts = prefix .. 'open:' .. r
    mine = mine + tonumber(redis.call('HGET', counts, identity) or '0')
    total = total + tonumber(redis.call('HGET', counts, '') or '0')
  end
end
if mine >= max_per then return {'limit', 'max_pending_per_session'} end
if total >= max_total then return {'limit', 'max_pending_total'} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local bucket = prefix .. 'bucket:' .. identity
local kept = redis.call('HMGET', bucket, 'tokens', 'at')
local tokens = math.min(burst, (tonumber(kept[1]) or burst) + (now - (tonumber(kept[2]) or now)) * rate)
local refill = math.ceil(burst / rate) + 1
if tokens < 1 then
  redis.call('HSET', bucket, 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('EXPIRE', bucket, refill)
  return {'rate', tostring((1 - tokens) / rate)}
end
redis.call('HSET', bucket, 'tokens', tostring(tokens - 1), 'at', tostring(now))
redis.call('EXPIRE', bucket, refill)
local counts = prefix .. 'open:' .. me
redis.call('HINCRBY', counts, identity, 1)
redis.call('HINCRBY', counts, '', 1)
redis.call('EXPIRE', counts, tonumber(ARGV[8]))
return {'ok'}
"""


RELEASE = """
if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') > 0 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  redis.call('HINCRBY', KEYS[1], '', -1)
end
"""
ADMIT_WAIT = 2.0
"""How long an admission waits for Redis before it counts on this replica (a Redis that stopped answering
without closing its connections is only found out by the 10 s socket timeout)."""
RELEASE_WAIT = 1.0
"""An end is counted at once when Redis answers within this; else at the next lease renewal."""


class SharedLimits:
    """`Broker`'s admission with `redis_url` (without it the broker counts in its process)."""

    def __init__(self, replicas: Replicas, config: ElicitationConfig, counts: Callable[[], Mapping[str, int]],
                 local: Callable[[str, DownstreamPeer, str], str]) -> None:
        """`counts`: what this replica holds per identity; `local(server, peer, identity)`: the admission of a
        gateway without replicas (the broker's), for while Redis is out of reach."""
        self.replicas = replicas
        self.config = config
        self._counts = counts
        self._local = local
        self._admit = replicas.redis.register_script(ADMIT)
        self._release = replicas.redis.register_script(RELEASE)
        replicas.renewals.append(self._renew)

    async def admit(self, server: str, peer: DownstreamPeer) -> str:
        """Check the limits for the client's identity across replicas; returns the identity."""
        identity = peer.principal or f"{self.replicas.id}:{peer.id}"  # session ids are per replica
        if not self.replicas.reachable:  # known away: no wait for a connection that cannot open
            return self._local(server, peer, identity)
        rate = self.config.rate_limit_per_minute / 60.0
        verdict: list[Any] | None = None
        try:
            with anyio.move_on_after(ADMIT_WAIT) as waited:  # a cancelled command closes its connection (redis-py)
                verdict = await self._admit(args=[
                    self.replicas.prefix, identity, self.replicas.id, self.config.max_pending_per_session,
                    self.config.max_pending_total, repr(rate), self.config.rate_limit_burst, LEASE_SECONDS,
                ])
            if waited.cancelled_caught:
                logger.warning("Redis did not answer an admission within %s s: counted on this replica", ADMIT_WAIT)
        except RedisError as exc:
            logger.debug("shared limits out of reach (%s): counted on this replica", exc)
        if verdict is None:  # should Redis have counted it after all, the next renewal rewrites the counts
            return self._local(server, peer, identity)
        if verdict[0] == "limit":
            raise pending_limit(self.config, server, verdict[1])
        if verdict[0] == "rate":
            raise rate_limited(self.config, server, float(verdict[1]))
        return identity

    async def release(self, identity: str) -> None:
        """One of `identity`'s elicitations ended (the renewal corrects what this cannot say)."""
        if not self.replicas.reachable:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_WAIT):
            try:
                await self._release(keys=[self.replicas.key("open", self.replicas.id)], args=[identity])
            except RedisError:
                pass

    def _renew(self, pipe: Pipeline) -> None:
        """This replica's counts, as it holds them (an end lowers them here)."""
        key = self.replicas.key("open", self.replicas.id)
        counts = {identity: n for identity, n in self._counts().items() if n > 0}
        pipe.delete(key)
        if counts:
            pipe.hset(key, mapping={**counts, TOTAL: sum(counts.values())})
            pipe.expire(key, LEASE_SECONDS)

