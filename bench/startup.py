"""Start-up: time until `/healthz` answers 200, the gateway's CPU by then, and idle RSS, with two stdio upstreams.

Two rows: the demo upstream (the `mcp` SDK's server: ~0.45 s of CPU each before it answers its handshake, on the
same 2 cores as the gateway), and `bench.lean_server` (a few ms each), where "ready" is the gateway's own start-up.
The top-level keys are the demo row's (bench/report.py's targets); `lean` holds the other. `upstreams_started_s`:
seconds from the gateway's start to its upstream processes' (the latest of the two; /proc's start times, 10 ms steps).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import IO, Any

from bench import configs
from bench.procs import HttpProcess, children, cpu_seconds, free_port, rss_kb

IDLE_SETTLE = 1.0
LEAN_UPSTREAM: dict[str, Any] = {"command": configs.PY, "args": ["-m", "bench.lean_server"], "era": "handshake"}


def _started_s(pid: int) -> float:
    """When `pid` started, in seconds since boot (/proc/<pid>/stat's starttime, in clock ticks)."""
    stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(stat[19]) / os.sysconf("SC_CLK_TCK")


def _row(name: str, upstream: dict[str, Any], repeats: int, log: IO[str], workdir: Path) -> dict[str, Any]:
    config = configs.write_config(workdir, name, configs.gateway_config({"one": upstream, "two": upstream},
                                                                       steady=False))
    runs = []
    for _ in range(repeats):
        port = free_port()
        with HttpProcess(configs.gateway_argv(config, f"127.0.0.1:{port}"), port, log, ready_path="/healthz") as gw:
            cpu = cpu_seconds(gw.pid)
            upstreams = children(gw.pid)
            upstreams_cpu = sum(cpu_seconds(pid) for pid in upstreams)
            started = max((_started_s(pid) for pid in upstreams), default=None)
            time.sleep(IDLE_SETTLE)
            runs.append({
                "ready_s": round(gw.ready_after, 3),
                "listening_s": round(gw.listening_after or gw.ready_after, 3),
                "upstreams_started_s": None if started is None else round(started - _started_s(gw.pid), 2),
                "gateway_cpu_s": round(cpu, 3),
                "upstreams_cpu_s": round(upstreams_cpu, 3),
                "gateway_rss_kb": rss_kb(gw.pid),
                "upstreams_rss_kb": sum(rss_kb(pid) for pid in upstreams),
                "upstream_processes": len(upstreams),
            })
    started = [r["upstreams_started_s"] for r in runs if r["upstreams_started_s"] is not None]
    return {
        "repeats": repeats,
        "ready_s_median": round(statistics.median(r["ready_s"] for r in runs), 3),
        "listening_s_median": round(statistics.median(r["listening_s"] for r in runs), 3),
        "upstreams_started_s_median": round(statistics.median(started), 2) if started else None,
        "gateway_cpu_s_median": round(statistics.median(r["gateway_cpu_s"] for r in runs), 3),
        "upstreams_cpu_s_median": round(statistics.median(r["upstreams_cpu_s"] for r in runs), 3),
        "gateway_rss_kb_median": int(statistics.median(r["gateway_rss_kb"] for r in runs)),
        "upstreams_rss_kb_median": int(statistics.median(r["upstreams_rss_kb"] for r in runs)),
        "runs": runs,
    }


def run(repeats: int, log: IO[str], workdir: Path) -> dict[str, Any]:
    demo = _row("startup", configs.stdio_upstream("auto"), repeats, log, workdir)
    lean = _row("startup-lean", LEAN_UPSTREAM, repeats, log, workdir)
    return {
        "upstreams": "two stdio upstreams (the demo server, era auto: the initialize handshake, which it accepts)",
        **demo,
        "lean": {"upstreams": "two stdio upstreams (bench.lean_server, handshake era)", **lean},
    }


async def measure(repeats: int, log: IO[str], workdir: Path) -> dict[str, Any]:
    return run(repeats, log, workdir)


def _describe_row(row: dict[str, Any], upstreams: str) -> str:
    return (
        f"start-up, {upstreams}, median of {row['repeats']}: ready in {row['ready_s_median']} s "
        f"(listening {row['listening_s_median']} s; upstreams started at {row.get('upstreams_started_s_median')} s; "
        f"gateway CPU by then {row.get('gateway_cpu_s_median', '?')} s, "
        f"its upstreams' {row.get('upstreams_cpu_s_median', '?')} s), idle RSS "
        f"{row['gateway_rss_kb_median'] / 1024:.1f} MiB (upstreams {row['upstreams_rss_kb_median'] / 1024:.1f} MiB)\n"
        + "\n".join(f"  {r}" for r in row["runs"])
    )


def describe(results: dict[str, Any]) -> str:
    text = _describe_row(results, results["upstreams"])
    if "lean" in results:
        text += "\n" + _describe_row(results["lean"], results["lean"]["upstreams"])
    return text


def main() -> None:
    from bench.procs import run_alone

    run_alone("bench.startup", __doc__, measure, describe, repeats=5)


if __name__ == "__main__":
    main()
