"""Instructions the bundled demo server executes from its first one to its answer to `initialize`, counted by
valgrind's callgrind: `python -m bench.callgrind_demo_startup [--base REF] [--runs N]`.

`python -m elicitgate.demo.server` over stdio (as the gateway starts it as an upstream) runs under
`valgrind --tool=callgrind` from the interpreter's first instruction; an `initialize` request is written to its stdin
as soon as it starts, and once its answer is read the count is dumped (`callgrind_control -d`) and its total read.
What the gateway's start-up waits for with demo upstreams (`bench.startup`), one upstream's share, without the
gateway's; deterministic where CPU seconds are not. With `--base REF` the tree committed at REF
(`bench.ab.export_src`) is counted first, then the work tree, `--runs` times each, interleaved. Each count comes after
one start of the same tree without valgrind (`elicitgate.codecache`'s file for the demo is there). The dumps stay in
`bench/results/callgrind_demo_startup/<label>-<pid>/` for `callgrind_annotate`. `--importtime` prints instead the
`python -X importtime` list of one start (no valgrind), slowest first. Needs valgrind (Debian's). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from pathlib import Path

from bench import configs
from bench.ab import sources_to_compare, work_src

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600.0
INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )
    + "\n"
)


def _answered(argv: list[str], src: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """`argv` started with `src` first on its path, `initialize` written to it and its answer read; still running."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    with open(log_path, "a") as log:
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(INITIALIZE.encode())
    process.stdin.flush()
    answer = process.stdout.readline()
    if b'"result"' not in answer:
        process.kill()
        raise RuntimeError(f"no initialize answer: {answer[:200]!r} (see {log_path})")
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None
    process.stdin.close()  # end of input: the server returns
    try:
        process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def count(src: Path, label: str) -> int:
    """Instructions of one start-up of the demo server in `src`, up to its `initialize` answer."""
    work = ROOT / "bench" / "results" / "callgrind_demo_startup" / f"{label}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("callgrind.out*"):
        old.unlink()
    log_path = work / "callgrind_demo_startup.log"
    argv = [configs.PY, *configs.DEMO_SERVER]
    _stop(_answered(argv, src, log_path))  # a start first, uncounted: the start-up cache is written
    counted = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out", *argv]
    process = _answered(counted, src, log_path)
    try:
        subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True, timeout=TIMEOUT)
    finally:
        _stop(process)
    # The dump on request is `callgrind.out.1`; the one valgrind writes at exit (`callgrind.out`) holds what came after.
    totals = [
        int(found)
        for dump in work.glob("callgrind.out.*")
        for found in re.findall(r"^(?:totals|summary): (\d+)", dump.read_text(errors="replace"), re.MULTILINE)
    ]
    if not totals:
        raise RuntimeError(f"valgrind dumped no totals in {work}")
    return max(totals)


def importtime(src: Path) -> str:
    """`python -X importtime` of one start of the demo server in `src` (after one to warm the cache), slowest first."""
    log_path = ROOT / "bench" / "results" / "callgrind_demo_startup" / "importtime.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [configs.PY, *configs.DEMO_SERVER]
    _stop(_answered(argv, src, log_path))
    log_path.write_text("")
    _stop(_answered([configs.PY, "-X", "importtime", *configs.DEMO_SERVER], src, log_path))
    rows = [line for line in log_path.read_text().splitlines() if line.startswith("import time:") and "|" in line]
    rows = [row for row in rows if row.split("|")[1].strip().isdigit()]
    return "\n".join(sorted(rows, key=lambda row: -int(row.split("|")[1])))


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.callgrind_demo_startup", description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a git ref to count first (its src/ exported by bench.ab.export_src)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--importtime", action="store_true", help="print the work tree's import times instead")
    args = parser.parse_args()
    if args.importtime:
        print(importtime(work_src()))
        return
    sources = sources_to_compare(args.base)
    found: dict[str, list[int]] = {label: [] for label in sources}
    for _ in range(args.runs):
        for label, src in sources.items():
            found[label].append(count(src, label))
            print(f"{label}: {found[label][-1] / 1e6:,.1f} M instructions to the initialize answer", flush=True)
    for label, counts in found.items():
        print(
            f"{label} ({sources[label]}): {min(counts) / 1e6:,.1f}-{max(counts) / 1e6:,.1f} M "
            f"instructions to the initialize answer ({len(counts)} runs)"
        )


if __name__ == "__main__":
    main()
