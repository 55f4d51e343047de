"""Memory per pending question on the two client-side paths of issue #34:
`python -m bench.pending_paths --path parked|pushed [--pending N]`, figures as JSON on stdout.

- `parked`: a 2026-07-28 client over stdio (raw JSON-RPC lines) calls `demo__confirm` N times; each call
  is parked (`bridging.rounds`) and answered with `input_required`, whose round the client never retries.
- `pushed`: a handshake-era client over the HTTP face (raw `httpx2`, one session) makes N calls; each POST
  turns into an SSE stream that pushes `elicitation/create` (`faces.http_answers`, `faces.event_streams`),
  and the client holds every stream open without answering.

Both with a 2026-07-28 stdio demo upstream (it returns `input_required`; it holds nothing). The gateway is
`bench.gateway_probe` (stdio or HTTP face): RSS from /proc before and with N pending, and with
`BENCH_TRACEMALLOC=1` (plus `BENCH_TRACEMALLOC_BY` / `BENCH_TRACEMALLOC_FRAMES`, see there) Python's own
allocations per pending and where they are. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

from bench import configs
from bench.procs import free_port, rss_kb
from bench.scale import Probe

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
CALL = {"name": "demo__confirm", "arguments": {"question": "Proceed?"}}
HTTP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
HANDSHAKE = "2025-11-25"


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class SlowProbe(Probe):
    """`Probe` with room for a tracemalloc snapshot of thousands of pending questions on a busy machine."""

    async def read(self, *, traced: bool = True) -> dict[str, Any]:
        self.path.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1 if traced else signal.SIGUSR2)
        deadline = time.monotonic() + 600
        while not self.path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the probe did not answer")
            await asyncio.sleep(0.05)
        stats: dict[str, Any] = json.loads(self.path.read_text())
        stats["rss_kb"] = rss_kb(self.pid)
        return stats


async def _audit_opened(probe: Probe) -> None:
    """As `Probe.audit_opened`, with room for a start-up slowed by tracing on a busy machine."""
    deadline = time.monotonic() + 600
    while not (await probe.read(traced=False))["audit_open"]:
        if time.monotonic() > deadline:
            raise RuntimeError("the audit store did not open")
        await asyncio.sleep(0.1)


async def _figures(probe: Probe, before: dict[str, Any], n: int, reached: float) -> dict[str, Any]:
    await asyncio.sleep(1.0)
    during = await probe.read()
    figures: dict[str, Any] = {
        "pending": n,
        "seconds_to_all_pending": round(reached, 2),
        "broker_pending_during": during["pending"],
        "tasks_during": during["tasks"],
        "rss_before_kb": before["rss_kb"],
        "rss_during_kb": during["rss_kb"],
        "bytes_per_pending": round((during["rss_kb"] - before["rss_kb"]) * 1024 / n),
    }
    if "traced" in during:
        figures["traced_bytes_per_pending"] = round((during["traced_total_kb"] - before["traced_total_kb"]) * 1024 / n)
        figures["traced_during"] = during["traced"]
    return figures


async def parked(n: int, workdir: Path) -> dict[str, Any]:
    # 10,000 calls queue up on one stdio upstream: on a busy machine the last ones wait past the default 60 s.
    settings = configs.gateway_config({"demo": {**configs.stdio_upstream("modern"), "request_timeout": 900}})
    settings["bridging"] = {"max_parked_calls": 1_000_000}  # 10,000 pending and the warm-up's calls
    config = configs.write_config(workdir, "parked", settings)
    probe_file = workdir / "parked.probe.json"
    log = (workdir / "parked.log").open("w")
    proc = await asyncio.create_subprocess_exec(
        configs.PY, "-m", "bench.gateway_probe", str(config), str(probe_file),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, limit=2**24,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        async def calls(first: int, count: int) -> float:
            start = time.perf_counter()
            proc.stdin.write(b"".join(  # type: ignore[union-attr]
                _line({"jsonrpc": "2.0", "id": first + i, "method": "tools/call",
                       "params": {**CALL, "_meta": MODERN_META}}) for i in range(count)))
            await proc.stdin.drain()  # type: ignore[union-attr]
            for _ in range(count):
                answer = json.loads(await proc.stdout.readline())  # type: ignore[union-attr]
                if answer.get("result", {}).get("resultType") != "input_required":
                    raise RuntimeError(f"expected input_required, got {answer}")
            return time.perf_counter() - start

        await calls(1_000_000, 20)  # warm-up (and the audit store opened)
        probe = SlowProbe(proc.pid, probe_file)
        await _audit_opened(probe)
        before = await probe.read()
        reached = await calls(1, n)
        return {"path": "parked: 2026-07-28 client over stdio, each call's round unanswered",
                **await _figures(probe, before, n, reached)}
    finally:
        proc.stdin.close()
        proc.kill()
        await proc.wait()


async def pushed(n: int, workdir: Path) -> dict[str, Any]:
    config = configs.write_config(workdir, "pushed", configs.gateway_config({"demo": configs.stdio_upstream("modern")}))
    probe_file = workdir / "pushed.probe.json"
    port = free_port()
    log = (workdir / "pushed.log").open("w")
    proc = subprocess.Popen(
        [configs.PY, "-m", "bench.gateway_probe", str(config), str(probe_file), f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log,
    )
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    try:
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=HTTP_HEADERS, timeout=900,
                                      limits=limits) as http:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the gateway did not start")
                await asyncio.sleep(0.1)
            opened = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "bench", "version": "1"}}})
            session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": HANDSHAKE}
            await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            held: list[Any] = []
            release = asyncio.Event()

            async def one(request_id: int, asked: asyncio.Event) -> None:
                body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": CALL}
                async with http.stream("POST", "/mcp", json=body, headers=session) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data:") and "elicitation/create" in line:
                            held.append(response)
                            asked.set()
                            await release.wait()
                            return
                    raise RuntimeError(f"no elicitation/create on call {request_id}")

            async def batch(first: int, count: int) -> tuple[float, list[asyncio.Task[None]]]:
                start = time.perf_counter()
                events = [asyncio.Event() for _ in range(count)]
                tasks = [asyncio.create_task(one(first + i, events[i])) for i in range(count)]
                for event, task in zip(events, tasks, strict=True):
                    waited = asyncio.ensure_future(event.wait())
                    await asyncio.wait([waited, task], return_when=asyncio.FIRST_COMPLETED)
                    if task.done():
                        task.result()
                return time.perf_counter() - start, tasks

            probe = SlowProbe(proc.pid, probe_file)
            await batch(1_000_000, 20)  # warm-up; left pending (the same before and during)
            await _audit_opened(probe)
            before = await probe.read()
            reached, tasks = await batch(1, n)
            figures = await _figures(probe, before, n, reached)
            release.set()
            for task in tasks:
                task.cancel()
            return {"path": "pushed: handshake-era client over the HTTP face, each POST an SSE stream held open",
                    **figures}
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pending_paths")
    parser.add_argument("--path", choices=["parked", "pushed"], required=True)
    parser.add_argument("--pending", type=int, default=2_000)
    parser.add_argument("--workdir", type=Path, default=Path("bench/results/work"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_STATE_HOME"] = str(args.workdir / "state")
    run = parked if args.path == "parked" else pushed
    print(json.dumps(asyncio.run(run(args.pending, args.workdir)), indent=1))


if __name__ == "__main__":
    sys.exit(main())
