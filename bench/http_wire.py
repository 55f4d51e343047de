"""The upstream HTTP wire alone, before / after: `python -m bench.http_wire [--base REF] [--calls N] [--runs N]`.

One `wire.endpoint.Endpoint` on the streamable HTTP wire that `upstreams.transports.open_transport` opens
(handshake era), in a process of its own per side (`src/` as committed at `--base`, default `main`, and
the work tree), making sequential `echo` requests to the demo server over HTTP: the CPU that process
spends per request (user and total, from `os.times`), and the wall time. No face, router or broker: what
a gateway spends on its upstream HTTP connection per call. Asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from bench import configs
from bench.ab import ROOT, export_src, work_src
from bench.procs import HttpProcess, free_port

WARMUP = 50

CHILD = """
import os, sys, time
sys.path.insert(0, SRC)
import anyio
from elicitgate.config import HttpServer
from elicitgate.wire.endpoint import Endpoint
from elicitgate.upstreams.transports import open_transport


async def main() -> None:
    async def on_request(inbound, method, params):
        return {}

    async def on_notify(inbound, method, params):
        pass

    async with open_transport(HttpServer(url=URL, era="handshake")) as wire:
        endpoint = Endpoint(wire.messages, "upstream")
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, on_request, on_notify)
            info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
            result = await endpoint.request("init", "initialize", info)
            headers = {"mcp-protocol-version": result["protocolVersion"]}
            await endpoint.notify("notifications/initialized", None, headers=headers)
            await wire.standalone_settled()
            echo = {"name": "echo", "arguments": {"text": "hello"}}
            for i in range(WARMUP):
                await endpoint.request(f"w{i}", "tools/call", echo, headers=headers)
            before, start = os.times(), time.perf_counter()
            for i in range(CALLS):
                await endpoint.request(f"r{i}", "tools/call", echo, headers=headers)
            after, wall = os.times(), time.perf_counter() - start
            user = (after.user - before.user) / CALLS * 1000
            total = user + (after.system - before.system) / CALLS * 1000
            print(f"{user:.3f} {total:.3f} {wall / CALLS * 1000:.3f}")
            tg.cancel_scope.cancel()


anyio.run(main)
"""


def one_run(src: str, url: str, calls: int) -> tuple[float, float, float]:
    """(user, total CPU, wall) ms per request of one side, in a fresh process."""
    code = f"SRC = {src!r}\nURL = {url!r}\nCALLS = {calls}\nWARMUP = {WARMUP}\n" + CHILD
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    user, total, wall = (float(x) for x in out.split())
    return user, total, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="main")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    sides = {"base": str(export_src(args.base)), "work": str(work_src())}
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(ROOT / "bench" / "results" / "http_wire.log", "w") as log, \
            HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log) as upstream:
        url = f"{upstream.url}/mcp"
        for _ in range(args.runs):
            for label, src in sides.items():  # alternating, so load lands on both alike
                user, total, wall = one_run(src, url, args.calls)
                print(f"{label}: CPU per request {user:.2f} ms user, {total:.2f} ms total; wall {wall:.2f} ms "
                      f"({args.calls} sequential echo requests)")


if __name__ == "__main__":
    main()
