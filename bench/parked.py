"""What parking costs a 2026-07-28 client's call: `python -m bench.parked [--calls N]`.

Every call of a 2026-07-28 client runs as a parked call (`bridging.rounds`), whether or not the upstream
ever asks: this times `Rounds.start` on its own, in one process, with a call that returns at once (no
upstream, no face), so that what parking itself costs per call is not lost in the noise of a whole request.
Prints microseconds per call (the best of three runs), parked from the start and run in its request's coroutine until
it asks (`Rounds.start`'s `then`, what a call toward a 2026-07-28 upstream does). Asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import anyio

from elicitgate.bridging.rounds import ParkedCall, Rounds
from elicitgate.config import BridgingConfig
from elicitgate.contracts import DownstreamPeer


@dataclass(eq=False)
class _Request:
    peer: DownstreamPeer
    request_id: int = 1
    modes: frozenset[str] = frozenset({"form"})
    tool: str | None = "echo"
    cancel_requested: bool = False

    def raw_capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}}}

    async def notify(self, method: str, params: Any) -> None:
        pass


async def _answer_at_once(park: ParkedCall) -> dict[str, Any]:
    return {"content": []}


async def _never_goes_on(park: ParkedCall, state: object) -> dict[str, Any]:
    raise AssertionError("the call never asks")


async def per_call(calls: int, in_request: bool = False) -> float:
    """Seconds per parked call that never asks; `in_request`: run in its request's coroutine until it asks (`then`)."""
    rounds = Rounds(BridgingConfig())
    peer = DownstreamPeer(id="bench", connection=None)  # type: ignore[arg-type]  # parking never touches it
    then = _never_goes_on if in_request else None
    try:
        for _ in range(min(calls, 2_000)):  # warm-up
            await rounds.start(_Request(peer), "tools/call", _answer_at_once, then)
        start = time.perf_counter()
        for _ in range(calls):
            await rounds.start(_Request(peer), "tools/call", _answer_at_once, then)
        return (time.perf_counter() - start) / calls
    finally:
        await rounds.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    for in_request, what in ((False, "parked call that never asks"), (True, "run in its request until it asks")):
        best = min(anyio.run(per_call, args.calls, in_request, backend_options={"use_uvloop": True}) for _ in range(3))
        print(f"{what}: {best * 1e6:.1f} us per call (best of 3 x {args.calls:,})")


if __name__ == "__main__":
    main()
