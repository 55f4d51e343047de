"""Python calls and loop turns per call of a 2026-07-28 client over stdio toward a 2026-07-28 upstream, by stretch:
`python -m bench.modern_rounds [--src DIR] [--op elicit|echo] [--calls N] [--top N]`.

`bench.modern_path` with the demo server over stdio as a 2026-07-28 upstream (the `modern__` tools of the latency
table's row "2026-07-28 client -> gateway -> 2026-07-28 upstream"): the upstream asks in its answers
(`input_required`), the gateway hands its question to the client as a round of its own, and the client's retry
carries the answer back. An `elicit` call is eight marks, and the stretches between are:

    request   the client's tools/call read, until it is written to the upstream
    (idle)    the upstream works
    round     the upstream's input_required answer read, until the gateway's round is written to the client
    (idle)    the client's callback answers
    retry     the client's retry read, until the upstream's retry (with the answer) is written to the upstream
    (idle)    the upstream works
    result    the upstream's result read, until it is written to the client (the retry's answer)
    between   the next call's wait

(`echo`: four marks, request / (idle) / result / between.) Per stretch and call: the Python calls and the loop's
turns, counted as `bench.modern_path` counts them (a turn: a Python function entered from the loop itself, a task's
step or a callback; a task freed shows as `WeakSet._remove`). Counts do not move with the machine's load. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import work_src
from bench.elicit_path import STRETCHES, WARMUP, _argv, _signalled  # pyright: ignore[reportPrivateUsage]
from bench.modern_path import FROM_THE_LOOP, TURN, regroup
from bench.procs import children, cmdline, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
NAMES = {
    "elicit": (
        "request",
        "(idle upstream)",
        "round",
        "(idle client)",
        "retry",
        "(idle upstream 2)",
        "result",
        "between",
    ),
    "echo": ("request", "(idle upstream)", "result", "between"),
}


async def count(src: Path, op: str, calls: int, work: Path, log: Any) -> Any:
    out = work / "counts.json"
    out.unlink(missing_ok=True)
    name = f"modern-rounds-{os.getpid()}"
    config = configs.write_config(
        work, name, configs.gateway_config({"modern": configs.stdio_upstream("modern")}, src=src)
    )
    tool, arguments = latency.TOOLS[op]
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            Client(
                stdio_transport(_argv(src, config, out, "serve_counted"), log),
                mode="2026-07-28",
                elicitation_callback=latency._answer,  # pyright: ignore[reportPrivateUsage]
                read_timeout_seconds=latency.CALL_TIMEOUT,
            )
        )
        for _ in range(WARMUP):
            await latency.call(client, f"modern__{tool}", arguments)
        pid = next(p for p in children(os.getpid()) if f"{name}.json" in " ".join(cmdline(p)))
        await _signalled(pid, signal.SIGUSR1, lambda: True)
        for _ in range(calls):
            await latency.call(client, f"modern__{tool}", arguments)
        await _signalled(pid, signal.SIGUSR2, out.exists)
        return json.loads(out.read_text())


def report(found: Any, names: tuple[str, ...], calls: int, top: int) -> None:
    by_mark = regroup(found, names)
    print(f"marks {found['marks']} (expected {len(names) * calls}); per call:")
    print(f"  {'stretch':18} {'calls':>8} {'turns':>6}")
    total_calls = total_turns = 0.0
    for name, counted in zip(names, by_mark, strict=True):
        stretch_calls, turns = (sum(counted.values()) - counted[TURN]) / calls, counted[TURN] / calls
        total_calls, total_turns = total_calls + stretch_calls, total_turns + turns
        print(f"  {name:18} {stretch_calls:8.1f} {turns:6.2f}")
    print(f"  {'all':18} {total_calls:8.1f} {total_turns:6.2f}")
    for name, counted in zip(names, by_mark, strict=True):
        if name == "between":
            continue
        print(f"  top of {name}:")
        for where, n in counted.most_common(top + 1):
            if where != TURN:
                print(f"    {n / calls:7.2f}  {where}")
    print("  entered from the loop, by function:")
    for i, name in enumerate(names):
        for stretch in STRETCHES[i :: len(names)]:
            for where, caller, n in found["stretches"][stretch]:
                if caller.startswith(FROM_THE_LOOP):
                    print(f"    [{name}] {n / calls:6.2f}  {where}")


async def measure(args: argparse.Namespace) -> None:
    src = Path(args.src) if args.src else work_src()
    work = ROOT / "bench" / "results" / "modern_rounds"
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "modern_rounds.log", "w") as log:
        found = await count(src, args.op, args.calls, work, log)
    print(f"{args.op}, src {src}")
    report(found, NAMES[args.op], args.calls, args.top)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.modern_rounds", description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="the src/ to run (default: the work tree's)")
    parser.add_argument("--op", choices=sorted(NAMES), default="elicit")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
