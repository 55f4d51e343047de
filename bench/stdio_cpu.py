"""The stdio face's CPU per call, before / after: `python -m bench.stdio_cpu [--base REF] [--runs N] [--calls N]`.

`bench.http_cpu`'s measure over stdio: two gateways (one on `src/` as committed at `--base`, default `main`, one on
the work tree), each with its stdio face in front of the demo server over stdio, for a 2026-07-28 client with a
2026-07-28 upstream, a handshake-era client with a handshake-era upstream, and a 2026-07-28 client with a
handshake-era upstream (one gateway process per row and
source, found by its config's name). For each row and operation (`echo`, `elicit`: one form elicitation, two
requests of a 2026-07-28 client), `--calls` sequential calls through one gateway, then the other, `--runs` times
(the order swapped every run); each gateway's CPU time (from `/proc`) per call: the median and every run. CPU, not
wall time: the machine may be busy with other work. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import sources_to_compare
from bench.http_cpu import cpu_rounds, print_cpu_table
from bench.procs import children, cmdline, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
ROWS = (("2026-07-28", "2026-07-28", "modern"), ("handshake", "legacy", "handshake"),
        ("2026-07-28-client-hs", "2026-07-28", "handshake"))
"""(row, client mode, upstream era): the last, a 2026-07-28 client in front of a handshake-era upstream (each call
borrows a pooled per-client upstream connection)."""


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "stdio_cpu"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base)
    rows = [row for row in ROWS if args.row in (None, row[0])]
    with open(work / "stdio_cpu.log", "w") as log:
        async with AsyncExitStack() as clients:
            opened: dict[tuple[str, str], tuple[Client, int]] = {}
            for label, src in sources.items():
                servers = {era: configs.stdio_upstream(era) for _, _, era in rows}
                for row, mode, _era in rows:
                    name = f"stdio-cpu-{label}-{row}"
                    config = configs.write_config(work, name, configs.gateway_config(servers, src=src))
                    argv = [configs.PY, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); "
                            "from elicitgate.cli import app; app()", "serve", "--config", str(config)]
                    client = await clients.enter_async_context(
                        latency.bench_client(stdio_transport(argv, log), mode))
                    pid = next(p for p in children(os.getpid()) if f"{name}.json" in " ".join(cmdline(p)))
                    opened[(label, row)] = (client, pid)
            found = await cpu_rounds(opened, rows, args)
    print_cpu_table(found, rows, args)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.stdio_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--row", choices=[row for row, _, _ in ROWS], help="one row only")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
