"""The gateway's upstream side of a 2026-07-28 `input_required` round, step by step: `python -m bench.upstream_rounds
[--src DIR] [--op elicit|echo] [--calls N] [--face http|stdio]`.

One gateway (`--src`: the `src/` to run, default the work tree's) in front of the demo server in 2026-07-28 mode (over
streamable HTTP with `--face http`, the default; over stdio with `--face stdio`), a handshake-era client on its HTTP
face (or its stdio face) making `--calls` sequential calls of the demo's `confirm` tool (one form elicitation, which
the 2026-07-28 server asks in an `input_required` round and the gateway pushes to the client) or `echo`. A profile hook
in the gateway counts Python and built-in calls (`sys.setprofile`, its `call` and `c_call` events), and the count is
noted where the call passes the upstream's side: each try's `UpstreamConnection.request` entered and returned, its
request's bytes written and its answer's first bytes read (HTTP only), the broker's `elicit` entered and returned,
and `router.forward.forward` returned. Printed per call, the calls between consecutive marks (on the HTTP upstream:
`send -> bytes out`, `bytes in -> result`; the round: `result -> broker`, `broker -> retry`; the end:
`result -> forward returned`), which do not move with the machine's load. What lies between the marks and is not
the upstream's side (the face's push, the client's answer, the server's own time) is left out; the marks' own few
calls are alike in any A/B. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from collections import defaultdict
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import work_src
from bench.procs import HttpProcess, children, cmdline, free_port, stdio_transport

WRAPPER = """
import signal, sys
sys.path.insert(0, {src!r})
counts = [0]
marks = []

def hook(frame, event, arg):
    if event == "call" or event == "c_call":
        counts[0] += 1

def mark(tag):
    marks.append((counts[0], tag))

def dump(signum, frame):
    with open({out!r} + ".tmp", "w") as file:
        file.write("\\n".join(f"{{n}} {{tag}}" for n, tag in marks))
    import os
    os.replace({out!r} + ".tmp", {out!r})

signal.signal(signal.SIGUSR1, dump)

import elicitgate.upstreams.connection as connection
request = connection.UpstreamConnection.request

async def marked_request(self, method, params, **options):
    mark("send")
    try:
        return await request(self, method, params, **options)
    finally:
        mark("result")

connection.UpstreamConnection.request = marked_request

import elicitgate.elicitation.broker as broker
elicit = broker.Broker.elicit

async def marked_elicit(self, **options):
    mark("broker")
    try:
        return await elicit(self, **options)
    finally:
        mark("retry")

broker.Broker.elicit = marked_elicit

import elicitgate.wire.http_client as http_client
write = http_client._Connection.write
received = http_client._Connection.data_received

def marked_write(self, *args):
    mark("bytes out")
    return write(self, *args)

def marked_received(self, data):
    mark("bytes in")
    return received(self, data)

http_client._Connection.write = marked_write
http_client._Connection.data_received = marked_received

import elicitgate.router.forward as forward_module
forward = forward_module.forward

async def marked_forward(*args, **options):
    try:
        return await forward(*args, **options)
    finally:
        mark("forward returned")

