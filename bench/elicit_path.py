"""Python calls per stdio elicitation, and how many of them sit on its critical path: `python -m bench.elicit_path
[--base REF] [--calls N] [--top N] [--callers TEXT] [--cpu | --wall [--lean]] [--runs N]`.

A stdio gateway (handshake-era client, the demo server over stdio as a handshake-era upstream) on `src/` as
committed at `--base` (default `main`) and one on the work tree, each with a counting profiler (`sys.setprofile`
on the event loop's thread: every Python and C function entered, a coroutine's resumption included, as cProfile
counts them) switched on after a warm-up, for `--calls` sequential `confirm` calls (one form elicitation each).
The counts are cut at the moments a message crosses the gateway: a pipe's read callback (`LineReader.
data_received`) and a message written (`codec.dumps_line`). A call is eight of them, in this order, and the
stretches between are:

    request   the client's tools/call read, until it is written to the upstream
    (idle)    the upstream works
    push      the upstream's elicitation/create read, until it is written to the client
    (idle)    the client's callback answers
    answer    the client's answer read, until the ElicitResult is written to the upstream
    after     what runs once the answer left (deferred work: the end's record, log line, metrics), until the
              upstream's tools/call result is read
    result    that result read, until it is written to the client
    between   the next call's wait

`push` + `answer` is the elicitation's own critical path: the upstream waits for every call counted there. With
`--cpu`, the event loop thread's CPU time (`time.thread_time_ns`, noted at each mark by wrappers instead of a
profiler) per stretch, `--runs` runs of `--calls` calls per source alternating: median and mean per call. With
`--wall`, the same marks on the wall clock (`time.perf_counter_ns`): the gateway's own stretches are then its wall
time on the message, and the idle ones the peers' time (which the gateway may lengthen: its CPU after a write
competes with the peer it woke). `--lean` adds the lean relay (`bench.lean_relay`, the floor), marked where the
read that completes a message begins and where its `feed` returns (after the write). Summed rows: `the relay's
own` (request, push, answer, result) and `all` (a whole call and the wait for the next). Counts are deterministic
(they do not depend on the machine's load, unlike CPU time); prints per call for each source, with each stretch's
`--top` functions (and with `--callers TEXT`, who calls the functions whose name holds TEXT). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

from bench import configs, latency
from bench.ab import sources_to_compare
from bench.procs import children, cmdline, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
LEAN = "lean relay"
STRETCHES = ("request", "(idle upstream)", "push", "(idle client)", "answer", "after", "result", "between")
WARMUP = 30


def _where(code: object) -> str:
    if isinstance(code, str):
        return code
    if hasattr(code, "co_filename"):
        filename: str = code.co_filename  # type: ignore[attr-defined]
        for marker in ("/elicitgate/", "/site-packages/", "/lib/python3"):
            if marker in filename:
                filename = filename.split(marker, 1)[1]
                break
        return f"{code.co_qualname} ({filename}:{code.co_firstlineno})"  # type: ignore[attr-defined]
    return f"<{getattr(code, '__qualname__', repr(code))}>"


def serve_counted(out: str) -> None:
    """Run the gateway (`elicitgate.cli.app`, with this process's arguments) counting calls between SIGUSR1 and
    SIGUSR2; at SIGUSR2 the counts by stretch go to `out` as JSON."""
    from elicitgate.wire import codec
    from elicitgate.wire.stdio import LineReader

    marks = (LineReader.data_received.__code__, codec.dumps_line.__code__)
    counts: list[Counter[object]] = [Counter() for _ in STRETCHES]
    state = {"marks": -1}  # -1 until the first mark: counting starts at a call's beginning

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            code = frame.f_code
            if code in marks:
                state["marks"] += 1
            if state["marks"] >= 0:
                caller = frame.f_back.f_code if frame.f_back is not None else None
                counts[state["marks"] % len(STRETCHES)][(code, caller)] += 1
        elif event == "c_call" and state["marks"] >= 0:
            # By name: a bound method (`{}.get`) is a new object each time, and keeping it would keep its object.
            counts[state["marks"] % len(STRETCHES)][(f"<{getattr(arg, '__qualname__', '?')}>", frame.f_code)] += 1

    _serve_profiled(out, count, state, counts, lambda key, n: [_where(key[0]), _where(key[1]), n])


def _serve_profiled(
    out: str,
    count: Callable[[FrameType, str, object], None],
    state: dict[str, int],
    counts: list[Counter[Any]],
    row: Callable[[Any, int], list[Any]],
) -> None:
    """Run the gateway (`_serve`) with `count` as the profiler between SIGUSR1 and SIGUSR2; at SIGUSR2 each stretch's
    counts (`counts`, one per stretch, `state["marks"]` the marks seen less one) go to `out` as JSON, a `row(key, n)`
    for each."""

    def start(*_: object) -> None:
        sys.setprofile(count)

    def stop(*_: object) -> None:
        sys.setprofile(None)
        found = {
            "marks": state["marks"] + 1,
            "stretches": {name: [row(key, n) for key, n in counted.items()]
                          for name, counted in zip(STRETCHES, counts, strict=True)},
        }
        Path(out).write_text(json.dumps(found))

    _serve(start, stop)


def serve_timed(out: str) -> None:
    """Run the gateway as `serve_counted` does, but note the event loop thread's CPU time (`time.thread_time_ns`) at
    each mark instead of counting calls; at SIGUSR2 the times go to `out` as JSON."""
    _serve_clocked(out, time.thread_time_ns)


def serve_walled(out: str) -> None:
    """`serve_timed` with the wall clock (`time.perf_counter_ns`): the idle stretches are then the peers' time."""
    _serve_clocked(out, time.perf_counter_ns)


def _serve_clocked(out: str, clock: Callable[[], int]) -> None:
    from elicitgate.wire import codec
    from elicitgate.wire.stdio import LineReader

    times: list[int] = []
    on = [False]
    read, dumps_line = LineReader.data_received, codec.dumps_line

    def data_received(self: LineReader, data: bytes) -> None:
        if on[0]:
            times.append(clock())
        read(self, data)

    def timed_dumps_line(message: Any) -> bytes:
        if on[0]:
            times.append(clock())
        return dumps_line(message)

    LineReader.data_received = data_received  # type: ignore[method-assign]
    codec.dumps_line = timed_dumps_line
    start, stop = _switches(out, times, on)
    _serve(start, stop)


def lean_walled(out: str) -> None:
    """Run `bench.lean_relay` (with this process's arguments: the server's command) noting the wall clock where a
    message is read (a line's `feed` begins) and where it has been written (`feed` returns), the gateway's marks."""
    from bench import lean_relay

    times: list[int] = []
    on = [False]
    feed = lean_relay.Lines.feed

    def timed_feed(self: lean_relay.Lines, data: bytes) -> None:
        read = time.perf_counter_ns()
        waiting = len(self.pending)
        feed(self, data)
        if on[0] and len(self.pending) <= waiting:  # a message went out (a part of one only waits in `pending`)
            times.extend((read, time.perf_counter_ns()))

    lean_relay.Lines.feed = timed_feed  # type: ignore[method-assign]
    start, stop = _switches(out, times, on)
    relay = lean_relay.relay

    async def switched_relay(argv: list[str]) -> int:
        # The loop's own handlers: a Python-level one would run only once Python code next runs (the next message).
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, start)
        loop.add_signal_handler(signal.SIGUSR2, stop)
        return await relay(argv)

    lean_relay.relay = switched_relay
    lean_relay.main()


