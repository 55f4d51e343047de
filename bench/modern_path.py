"""Python calls and loop turns per call of a 2026-07-28 client over stdio toward a handshake-era upstream, by stretch:
`python -m bench.modern_path [--src DIR] [--upstream handshake|modern] [--op elicit|echo] [--calls N] [--top N]
[--callers TEXT] [--cpu]`.

`bench.elicit_path`'s counting gateway (`serve_counted`: `sys.setprofile` on the event loop's thread, every Python and
C function entered, cut where a message crosses the gateway: a pipe's read callback and a message written), with a
2026-07-28 client in front (the gateway answers the upstream's `elicitation/create` with an `input_required` round,
the client retries) and the demo server over stdio as a handshake-era upstream (`--src`: the `src/` to run, default
the work tree's). An `elicit` call is eight marks, and the stretches between are:

    request   the client's tools/call read, until it is written to the upstream
    (idle)    the upstream works
    push      the upstream's elicitation/create read, until the input_required result is written to the client
    (idle)    the client's callback answers
    retry     the client's retry read, until the ElicitResult is written to the upstream
    after     what runs once the answer left, until the upstream's tools/call result is read
    result    that result read, until it is written to the client (the retry's answer)
    between   the next call's wait

(`echo`: four marks, request / (idle) / result / between.) All but the idle ones and `after` are on the critical path.
`--upstream modern`: the demo server as a 2026-07-28 upstream instead (the `modern__` tools of the latency table's row
"2026-07-28 client -> gateway -> 2026-07-28 upstream"): it asks in its answers (`input_required`), and an `elicit`
call's stretches are request, (idle upstream), round (its `input_required` read, until the gateway's round is written
to the client), (idle client), retry (until the upstream's retry with the answer is written), (idle upstream 2),
result, between.
Per stretch and call: the Python calls and the loop's turns (a Python function entered from the loop itself, as a
task's step or a callback is; a task freed shows there too, as `WeakSet._remove`, asyncio's registry of tasks
letting go of it; tasks made are not counted: uvloop's `create_task` is compiled, not seen by a profiler). Counts
do not move with the machine's load (a timer's work may land in a stretch now and then). `--cpu`: the event loop
thread's CPU time per stretch instead (`elicit_path.serve_timed`), which does. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from bench import configs, latency
from bench.ab import work_src
from bench.elicit_path import STRETCHES, WARMUP, _argv, _signalled  # pyright: ignore[reportPrivateUsage]
from bench.procs import children, cmdline, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
NAMES = {
    ("handshake", "elicit"): ("request", "(idle upstream)", "push", "(idle client)", "retry", "after", "result",
                              "between"),
    ("modern", "elicit"): ("request", "(idle upstream)", "round", "(idle client)", "retry", "(idle upstream 2)",
                           "result", "between"),
    ("handshake", "echo"): ("request", "(idle upstream)", "result", "between"),
    ("modern", "echo"): ("request", "(idle upstream)", "result", "between"),
}
"""The stretches of a call, by (upstream era, op)."""
TURN = "(entered from the loop)"
FROM_THE_LOOP = "Runner.run ("
"""How `elicit_path._where` names the caller of a task's step or a callback the loop ran: uvloop's loop is compiled (no
frames of its own), so the Python frame below one is `asyncio.Runner.run`'s, which started the loop."""


async def count(
    src: Path, op: str, calls: int, work: Path, log: Any, serve: str = "serve_counted", era: str = "handshake",
    module: str = "bench.elicit_path",
) -> Any:
    """What `module`'s `serve` (a counting or timing gateway) wrote after `calls` calls of `op` by a 2026-07-28 client
    on stdio, toward the demo server as an `era` upstream."""
    out = work / "counts.json"
    out.unlink(missing_ok=True)
    name = f"modern-path-{os.getpid()}"
    config = configs.write_config(work, name, configs.gateway_config({era: configs.stdio_upstream(era)}, src=src))
    tool, arguments = latency.TOOLS[op]
    async with AsyncExitStack() as stack:
        transport = stdio_transport(_argv(src, config, out, serve, module), log)
        client = await stack.enter_async_context(latency.bench_client(transport, "2026-07-28"))
        for _ in range(WARMUP):
            await latency.call(client, f"{era}__{tool}", arguments)
        pid = next(p for p in children(os.getpid()) if f"{name}.json" in " ".join(cmdline(p)))
        await _signalled(pid, signal.SIGUSR1, lambda: True)
        for _ in range(calls):
            await latency.call(client, f"{era}__{tool}", arguments)
        await _signalled(pid, signal.SIGUSR2, out.exists)
        return json.loads(out.read_text())