forward_module.forward = marked_forward
sys.setprofile(hook)
import threading
threading.setprofile(None)
from elicitgate.cli import app
app()
"""

STEPS = (
    ("send", "bytes out"),
    ("bytes in", "result"),
    ("send", "result"),
    ("result", "broker"),
    ("retry", "send"),
    ("result", "forward returned"),
)
"""The spans printed (`send -> result`: a whole try, the server's wait included, in which the gateway may do other
work of the call: what the broker records once an answer went on its way)."""


def gateway_argv(src: Path, out: str) -> list[str]:
    return [configs.PY, "-c", WRAPPER.format(src=str(src), out=out)]


def spans(marks: list[tuple[int, str]]) -> dict[str, list[int]]:
    """For each step, the calls of each of its spans, in order: from a mark to the next of the step's end, where no
    other mark of its start comes between (a try's `bytes in`: its first)."""
    found: dict[str, list[int]] = defaultdict(list)
    for i, (count, tag) in enumerate(marks):
        if i and tag == "bytes in" and marks[i - 1][1] == "bytes in":
            continue  # the rest of the same answer: its span runs from the first
        for start, end in STEPS:
            if tag != start:
                continue
            for later, later_tag in marks[i + 1 :]:
                if later_tag == end:
                    found[f"{start} -> {end}"].append(later - count)
                    break
                if later_tag == start and start != "bytes in":
                    break
    return found


async def take_marks(pid: int, out: str, client: Client, tool: str, arguments: dict[str, Any]) -> list[tuple[int, str]]:
    """Signal the gateway, make one call (in whose first step the gateway writes its marks), read them."""
    path = Path(out)
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    await latency.call(client, tool, arguments)
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no marks in {path}")
        await anyio.sleep(0.05)
    marks: list[tuple[int, str]] = []
    for line in path.read_text().splitlines():
        count, tag = line.split(" ", 1)
        marks.append((int(count), tag))
    return marks


async def calls_through(
    client: Client, pid: int, out: str, tool: str, arguments: dict[str, Any], args: argparse.Namespace
) -> tuple[list[tuple[int, str]], int]:
    for _ in range(args.warmup):
        await latency.call(client, tool, arguments)
    before = await take_marks(pid, out, client, tool, arguments)
    for _ in range(args.calls):
        await latency.call(client, tool, arguments)
    after = await take_marks(pid, out, client, tool, arguments)
    # From the first snapshot's call (the gateway wrote its marks as that call came in) to the second's (likewise).
    measured = after[len(before) :]
    return measured, sum(tag == "forward returned" for _, tag in measured)


async def measure(args: argparse.Namespace) -> None:
    src = Path(args.src) if args.src else work_src()
    work = Path(tempfile.mkdtemp(prefix="upstream_rounds-"))
    name, arguments = latency.TOOLS[args.op]
    tool = f"modern__{name}"
    out = str(work / "marks")
    with open(work / "log", "w") as log, ExitStack() as stack:
        if args.face == "http":
            port = free_port()
            upstream = stack.enter_context(HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log))
            servers = {"modern": configs.http_upstream(f"{upstream.url}/mcp", "modern")}
            config = configs.write_config(work, "gw", configs.gateway_config(servers, src=src))
            gw_port = free_port()
            argv = [*gateway_argv(src, out), "serve", "--config", str(config), "--http", f"127.0.0.1:{gw_port}"]
            gateway = stack.enter_context(HttpProcess(argv, gw_port, log, ready_path="/healthz"))
            async with AsyncExitStack() as clients:
                client = await clients.enter_async_context(latency.bench_client(f"{gateway.url}/mcp"))
                marks, calls = await calls_through(client, gateway.pid, out, tool, arguments, args)
        else:
            marker = f"upstream-rounds-{os.getpid()}"
            config = configs.write_config(
                work, marker, configs.gateway_config({"modern": configs.stdio_upstream("modern")}, src=src)
            )
            argv = [*gateway_argv(src, out), "serve", "--config", str(config)]
            async with latency.bench_client(stdio_transport(argv, log)) as client:
                await latency.call(client, tool, arguments)
                pid = next(p for p in children(os.getpid()) if f"{marker}.json" in " ".join(cmdline(p)))
                marks, calls = await calls_through(client, pid, out, tool, arguments, args)
    print(
        f"{args.face} {args.op}, src {src}: calls (Python and built-in) per call ({calls} calls), by step of the "
        "upstream's side"
    )
    if args.show:
        ends = [i for i, (_, tag) in enumerate(marks) if tag == "forward returned"]
        for count, tag in marks[ends[0] + 1 : ends[1] + 1]:
            print(f"  {count - marks[ends[0]][0]:8d} {tag}")
    for step, found in spans(marks).items():
        print(f"  {step:<26} {sum(found) / calls:8.1f}  ({len(found) / calls:.0f} per call)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.upstream_rounds", description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="the src/ to run (default: the work tree's)")
    parser.add_argument("--op", choices=latency.OPS, default="elicit")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--face", choices=("http", "stdio"), default="http")
    parser.add_argument("--show", action="store_true", help="print one call's marks")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
