"""Per-client token bucket for elicitation rate limits, and the errors of every limit."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import ElicitationConfig


def pending_limit(config: ElicitationConfig, server: str, limit: Literal["max_pending_per_session",
                                                                          "max_pending_total"]) -> MCPError:
    per_client = limit == "max_pending_per_session"
    return errors.gateway_error(
        errors.ELICITATION_LIMIT,
        "too many pending elicitations for this client" if per_client
        else "too many pending elicitations in the gateway",
        server=server,
        limit=limit,
        value=config.max_pending_per_session if per_client else config.max_pending_total,
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


@dataclass
class TokenBucket:
    rate_per_second: float
    burst: int
    tokens: float = field(init=False)
    updated: float = field(init=False, default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def take(self) -> float:
        """Take one token; returns 0 on success, else the seconds until one is available."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate_per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate_per_second

    def full(self) -> bool:
        """Refilled to the burst: indistinguishable from a new bucket."""
        return self.tokens + (time.monotonic() - self.updated) * self.rate_per_second >= self.burst
