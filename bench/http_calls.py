"""The HTTP face's Python calls per call, counted: `python -m bench.http_calls [--src DIR] [--calls N] [--row ROW]
[--op OP] [--top N]`.

One gateway with the HTTP face (`--src`: the `src/` to run, default the work tree's) in front of the demo server
over streamable HTTP, as `bench.http_cpu` has them, its main thread under cProfile from its start. A client of the
row makes `--calls` sequential calls of the operation; the gateway's profile is snapshot before the first and after
the last (`SIGUSR1`, handled in the gateway's main thread at its next Python step, which is the next call's) and the
difference per call is printed: all Python calls, the face's (its protocol, the endpoint, the session's wire, the
answers, uvicorn's cycle), the callbacks the event loop ran (`Context.run`: each task step and each `call_soon`
is one, so a hop through a task or a queue shows) and the tasks made, then the `--top` functions by count. Counts
do not move with the machine's load, which CPU figures do. Asserts nothing.
"""

from __future__ import annotations

import argparse
import marshal
import os
import signal
import tempfile
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import work_src
from bench.http_cpu import EXTRA_ROWS, ROWS
from bench.procs import HttpProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
FACE = ("elicitgate/web/http_protocol", "elicitgate/faces/streamable", "elicitgate/faces/http_answers",
        "elicitgate/faces/http_session", "elicitgate/faces/event_streams", "elicitgate/faces/http.py",
        "elicitgate/web/request_headers", "elicitgate/web/guard", "uvicorn/")

WRAPPER = """
import cProfile, marshal, signal, sys
sys.path.insert(0, {src!r})
profile = cProfile.Profile()
snapshots = [0]

def snapshot(signum, frame):
    profile.disable()
    profile.create_stats()
    stats = {stats}
    snapshots[0] += 1
    with open({out!r} + "." + str(snapshots[0]), "wb") as file:
        marshal.dump(stats, file)
    profile.enable()

signal.signal(signal.SIGUSR1, snapshot)
from elicitgate.cli import app
profile.enable()
app()
"""

COUNTS = "{key: (value[0], value[1], sum(c[0] for c in value[4].values()), value[2]) for key, value in " \
    "profile.stats.items()}"
"""What a snapshot keeps of cProfile's stats, by function: (primitive calls, calls, calls from Python callers, time)."""

Counts = dict[tuple[str, int, str], tuple[int, int, int, float]]


def gateway_argv(src: Path, config: Path, listen: str, out: str, stats: str) -> list[str]:
    return [configs.PY, "-c", WRAPPER.format(src=str(src), out=out, stats=stats), "serve", "--config", str(config),
            "--http", listen]


async def take_snapshot(pid: int, out: str, number: int, client: Client, tool: str,
                        arguments: dict[str, Any]) -> Any:
    """Signal the gateway, make one call (in whose first step the gateway snapshots), wait for the file."""
    os.kill(pid, signal.SIGUSR1)
    await latency.call(client, tool, arguments)
    path = Path(f"{out}.{number}")
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no profile snapshot {path}")
        await anyio.sleep(0.05)
    await anyio.sleep(0.2)  # written whole by the gateway's handler before the call it runs in goes on
    with open(path, "rb") as file:
        return marshal.load(file)


def difference(before: Counts, after: Counts) -> dict[tuple[str, int, str], tuple[int, int]]:
    """By function: (calls, calls entered from no Python caller: from the event loop) between the snapshots."""
    found: dict[tuple[str, int, str], tuple[int, int]] = {}
    for key, (_, calls, from_python, _) in after.items():
        _, was, was_from_python, _ = before.get(key, (0, 0, 0, 0.0))
        if calls > was:
            found[key] = (calls - was, calls - was - (from_python - was_from_python))
    return found


def summary(calls: Mapping[tuple[str, int, str], tuple[int, int]], per: int, top: int) -> None:
    total = sum(n for n, _ in calls.values())
    face = sum(n for (path, _, _), (n, _) in calls.items() if any(part in path for part in FACE))
    entries = sum(entered for entered, _ in ((e, 0) for _, e in calls.values()))
    tasks = sum(n for (_, _, name), (n, _) in calls.items() if "'create_task'" in name)
    print(f"per call ({per} calls): Python calls {total / per:.1f}, face {face / per:.1f}, "
          f"entered from the loop (task steps, callbacks) {entries / per:.2f}, create_task {tasks / per:.2f}")
    for (path, line, name), (n, entered) in sorted(calls.items(), key=lambda item: -item[1][0])[:top]:
        short = path.split("site-packages/")[-1].split("/src/")[-1]
        print(f"{n / per:8.2f} {entered / per:6.2f}  {short}:{line} {name}")
    print("the face's, by function:")
    for (path, line, name), (n, entered) in sorted(calls.items(), key=lambda item: -item[1][0]):
        if any(part in path for part in FACE):
            short = path.split("site-packages/")[-1].split("/src/")[-1]
            print(f"{n / per:8.2f} {entered / per:6.2f}  {short}:{line} {name}")
    print("entered from the loop, by function:")
    for (path, line, name), (_, entered) in sorted(calls.items(), key=lambda item: -item[1][1]):
        if entered <= 0:
            break
        short = path.split("site-packages/")[-1].split("/src/")[-1]
        print(f"{entered / per:8.2f}  {short}:{line} {name}")


async def profiled_calls(args: argparse.Namespace, stats: str) -> tuple[Path, Any, Any]:
    """The run both `bench.http_calls` and `bench.http_callers` make: the `src/` run, and the gateway's snapshots
    (`stats`: what each keeps of cProfile's stats, a Python expression) before the first call and after the last."""
    src = Path(args.src) if args.src else work_src()
    work = Path(tempfile.mkdtemp(prefix="http_calls-"))
    _, mode, era = next(r for r in ROWS + EXTRA_ROWS if r[0] == args.row)
    name, arguments = latency.TOOLS[args.op]
    tool = f"{era}__{name}"
    out = str(work / "profile")
    with open(work / "log", "w") as log, ExitStack() as stack:
        port = free_port()
        upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
        config = configs.write_config(work, "gw", configs.gateway_config({era: configs.http_upstream(upstream, era)},
                                                                         src=src))
        gw_port = free_port()
        gateway = stack.enter_context(HttpProcess(gateway_argv(src, config, f"127.0.0.1:{gw_port}", out, stats),
                                                  gw_port, log, ready_path="/healthz"))
        async with AsyncExitStack() as clients:
            client = await clients.enter_async_context(latency.bench_client(f"{gateway.url}/mcp", mode))
            for _ in range(args.warmup):
                await latency.call(client, tool, arguments)
            before = await take_snapshot(gateway.pid, out, 1, client, tool, arguments)
            for _ in range(args.calls - 1):
                await latency.call(client, tool, arguments)
            after = await take_snapshot(gateway.pid, out, 2, client, tool, arguments)
    return src, before, after


async def measure(args: argparse.Namespace) -> None:
    src, before, after = await profiled_calls(args, COUNTS)
    print(f"{args.row} {args.op}, src {src}")
    summary(difference(before, after), args.calls, args.top)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.http_calls", description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="the src/ to run (default: the work tree's)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--row", choices=[row for row, _, _ in ROWS + EXTRA_ROWS], default="handshake")
    parser.add_argument("--op", choices=latency.OPS, default="elicit")
    parser.add_argument("--top", type=int, default=40)
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
