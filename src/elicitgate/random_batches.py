"""Random tokens made ahead, a batch from one read of the system's random source: on a hot path each costs a `pop`,
not a system call and a formatting of its own."""

from __future__ import annotations

import os
from collections.abc import Callable

READ_BYTES = 4096
"""Bytes of the system's random source read for one batch."""


class RandomBatch(list[str]):
    """Tokens of `size` random bytes each, as `make` writes them, made `READ_BYTES // size` at a time: take one with
    `batch.pop() if batch else batch.refill()`. A batch lives in the process: one forked after it was made would share
    it (the gateway does not fork)."""

    def __init__(self, size: int, make: Callable[[bytes], str]) -> None:
        super().__init__()
        self.size = size
        self.make = make

    def refill(self) -> str:
        """A batch made; one of its tokens taken."""
        size, make = self.size, self.make
        random = os.urandom(READ_BYTES // size * size)
        self.extend(make(random[at : at + size]) for at in range(0, len(random), size))
        return self.pop()
