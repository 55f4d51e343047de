"""Replicas that act as one gateway, on Redis (`redis_url`, docs/deploy.md).

Without `redis_url` nothing here runs and the gateway keeps everything in its process. With it:

- `bus.Replicas`: this replica's lease (a key with a TTL, renewed while it lives), its channel for the
  others' requests (Redis pub/sub), and asking another replica something (`ask`), which fails within
  a few seconds when that replica is gone.
- `board.PendingBoard`: every replica's pending elicitations, readable by all (the admin API, the inbox).
- `limits.SharedLimits`: rate-limit buckets and pending limits, counted in Redis (Lua, atomic), and on the
  replica while Redis is away.
- `keys.shared_state_key`: the `requestState` sealing key every replica uses.
- `elicitgate.web.replicas.ToOwner` (the web side, in `web`): a hosted page or admin-API request for an
  elicitation another replica holds goes to it.
- `retries`: a 2026-07-28 retry for a call parked on another replica goes to that replica.
"""
