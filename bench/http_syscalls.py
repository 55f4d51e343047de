"""System calls per call on the HTTP face's event loop thread: `python -m bench.http_syscalls [--base REF]
[--calls N] [--op elicit|echo] [--upstream modern|handshake]`.

A gateway with the HTTP face (`src/` of the work tree, and with `--base` that ref's) in front of the demo server over
streamable HTTP (`--upstream`: in 2026-07-28 mode, the default, or the handshake era), a handshake-era client on its
HTTP face: `bench.upstream_rounds`' row, the gateway's own `input_required` rounds retried toward the upstream. After
30 warm-up calls, `strace -c -p PID` (the main thread alone: the event loop's) is attached for `--calls` sequential
calls. Prints, per call, the syscalls the loop thread made (`getpid` is asyncio's running-loop check on Python 3.11:
`get_running_loop`, `current_task` without a loop, a future made without one, anyio's clock). Counts only; needs
strace and ptrace rights. Asserts nothing.
"""

from __future__ import annotations

import argparse
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import IO

import anyio

from bench import configs, latency
from bench.ab import sources_to_compare
from bench.procs import HttpProcess, free_port
from bench.stdio_syscalls import WARMUP, print_table, traced

ROOT = Path(__file__).resolve().parent.parent


def _argv(src: Path, config: Path, port: int) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from elicitgate.cli import app; app()"
    return [configs.PY, "-c", code, "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"]


async def _count(label: str, src: Path, work: Path, args: argparse.Namespace, log: IO[str]) -> dict[str, float]:
    tool, arguments = latency.TOOLS[args.op]
    out = work / f"{label}.strace"
    with ExitStack() as stack:
        port = free_port()
        upstream = stack.enter_context(HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log))
        servers = {args.upstream: configs.http_upstream(f"{upstream.url}/mcp", args.upstream)}
        config = configs.write_config(work, f"http-syscalls-{label}", configs.gateway_config(servers, src=src))
        gw_port = free_port()
        gateway = stack.enter_context(HttpProcess(_argv(src, config, gw_port), gw_port, log, ready_path="/healthz"))
        async with AsyncExitStack() as clients:
            client = await clients.enter_async_context(latency.bench_client(f"{gateway.url}/mcp"))
            for _ in range(WARMUP):
                await latency.call(client, f"{args.upstream}__{tool}", arguments)
            return await traced(client, gateway.pid, f"{args.upstream}__{tool}", arguments, args.calls, out)


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "http_syscalls"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base, Path(args.src) if args.src else None)
    found: dict[str, dict[str, float]] = {}
    with open(work / "http_syscalls.log", "w") as log:
        for label, src in sources.items():
            found[label] = await _count(label, src, work, args, log)
    print(
        f"syscalls per {args.op} call on the gateway's event loop thread ({args.calls} calls, HTTP face, "
        f"{args.upstream} upstream over HTTP)"
    )
    print_table(found)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.http_syscalls", description=__doc__.splitlines()[0])
    parser.add_argument("--base")
    parser.add_argument("--src", help="the src/ to run as `work` (default: the work tree's)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--op", choices=("elicit", "echo"), default="elicit")
    parser.add_argument("--upstream", choices=("modern", "handshake"), default="modern")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
