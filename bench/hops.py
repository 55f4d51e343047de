"""Where the gateway's CPU goes, hop by hop: `python -m bench.hops [--calls N] [--only FACE/UPSTREAM ...]`.

For each face (stdio, streamable HTTP), each upstream transport (stdio, streamable HTTP) and each
pairing of eras (handshake client and upstream; handshake client, 2026-07-28 upstream; 2026-07-28
client and upstream), one gateway with the demo server behind it: `N` sequential `echo` calls, then
`N` sequential `confirm` calls (one form elicitation each), with the mean wall time per call and the
gateway's CPU time per call (from `/proc`). CPU time per call barely moves with other work on the
machine, so this is the figure to compare across commits on a busy machine; the difference between
rows says what one hop costs (the HTTP face, the HTTP upstream client, the 2026-07-28 bridging).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import gateway_pid
from bench.procs import HttpProcess, cpu_seconds, free_port, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
ERAS = (("handshake", "legacy", "handshake"), ("bridged", "legacy", "modern"), ("2026-07-28", "2026-07-28", "modern"))
"""(row label, client mode, upstream era)."""


async def measure(face: str, upstream: str, client_mode: str, era: str, calls: int, log: IO[str],
                  work: Path) -> dict[str, tuple[float, float]]:
    """op -> (mean wall ms, gateway CPU ms) per call."""
    async with AsyncExitStack() as stack:
        if upstream == "http":
            port = free_port()
            demo = stack.enter_context(HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log))
            server = configs.http_upstream(f"{demo.url}/mcp", era)
        else:
            server = configs.stdio_upstream(era)
        config = configs.write_config(work, f"hops-{face}-{upstream}-{era}-{os.getpid()}",
                                      configs.gateway_config({"up": server}))
        if face == "http":
            port = free_port()
            gateway = stack.enter_context(HttpProcess(configs.gateway_argv(config, f"127.0.0.1:{port}"), port, log,
                                                      ready_path="/healthz"))
            target: Any = f"{gateway.url}/mcp"
            pid: int | None = gateway.pid
        else:
            target, pid = stdio_transport(configs.gateway_argv(config), log), None
        client = await stack.enter_async_context(
            Client(target, mode=client_mode, elicitation_callback=latency._answer)  # noqa: SLF001
        )
        pid = pid or gateway_pid(str(config))
        found: dict[str, tuple[float, float]] = {}
        for op in ("echo", "elicit"):
            name, arguments = latency.TOOLS[op]
            for _ in range(latency.WARMUP_CALLS):
                await latency.call(client, "up__" + name, arguments)
            cpu, start = cpu_seconds(pid), time.perf_counter()
            for _ in range(calls):
                await latency.call(client, "up__" + name, arguments)
            found[op] = ((time.perf_counter() - start) / calls * 1000, (cpu_seconds(pid) - cpu) / calls * 1000)
        return found


async def main(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "hops"
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "hops.log", "w") as log:
        for face in ("stdio", "http"):
            for upstream in ("stdio", "http"):
                if args.only and f"{face}/{upstream}" not in args.only:
                    continue
                for label, mode, era in ERAS:
                    per_op = await measure(face, upstream, mode, era, args.calls, log, work)
                    print(f"{face:<5} face, {upstream:<5} upstream, {label:<10}: " + ", ".join(
                        f"{op} {wall:.2f} ms wall / {cpu:.2f} ms gateway CPU" for op, (wall, cpu) in per_op.items()),
                        flush=True)


if __name__ == "__main__":
    os.environ["XDG_STATE_HOME"] = str(ROOT / "bench" / "results" / "hops" / "state" / str(os.getpid()))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--only", nargs="*", default=[], help="face/upstream pairs, e.g. stdio/http")
    anyio.run(main, parser.parse_args())
