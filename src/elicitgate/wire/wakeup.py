"""One reader waiting for its producer's next change, bounded by a timeout: a future and a timer, no task and
no event (an asyncio or anyio `Event` holds a deque, which an object kept per pending question need not)."""

from __future__ import annotations

import asyncio


class Wakeable:
    """A base for an object with one reader: the producer calls `_wake`, the reader awaits `_wait`."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[bool] | None = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def _wait(self, timeout: float | None) -> bool:
        """Until `_wake` (True) or `timeout` seconds (False; None: no bound)."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            return await waiter
        finally:
            if self._waiter is waiter:
                self._waiter = None
            if timer is not None:
                timer.cancel()


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
