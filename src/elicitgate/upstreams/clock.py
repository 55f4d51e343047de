"""A request deadline that stops while a person is answering an elicitation for that request."""

from __future__ import annotations

import math
from collections.abc import Generator
from contextlib import contextmanager
from types import TracebackType

from elicitgate.wire.scopes import cancel_scope, now


class PausableDeadline:
    """`timeout` seconds of budget, spent only while no elicitation is open for the request.

    `with PausableDeadline(timeout) as clock:` raises `TimeoutError` when the block's running time, pauses
    excluded, exceeds `timeout` (`None`: no limit). A class rather than a generator: one of these lives
    for every request in flight, and a generator-based context manager keeps a frame besides.
    """

    __slots__ = ("_budget", "_pauses", "_scope")

    def __init__(self, timeout: float | None) -> None:
        self._budget = math.inf if timeout is None else timeout
        self._scope = cancel_scope(now() + self._budget)
        self._pauses = 0

    def __enter__(self) -> PausableDeadline:
        self._scope.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._scope.__exit__(exc_type, exc, tb)  # swallows only its own cancellation, raised as TimeoutError
        if self._scope.cancelled_caught:
            raise TimeoutError

    def pause(self) -> None:
        if not self._pauses:
            self._budget = max(0.0, self._scope.deadline - now())
            self._scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        self._pauses -= 1
        if not self._pauses:
            self._scope.deadline = now() + self._budget

    @contextmanager
    def paused(self) -> Generator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()
