"""What carries a question to its human right now, and the grace period when nothing does.

A question is a record that carriers attach to (design invariant 8): a handshake-era client's response
stream, the same stream resumed with `Last-Event-ID`, later a task or a notice. When the last carrier leaves
(the client's connection broke), a grace timer starts; a carrier attaching (the stream resumed) stops it;
when it fires, the question is abandoned: the broker ends it (`elicitation.abandoned`, docs/reliability.md).
A question that never had a carrier tracked here (stdio, a hosted page, a 2026-07-28 round) never starts one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Carriers:
    """The carriers attached to one question and its grace timer."""

    __slots__ = ("_attached", "_grace", "_on_abandoned", "_timer")

    def __init__(self, grace: float, on_abandoned: Callable[[str], object]) -> None:
        self._attached: set[object] | None = None
        """Made at the first attach: most questions (stdio, 2026-07-28 rounds) never have a carrier tracked here,
        and an empty set is 216 bytes held for as long as the question waits."""
        self._grace = grace
        self._on_abandoned = on_abandoned
        """Called with why the last carrier left, once the grace period ran out with none back."""
        self._timer: asyncio.TimerHandle | None = None

    @property
    def waiting(self) -> bool:
        """The grace period is running: no carrier is attached."""
        return self._timer is not None

    def attach(self, carrier: object) -> None:
        if self._attached is None:
            self._attached = set()
        self._attached.add(carrier)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def detach(self, carrier: object, why: str) -> None:
        """`carrier` left (`why`: for the audit trail); the last one leaving starts the grace period."""
        if self._attached is not None:
            self._attached.discard(carrier)
        if not self._attached and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._grace, self._expire, why)

    def _expire(self, why: str) -> None:
        self._timer = None
        if not self._attached:
            self._on_abandoned(why)

    def stop(self) -> None:
        """The question ended: no timer outlives it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._attached = None
