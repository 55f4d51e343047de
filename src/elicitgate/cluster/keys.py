"""The `requestState` sealing key every replica uses: a retry sealed by one replica opens on any other.

Configured `bridging.state_keys` win (every replica has them from the same config). Otherwise the first
replica to start puts a random key in Redis (`SET NX`, no expiry) and every replica takes that one,
instead of the per-host `state_key_file`. A running replica puts it back should Redis lose it
(`announce_state_key`), so that a replica started after an empty restart takes the same key.
"""

from __future__ import annotations

import secrets
import time

import redis
from pydantic import SecretStr

from elicitgate.cluster.bus import CONNECT_TIMEOUT, PREFIX, Replicas, where
from elicitgate.cluster.redis_client import Pipeline
from elicitgate.config import GatewayConfig
from elicitgate.errors import ConfigError

STATE_KEY = PREFIX + "state-key"
START_WAIT = 15.0
"""Seconds start-up waits for Redis before it gives up with a clear error."""


def with_shared_state_key(cfg: GatewayConfig, url: str) -> GatewayConfig:
    """`cfg` with the replicas' shared key as `bridging.state_keys` (unless keys are configured)."""
    if cfg.bridging.state_keys:
        return cfg
    # redis-py leaves from_url's **kwargs untyped; the client itself is typed
    client = redis.Redis.from_url(  # pyright: ignore[reportUnknownMemberType]
        url, decode_responses=True, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT
    )
    deadline = time.monotonic() + START_WAIT
    try:
        while True:
            try:
                client.set(STATE_KEY, secrets.token_hex(32), nx=True)
                key = client.get(STATE_KEY)
                break
            except redis.RedisError as exc:
                if time.monotonic() > deadline:
                    raise ConfigError("redis_url", [
                        f"Redis at {where(url)} is unreachable ({exc}); the replicas share their requestState "
                        "key there, so the gateway cannot start without it",
                    ]) from None
                time.sleep(0.5)
    finally:
        client.close()
    bridging = cfg.bridging.model_copy(update={"state_keys": [SecretStr(str(key))]})
    return cfg.model_copy(update={"bridging": bridging})


def announce_state_key(replicas: Replicas, key: str) -> None:
    """Have `replicas` put the key it took from Redis back whenever Redis lost it (`Replicas.announce`);
    `SET NX`: every running replica has the same one."""

    def announce(pipe: Pipeline) -> None:
        pipe.set(STATE_KEY, key, nx=True)

    replicas.announcements.append(announce)
