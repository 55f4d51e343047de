"""The event loop's callbacks per parked call: `python -m bench.parked_callbacks [--calls N]`.

`bench.parked`'s calls (`Rounds.start` on its own, a call that returns at once: parked from the start, and run in its
request's coroutine until it asks), on an asyncio loop that counts what is handed to `call_soon` (a task's step, a
task woken, a done callback), by kind, per call. `bench.parked` times them, which moves with the machine's load; these
counts do not. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import Any

from bench.parked import per_call


class _CountingLoop(asyncio.SelectorEventLoop):
    """Counts every callback scheduled with `call_soon`, by the callback's name."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: Counter[str] = Counter()

    def call_soon(self, callback: Any, *args: Any, context: Any = None) -> asyncio.Handle:
        self.counted[getattr(callback, "__qualname__", type(callback).__name__)] += 1
        return super().call_soon(callback, *args, context=context)


def count(calls: int, in_request: bool) -> tuple[float, dict[str, float]]:
    """Callbacks per call (all, and by kind) of `calls` parked calls, after `per_call`'s own warm-up of as many."""
    loop = _CountingLoop()
    try:
        loop.run_until_complete(per_call(10, in_request))  # imports and first-use caches
        loop.counted.clear()
        loop.run_until_complete(per_call(calls, in_request))
    finally:
        loop.close()
    made = 2 * calls  # per_call makes a warm-up of as many calls before the timed ones
    counted = {kind: n / made for kind, n in loop.counted.most_common() if n >= made / 100}
    return sum(loop.counted.values()) / made, counted


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.parked_callbacks", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000)
    args = parser.parse_args()
    for what, in_request in (("parked call that never asks", False), ("run in its request until it asks", True)):
        total, kinds = count(args.calls, in_request)
        shown = ", ".join(f"{kind} {n:.2f}" for kind, n in kinds.items())
        print(f"{what}: {total:.2f} loop callbacks per call ({shown})")


if __name__ == "__main__":
    main()
