"""The floor under the latency target: `python -m bench.floor [--rounds N] [--batch N]`.

Over stdio, side by side in interleaved rounds (as `bench.latency`): the demo server called directly,
through a bare Python relay (`bench.bare_relay`: each line parsed and serialised again, nothing else), and
through elicitgate, for both eras (a handshake-era client, and a 2026-07-28 client with a 2026-07-28
upstream). It prints each path's p50 and what it adds to the direct call, and for elicitgate how much of
that a bare relay adds already: no Python process in the middle can add less than the relay does, so its
row is the lowest the "added" column of the latency table can go on this machine. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import anyio

from bench import configs, latency
from bench.procs import pin_to_one_core, stdio_transport
from bench.report import percentile

ROOT = Path(__file__).resolve().parent.parent
ERAS = (("handshake", "legacy", "handshake"), ("2026-07-28", "2026-07-28", "modern"))
"""(row label, client mode, upstream era)."""


def targets(log: object, workdir: Path) -> list[latency.Target]:
    def stdio(argv: list[str]) -> object:
        return lambda: stdio_transport(argv, log)  # type: ignore[arg-type]

    relay = configs.bare_relay_argv()
    found: list[latency.Target] = []
    for label, mode, era in ERAS:
        config = configs.write_config(workdir, f"floor-{era}", configs.gateway_config({"up": configs.stdio_upstream(era)}))
        found += [
            latency.Target("stdio", label, "direct", mode, stdio(configs.demo_argv())),  # type: ignore[arg-type]
            latency.Target("stdio", label, "bare-relay", mode, stdio(relay)),  # type: ignore[arg-type]
            latency.Target("stdio", label, "elicitgate", mode, stdio(configs.gateway_argv(config)),  # type: ignore[arg-type]
                           prefix="up__"),
        ]
    return found


def report(found: list[latency.Target]) -> str:
    lines = ["| era | path | elicit p50 ms | elicit added | echo p50 ms | echo added |", "|---|---|---:|---:|---:|---:|"]
    direct = {t.era: t for t in found if t.path == "direct"}
    relay = {t.era: t for t in found if t.path == "bare-relay"}
    notes: list[str] = []
    for t in found:
        cells = []
        for op in latency.OPS:
            if op in t.errors or not t.samples[op]:
                cells += [t.errors.get(op, "no samples"), ""]
                continue
            p50 = percentile(t.samples[op], 50) * 1000
            base = percentile(direct[t.era].samples[op], 50) * 1000
            added = "" if t.path == "direct" else f"+{p50 - base:.2f} ({(p50 - base) / base:.0%})"
            cells += [f"{p50:.2f}", added]
            if t.path == "elicitgate":
                floor = percentile(relay[t.era].samples[op], 50) * 1000 - base
                notes.append(f"- {t.era} `{op}`: a bare relay adds {floor / base:.0%} of the direct p50 "
                             f"(+{floor:.2f} ms); elicitgate adds {(p50 - base) / max(floor, 1e-9):.1f}x that")
        lines.append(f"| {t.era} | {t.path} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + notes)


async def main(args: argparse.Namespace) -> None:
    workdir = ROOT / "bench" / "results" / "floor"
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "floor.log", "w") as log:
        found = targets(log, workdir)
        await latency.interleave(found, args.rounds, args.batch, seed=7)
    print(report(found))


if __name__ == "__main__":
    os.environ["XDG_STATE_HOME"] = str(ROOT / "bench" / "results" / "floor" / "state")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--pin", action="store_true", help="every process on one core (steadier p50s, see procs.pin_to_one_core)")
    args = parser.parse_args()
    if args.pin:
        pin_to_one_core()
    anyio.run(main, args)
