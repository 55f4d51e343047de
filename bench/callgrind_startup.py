"""Instructions the gateway executes from its first one to `/healthz` 200, counted by valgrind's callgrind:
`python -m bench.callgrind_startup [--base REF] [--runs N]`.

`serve --http` with two stdio `bench.lean_server` upstreams (a few ms of start-up each, so what is counted is the
gateway's own start-up, as `bench.ab --startup N --lean-upstreams` times it), run under
`valgrind --tool=callgrind` from the interpreter's first instruction; once `/healthz` answers 200 the count is dumped
(`callgrind_control -d`) and its total read. Deterministic where the CPU seconds of `bench.ab --startup` move by a
third on a busy machine (two runs of the same tree agree to within ~0.5%: what differs is the `/healthz` polls
answered 503 before the upstreams are up, and the loop's idle turns). With `--base REF` the tree committed at REF
(`bench.ab.export_src`) is counted first, then the work tree, `--runs` times each, interleaved. The dumps stay in
`bench/results/callgrind_startup/<label>-<pid>/` for `callgrind_annotate`. Each count comes after one start of the
same tree without valgrind (a gateway that started before: `elicitgate.codecache`'s file is there). Needs valgrind
(Debian's). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path

from bench import configs
from bench.ab import sources_to_compare
from bench.callgrind_cpu import READY_TIMEOUT, SlowProcess
from bench.procs import HttpProcess, free_port
from bench.startup import LEAN_UPSTREAM

ROOT = Path(__file__).resolve().parent.parent


def count(src: Path, label: str) -> int:
    """Instructions of one start-up of the gateway in `src`, up to `/healthz` 200."""
    work = ROOT / "bench" / "results" / "callgrind_startup" / f"{label}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("callgrind.out*"):
        old.unlink()
    tree = {"PYTHONPATH": str(src)}  # the upstreams run `bench.lean_server` with the same tree
    servers = {name: {**LEAN_UPSTREAM, "env": tree} for name in ("one", "two")}
    config = configs.write_config(work, f"startup-{label}", configs.gateway_config(servers, steady=False))
    argv = [configs.PY, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); from elicitgate.cli import app; app()",
            "serve", "--config", str(config)]
    with open(work / "callgrind_startup.log", "w") as log:
        # A start first, uncounted, as a gateway that ran before: what it keeps for the next (`elicitgate.codecache`)
        # is there, as it is for every start after the first.
        port = free_port()
        with HttpProcess([*argv, "--http", f"127.0.0.1:{port}"], port, log, ready_path="/healthz"):
            pass
    port = free_port()
    counted = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out", *argv,
               "--http", f"127.0.0.1:{port}"]
    with open(work / "callgrind_startup.log", "a") as log, SlowProcess(counted, port, log, ready_path="/healthz") as gw:
        subprocess.run(["callgrind_control", "-d", str(gw.pid)], check=True, capture_output=True,
                       timeout=READY_TIMEOUT)
    # The dump on request is `callgrind.out.1`; the one valgrind writes at exit (`callgrind.out`) holds what came after.
    totals = [int(found) for dump in work.glob("callgrind.out.*")
              for found in re.findall(r"^(?:totals|summary): (\d+)", dump.read_text(errors="replace"), re.MULTILINE)]
    if not totals:
        raise RuntimeError(f"valgrind dumped no totals in {work}")
    return max(totals)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.callgrind_startup", description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a git ref to count first (its src/ exported by bench.ab.export_src)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    sources = sources_to_compare(args.base)
    found: dict[str, list[int]] = {label: [] for label in sources}
    for _ in range(args.runs):
        for label, src in sources.items():
            found[label].append(count(src, label))
            print(f"{label}: {found[label][-1] / 1e6:,.1f} M instructions to /healthz 200", flush=True)
    for label, counts in found.items():
        print(f"{label} ({sources[label]}): {min(counts) / 1e6:,.1f}-{max(counts) / 1e6:,.1f} M "
              f"instructions to /healthz 200 ({len(counts)} runs)")


if __name__ == "__main__":
    main()
