"""What `bench.hot_pieces` and `bench.audit_pieces` share: pieces of the hot path timed alone on `src/` as committed
at `--base` (default `main`) and on the work tree, each in a process of its own, `--runs` times alternating, printed
as one table of microseconds per piece. Asserts nothing."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(module: str, description: str, pieces: Callable[[], dict[str, float]], *, unit: str, digits: int) -> None:
    """Parse the command line; as the parent, run `module` on both sources and print the table; as the child
    (`--src`), print `pieces()` of that source tree as JSON."""
    parser = argparse.ArgumentParser(prog=module, description=description)
    parser.add_argument("--base", default="main")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--src", help=argparse.SUPPRESS)  # the child: time the pieces of this source tree
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
        import elicitgate

        assert elicitgate.__file__ is not None and elicitgate.__file__.startswith(args.src), elicitgate.__file__
        print(json.dumps(pieces()), file=sys.__stdout__)
        return
    from bench.ab import export_src

    sources = {"base": export_src(args.base), "work": ROOT / "src"}
    found: dict[str, list[dict[str, float]]] = {label: [] for label in sources}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(args.runs):
        for label, src in sources.items():
            out = subprocess.run([sys.executable, "-m", module, "--src", str(src)], cwd=ROOT, env=env,
                                 capture_output=True, text=True, check=True).stdout
            found[label].append(json.loads(out))
    print(f"| {unit} | base | work |\n|---|---:|---:|")
    for piece in found["base"][0]:
        base = ", ".join(f"{run[piece]:.{digits}f}" for run in found["base"])
        work = ", ".join(f"{run[piece]:.{digits}f}" for run in found["work"])
        print(f"| {piece} | {base} | {work} |")
