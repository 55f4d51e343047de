"""The functions each stdio elicitation stretch calls, for any stretch: `python -m bench.stdio_stretches [--base REF]
[--calls N] [--top N] [--stretch NAME ...] [--callers]`.

`bench.elicit_path`'s counting gateway (the same marks and stretches, `--calls` confirm calls after its warm-up), on
the work tree's `src/` and, with `--base`, on that ref's as well; prints the calls per elicitation of each `--stretch`
(default `request`, `push`, `result`), its `--top` functions by count, and with `--callers` each function's callers.
Counts only (deterministic); asserts nothing.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import anyio

from bench.ab import sources_to_compare
from bench.elicit_path import ROOT, _count  # pyright: ignore[reportPrivateUsage]


def _show(label: str, found: Any, calls: int, stretches: list[str], top: int, callers: bool) -> None:
    for name in stretches:
        rows: list[tuple[str, str, int]] = found["stretches"][name]
        print(f"\n{label} {name}: {sum(n for _, _, n in rows) / calls:.1f} calls per elicitation")
        if callers:
            for where, caller, n in sorted(rows, key=lambda row: -row[2])[:top]:
                print(f"  {n / calls:7.2f}  {where} <- {caller}")
            continue
        counted: Counter[str] = Counter()
        for where, _caller, n in rows:
            counted[where] += n
        for where, n in counted.most_common(top):
            print(f"  {n / calls:7.2f}  {where}")


async def measure(args: argparse.Namespace) -> None:
    work = ROOT / "bench" / "results" / "stdio_stretches"
    work.mkdir(parents=True, exist_ok=True)
    sources = sources_to_compare(args.base)
    with open(work / "stdio_stretches.log", "w") as log:
        for label, src in sources.items():
            found = await _count(label, src, work, args.calls, log)
            _show(label, found, args.calls, args.stretch or ["request", "push", "result"], args.top, args.callers)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.stdio_stretches", description=__doc__.splitlines()[0])
    parser.add_argument("--base")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--top", type=int, default=200)
    parser.add_argument("--stretch", action="append")
    parser.add_argument("--callers", action="store_true")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
