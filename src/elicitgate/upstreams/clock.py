"""A request deadline that stops while a person is answering an elicitation for that request."""

from __future__ import annotations

import math
from collections.abc import Generator
from contextlib import contextmanager

import anyio


class PausableDeadline:
    """`timeout` seconds of budget, spent only while no elicitation is open for the request."""

    def __init__(self, timeout: float | None, scope: anyio.CancelScope) -> None:
        self._budget = math.inf if timeout is None else timeout
        self._scope = scope
        self._pauses = 0
        scope.deadline = anyio.current_time() + self._budget

    def pause(self) -> None:
        if not self._pauses:
            self._budget = max(0.0, self._scope.deadline - anyio.current_time())
            self._scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        self._pauses -= 1
        if not self._pauses:
            self._scope.deadline = anyio.current_time() + self._budget

    @contextmanager
    def paused(self) -> Generator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()

    @classmethod
    @contextmanager
    def run(cls, timeout: float | None) -> Generator[PausableDeadline]:
        """Raise `TimeoutError` when the block's running time exceeds `timeout`."""
        with anyio.CancelScope() as scope:
            yield cls(timeout, scope)
        if scope.cancelled_caught:
            raise TimeoutError