def _switches(out: str, times: list[int], on: list[bool]) -> tuple[Callable[..., None], Callable[..., None]]:
    def start(*_: object) -> None:
        on[0] = True

    def stop(*_: object) -> None:
        on[0] = False
        Path(out).write_text(json.dumps({"marks": len(times), "times": times}))

    return start, stop


def _serve(start: Callable[..., None], stop: Callable[..., None]) -> None:
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    from elicitgate.cli import app

    app()


def _argv(src: Path, config: Path, out: Path, serve: str, module: str = "bench.elicit_path") -> list[str]:
    """A stdio gateway on `src` run by `module`'s `serve` function (the counting or timing server), writing to `out`."""
    code = (f"import sys; sys.path.insert(0, {str(src)!r}); sys.path.insert(1, {str(ROOT)!r}); "
            f"from {module} import {serve}; {serve}({str(out)!r})")
    return [configs.PY, "-c", code, "serve", "--config", str(config)]


async def _count(label: str, src: Path, work: Path, calls: int, log: Any, serve: str = "serve_counted") -> Any:
    out = work / f"{label}.json"
    out.unlink(missing_ok=True)
    servers = {"handshake": configs.stdio_upstream("handshake")}
    name = f"elicit-path-{label}"
    config = configs.write_config(work, name, configs.gateway_config(servers, src=src))
    tool, arguments = latency.TOOLS["elicit"]
    if serve == "lean_walled":
        argv, tool = _lean_argv(out, name), tool.removeprefix("handshake__")
    else:
        argv, tool = _argv(src, config, out, serve), f"handshake__{tool}"
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(latency.bench_client(stdio_transport(argv, log)))
        pid = next(p for p in children(os.getpid()) if f"{name}.json" in " ".join(cmdline(p)))
        for _ in range(WARMUP):
            await latency.call(client, tool, arguments)
        await _signalled(pid, signal.SIGUSR1, lambda: True)  # the handler runs at the loop's next Python step
        for _ in range(calls):
            await latency.call(client, tool, arguments)
        await _signalled(pid, signal.SIGUSR2, out.exists)
        return json.loads(out.read_text())


