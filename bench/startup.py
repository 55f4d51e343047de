"""Start-up: time until `/healthz` answers 200, and idle RSS, with two stdio upstreams."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import IO, Any

from bench import configs
from bench.procs import HttpProcess, children, free_port, rss_kb

IDLE_SETTLE = 1.0


def run(repeats: int, log: IO[str], workdir: Path) -> dict[str, Any]:
    config = configs.write_config(
        workdir, "startup",
        configs.gateway_config({"one": configs.stdio_upstream("auto"), "two": configs.stdio_upstream("auto")},
                              steady=False),
    )
    runs = []
    for _ in range(repeats):
        port = free_port()
        with HttpProcess(configs.gateway_argv(config, f"127.0.0.1:{port}"), port, log, ready_path="/healthz") as gw:
            time.sleep(IDLE_SETTLE)
            upstreams = children(gw.pid)
            runs.append({
                "ready_s": round(gw.ready_after, 3),
                "listening_s": round(gw.listening_after or gw.ready_after, 3),
                "gateway_rss_kb": rss_kb(gw.pid),
                "upstreams_rss_kb": sum(rss_kb(pid) for pid in upstreams),
                "upstream_processes": len(upstreams),
            })
    return {
        "upstreams": "two stdio upstreams (the demo server, era auto: the initialize handshake, which it accepts)",
        "repeats": repeats,
        "ready_s_median": round(statistics.median(r["ready_s"] for r in runs), 3),
        "listening_s_median": round(statistics.median(r["listening_s"] for r in runs), 3),
        "gateway_rss_kb_median": int(statistics.median(r["gateway_rss_kb"] for r in runs)),
        "upstreams_rss_kb_median": int(statistics.median(r["upstreams_rss_kb"] for r in runs)),
        "runs": runs,
    }


async def measure(repeats: int, log: IO[str], workdir: Path) -> dict[str, Any]:
    return run(repeats, log, workdir)


def describe(results: dict[str, Any]) -> str:
    return (
        f"start-up, {results['upstreams']}, median of {results['repeats']}: ready in "
        f"{results['ready_s_median']} s (listening {results['listening_s_median']} s), idle RSS "
        f"{results['gateway_rss_kb_median'] / 1024:.1f} MiB "
        f"(upstreams {results['upstreams_rss_kb_median'] / 1024:.1f} MiB)\n"
        + "\n".join(f"  {r}" for r in results["runs"])
    )


def main() -> None:
    from bench.procs import run_alone

    run_alone("bench.startup", __doc__, measure, describe, repeats=5)


if __name__ == "__main__":
    main()
