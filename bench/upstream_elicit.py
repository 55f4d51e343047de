"""The upstream side of an elicitation alone, before / after: `python -m bench.upstream_elicit [--base REF]
[--transport http|stdio] [--op elicit|echo] [--calls N] [--runs N]`.

One `wire.endpoint.Endpoint` on the wire `upstreams.transports.open_transport` opens (handshake era) to the demo
server, over streamable HTTP or stdio, in a process of its own per side (`src/` as committed at `--base`, default
`main`, and the work tree): sequential calls of the demo's `confirm` tool (one form elicitation, answered at once
by the endpoint's request handler, as the broker would answer it) or `echo`. No face, router or broker: what a
gateway spends on the upstream's side of a call. For each side, the CPU the process spends per call (user and total,
`os.times`), then in a second pass, counted: Python function calls (a `sys.setprofile` hook), tasks made (a task
factory) and event-loop turns (`_run_once`) per call, split in two steps: from the call's write to the handler
called with the server's `elicitation/create` (the POST, its event stream's head, the event read and dispatched),
and from there to the call's result (the answer written and its 202 read, the result read, the stream's end when it
comes before the result is handed over). Asserts nothing.
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
import asyncio, os, sys, time
sys.path.insert(0, SRC)
import anyio
from elicitgate.config import HttpServer, StdioServer
from elicitgate.wire.endpoint import Endpoint
from elicitgate.upstreams.transports import open_transport

TOOL = {"elicit": {"name": "confirm", "arguments": {"question": "Proceed?"}},
        "echo": {"name": "echo", "arguments": {"text": "hello"}}}[OP]
ANSWER = {"action": "accept", "content": {"ok": True}}
counts = {"calls": 0, "tasks": 0, "turns": 0}
marks = []


def profile(frame, event, arg):
    if event == "call":
        counts["calls"] += 1


def snapshot():
    return (counts["calls"], counts["tasks"], counts["turns"])


async def main() -> None:
    loop = asyncio.get_running_loop()
    if COUNT:
        run_once = loop._run_once

        def counted_turn():
            counts["turns"] += 1
            run_once()

        loop._run_once = counted_turn

        def factory(loop, coro, **kwargs):
            counts["tasks"] += 1
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)

    async def on_request(inbound, method, params):
        if COUNT and counting:
            marks.append(snapshot())
        return ANSWER

    async def on_notify(inbound, method, params):
        pass

    if TRANSPORT == "http":
        config = HttpServer(url=URL, era="handshake")
    else:
        config = StdioServer(command=sys.executable, args=["-m", "elicitgate.demo.server"], era="handshake")
    counting = False
    async with open_transport(config) as wire:
        endpoint = Endpoint(wire.messages, "upstream")
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, on_request, on_notify)
            info = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                    "clientInfo": {"name": "b", "version": "1"}}
            result = await endpoint.request("init", "initialize", info)
            headers = {"mcp-protocol-version": result["protocolVersion"]}
            await endpoint.notify("notifications/initialized", None, headers=headers)
            await wire.standalone_settled()
            for i in range(WARMUP):
                await endpoint.request(f"w{i}", "tools/call", TOOL, headers=headers)
            if COUNT:
                steps = [[0, 0, 0], [0, 0, 0]]
                counting = True
                sys.setprofile(profile)
                for i in range(CALLS):
                    marks.clear()
                    start = snapshot()
                    await endpoint.request(f"r{i}", "tools/call", TOOL, headers=headers)
                    end = snapshot()
                    middle = marks[0] if marks else end
                    for k in range(3):
                        steps[0][k] += middle[k] - start[k]
                        steps[1][k] += end[k] - middle[k]
                sys.setprofile(None)
                print(" ".join(f"{v / CALLS:.2f}" for step in steps for v in step))
            else:
                before, started = os.times(), time.perf_counter()
                for i in range(CALLS):
                    await endpoint.request(f"r{i}", "tools/call", TOOL, headers=headers)
                after, wall = os.times(), time.perf_counter() - started
                user = (after.user - before.user) / CALLS * 1000
                total = user + (after.system - before.system) / CALLS * 1000
                print(f"{user:.3f} {total:.3f} {wall / CALLS * 1000:.3f}")
            tg.cancel_scope.cancel()


anyio.run(main)
"""


def child(src: str, transport: str, url: str, op: str, calls: int, count: bool) -> list[float]:
    """One side's figures, in a fresh process: (user, total CPU, wall) ms per call, or with `count` the Python
    calls, tasks and loop turns per call of each of the two steps."""
    code = (f"SRC = {src!r}\nURL = {url!r}\nCALLS = {calls}\nWARMUP = {WARMUP}\nTRANSPORT = {transport!r}\n"
            f"OP = {op!r}\nCOUNT = {count}\n" + CHILD)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def report(sides: dict[str, str], transport: str, url: str, args: argparse.Namespace) -> None:
    for label, src in sides.items():
        c = child(src, transport, url, args.op, args.count_calls, True)
        print(f"{label}: {transport} {args.op} per call: call -> question {c[0]:.0f} Python calls, {c[1]:.2f} tasks, "
              f"{c[2]:.2f} loop turns; question -> result {c[3]:.0f} Python calls, {c[4]:.2f} tasks, {c[5]:.2f} "
              f"loop turns; all {c[0] + c[3]:.0f} / {c[1] + c[4]:.2f} / {c[2] + c[5]:.2f}", flush=True)
    for _ in range(args.runs):
        for label, src in sides.items():  # alternating, so load lands on both alike
            user, total, wall = child(src, transport, url, args.op, args.calls, False)
            print(f"{label}: {transport} {args.op} CPU per call {user:.3f} ms user, {total:.3f} ms total; wall "
                  f"{wall:.2f} ms ({args.calls} sequential calls)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.upstream_elicit", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--op", choices=("elicit", "echo"), default="elicit")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--count-calls", type=int, default=300, help="calls counted under the profile hook")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sides = {"base": str(export_src(args.base)), "work": str(work_src())}
    if args.transport == "stdio":
        report(sides, "stdio", "", args)
        return
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(ROOT / "bench" / "results" / "upstream_elicit.log", "w") as log, \
            HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log) as upstream:
        report(sides, "http", f"{upstream.url}/mcp", args)


if __name__ == "__main__":
    main()
