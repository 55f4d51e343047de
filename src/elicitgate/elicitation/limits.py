"""Per-client token bucket for elicitation rate limits."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


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
