"""A cancel scope and the clock for the hot path, without anyio's look-up of the running async library; and the
cancellation of a whole task as a cancel scope around all of it would deliver it, with no scope kept.

`anyio.CancelScope()` and `anyio.current_time()` ask sniffio which library runs, every time: about a third of
a scope's cost, paid for each request in flight (the endpoint's scope for a request served inline; the clock of
the `PausableDeadline` of a request upstream). The gateway runs on asyncio (uvloop where it is installed), so the
backend's scope class is taken once, from the first scope made, and the clock is the loop's own.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, final

import anyio

_scope_class: type[anyio.CancelScope] | None = None


def cancel_scope(deadline: float = math.inf) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=deadline)`, made by the running backend's class directly."""
    global _scope_class
    if _scope_class is None:
        first = anyio.CancelScope(deadline=deadline)
        _scope_class = type(first)
        return first
    return _scope_class(deadline=deadline)


def now() -> float:
    """`anyio.current_time()` on asyncio: the running loop's clock."""
    return asyncio.get_running_loop().time()


@final  # told apart by `type` (`Endpoint` cancelling a request it serves)
class TaskCancel:
    """A task cancelled as if a cancel scope around its whole coroutine had been cancelled, without that scope: made
    when the cancellation is asked for, so a task that is never cancelled (a request in flight, waiting on a human for
    minutes) holds nothing for it. anyio's scope holds two sets, a dozen slots and its task's state (~0.6 KB).

    What the scope would do, done the same way (anyio's `CancelScope._deliver_cancellation`): at every turn of the loop
    until `stop`, the task is cancelled (`Task.cancel`) if it has started, is waiting, has no cancellation pending
    already and is not waking with a result; and not while it is inside a shielded anyio scope (`CancelScope(shield=
    True)`, `move_on_after(..., shield=True)`): a shielded step runs to its end, and the cancellation lands at the
    task's next wait after it. Level-triggered, as the scope's: a task that catches the cancellation and waits again
    (outside a shield) is cancelled again. `stop` ends it and takes back every cancellation it delivered (`uncancel`),
    as the scope's exit does; the caller then tells its own cancellation from one asked of the task from elsewhere
    (`Task.cancelling()` still above zero).
    """

    __slots__ = ("_task", "_reason", "_delivered", "_next")

    def __init__(self, task: asyncio.Task[Any], reason: str) -> None:
        self._task = task
        self._reason = reason
        self._delivered = 0
        # Not at once: the caller may be the task itself, or the task may not have taken its first step yet.
        self._next: asyncio.Handle | None = asyncio.get_running_loop().call_soon(self._deliver)

    def _deliver(self) -> None:
        # anyio's own rules, read from its internals: imported only when cancelling.
        from elicitgate._compat import cancel_reaches

        self._next = None
        task = self._task
        if task.done():
            return
        if cancel_reaches(task):
            task.cancel(self._reason)
            self._delivered += 1
        self._next = asyncio.get_running_loop().call_soon(self._deliver)

    @property
    def task(self) -> asyncio.Task[Any]:
        """The task it cancels."""
        return self._task

    def stop(self) -> bool:
        """No more cancellations: the part of the task it covered has ended. Those it delivered are taken back; returns
        whether the task has no other cancellation pending (a `CancelledError` caught now was this one's)."""
        if self._next is not None:
            self._next.cancel()
            self._next = None
        for _ in range(self._delivered):
            self._task.uncancel()
        self._delivered = 0
        return not self._task.cancelling()

