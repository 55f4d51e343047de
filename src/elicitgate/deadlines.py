"""One timer per key on the event loop's clock (which is anyio's): set, brought earlier, never put off."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")


class Deadlines(Generic[K]):
    """`due(key)` runs at the earliest time `at` was given for `key`, unless `cancel` came first."""

    __slots__ = ("_due", "_timers")

    def __init__(self, due: Callable[[K], object]) -> None:
        self._due = due
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}

    def at(self, key: K, when: float) -> None:
        """`key` is due at `when`, or earlier if it was due earlier already."""
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= when:
                return
            current[1].cancel()
        self._timers[key] = (when, asyncio.get_running_loop().call_at(when, self._fire, key))

    def cancel(self, key: K) -> None:
        if (timer := self._timers.pop(key, None)) is not None:
            timer[1].cancel()

    def run_due(self, now: float) -> None:
        """Run now what is due by `now` (its timer may not have run yet when a request comes at that moment)."""
        for key in [k for k, (when, _) in self._timers.items() if when <= now]:
            self._timers.pop(key)[1].cancel()
            self._due(key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self._due(key)
