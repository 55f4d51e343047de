"""Replicas on Redis: what the Redis hop costs a call with one elicitation, and throughput with 1 vs 3 replicas.

A 2026-07-28 `mcp.Client` calls the demo server's `confirm` (one form elicitation, answered at once by the
client's callback: the call's first request gets `input_required`, its retry carries the answer). Targets,
each `elicitgate serve --http` with a 2026-07-28 stdio demo upstream per replica (shared by all calls):

- `single`: one replica without `redis_url` (everything in the process);
- `single-redis`: one replica with `redis_url` (shared limits: one Lua script per elicitation);
- `three-redis`: three replicas on one Redis behind a round-robin balancer (no affinity), so the retry,
  which carries the answer, always lands on another replica than the call and is forwarded over pub/sub.

Per target: `calls` sequential calls (p50 / p99), then `calls_100` calls at concurrency 100 (calls per
second). The Redis hop is `three-redis` p50 minus `single-redis` p50. Prints figures; asserts nothing.

    python -m bench.replicas [--calls 200] [--calls-100 500]     # needs Debian's redis-server
"""

from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import httpx2
import mcp_types as types

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench import configs
from bench.procs import HttpProcess, free_port, run_alone
from bench.report import percentile
from bench.scale import concurrent_calls

TOOL = "demo__confirm"
ARGS = {"question": "Proceed?"}
CONCURRENCY = 100


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer without affinity: each request to the next replica."""

    def __init__(self, urls: list[str]) -> None:
        self.targets = [httpx2.URL(url) for url in urls]
        self.count = 0
        # 100 calls at once; no keep-alive: a connection the server is closing as idle is never reused
        # (at concurrency 100 that race reset requests), the same for every target
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=0)
        self._inner = httpx2.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = self.targets[self.count % len(self.targets)]
        self.count += 1
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def answer(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"ok": True})


async def _target(urls: list[str], calls: int, calls_100: int) -> dict[str, Any]:
    async with httpx2.AsyncClient(transport=RoundRobin(urls), timeout=httpx2.Timeout(60, read=300)) as http:
        transport = streamable_http_client(f"{urls[0]}/mcp", http_client=http)
        async with Client(transport, mode="2026-07-28", elicitation_callback=answer) as client:

            async def call() -> None:
                result = await client.call_tool(TOOL, ARGS)
                if result.is_error:
                    raise RuntimeError(" ".join(getattr(b, "text", "") for b in result.content))

            for _ in range(10):  # warm-up: connections, imports, the upstream's first calls
                await call()
            sequential = await concurrent_calls(call, calls, 1)
            start = time.perf_counter()
            await concurrent_calls(call, calls_100, CONCURRENCY)
            elapsed = time.perf_counter() - start
    return {
        "p50_ms": round(percentile(sequential, 50) * 1000, 3),
        "p99_ms": round(percentile(sequential, 99) * 1000, 3),
        "calls_per_s_at_100": round(calls_100 / elapsed, 1),
    }


def _redis(workdir: Path, log: IO[str]) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench.replicas needs redis-server (Debian: apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=log, stderr=log)
    return proc, f"redis://127.0.0.1:{port}/0"


def _replicas(
    stack: ExitStack, workdir: Path, name: str, count: int, redis_url: str | None, log: IO[str]
) -> list[str]:
    config = configs.write_config(workdir, name, configs.gateway_config({"demo": configs.stdio_upstream("modern")}))
    urls = []
    for i in range(count):
        port = free_port()
        redis = [f"ELICITGATE_REDIS_URL={redis_url}"] if redis_url else []
        env = [f"XDG_STATE_HOME={workdir / f'{name}-{i}'}", *redis]
        argv = ["env", *env, *configs.gateway_argv(config, f"127.0.0.1:{port}")]
        urls.append(stack.enter_context(HttpProcess(argv, port, log, ready_path="/healthz")).url)
    return urls


async def measure(calls: int, calls_100: int, log: IO[str], workdir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"calls": calls, "calls_100": calls_100, "targets": {}}
    redis, url = _redis(workdir, log)
    try:
        for name, count, redis_url in (("single", 1, None), ("single-redis", 1, url), ("three-redis", 3, url)):
            with ExitStack() as stack:
                urls = _replicas(stack, workdir, name, count, redis_url, log)
                results["targets"][name] = await _target(urls, calls, calls_100)
    finally:
        redis.kill()
        redis.wait()
    targets = results["targets"]
    results["redis_hop_ms"] = round(targets["three-redis"]["p50_ms"] - targets["single-redis"]["p50_ms"], 3)
    results["redis_limits_ms"] = round(targets["single-redis"]["p50_ms"] - targets["single"]["p50_ms"], 3)
    return results


def describe(results: dict[str, Any]) -> str:
    lines = [f"replicas: a 2026-07-28 call with one elicitation, {results['calls']} sequential calls, "
             f"{results['calls_100']} at concurrency {CONCURRENCY}"]
    for name, row in results["targets"].items():
        lines.append(f"  {name}: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms; "
                     f"{row['calls_per_s_at_100']} calls/s at concurrency {CONCURRENCY}")
    lines.append(f"  Redis with one replica (shared limits) adds {results['redis_limits_ms']} ms to the p50; the retry "
                 f"forwarded to the call's replica (the Redis hop) adds {results['redis_hop_ms']} ms more")
    return "\n".join(lines)


def main() -> None:
    run_alone("bench.replicas", __doc__, measure, describe, calls=200, calls_100=500)


if __name__ == "__main__":
    main()
