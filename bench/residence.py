"""The gateway's own time on a call's critical path, before / after: `python -m bench.residence [--base REF]
[--blocks N]`.

The row "elicit, http, 2026-07-28" of the latency table: a handshake-era client over HTTP, the gateway's HTTP face,
and the demo server over streamable HTTP in 2026-07-28 (`mcpServers.*.era: modern`), which answers `confirm` with
`input_required`; the gateway asks the client (`elicitation/create` on the call's SSE stream), takes its answer (a
POST of its own) and retries the call with it. Two gateways (`src/` as committed at `--base`, default `main`, and the
work tree) in front of one demo server, their calls interleaved in blocks of 10, each gateway's syscalls recorded by
`perf trace` (read and write only). For each of the four steps the gateway relays, the time from the read that
completed what it relays to the write that sends it on: the call to the upstream, the `input_required` result to
the question on the client's stream, the client's answer to the retry, the result to the client. Median over the
calls. Unlike wall time this is the gateway's own share (what it does first, and what it lets wait); unlike CPU time
it counts what delays the write that matters (a 202 that wakes the client first, a log line written before the
retry). Needs `perf` (Debian's linux-perf) allowed to trace the gateway's syscalls. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

import anyio

from bench import configs, latency
from bench.ab import sources_to_compare
from bench.http_cpu import start_gateways
from bench.procs import HttpProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("call -> upstream", "input_required -> question", "answer -> retry", "result -> client")
SIZES = ((560, 620), (560, 640), (640, 720), (140, 190))
"""The size range of each step's write, in bytes (the demo server's `confirm`): the call's POST upstream, the SSE
head with the question, the retry's POST (the call with `inputResponses` and `requestState`), the result's event.
The client's 202 (180 bytes) and the log line (fd 2) are not steps."""
ACCEPTED = 180
LINE = re.compile(r"\s*([\d.]+) \(\s*[\d.]+ ms\): \S+ (read|write)\(fd: (\d+)(?:<[^>]*>)?, buf: \S+, count: \d+\)"
                  r"\s+= (-?\d+)")


def steps(trace: Path) -> dict[str, list[float]]:
    """Each step's times (ms) in one gateway's `perf trace`: the four writes of a call in order, each from the last
    read that returned data before it."""
    writes: list[tuple[float, int, float]] = []  # when, size, when the last read before it returned data
    last_read: float | None = None
    for line in trace.read_text().splitlines():
        found = LINE.match(line)
        if found is None:
            continue
        when, op, fd, size = float(found[1]), found[2], int(found[3]), int(found[4])
        if op == "read":
            last_read = when if size > 0 else last_read
        elif fd != 2 and size not in (ACCEPTED,) and size > 100 and last_read is not None:
            writes.append((when, size, last_read))
    found_steps: dict[str, list[float]] = {step: [] for step in STEPS}
    i = 0
    while i + len(STEPS) <= len(writes):
        call = writes[i:i + len(STEPS)]
        if all(low <= size <= high for (_, size, _), (low, high) in zip(call, SIZES, strict=True)):
            for step, (when, _, read) in zip(STEPS, call, strict=True):
                found_steps[step].append(when - read)
            i += len(STEPS)
        else:
            i += 1  # a write of something else (or one perf lost): find the next call's first write
    return found_steps


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "residence"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base)
    with open(work / "residence.log", "w") as log, ExitStack() as stack:
        port = free_port()
        upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
        gateways = start_gateways(work, sources, {"modern": configs.http_upstream(upstream, "modern")}, stack, log)
        name, arguments = latency.TOOLS["elicit"]
        async with AsyncExitStack() as clients:
            opened = {label: await clients.enter_async_context(latency.bench_client(f"{gateway.url}/mcp"))
                      for label, gateway in gateways.items()}
            for client in opened.values():
                for _ in range(20):
                    await latency.call(client, f"modern__{name}", arguments)
            traces = {label: work / f"perf-{label}.txt" for label in gateways}
            tracers = [subprocess.Popen(["perf", "trace", "-o", str(traces[label]), "-e", "read,write", "-p",
                                         str(gateway.pid)], stdout=log, stderr=log)
                       for label, gateway in gateways.items()]
            await anyio.sleep(2)  # perf attaches
            try:
                labels = list(gateways)
                for block in range(args.blocks):
                    for label in labels if block % 2 == 0 else reversed(labels):
                        for _ in range(10):
                            await latency.call(opened[label], f"modern__{name}", arguments)
                await anyio.sleep(0.5)
            finally:
                for tracer in tracers:
                    tracer.send_signal(signal.SIGINT)
                    tracer.wait(timeout=60)
    found = {label: steps(trace) for label, trace in traces.items()}
    print(f"gateway residence per step, ms (median over {args.blocks * 10} calls each; load "
          f"{os.getloadavg()[0]:.1f})")
    print("| step | base | work | change |")
    print("|---|---:|---:|---:|")
    totals = {label: 0.0 for label in found}
    for step in STEPS:
        medians = {label: statistics.median(times[step]) if times[step] else float("nan")
                   for label, times in found.items()}
        for label in totals:
            totals[label] += medians[label]
        counted = "/".join(str(len(times[step])) for times in found.values())
        print(f"| {step} | {medians['base']:.3f} | {medians['work']:.3f} | "
              f"{medians['work'] - medians['base']:+.3f} | calls {counted}")
    print(f"| all four | {totals['base']:.3f} | {totals['work']:.3f} | {totals['work'] - totals['base']:+.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.residence", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--blocks", type=int, default=20)
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
