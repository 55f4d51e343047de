"""Profile of the gateway's hot path: py-spy samples the gateway process (attached by pid, without
pausing it, only the thread holding the GIL: CPU spent in Python, not waiting) while a client makes
sequential elicitation round trips through it, over stdio and over streamable HTTP (handshake era).
The raw samples are kept (`profile-*.txt`, py-spy's folded "raw" format: one stack and its count a
line); the summary is where the CPU time goes.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any

from mcp import Client

from bench import configs
from bench.latency import TOOLS, _answer, call
from bench.procs import HttpProcess, find_child, free_port, stdio_transport

PY_SPY = str(Path(sys.executable).with_name("py-spy"))
RATE = 250
WARMUP = 20


LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("face: SDK stdio server (stdin/stdout through worker threads)", ("mcp/server/stdio",)),
    ("face: elicitgate's stdio pipes (asyncio)", ("elicitgate/faces/stdio_pipes", "PipeWire.", "WriteFlow.")),
    ("face: uvicorn + h11", ("uvicorn/", "h11/")),
    ("face: starlette + sse_starlette", ("starlette/", "sse_starlette/")),
    ("face: SDK streamable HTTP server transport", ("mcp/server/streamable_http",)),
    ("SDK server runner", ("mcp/server/runner", "mcp/server/lowlevel")),
    ("JSON-RPC dispatcher", ("mcp/shared/jsonrpc_dispatcher",)),
    ("upstream: HTTP wire (elicitgate's, the SDK's before) + httpx2/httpcore2",
     ("elicitgate/wire/http", "mcp/client/streamable_http", "httpx2/", "httpcore2/")),
    ("upstream: SDK stdio client", ("mcp/client/stdio",)),
    ("elicitgate's own code", ("elicitgate/",)),
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("jsonschema (answer check)", ("jsonschema/", "referencing/")),
    ("logging", ("logging/",)),
)
"""Inclusive layers: a sample counts for every layer on its stack (so they add up to more than 100%). A prefix
is a file's path or a function's name (the stdio face's `PipeWire` shares `wire/stdio.py` with the upstreams'
`StdioWire`)."""


def _where(frame: str) -> tuple[str, str]:
    """(`function (file)` without the line, file path) of a py-spy frame."""
    match = re.match(r"(.*) \((.*?)(?::\d+)?\)$", frame)
    if not match:
        return frame, frame
    name, path = match.groups()
    return f"{name} ({path})", path


def summarize(raw: Path, *, calls: int | None = None, top: int = 12) -> dict[str, Any]:
    """Where the gateway's CPU goes: self time by package and function, inclusive time by layer."""
    by_package: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    by_layer: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [_where(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += n
        function, path = frames[-1]
        by_package[path.split("/")[0]] += n
        by_function[function] += n
        named = [(f, p) for f, p in frames if not p.startswith("elicitgate/cli")]
        for layer, prefixes in LAYERS:
            if any(p.startswith(prefixes) or f.startswith(prefixes) for f, p in named):
                by_layer[layer] += n

    def share(counter: Counter[str], limit: int = top) -> list[list[Any]]:
        return [[name, round(100 * n / total, 1)] for name, n in counter.most_common(limit)] if total else []

    summary: dict[str, Any] = {"samples": total, "layers_inclusive_pct": share(by_layer, len(LAYERS)),
                               "self_by_package_pct": share(by_package), "self_by_function_pct": share(by_function)}
    if calls:
        summary["cpu_ms_per_call"] = round(total / RATE / calls * 1000, 2)
    return summary


async def _profile(client: Client, prefix: str, pid: int, calls: int, out: Path) -> dict[str, Any]:
    name, arguments = TOOLS["elicit"]
    for _ in range(WARMUP):
        await call(client, prefix + name, arguments)
    spy = subprocess.Popen(
        [PY_SPY, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "--output", str(out),
         "--nonblocking", "--gil", "--duration", "600"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        for _ in range(calls):
            await call(client, prefix + name, arguments)
    finally:
        spy.send_signal(signal.SIGINT)
        _, err = spy.communicate(timeout=60)
    if not out.exists():
        return {"error": f"py-spy wrote nothing: {err.strip()[-500:]}"}
    return {"calls": calls, "raw": out.name, **summarize(out, calls=calls)}


async def run(calls: int, log: IO[str], workdir: Path, results: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    stdio_config = configs.write_config(workdir, "profile-stdio",
                                        configs.gateway_config({"demo": configs.stdio_upstream("handshake")}))
    async with Client(stdio_transport(configs.gateway_argv(stdio_config), log), mode="legacy",
                      elicitation_callback=_answer) as client:
        pid = find_child(str(stdio_config))
        found["stdio"] = await _profile(client, "demo__", pid, calls, results / "profile-stdio.txt")
    up_port, gw_port = free_port(), free_port()
    async with AsyncExitStack() as stack:
        upstream = stack.enter_context(HttpProcess(configs.demo_argv(f"127.0.0.1:{up_port}"), up_port, log))
        http_config = configs.write_config(
            workdir, "profile-http", configs.gateway_config({"demo": configs.http_upstream(f"{upstream.url}/mcp",
                                                                                          "handshake")}))
        gateway = stack.enter_context(HttpProcess(configs.gateway_argv(http_config, f"127.0.0.1:{gw_port}"), gw_port,
                                                  log, ready_path="/healthz"))
        client = await stack.enter_async_context(Client(f"{gateway.url}/mcp", mode="legacy",
                                                        elicitation_callback=_answer))
        found["http"] = await _profile(client, "demo__", gateway.pid, calls, results / "profile-http.txt")
    return found


if __name__ == "__main__":  # `python -m bench.hotpath RAW` re-summarizes a saved profile
    import json

    print(json.dumps(summarize(Path(sys.argv[1])), indent=2))
