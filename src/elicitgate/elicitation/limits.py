"""Per-client token bucket for elicitation rate limits, and the errors of every limit."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Literal

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import ElicitationConfig


def pending_limit(config: ElicitationConfig, server: str, limit: Literal["max_pending_per_session",
                                                                          "max_pending_total"]) -> MCPError:
    per_client = limit == "max_pending_per_session"
    return errors.gateway_error(
        errors.ELICITATION_LIMIT,
        "too many pending elicitations (or open tasks) for this client" if per_client
        else "too many pending elicitations in the gateway",
        server=server,
        limit=limit,
        value=config.max_pending_per_session if per_client else config.max_pending_total,
        fix=f"answer or cancel open questions (or tasks) first, or raise elicitation.{limit}" if per_client
        else f"retry when open questions have ended, or raise elicitation.{limit}",
    )


def rate_limited(config: ElicitationConfig, server: str, wait: float) -> MCPError:
    return errors.gateway_error(
        errors.ELICITATION_RATE_LIMITED,
        "elicitation rate limit exceeded for this client",
        server=server,
        limit="rate_limit_per_minute",
        value=config.rate_limit_per_minute,
        retryAfterSeconds=round(wait, 3),
    )


_FLOAT_SLACK = 1e-6
"""Rounding error of the refill arithmetic (in tokens; in milliseconds for the advertised wait): a client
that waited the advertised time gets its token."""


class TokenBucket:
    """`burst` tokens (at least 1), refilled at `rate_per_second`. Slotted, with no `__post_init__`: a 2026-07-28
    client without authentication is a client of its own for every call, so most questions make one."""

    __slots__ = ("rate_per_second", "burst", "clock", "tokens", "updated")

    def __init__(
        self, rate_per_second: float, burst: int, clock: Callable[[], float] = time.monotonic, *, taken: bool = False
    ) -> None:
        """`taken`: with its first token taken, as `take` leaves a new bucket (it has one to give: no wait)."""
        self.rate_per_second = rate_per_second
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst - 1 if taken else burst)
        self.updated = clock()

    def take(self) -> float:
        """Take one token; returns 0 on success, else the seconds (whole milliseconds) until one is available."""
        now = self.clock()
        # `min(burst, refilled)` and `max(0.0, left)` as comparisons: two calls less on every question's way.
        refilled = self.tokens + (now - self.updated) * self.rate_per_second
        self.tokens = refilled if refilled < self.burst else self.burst
        self.updated = now
        if self.tokens >= 1 - _FLOAT_SLACK:
            left = self.tokens - 1
            self.tokens = left if left > 0.0 else 0.0
            return 0.0
        # In whole milliseconds, rounded up: waiting the advertised time always earns the token.
        return max(1, math.ceil((1 - self.tokens) / self.rate_per_second * 1000 - _FLOAT_SLACK)) / 1000

    def full(self) -> bool:
        """Refilled to the burst: indistinguishable from a new bucket."""
        return self.tokens + (self.clock() - self.updated) * self.rate_per_second >= self.burst
