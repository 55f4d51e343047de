"""The HTTP face's Python calls per call by calling file: `python -m bench.http_callers [--src DIR] [--calls N]
[--row ROW] [--op OP] [--file PART]...`.

`bench.http_calls`' run (one gateway in front of the demo server over streamable HTTP, its main thread under
cProfile, snapshot before the first and after the last call), but the calls are counted by their caller: per call,
the calls each file makes (builtins included, which `bench.http_calls` lists only by name), and for each `--file`
the callees of each of its functions. Counts do not move with the machine's load. Asserts nothing.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import anyio

from bench import latency
from bench.http_calls import profiled_calls
from bench.http_cpu import EXTRA_ROWS, ROWS

EDGES = "{key: {caller: c[0] for caller, c in value[4].items()} for key, value in profile.stats.items()}"
"""What a snapshot keeps of cProfile's stats: by function, the calls from each caller."""

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
    src, before, after = await profiled_calls(args, EDGES)
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
