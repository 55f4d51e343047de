"""What a POST whose event stream is held open costs the gateway's upstream HTTP side alone (`wire.http.HttpWire` on
`wire.http_client`), per stream: a pushed question's upstream POST, without the gateway around it.

Run: `python -m bench.held_posts [--streams 5000] [--trace] [--uvloop]`. A server in a process of its own answers
each POST with an event stream (chunked, as uvicorn sends one) carrying one `elicitation/create` and holds it open;
this process sends `--streams` requests through one `HttpWire`, takes the server's requests from `messages()` as
the endpoint would, and prints its RSS growth per held stream (without `--trace`: tracing costs memory itself), or
Python's traced growth per held stream and where it is (`--trace`). `--uvloop` runs on uvloop, as `elicitgate
serve` does on stdio (`bench.gateway_probe`, and so `bench.scale`, run on asyncio's own loop).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tracemalloc
from typing import Any

from elicitgate.wire.http import HttpWire

EVENT = b"event: message\ndata: " + json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
    "params": {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
}).encode() + b"\n\n"
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n")
BATCH = 500
"""Requests sent before waiting for their streams' first events (the server's listen backlog holds them)."""
WARM_UP = 50


class _Holding(asyncio.Protocol):
    """The server's side of one connection: every request answered with a stream that stays open."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            self.transport.write(HEAD + b"%x\r\n" % len(EVENT) + EVENT + b"\r\n")


async def _serve() -> None:
    server = await asyncio.get_running_loop().create_server(_Holding, "127.0.0.1", 0, backlog=16384)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


async def _measure(port: int, streams: int, trace: bool) -> dict[str, Any]:
    wire = HttpWire(f"http://127.0.0.1:{port}/mcp")
    asked = 0

    async def endpoint() -> None:
        nonlocal asked
        async for _ in wire.messages():
            asked += 1

    async def send(count: int, prefix: str) -> None:
        sent = asked
        for i in range(count):
            await wire.send({"jsonrpc": "2.0", "id": f"{prefix}{i}", "method": "tools/call",
                             "params": {"name": "confirm", "arguments": {"question": "Proceed?"}}})
            if (i + 1) % BATCH == 0 or i + 1 == count:
                while asked < sent + i + 1:
                    await asyncio.sleep(0.01)

    reader = asyncio.get_running_loop().create_task(endpoint())
    try:
        await send(WARM_UP, "w")
        gc.collect()
        if trace:
            tracemalloc.start()
        before_traced = tracemalloc.take_snapshot() if trace else None
        before = _rss_kb()
        await send(streams, "eg-")
        gc.collect()
        found: dict[str, Any] = {"streams": streams, "loop": type(asyncio.get_running_loop()).__module__,
                                 "connections": wire._client.connections}  # pyright: ignore[reportPrivateUsage]
        if before_traced is None:
            found["rss_bytes_per_stream"] = round((_rss_kb() - before) * 1024 / streams)
        else:
            grown = tracemalloc.take_snapshot().compare_to(before_traced, "lineno")
            found["traced_bytes_per_stream"] = round(sum(stat.size_diff for stat in grown) / streams)
            found["by_line"] = [f"{round(stat.size_diff / streams)} B {stat.count_diff / streams:.2f} "
                                f"{stat.traceback[0].filename.rsplit('/', 2)[-1]}:{stat.traceback[0].lineno}"
                                for stat in grown[:15]]
        return found
    finally:
        reader.cancel()
        await wire.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.held_posts")
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    server = subprocess.Popen([sys.executable, "-m", "bench.held_posts", "--serve"], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        measure = _measure(port, args.streams, args.trace)
        if args.uvloop:
            import uvloop

            found = uvloop.run(measure)
        else:
            found = asyncio.run(measure)
    finally:
        server.kill()
        server.wait()
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