def regroup(found: Any, names: tuple[str, ...]) -> list[Counter[str]]:
    """`serve_counted`'s eight stretches folded onto this op's (a cycle of `len(names)` marks)."""
    by_mark: list[Counter[str]] = [Counter() for _ in names]
    # serve_counted cycles its eight stretches; with four marks per call, stretch i is mark i % 4.
    for i, stretch in enumerate(STRETCHES):
        for where, _caller, n in found["stretches"][stretch]:
            by_mark[i % len(names)][where] += n
            if _caller.startswith(FROM_THE_LOOP):
                by_mark[i % len(names)][TURN] += n
    return by_mark


def report(found: Any, names: tuple[str, ...], calls: int, top: int, callers: str | None) -> None:
    by_mark = regroup(found, names)
    print(f"marks {found['marks']} (expected {len(names) * calls}); per call:")
    print(f"  {'stretch':16} {'calls':>8} {'turns':>6}")
    for name, counted in zip(names, by_mark, strict=True):
        print(f"  {name:16} {(sum(counted.values()) - counted[TURN]) / calls:8.1f} {counted[TURN] / calls:6.2f}")
    total = Counter[str]()
    for counted in by_mark:
        total.update(counted)
    calls_all = (sum(total.values()) - total[TURN]) / calls
    print(f"  {'all':16} {calls_all:8.1f} {total[TURN] / calls:6.2f}")
    for name, counted in zip(names, by_mark, strict=True):
        if name.startswith("(") or name == "between":
            continue
        print(f"  top of {name}:")
        for where, n in counted.most_common(top + 1):
            if where == TURN:
                continue
            print(f"    {n / calls:7.2f}  {where}")
    print("  entered from the loop, by function:")
    for i, name in enumerate(names):
        entered: Counter[str] = Counter()
        for stretch in STRETCHES[i :: len(names)]:
            for where, caller, n in found["stretches"][stretch]:
                if caller.startswith(FROM_THE_LOOP):
                    entered[where] += n
        for where, n in entered.items():
            print(f"    [{name}] {n / calls:6.2f}  {where}")
    if callers:
        for stretch in STRETCHES:
            for where, caller, n in sorted(found["stretches"][stretch], key=lambda row: -row[2]):
                if callers in where:
                    print(f"    [{stretch}] {n / calls:7.2f}  {where} <- {caller}")


def report_cpu(found: Any, names: tuple[str, ...]) -> None:
    """The event loop thread's CPU time per stretch (`elicit_path.serve_timed`'s marks): median and mean, us."""
    times: list[int] = found["times"]
    per: dict[str, list[float]] = {name: [] for name in names}
    for i in range(len(times) - 1):
        per[names[i % len(names)]].append((times[i + 1] - times[i]) / 1000)
    load = os.getloadavg()[0]
    print(f"marks {found['marks']}; event loop thread CPU per stretch, us: median [mean]; load {load:.1f}")
    for name, values in per.items():
        print(f"  {name:16} {statistics.median(values):8.1f} [{statistics.fmean(values):.1f}]")


async def measure(args: argparse.Namespace) -> None:
    src = Path(args.src) if args.src else work_src()
    work = ROOT / "bench" / "results" / "modern_path"
    work.mkdir(parents=True, exist_ok=True)
    names = NAMES[(args.upstream, args.op)]
    with open(work / "modern_path.log", "w") as log:
        if args.cpu:
            report_cpu(await count(src, args.op, args.calls, work, log, "serve_timed", args.upstream), names)
            return
        found = await count(src, args.op, args.calls, work, log, era=args.upstream)
    print(f"{args.op} toward a {args.upstream} upstream, src {src}")
    report(found, names, args.calls, args.top, args.callers)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.modern_path", description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="the src/ to run (default: the work tree's)")
    parser.add_argument("--upstream", choices=("handshake", "modern"), default="handshake",
                        help="the demo server's era behind the gateway")
    parser.add_argument("--op", choices=("elicit", "echo"), default="elicit")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="the event loop thread's CPU time per stretch instead of the calls (varies with load)",
    )
    parser.add_argument("--callers", help="also list the callers of the functions whose name holds this text")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
