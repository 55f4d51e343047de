"""The floor under the latency target: `python -m bench.floor [--transport T] [--rounds N] [--batch N]`.

Side by side in interleaved rounds (as `bench.latency`), over stdio and over streamable HTTP: the demo server called
directly, through two Python relays that parse each message and serialise it again and do nothing else, through the
lean relay plus the question's work, and through elicitgate, for both eras (a handshake-era client, and a 2026-07-28
client with a 2026-07-28 upstream). The lean relay (`bench.lean_relay` over stdio, `bench.lean_http_relay` over
HTTP: asyncio Protocols, httptools and orjson, callbacks instead of tasks) is the floor: about the least any Python
process in the middle can add on this machine. The bare relay (`bench.bare_relay`, asyncio streams and `json`;
`bench.bare_http_relay`, uvicorn and httpx2 as the gateway runs them) is what the same job costs on the gateway's
libraries. For the handshake era, `bench.lean_work_relay` (stdio) and `bench.lean_http_work_relay` (HTTP) are the
lean relays plus the work elicitgate's broker does for each elicitation, by elicitgate's own functions (checks,
limits, the `[server] ` prefix and `_meta`, its own ids, the answer's check, the end's metrics, log line and audit
record): the floor for any gateway that keeps elicitgate's promise, so that what elicitgate adds beyond it is
plumbing. It prints each path's p50 and what it adds to the direct call, each relay's added as a multiple of the
lean relay's, and for elicitgate its added against each relay's (the target: at most 1.5x the lean floor's). Asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import anyio

from bench import configs, latency
from bench.procs import HttpProcess, free_port, pin_to_one_core, stdio_transport
from bench.report import TARGETS, latency_rows

ROOT = Path(__file__).resolve().parent.parent
ERAS = (("handshake", "legacy", "handshake"), ("2026-07-28", "2026-07-28", "modern"))
"""(row label, client mode, upstream era)."""
TRANSPORTS = ("stdio", "http")
LEAN_WORK = "lean-work-relay"
"""The lean relay plus the question's work (`bench.lean_work_relay`, `bench.lean_http_work_relay`: handshake era
only)."""
PATH_NAMES = {LEAN_WORK: "lean relay + question work"}
PATHS = ("direct", "lean-relay", LEAN_WORK, "bare-relay", "elicitgate")


def stdio_targets(log: IO[str], workdir: Path) -> list[latency.Target]:
    def stdio(argv: list[str]) -> Callable[[], Any]:
        return lambda: stdio_transport(argv, log)

    relay, lean, work = configs.bare_relay_argv(), configs.lean_relay_argv(), configs.lean_work_relay_argv()
    found: list[latency.Target] = []
    for label, mode, era in ERAS:
        gateway = configs.gateway_config({"up": configs.stdio_upstream(era)})
        config = configs.write_config(workdir, f"floor-{era}", gateway)
        found += [
            latency.Target("stdio", label, "direct", mode, stdio(configs.demo_argv())),
            latency.Target("stdio", label, "lean-relay", mode, stdio(lean)),
            *([latency.Target("stdio", label, LEAN_WORK, mode, stdio(work))] if era == "handshake" else []),
            latency.Target("stdio", label, "bare-relay", mode, stdio(relay)),
            latency.Target("stdio", label, "elicitgate", mode, stdio(configs.gateway_argv(config)), prefix="up__"),
        ]
    return found


@contextmanager
def http_targets(log: IO[str], workdir: Path) -> Iterator[list[latency.Target]]:
    """The demo server on HTTP, the two relays and one gateway (HTTP face, one upstream per era) in front of it,
    for as long as the block runs."""

    def url(address: str) -> Callable[[], Any]:
        return lambda: address

    with ExitStack() as stack:
        port = free_port()
        upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
        port = free_port()
        relay = stack.enter_context(HttpProcess(configs.bare_http_relay_argv(f"127.0.0.1:{port}", upstream), port, log))
        port = free_port()
        lean = stack.enter_context(HttpProcess(configs.lean_http_relay_argv(f"127.0.0.1:{port}", upstream), port, log))
        port = free_port()
        work = stack.enter_context(
            HttpProcess(configs.lean_http_work_relay_argv(f"127.0.0.1:{port}", upstream), port, log)
        )
        servers = {era: configs.http_upstream(upstream, era) for _, _, era in ERAS}
        config = configs.write_config(workdir, "floor-http", configs.gateway_config(servers))
        port = free_port()
        gateway = stack.enter_context(
            HttpProcess(configs.gateway_argv(config, f"127.0.0.1:{port}"), port, log, ready_path="/healthz")
        )
        yield [
            target
            for label, mode, era in ERAS
            for target in (
                latency.Target("http", label, "direct", mode, url(upstream)),
                latency.Target("http", label, "lean-relay", mode, url(f"{lean.url}/mcp")),
                *(
                    [latency.Target("http", label, LEAN_WORK, mode, url(f"{work.url}/mcp"))]
                    if era == "handshake"
                    else []
                ),
                latency.Target("http", label, "bare-relay", mode, url(f"{relay.url}/mcp")),
                latency.Target("http", label, "elicitgate", mode, url(f"{gateway.url}/mcp"), prefix=f"{era}__"),
            )
        ]


def report(found: list[latency.Target]) -> str:
    """The rows as the latency table has them (`report.latency_rows`), and elicitgate against both relays."""
    rows = {(r["transport"], r["era"], r["path"], r["op"]): r for r in latency_rows(found)}
    lines = [
        "| transport | era | path | elicit p50 ms | elicit added | x lean | echo p50 ms | echo added | x lean |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    for transport, label in sorted({key[:2] for key in rows}, key=lambda pair: (TRANSPORTS.index(pair[0]), pair[1])):
        for path in PATHS:
            if (transport, label, path, latency.OPS[0]) not in rows:
                continue
            cells = []
            for op in latency.OPS:
                row = rows[(transport, label, path, op)]
                if "p50_ms" not in row:
                    cells += [row.get("error") or "no samples", "", ""]
                    continue
                added = (
                    f"{row['added_p50_ms']:+.2f} ({row['added_pct_of_direct']:.0f}%)" if "added_p50_ms" in row else ""
                )
                cells += [
                    f"{row['p50_ms']:.2f}",
                    added,
                    times_lean(row, rows.get((transport, label, "lean-relay", op))),
                ]
                if path == "elicitgate" and "added_p50_ms" in row:
                    notes.append(f"- {transport}, {label} `{op}`: {against_floors(row, rows, (transport, label, op))}")
            lines.append(f"| {transport} | {label} | {PATH_NAMES.get(path, path)} | " + " | ".join(cells) + " |")
    target = (
        f"Target: elicitgate adds at most {TARGETS['lean_floor_added_ratio']}x what the lean relay adds, "
        "on the same row (not asserted)."
    )
    return "\n".join([*lines, "", target, *notes])


def against_floors(
    row: dict[str, Any], rows: dict[tuple[str, str, str, str], dict[str, Any]], where: tuple[str, str, str]
) -> str:
    """elicitgate's added p50 as a multiple of each relay's on the same row."""
    transport, label, op = where
    parts: list[str] = []
    for path, name in (
        ("lean-relay", "the lean relay"),
        (LEAN_WORK, "the lean relay + question work"),
        ("bare-relay", "the bare relay"),
    ):
        floor = rows.get((transport, label, path, op), {})
        if "added_p50_ms" in floor:
            parts.append(
                f"{name} adds {floor['added_p50_ms']:+.2f} ms ({floor['added_pct_of_direct']:.0f}%), "
                f"elicitgate {ratio(row['added_p50_ms'], floor['added_p50_ms'])} that"
            )
    return "; ".join(parts) or "no relay row to compare with"


def times_lean(row: dict[str, Any], lean: dict[str, Any] | None) -> str:
    """A relay's or elicitgate's added p50 as a multiple of the lean relay's on the same row ("" for the lean relay
    itself and the direct call)."""
    if lean is None or row is lean or "added_p50_ms" not in row or "added_p50_ms" not in lean:
        return ""
    return ratio(row["added_p50_ms"], lean["added_p50_ms"])


def ratio(added: float, floor: float) -> str:
    """`added` as a multiple of `floor` (a floor at or below zero, within the noise, has no multiple)."""
    return f"{added / floor:.1f}x" if floor > 0 else f"{added - floor:+.2f} ms over"


async def main(args: argparse.Namespace) -> None:
    workdir = ROOT / "bench" / "results" / "floor"
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "floor.log", "w") as log, ExitStack() as stack:
        found = stdio_targets(log, workdir) if "stdio" in args.transport else []
        if "http" in args.transport:
            found += stack.enter_context(http_targets(log, workdir))
        await latency.interleave(found, args.rounds, args.batch, seed=7)
    print(report(found))


if __name__ == "__main__":
    os.environ["XDG_STATE_HOME"] = str(ROOT / "bench" / "results" / "floor" / "state")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--transport", choices=TRANSPORTS, action="append", help="stdio or http (repeat for both; both by default)"
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument(
        "--pin", action="store_true", help="every process on one core (steadier p50s, see procs.pin_to_one_core)"
    )
    args = parser.parse_args()
    args.transport = args.transport or list(TRANSPORTS)
    if args.pin:
        pin_to_one_core()
    anyio.run(main, args)
