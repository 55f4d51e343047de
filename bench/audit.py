"""The audit trail's cost: elicitation round trips through the gateway with `audit` on and off.

Three targets per transport (stdio, streamable HTTP), handshake era, each one `mcp.Client` session kept
open: the demo server directly, the gateway with the audit trail on (SQLite in the work directory), and
the gateway with `audit.enabled: false`. Rounds interleave them in a shuffled order; each round every
target makes `batch` sequential `confirm` calls (one form elicitation, answered at once).

    overhead = (p50 with audit - p50 without) / (p50 without - p50 direct)

the share of the gateway-added latency that the audit trail adds (target: at most 10%).

    python -m bench.audit [--rounds 3] [--batch 20]     # a short run, printed
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from bench import configs
from bench.latency import Target, interleave
from bench.procs import HttpProcess, free_port, run_alone, stdio_transport
from bench.report import percentile

TARGET_RATIO = 0.10


def _config(workdir: Path, name: str, upstream: dict[str, Any], audit: bool) -> Path:
    config = configs.gateway_config({"hs": upstream})
    db = f"sqlite:///{workdir / f'{name}.db'}"
    config["audit"] = {"url": db, "open_at_start": True} if audit else {"enabled": False}
    return configs.write_config(workdir, name, config)


async def measure(rounds: int, batch: int, log: IO[str], workdir: Path, seed: int = 14) -> dict[str, Any]:
    upstream_port = free_port()
    results: dict[str, Any] = {"rounds": rounds, "batch": batch, "target_ratio": TARGET_RATIO, "transports": {}}
    with ExitStack() as procs:
        upstream = procs.enter_context(HttpProcess(configs.demo_argv(f"127.0.0.1:{upstream_port}"), upstream_port, log))
        upstream_mcp = f"{upstream.url}/mcp"
        found: list[Target] = []
        for audit in (True, False):
            path = "audit-on" if audit else "audit-off"
            stdio_config = _config(workdir, f"{path}-stdio", configs.stdio_upstream("handshake"), audit)
            argv = configs.gateway_argv(stdio_config)
            found.append(Target("stdio", "handshake", path, "legacy", lambda a=argv: stdio_transport(a, log), "hs__"))
            port = free_port()
            http_config = _config(workdir, f"{path}-http", configs.http_upstream(upstream_mcp, "handshake"), audit)
            gateway = procs.enter_context(
                HttpProcess(configs.gateway_argv(http_config, f"127.0.0.1:{port}"), port, log, ready_path="/healthz")
            )
            found.append(Target("http", "handshake", path, "legacy", lambda u=f"{gateway.url}/mcp": u, "hs__"))
        direct = configs.demo_argv()
        found.append(Target("stdio", "handshake", "direct", "legacy", lambda: stdio_transport(direct, log)))
        found.append(Target("http", "handshake", "direct", "legacy", lambda: upstream_mcp))
        await interleave(found, rounds, batch, seed, ops=("elicit",))
    for transport in ("stdio", "http"):
        p50 = {}
        for target in (t for t in found if t.transport == transport):
            if target.errors.get("elicit"):
                p50[target.path] = None
                results["transports"].setdefault(transport, {})[f"{target.path}_error"] = target.errors["elicit"]
            else:
                p50[target.path] = percentile(target.samples["elicit"], 50)
        row = results["transports"].setdefault(transport, {})
        row.update({f"{path}_p50_ms": None if v is None else round(v * 1000, 3) for path, v in p50.items()})
        if None not in p50.values():
            added = p50["audit-off"] - p50["direct"]
            row["gateway_added_ms"] = round(added * 1000, 3)
            row["audit_added_ms"] = round((p50["audit-on"] - p50["audit-off"]) * 1000, 3)
            row["overhead_ratio"] = round((p50["audit-on"] - p50["audit-off"]) / added, 3) if added > 0 else None
            row["met"] = row["overhead_ratio"] is not None and row["overhead_ratio"] <= TARGET_RATIO
    return results


def describe(results: dict[str, Any]) -> str:
    lines = [f"audit on vs off: {results['rounds']} rounds x {results['batch']} elicitations per target"]
    for transport, row in results["transports"].items():
        if "overhead_ratio" not in row:
            lines.append(f"  {transport}: not measured ({row})")
            continue
        ratio = row["overhead_ratio"]
        verdict = "met" if row["met"] else "NOT met"
        lines.append(
            f"  {transport}: p50 direct {row['direct_p50_ms']} ms, audit off {row['audit-off_p50_ms']} ms, "
            f"audit on {row['audit-on_p50_ms']} ms; the gateway adds {row['gateway_added_ms']} ms, the audit "
            f"{row['audit_added_ms']} ms: overhead ratio {ratio:.1%} (target <= {TARGET_RATIO:.0%}: {verdict})"
        )
    return "\n".join(lines)


def main() -> None:
    run_alone("bench.audit", __doc__, measure, describe, rounds=3, batch=20)


if __name__ == "__main__":
    main()
