"""Python calls per call of a 2026-07-28 client over stdio, by stretch, counted inclusively for each gateway function:
`python -m bench.round_inclusive [--src DIR] [--upstream handshake|modern] [--calls N] [--top N] [--match TEXT]`.

`bench.modern_path`'s set-up and marks (see its docstring), with another counting profiler: every function entered
(Python or C) counts once for each distinct function of `elicitgate` on its frame's stack (the work done under it,
itself included, within the loop's step), so that a stretch's calls can be told by where in the gateway they were
made. `--match`: only functions whose `name (file:line)` holds this text. Asserts nothing.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

from bench.ab import work_src
from bench.elicit_path import STRETCHES, _serve_profiled, _where  # pyright: ignore[reportPrivateUsage]
from bench.modern_path import NAMES, count

ROOT = Path(__file__).resolve().parent.parent


def serve_inclusive(out: str) -> None:
    """Run the gateway counting, between SIGUSR1 and SIGUSR2, each call under every gateway function on its stack."""
    from elicitgate.wire import codec
    from elicitgate.wire.stdio import LineReader

    marks = (LineReader.data_received.__code__, codec.dumps_line.__code__)
    counts: list[Counter[object]] = [Counter() for _ in STRETCHES]
    state = {"marks": -1}
    ours: dict[object, bool] = {}

    def gateway(code: Any) -> bool:
        known = ours.get(code)
        if known is None:
            known = ours[code] = "/elicitgate/" in code.co_filename
        return known

    def under(frame: FrameType | None, counted: Counter[object]) -> None:
        seen: set[object] = set()
        while frame is not None:
            code = frame.f_code
            if code not in seen and gateway(code):
                seen.add(code)
                counted[code] += 1
            frame = frame.f_back

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            if frame.f_code in marks:
                state["marks"] += 1
            if state["marks"] >= 0:
                counted = counts[state["marks"] % len(STRETCHES)]
                counted["(all)"] += 1
                under(frame, counted)
        elif event == "c_call" and state["marks"] >= 0:
            counted = counts[state["marks"] % len(STRETCHES)]
            counted["(all)"] += 1
            under(frame, counted)

    _serve_profiled(out, count, state, counts, lambda code, n: [_where(code), n])


def report(found: Any, names: tuple[str, ...], calls: int, top: int, match: str | None) -> None:
    by_mark: list[Counter[str]] = [Counter() for _ in names]
    for i, stretch in enumerate(STRETCHES):
        for where, n in found["stretches"][stretch]:
            by_mark[i % len(names)][where] += n
    print(f"marks {found['marks']} (expected {len(names) * calls}); per call, inclusive:")
    for name, counted in zip(names, by_mark, strict=True):
        if name.startswith("(") or name == "between":
            continue
        print(f"  {name}: {counted['(all)'] / calls:.1f} calls")
        rows = [(where, n) for where, n in counted.most_common() if where != "(all)" and (not match or match in where)]
        for where, n in rows[:top]:
            print(f"    {n / calls:7.2f}  {where}")


async def measure(args: argparse.Namespace) -> None:
    src = Path(args.src) if args.src else work_src()
    work = ROOT / "bench" / "results" / "round_inclusive"
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "round_inclusive.log", "w") as log:
        found = await count(src, "elicit", args.calls, work, log, "serve_inclusive", args.upstream,
                            "bench.round_inclusive")
    print(f"elicit toward a {args.upstream} upstream, src {src}")
    report(found, NAMES[(args.upstream, "elicit")], args.calls, args.top, args.match)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="the src/ to run (default: the work tree's)")
    parser.add_argument("--upstream", choices=("handshake", "modern"), default="modern")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=60)
    parser.add_argument("--match", help="only functions whose name and place hold this text")
    args = parser.parse_args()
    anyio.run(measure, args)


if __name__ == "__main__":
    main()
