"""What `per_session` costs per client (docs/routing.md): `python -m bench.sessions [N]`.

N handshake-era clients connect to an in-process gateway (real HTTP face) one after another and stay
connected; each makes two calls. For a streamable HTTP upstream (the TypeScript SDK server of
tests/peers/ts) and a stdio one (the `mcp` SDK docs-style server docs/examples/restaurant.py), once with
`session_policy: shared` (the baseline: no connection per client) and once with the default
`per_session`: the first call's latency (under per_session it opens the client's upstream session),
the second's, the process's RSS growth per client (clients and gateway share the process, hence the
baseline), and for stdio the RSS of each upstream process.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from mcp import Client

from bench.procs import children, rss_kb
from tests.conformance.run import TS_SERVER, write_ts_fixtures
from tests.conftest import PY, ROOT, Process, free_port, inprocess_gateway


async def measure(
    name: str, upstream: dict[str, Any], tool: str, args: dict[str, Any], n: int, policy: str
) -> dict[str, Any]:
    server = {**upstream, "max_upstream_sessions": n, "session_policy": policy}
    config = {"mcpServers": {"s": server}, "log_level": "warning"}
    first: list[float] = []
    second: list[float] = []
    async with inprocess_gateway(config) as gw, AsyncExitStack() as stack:
        before_kids = set(children(os.getpid()))
        rss_before = rss_kb(os.getpid())
        for _ in range(n):
            client = await stack.enter_async_context(Client(gw.mcp_url, mode="legacy"))
            for lap in (first, second):
                start = time.perf_counter()
                await client.call_tool(f"s__{tool}", args)
                lap.append((time.perf_counter() - start) * 1000)
        rss_after = rss_kb(os.getpid())
        kids = [pid for pid in children(os.getpid()) if pid not in before_kids]
        upstream_rss = statistics.median(rss_kb(pid) for pid in kids) / 1024 if kids else None
        sessions = len(gw.gateway.links["s"].sessions)
    return {
        "upstream": name,
        "policy": policy,
        "sessions": sessions,
        "first_call_ms": round(statistics.median(first), 1),
        "second_call_ms": round(statistics.median(second), 1),
        "process_kb_per_client": round((rss_after - rss_before) / n),
        "upstream_process_mb": round(upstream_rss, 1) if upstream_rss else None,
    }


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        port = free_port()
        ts = Process(["node", str(TS_SERVER), "--fixtures", str(write_ts_fixtures(Path(scratch))), "--http", str(port)],
                     port)
        rows = []
        try:
            for policy in ("shared", "per_session"):
                http = {"url": f"{ts.url}/mcp"}
                rows.append(await measure("streamable HTTP (TypeScript SDK)", http, "test_simple_text", {}, n, policy))
        finally:
            ts.stop()
    stdio = {"command": PY, "args": [str(ROOT / "docs" / "examples" / "restaurant.py")]}
    args = {"date": "2024-12-24", "time": "19:00", "party_size": 2}
    for policy in ("shared", "per_session"):
        rows.append(await measure("stdio (mcp SDK MCPServer)", stdio, "book_table", args, n, policy))
    for row in rows:
        print(row)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
