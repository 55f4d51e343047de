"""The HTTP face's CPU per call, before / after: `python -m bench.http_cpu [--base REF] [--runs N] [--calls N]
[--row ROW]`.

Two gateways with the HTTP face (one on `src/` as committed at `--base`, default `main`, one on the work tree) in
front of one demo server over streamable HTTP, as `bench.floor`'s HTTP rows have them: a handshake-era client
with a handshake-era upstream, a 2026-07-28 client with a 2026-07-28 upstream, and a 2026-07-28 client with a
handshake-era upstream (`--row`: one of them only). For each row and operation
(`echo`, `elicit`: one form elicitation), `--calls` sequential calls through one gateway, then through the
other, `--runs` times; each gateway's CPU time (from `/proc`) per call, median of the runs. CPU, not wall time:
the machine may be busy with other work. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import IO, Any

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import sources_to_compare
from bench.procs import HttpProcess, cpu_seconds, free_port

ROOT = Path(__file__).resolve().parent.parent
ROWS = (("handshake", "legacy", "handshake"), ("2026-07-28", "2026-07-28", "modern"),
        ("2026-07-28-client-hs", "2026-07-28", "handshake"))
"""(row, client mode, upstream era); the last, a 2026-07-28 client in front of a handshake-era upstream."""
EXTRA_ROWS = (("handshake-client-2026-07-28-upstream", "legacy", "modern"),)
"""Rows run only when named with `--row`: a handshake-era client in front of a 2026-07-28 upstream (the latency
table's HTTP "2026-07-28" `elicitgate` row, whose face is the handshake-era one)."""


def gateway_argv(src: Path, config: Path, listen: str) -> list[str]:
    return [configs.PY, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); from elicitgate.cli import app; app()",
            "serve", "--config", str(config), "--http", listen]


def start_gateways(work: Path, sources: dict[str, Path], servers: dict[str, Any], stack: ExitStack,
                   log: IO[str]) -> dict[str, HttpProcess]:
    """An HTTP gateway on each of `sources` (by label) in front of `servers`, each ready (`/healthz`), stopped with
    `stack`."""
    gateways: dict[str, HttpProcess] = {}
    for label, src in sources.items():
        config = configs.write_config(work, f"gw-{label}", configs.gateway_config(servers, src=src))
        port = free_port()
        gateways[label] = stack.enter_context(
            HttpProcess(gateway_argv(src, config, f"127.0.0.1:{port}"), port, log, ready_path="/healthz"))
    return gateways


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "http_cpu"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base)
    with open(work / "http_cpu.log", "w") as log, ExitStack() as stack:
        port = free_port()
        upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
        rows = [row for row in ROWS if args.row in (None, row[0])] + [row for row in EXTRA_ROWS if args.row == row[0]]
        servers = {era: configs.http_upstream(upstream, era) for _, _, era in rows}
        gateways = start_gateways(work, sources, servers, stack, log)
        async with AsyncExitStack() as clients:
            opened: dict[tuple[str, str], tuple[Client, int]] = {}
            for label, gateway in gateways.items():
                for row, mode, _era in rows:
                    client = await clients.enter_async_context(latency.bench_client(f"{gateway.url}/mcp", mode))
                    opened[(label, row)] = (client, gateway.pid)
            found = await cpu_rounds(opened, rows, args)
    print_cpu_table(found, rows, args)


async def cpu_rounds(opened: Mapping[tuple[str, str], tuple[Client, int]], rows: Sequence[tuple[str, str, str]],
                     args: argparse.Namespace) -> dict[tuple[str, str, str], list[float]]:
    """`args.runs` times, for each row and operation, `args.calls` calls through each gateway (`opened`: by
    (label, row), a client and its gateway's pid), the order of the gateways swapped every run: each gateway's CPU
    per call, in ms, by (row, operation, label)."""
    labels = list(dict.fromkeys(label for label, _ in opened))
    found: dict[tuple[str, str, str], list[float]] = {}
    for run in range(args.runs):
        for row, _mode, era in rows:
            for op in latency.OPS:
                name, arguments = latency.TOOLS[op]
                for label in labels if run % 2 == 0 else reversed(labels):
                    client, pid = opened[(label, row)]
                    for _ in range(args.warmup):
                        await latency.call(client, f"{era}__{name}", arguments)
                    before = cpu_seconds(pid)
                    for _ in range(args.calls):
                        await latency.call(client, f"{era}__{name}", arguments)
                    found.setdefault((row, op, label), []).append((cpu_seconds(pid) - before) * 1000 / args.calls)
    return found


def print_cpu_table(found: Mapping[tuple[str, str, str], list[float]], rows: Sequence[tuple[str, str, str]],
                    args: argparse.Namespace) -> None:
    print(f"gateway CPU per call, ms (median of {args.runs} runs x {args.calls} calls; load {os.getloadavg()[0]:.1f})")
    print("| row | op | base | work | change |")
    print("|---|---|---:|---:|---:|")
    for row, _, _ in rows:
        for op in latency.OPS:
            base, mine = (statistics.median(found[(row, op, label)]) for label in ("base", "work"))
            runs = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(found[(row, op, "base")], found[(row, op, "work")],
                                                                strict=True))
            print(f"| {row} | {op} | {base:.2f} | {mine:.2f} | {(mine - base) / base:+.0%} | runs {runs}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.http_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--row", choices=[row for row, _, _ in ROWS + EXTRA_ROWS], help="one row only")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
