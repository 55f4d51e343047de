"""The HTTP face's Python calls per call by calling file: `python -m bench.http_callers [--src DIR] [--calls N]
[--row ROW] [--op OP] [--file PART]...`.

`bench.http_calls`' run (one gateway in front of the demo server over streamable HTTP, its main thread under
cProfile, snapshot before the first and after the last call), but the calls are counted by their caller: per call,
the calls each file makes (builtins included, which `bench.http_calls` lists only by name), and for each `--file`
the callees of each of its functions. Counts do not move with the machine's load. Asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

import anyio

from mcp import Client

from bench import configs, latency
from bench.ab import work_src
from bench.http_calls import take_snapshot
from bench.http_cpu import EXTRA_ROWS, ROWS
from bench.procs import HttpProcess, free_port

WRAPPER = """
import cProfile, marshal, signal, sys
sys.path.insert(0, {src!r})
profile = cProfile.Profile()
snapshots = [0]

def snapshot(signum, frame):
    profile.disable()
    profile.create_stats()
    stats = {{key: {{caller: c[0] for caller, c in value[4].items()}} for key, value in profile.stats.items()}}
    snapshots[0] += 1
    with open({out!r} + "." + str(snapshots[0]), "wb") as file:
        marshal.dump(stats, file)
    profile.enable()

signal.signal(signal.SIGUSR1, snapshot)
from elicitgate.cli import app
profile.enable()
app()
"""

Key = tuple[str, int, str]
Edges = dict[Key, dict[Key, int]]


def short(key: Key) -> str:
    path, line, name = key
    return f"{path.split('site-packages/')[-1].split('/src/')[-1]}:{line} {name}"


def difference(before: Edges, after: Edges) -> dict[tuple[Key, Key], int]:
    """(caller, callee) -> calls between the snapshots."""
    found: dict[tuple[Key, Key], int] = {}
    for callee, callers in after.items():
        was = before.get(callee, {})
        for caller, n in callers.items():
            if n > was.get(caller, 0):
                found[(caller, callee)] = n - was.get(caller, 0)
    return found


def report(edges: dict[tuple[Key, Key], int], per: int, files: list[str]) -> None:
    by_file: dict[str, int] = defaultdict(int)
    for (caller, _), n in edges.items():
        by_file[short(caller).split(":")[0]] += n
    print(f"per call ({per} calls): Python calls {sum(edges.values()) / per:.1f}; by calling file:")
    for name, n in sorted(by_file.items(), key=lambda item: -item[1])[:40]:
        print(f"{n / per:8.2f}  {name}")
    for part in files:
        print(f"callees of {part}:")
        rows = sorted(
            ((short(caller), short(callee), n) for (caller, callee), n in edges.items() if part in caller[0]),
            key=lambda row: (row[0], -row[2]),
        )
        for caller, callee, n in rows:
            print(f"{n / per:8.2f}  {caller} -> {callee}")


async def measure(args: argparse.Namespace) -> None:
    src = Path(args.src) if args.src else work_src()
    work = Path(tempfile.mkdtemp(prefix="http_callers-"))
    _, mode, era = next(r for r in ROWS + EXTRA_ROWS if r[0] == args.row)
    name, arguments = latency.TOOLS[args.op]
    tool = f"{era}__{name}"
    out = str(work / "profile")
    with open(work / "log", "w") as log, ExitStack() as stack:
        port = free_port()
        upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
        config = configs.write_config(
            work, "gw", configs.gateway_config({era: configs.http_upstream(upstream, era)}, src=src)
        )
        gw_port = free_port()
        argv = [
            configs.PY,
            "-c",
            WRAPPER.format(src=str(src), out=out),
            "serve",
            "--config",
            str(config),
            "--http",
            f"127.0.0.1:{gw_port}",
        ]
        gateway = stack.enter_context(HttpProcess(argv, gw_port, log, ready_path="/healthz"))
        async with AsyncExitStack() as clients:
            client = await clients.enter_async_context(
                Client(
                    f"{gateway.url}/mcp",
                    mode=mode,
                    elicitation_callback=latency._answer,  # pyright: ignore[reportPrivateUsage]
                    read_timeout_seconds=latency.CALL_TIMEOUT,
                )
            )
            for _ in range(args.warmup):
                await latency.call(client, tool, arguments)
            before: Edges = await take_snapshot(gateway.pid, out, 1, client, tool, arguments)  # pyright: ignore[reportAssignmentType]
            for _ in range(args.calls - 1):
                await latency.call(client, tool, arguments)
            after: Edges = await take_snapshot(gateway.pid, out, 2, client, tool, arguments)  # pyright: ignore[reportAssignmentType]
    print(f"{args.row} {args.op}, src {src}")
    report(difference(before, after), args.calls, args.file)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.http_callers", description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="the src/ to run (default: the work tree's)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--row", choices=[row for row, _, _ in ROWS + EXTRA_ROWS], default="handshake")
    parser.add_argument("--op", choices=latency.OPS, default="elicit")
    parser.add_argument("--file", action="append", default=[], help="list the callees of this file's functions")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