def _lean_argv(out: Path, name: str) -> list[str]:
    """The lean relay in front of the demo server, its marks noted (`lean_walled`); `name` in its command line finds
    it among this process's children."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.argv[1:] = sys.argv[2:]; "
            f"from bench.elicit_path import lean_walled; lean_walled({str(out)!r})")
    return [configs.PY, "-c", code, f"{name}.json", *configs.demo_argv()]


async def _signalled(pid: int, signum: int, done: Callable[[], bool]) -> None:
    os.kill(pid, signum)
    deadline = time.monotonic() + 30
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gateway {pid} did not answer signal {signum}")
        await anyio.sleep(0.05)
    await anyio.sleep(0.2)  # SIGUSR1: the handler has surely run before the first counted call


def _by_callee(rows: list[tuple[str, str, int]]) -> Counter[str]:
    counted: Counter[str] = Counter()
    for where, _caller, n in rows:
        counted[where] += n
    return counted


def _print(label: str, found: dict[str, Any], calls: int, top: int, callers: str | None) -> dict[str, float]:
    per_call = {name: sum(n for _, _, n in rows) / calls for name, rows in found["stretches"].items()}
    critical = per_call["push"] + per_call["answer"]
    print(f"\n{label}: marks {found['marks']} (expected {len(STRETCHES) * calls}), Python calls per elicitation "
          f"{sum(per_call.values()):.1f}, of them push + answer (the critical path) {critical:.1f}")
    for name, n in per_call.items():
        print(f"  {name:16} {n:8.1f}")
    for name in ("push", "answer", "after"):
        print(f"  top of {name}:")
        for where, n in _by_callee(found["stretches"][name]).most_common(top):
            print(f"    {n / calls:7.2f}  {where}")
        if callers:
            for where, caller, n in sorted(found["stretches"][name], key=lambda row: -row[2]):
                if callers in where:
                    print(f"    {n / calls:7.2f}  {where} <- {caller}")
    return per_call


def _cpu_us(found: dict[str, Any]) -> dict[str, list[float]]:
    """Each stretch's CPU time per call, us, from the times noted at each mark (the last stretch of the last call has
    no end: left out)."""
    times: list[int] = found["times"]
    per: dict[str, list[float]] = {name: [] for name in STRETCHES}
    for i in range(len(times) - 1):
        per[STRETCHES[i % len(STRETCHES)]].append((times[i + 1] - times[i]) / 1000)
    return per


async def measure_cpu(args: argparse.Namespace, work: Path, sources: dict[str, Path]) -> None:
    """`--cpu` / `--wall`: the event loop thread's CPU time (or the wall clock) per stretch, `--runs` runs of each
    source alternating; with `--lean`, the lean relay's wall clock beside them."""
    serve = "serve_walled" if args.wall else "serve_timed"
    runs = {label: (src, serve) for label, src in sources.items()}
    if args.lean:
        runs[LEAN] = (ROOT / "src", "lean_walled")
    found: dict[str, dict[str, list[float]]] = {label: {name: [] for name in STRETCHES} for label in runs}
    labels = list(runs)
    with open(work / "elicit_path.log", "w") as log:
        for run in range(args.runs):
            for label in labels if run % 2 == 0 else reversed(labels):
                src, how = runs[label]
                timed = await _count(label, src, work, args.calls, log, how)
                if timed["marks"] != len(STRETCHES) * args.calls:
                    print(f"{label} run {run}: {timed['marks']} marks, expected {len(STRETCHES) * args.calls}")
                for name, values in _cpu_us(timed).items():
                    found[label][name] += values
    what = "wall clock" if args.wall else "event loop thread CPU"
    print(f"{what} per stretch, us: median [mean] of {args.runs} x {args.calls} calls per source; "
          f"load {os.getloadavg()[0]:.1f}")
    print("| stretch | " + " | ".join(labels) + " |\n|---|" + "---:|" * len(labels))
    for name in (*STRETCHES, "push + answer", "the relay's own", "all"):
        cells = []
        for label in labels:
            cells.append(_cell(found[label], name))
        print(f"| {name} | " + " | ".join(cells) + " |")


