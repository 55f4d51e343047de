"""A cancel scope and the clock for the hot path, without anyio's look-up of the running async library.

`anyio.CancelScope()` and `anyio.current_time()` ask sniffio which library runs, every time: about a third of
a scope's cost, paid for each request in flight (the endpoint's scope for a request of the peer's; the clock of
the `PausableDeadline` of a request upstream). The gateway runs on asyncio (uvloop where it is installed), so the
backend's scope class is taken once, from the first scope made, and the clock is the loop's own.
"""

from __future__ import annotations

import asyncio
import math

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
