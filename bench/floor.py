"""The floor under the latency target: `python -m bench.floor [--transport T] [--rounds N] [--batch N]`.

Side by side in interleaved rounds (as `bench.latency`), over stdio and over streamable HTTP: the demo
server called directly, through a bare Python relay (`bench.bare_relay` over stdio, `bench.bare_http_relay`
over HTTP: each message parsed and serialised again, nothing else), and through elicitgate, for both eras
(a handshake-era client, and a 2026-07-28 client with a 2026-07-28 upstream). It prints each path's p50
and what it adds to the direct call, and for elicitgate how much of that a bare relay adds already. Over
stdio no Python process in the middle can add less than the relay does, so its row is the lowest the
"added" column of the latency table can go on this machine; over HTTP the relay passes each answer
through as the server gives it (an SSE stream stays one), on the libraries the gateway runs, so its row is
what relaying costs on them before any gateway work. Asserts nothing.
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
from bench.report import latency_rows

ROOT = Path(__file__).resolve().parent.parent
ERAS = (("handshake", "legacy", "handshake"), ("2026-07-28", "2026-07-28", "modern"))
"""(row label, client mode, upstream era)."""
TRANSPORTS = ("stdio", "http")


def stdio_targets(log: IO[str], workdir: Path) -> list[latency.Target]:
    def stdio(argv: list[str]) -> Callable[[], Any]:
        return lambda: stdio_transport(argv, log)

    relay = configs.bare_relay_argv()
    found: list[latency.Target] = []
    for label, mode, era in ERAS:
        config = configs.write_config(workdir, f"floor-{era}", configs.gateway_config({"up": configs.stdio_upstream(era)}))
        found += [
            latency.Target("stdio", label, "direct", mode, stdio(configs.demo_argv())),
            latency.Target("stdio", label, "bare-relay", mode, stdio(relay)),
            latency.Target("stdio", label, "elicitgate", mode, stdio(configs.gateway_argv(config)), prefix="up__"),
        ]
    return found


@contextmanager
def http_targets(log: IO[str], workdir: Path) -> Iterator[list[latency.Target]]:
    """The demo server on HTTP, the relay and one gateway (HTTP face, one upstream per era) in front of it,
    for as long as the block runs."""
    def url(address: str) -> Callable[[], Any]:
        return lambda: address

    with ExitStack() as stack:
        port = free_port()
        upstream = f"{stack.enter_context(HttpProcess(configs.demo_argv(f'127.0.0.1:{port}'), port, log)).url}/mcp"
        port = free_port()
        relay = stack.enter_context(HttpProcess(configs.bare_http_relay_argv(f"127.0.0.1:{port}", upstream), port, log))
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
                latency.Target("http", label, "bare-relay", mode, url(f"{relay.url}/mcp")),
                latency.Target("http", label, "elicitgate", mode, url(f"{gateway.url}/mcp"), prefix=f"{era}__"),
            )
        ]


def report(found: list[latency.Target]) -> str:
    """The rows as the latency table has them (`report.latency_rows`), and elicitgate against the relay."""
    rows = {(r["transport"], r["era"], r["path"], r["op"]): r for r in latency_rows(found)}
    lines = ["| transport | era | path | elicit p50 ms | elicit added | echo p50 ms | echo added |",
             "|---|---|---|---:|---:|---:|---:|"]
    notes: list[str] = []
    for transport, label in sorted({key[:2] for key in rows}, key=lambda pair: (TRANSPORTS.index(pair[0]), pair[1])):
        for path in ("direct", "bare-relay", "elicitgate"):
            cells = []
            for op in latency.OPS:
                row = rows[(transport, label, path, op)]
                if "p50_ms" not in row:
                    cells += [row.get("error") or "no samples", ""]
                    continue
                added = f"+{row['added_p50_ms']:.2f} ({row['added_pct_of_direct']:.0f}%)" if "added_p50_ms" in row else ""
                cells += [f"{row['p50_ms']:.2f}", added]
                floor = rows[(transport, label, "bare-relay", op)]
                if path == "elicitgate" and "added_p50_ms" in row and "added_p50_ms" in floor:
                    notes.append(f"- {transport}, {label} `{op}`: a bare relay adds {floor['added_pct_of_direct']:.0f}% of the direct "
                                 f"p50 (+{floor['added_p50_ms']:.2f} ms); elicitgate adds "
                                 f"{row['added_p50_ms'] / max(floor['added_p50_ms'], 1e-9):.1f}x that")
            lines.append(f"| {transport} | {label} | {path} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + notes)


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
    parser.add_argument("--transport", choices=TRANSPORTS, action="append",
                        help="stdio or http (repeat for both; both by default)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--pin", action="store_true", help="every process on one core (steadier p50s, see procs.pin_to_one_core)")
    args = parser.parse_args()
    args.transport = args.transport or list(TRANSPORTS)
    if args.pin:
        pin_to_one_core()
    anyio.run(main, args)