OWN = ("request", "push", "answer", "result")
"""The stretches in which the relay in the middle works on a message the call waits for."""


def _cell(found: dict[str, list[float]], name: str) -> str:
    """A row's median [mean] per call; `push + answer`, `the relay's own` (`OWN`) and `all` summed call by call."""
    parts = {"push + answer": ("push", "answer"), "the relay's own": OWN, "all": STRETCHES}.get(name, (name,))
    values = [sum(row) for row in zip(*(found[part] for part in parts), strict=False)]
    return f"{statistics.median(values):.1f} [{statistics.fmean(values):.1f}]"


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "elicit_path"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base)
    if args.lean and not args.wall:
        raise SystemExit("--lean needs --wall: the lean relay's marks are taken on the wall clock")
    if args.cpu or args.wall:
        await measure_cpu(args, work, sources)
        return
    found: dict[str, dict[str, float]] = {}
    with open(work / "elicit_path.log", "w") as log:
        for label, src in sources.items():
            counted = await _count(label, src, work, args.calls, log)
            found[label] = _print(label, counted, args.calls, args.top, args.callers)
    print("\n| stretch | base | work |\n|---|---:|---:|")
    for name in STRETCHES:
        print(f"| {name} | {found['base'][name]:.1f} | {found['work'][name]:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.elicit_path", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--callers", help="also list the callers of the functions whose name holds this text")
    parser.add_argument("--cpu", action="store_true",
                        help="the event loop thread's CPU time per stretch instead of the calls (`--runs` each)")
    parser.add_argument("--wall", action="store_true", help="as --cpu, with the wall clock: the idle stretches are "
                        "then the peers' time")
    parser.add_argument("--lean", action="store_true",
                        help="with --wall: the lean relay (bench.lean_relay) beside them")
    parser.add_argument("--runs", type=int, default=4)
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
