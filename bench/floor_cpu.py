"""CPU per call of each process in the middle: `python -m bench.floor_cpu [--transport stdio|http] [--runs N]
[--calls N]`.

`bench.floor`'s handshake rows in CPU time, which moves less with other work on the machine than wall time: the lean
relay (`bench.lean_relay`), the lean relay plus the question's work (`bench.lean_work_relay`) and elicitgate
(`serve`, stdio face), each in front of the demo server over stdio with a handshake-era client; with `--transport
http`, `bench.lean_http_relay`, `bench.lean_http_work_relay` and elicitgate's HTTP face in front of the demo server
on streamable HTTP. For each operation (`elicit`: one form elicitation; `echo`), `--calls` sequential calls through
each process in turn (the order rotated every run), `--runs` times; each process's CPU time over the calls, per call
in microseconds: every thread (as `procs.cpu_seconds`), the main thread and the others (the audit trail's SQLite
thread) apart, and the user / system split (`/proc/<pid>/stat`, in clock ticks: coarse); the median and every run.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO

import anyio

from mcp import Client

from bench import configs, latency
from bench.procs import HttpProcess, find_child, free_port, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("lean relay", "lean relay + question work", "elicitgate")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_parts(pid: int) -> tuple[float, float, float, float]:
    """Seconds of CPU so far: the main thread's and the other threads' (`schedstat`, ns), the process's user and
    system time (`stat`, in clock ticks)."""
    main = others = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
        if task.name == str(pid):
            main += ns
        else:
            others += ns
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return main, others, int(fields[11]) / TICK, int(fields[12]) / TICK


def launches(workdir: Path) -> dict[str, tuple[list[str], str, str]]:
    """Over stdio, by path: its command line, the text that finds its process among ours, and its tools' prefix."""
    config = configs.write_config(
        workdir, "floor-cpu", configs.gateway_config({"up": configs.stdio_upstream("handshake")})
    )
    return {
        "lean relay": (configs.lean_relay_argv(), "bench.lean_relay", ""),
        "lean relay + question work": (configs.lean_work_relay_argv(), "bench.lean_work_relay", ""),
        "elicitgate": (configs.gateway_argv(config), "floor-cpu.json", "up__"),
    }


async def stdio_clients(stack: AsyncExitStack, workdir: Path, log: IO[str]) -> dict[str, tuple[Client, int, str]]:
    """Each path over stdio: its client, its process's pid, its tools' prefix."""
    opened: dict[str, tuple[Client, int, str]] = {}
    for path, (argv, marker, prefix) in launches(workdir).items():
        client = await stack.enter_async_context(latency.bench_client(stdio_transport(argv, log)))
        opened[path] = (client, find_child(marker), prefix)
    return opened


async def http_clients(stack: AsyncExitStack, workdir: Path, log: IO[str]) -> dict[str, tuple[Client, int, str]]:
    """Each path over streamable HTTP, in front of the demo server on HTTP: its client, its pid, its tools' prefix."""
    port = free_port()
    upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
    config = configs.write_config(
        workdir, "floor-cpu-http", configs.gateway_config({"up": configs.http_upstream(upstream, "handshake")})
    )
    argvs = {
        "lean relay": lambda listen: configs.lean_http_relay_argv(listen, upstream),
        "lean relay + question work": lambda listen: configs.lean_http_work_relay_argv(listen, upstream),
        "elicitgate": lambda listen: configs.gateway_argv(config, listen),
    }
    opened: dict[str, tuple[Client, int, str]] = {}
    for path, argv in argvs.items():
        port = free_port()
        ready = "/healthz" if path == "elicitgate" else "/mcp"
        process = stack.enter_context(HttpProcess(argv(f"127.0.0.1:{port}"), port, log, ready_path=ready))
        client = await stack.enter_async_context(latency.bench_client(f"{process.url}/mcp"))
        opened[path] = (client, process.pid, "up__" if path == "elicitgate" else "")
    return opened


async def measure(args: argparse.Namespace) -> dict[tuple[str, str], list[tuple[float, ...]]]:
    workdir = ROOT / "bench" / "results" / "floor_cpu"
    workdir.mkdir(parents=True, exist_ok=True)
    found: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    with open(workdir / "floor_cpu.log", "w") as log:
        async with AsyncExitStack() as stack:
            clients = stdio_clients if args.transport == "stdio" else http_clients
            opened = await clients(stack, workdir, log)
            for run in range(args.runs):
                order = PATHS[run % len(PATHS) :] + PATHS[: run % len(PATHS)]
                for op in latency.OPS:
                    name, arguments = latency.TOOLS[op]
                    for path in order:
                        client, pid, prefix = opened[path]
                        for _ in range(args.warmup):
                            await latency.call(client, prefix + name, arguments)
                        before = cpu_parts(pid)
                        for _ in range(args.calls):
                            await latency.call(client, prefix + name, arguments)
                        after = cpu_parts(pid)
                        parts = tuple((b - a) * 1e6 / args.calls for a, b in zip(before, after, strict=True))
                        found.setdefault((path, op), []).append((parts[0] + parts[1], *parts))
    return found


def table(found: dict[tuple[str, str], list[tuple[float, ...]]], args: argparse.Namespace) -> str:
    """Medians over the runs: all threads, the main (event loop) thread, the others (the audit trail's SQLite
    thread), and the process's user / system split (clock ticks: coarse)."""
    lines = [
        f"CPU per call of the process in the middle, us (median of {args.runs} runs x {args.calls} calls; "
        f"load {os.getloadavg()[0]:.1f}); {args.transport}, handshake-era client and upstream",
        "",
        "| path | op | all threads | main thread | other threads | user | system | all threads, every run |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for path in PATHS:
        for op in latency.OPS:
            runs = found[(path, op)]
            total, main, others, user, system = (statistics.median(run[i] for run in runs) for i in range(5))
            every = ", ".join(f"{run[0]:.0f}" for run in runs)
            lines.append(
                f"| {path} | {op} | {total:.0f} | {main:.0f} | {others:.0f} | {user:.0f} | {system:.0f} | {every} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.floor_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    args = parser.parse_args()
    print(table(anyio.run(measure, args), args))


if __name__ == "__main__":
    os.environ["XDG_STATE_HOME"] = str(ROOT / "bench" / "results" / "floor_cpu" / "state")
    main()
