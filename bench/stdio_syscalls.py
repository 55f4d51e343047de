"""System calls per stdio elicitation on the gateway's event loop thread: `python -m bench.stdio_syscalls [--base REF]
[--calls N] [--op elicit|echo]`.

A stdio gateway (handshake-era client, the demo server over stdio as a handshake-era upstream, as `bench.elicit_path`
runs it) on the work tree's `src/` and, with `--base`, on that ref's; after 30 warm-up calls, `strace -c -p PID` (the
main thread alone: the event loop's) is attached for `--calls` sequential calls. Prints, per call, the syscalls the
loop thread made (`getpid` is asyncio's running-loop check on Python 3.11: `get_running_loop`, `current_task`
without a loop, a future made without one, anyio's clock). Counts only; needs strace and ptrace rights. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import sources_to_compare
from bench.procs import children, cmdline, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 30
ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def _argv(src: Path, config: Path) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from elicitgate.cli import app; app()"
    return [configs.PY, "-c", code, "serve", "--config", str(config)]


async def _count(label: str, src: Path, work: Path, calls: int, op: str, log: IO[str]) -> dict[str, float]:
    servers = {"handshake": configs.stdio_upstream("handshake")}
    name = f"stdio-syscalls-{label}"
    config = configs.write_config(work, name, configs.gateway_config(servers, src=src))
    tool, arguments = latency.TOOLS[op]
    out = work / f"{label}.strace"
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(latency.bench_client(stdio_transport(_argv(src, config), log)))
        pid = next(p for p in children(os.getpid()) if f"{name}.json" in " ".join(cmdline(p)))
        for _ in range(WARMUP):
            await latency.call(client, f"handshake__{tool}", arguments)
        return await traced(client, pid, f"handshake__{tool}", arguments, calls, out)


async def traced(client: Client, pid: int, tool: str, arguments: dict[str, Any], calls: int,
                 out: Path) -> dict[str, float]:
    """`calls` calls of `tool` with `strace -c` on `pid` (its main thread: the event loop's); per call, the count of
    each system call (`strace`'s summary, written to `out`)."""
    tracer = subprocess.Popen(["strace", "-c", "-p", str(pid), "-o", str(out)], stderr=subprocess.DEVNULL)
    await anyio.sleep(1.0)  # attached (strace says nothing when it is)
    for _ in range(calls):
        await latency.call(client, tool, arguments)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    counts: dict[str, float] = {}
    for line in out.read_text().splitlines():
        if (match := ROW.match(line)) is not None:
            counts[match.group(2)] = int(match.group(1)) / calls
    return counts


def print_table(found: dict[str, dict[str, float]]) -> None:
    """One row per system call, one column per source."""
    names = sorted({name for counts in found.values() for name in counts})
    print("| syscall | " + " | ".join(found) + " |\n|---|" + "---:|" * len(found))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{counts.get(name, 0):.2f}" for counts in found.values()) + " |")


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "stdio_syscalls"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base)
    found: dict[str, dict[str, float]] = {}
    with open(work / "stdio_syscalls.log", "w") as log:
        for label, src in sources.items():
            found[label] = await _count(label, src, work, args.calls, args.op, log)
    print(f"syscalls per {args.op} call on the gateway's event loop thread ({args.calls} calls)")
    print_table(found)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.stdio_syscalls", description=__doc__.splitlines()[0])
    parser.add_argument("--base")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--op", choices=("elicit", "echo"), default="elicit")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
