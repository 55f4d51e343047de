"""A request deadline that stops while a person is answering an elicitation for that request."""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import Generator
from contextlib import contextmanager
from types import TracebackType

EXPIRY_RECHECK = 0.01
"""Seconds after which an expiry that found the task being cancelled from elsewhere looks again (`_expire`)."""

_TIMER_CONTEXT = contextvars.Context()
"""The context the expiry timers run in: theirs only cancels a task, so none is copied for each (`call_at` copies
the current one otherwise)."""


class PausableDeadline:
    """`timeout` seconds of budget, spent only while no elicitation is open for the request.

    `with PausableDeadline(timeout) as clock:` raises `TimeoutError` when the block's running time, pauses
    excluded, exceeds `timeout` (`None`: no limit). One of these lives for every request in flight (for a call
    whose question waits for a person, as long as the person takes), so it is a loop timer that cancels the task
    and a count of the task's cancellations, as `asyncio.timeout` is, not an anyio cancel scope (~0.6 KB each:
    a dict and two sets) nor a generator-based context manager (a frame). A cancellation of the task from
    elsewhere (the caller's, an anyio scope's) passes through untouched, as `asyncio.timeout` lets it.
    """

    __slots__ = ("loop", "_budget", "_pauses", "_deadline", "_task", "_cancelling", "_timer", "_state")

    def __init__(self, timeout: float | None, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        """The event loop it is made in (`loop`, the running one), asked for once at most: `get_running_loop` (and
        `current_task` without a loop, and anyio's clock) is a `getpid` system call on Python 3.11, and a call's clock
        reads it at each step."""
        self._budget = math.inf if timeout is None else timeout
        self._deadline = self.loop.time() + self._budget
        self._pauses = 0
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._timer: asyncio.Handle | None = None
        self._state = 0
        """0 not entered yet, 1 running, 2 expired (the task was cancelled for it), 3 exited."""

    @property
    def deadline(self) -> float:
        """When the budget runs out (the event loop's clock); infinite while paused or without a timeout."""
        return self._deadline

    def __enter__(self) -> PausableDeadline:
        task = asyncio.current_task(self.loop)
        assert task is not None, "PausableDeadline is entered in a task"
        self._task = task
        self._cancelling = task.cancelling()
        self._state = 1
        self._arm()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._disarm()
        expired = self._state == 2
        self._state = 3
        task = self._task
        self._task = None
        # Only its own cancellation becomes TimeoutError: one asked for since (by the caller) is the caller's.
        if expired and task is not None and task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def pause(self) -> None:
        if not self._pauses:
            self._budget = max(0.0, self._deadline - self.loop.time())
            self._deadline = math.inf
            self._disarm()
        self._pauses += 1

    def resume(self) -> None:
        self._pauses -= 1
        if not self._pauses:
            self._deadline = self.loop.time() + self._budget
            self._arm()

    @contextmanager
    def paused(self) -> Generator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def _arm(self) -> None:
        """Start the timer for `_deadline` while the block runs (a resume after it ended arms nothing)."""
        if self._state != 1 or self._deadline == math.inf:
            return
        loop = self.loop
        if self._deadline <= loop.time():  # not at once: a cancel asked of the running task itself would outlive a
            # block that ends before its next await (Python 3.11's `uncancel` leaves it pending)
            self._timer = loop.call_soon(self._expire, context=_TIMER_CONTEXT)
        else:
            self._timer = loop.call_at(self._deadline, self._expire, context=_TIMER_CONTEXT)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        task = self._task
        if self._state != 1 or task is None:
            return
        if task.cancelling() > self._cancelling:
            # Cancelled from elsewhere already, and maybe in a shielded step of its way out (telling the upstream the
            # request is cancelled): a cancel now would break into it, as anyio's shields do not stop a task's own
            # `cancel()`. Looked at again shortly, in case that cancellation is caught within the block and it runs on.
            self._timer = self.loop.call_later(EXPIRY_RECHECK, self._expire, context=_TIMER_CONTEXT)
            return
        self._state = 2
        task.cancel()
