"""Instructions per upstream request on the gateway's side, counted by valgrind's callgrind, before / after:
`python -m bench.upstream_instructions [--base REF] [--part response|request|needed] [--n N]`.

In a process of its own per side (`src/` as committed at `--base`, default `main`, and the work tree), under
`valgrind --tool=callgrind`, one piece of the upstream side of a call run `N` times and `3 N` times, in memory, on
uvloop as the gateway runs: the difference over `2 N` is the piece's instructions, the process's start-up and the
loop's set-up cancelled out. Parts: `response` (a request written at once by `wire.http_client.HttpClient.start` on a
kept-alive connection of a stand-in socket, and its JSON answer, head and body in one read, streamed to a sink: what a
2026-07-28 upstream's answer costs in the client), `request` (`UpstreamConnection.request` on a 2026-07-28 connection
whose endpoint answers at once: the stamp, the clock, the in-flight entry), `needed` (`GatewayAsks.needed` for a
listed tool with a required argument given: the check every tools/call makes). Instruction counts do not move with
the machine's load, unlike CPU time; a timer or the audit's commit, which do, play no part here. Needs valgrind.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

from bench import configs
from bench.ab import sources_to_compare

CHILD = r"""
import asyncio, sys
import uvloop
sys.path.insert(0, SRC)
PART, N = sys.argv[1], int(sys.argv[2])

def response():
    from elicitgate.wire import http_client
    from elicitgate.wire.http_client import HttpClient, Url

    class Socket(asyncio.Transport):
        def get_extra_info(self, name, default=None): return default
        def write(self, data): pass
        def is_closing(self): return False
        def get_write_buffer_size(self): return 0
        def get_write_buffer_limits(self): return (16384, 65536)

    class Sink:
        def body(self, chunk): pass
        def ended(self, error): assert error is None

    class Listener:
        def head(self, response): response.stream(Sink())
        def failed(self, error, retry): raise AssertionError(error)

    url = Url.parse("http://upstream.test/mcp")
    answer = b'{"jsonrpc":"2.0","id":"eg-13","result":{"content":[{"text":"ok","type":"text"}],"isError":false}}'
    read = (b"HTTP/1.1 200 OK\r\ndate: Fri, 27 Nov 2026 17:54:02 GMT\r\nserver: uvicorn\r\ncontent-length: %d\r\n"
            b"content-type: application/json\r\n\r\n" % len(answer)) + answer
    headers = {"content-type": "application/json"}

    async def main():
        client = HttpClient()
        listener = Listener()
        connection = http_client._Connection(client, url.origin)
        connection.connection_made(Socket())
        client.release(connection)
        for _ in range(N):
            client.start("POST", url, headers, b"{}", listener)
            connection.data_received(read)

    uvloop.run(main())

def request():
    from elicitgate.config import HttpServer
    from elicitgate.upstreams.connection import Negotiated, UpstreamConnection

    class Answering:
        def __init__(self, loop): self.loop = loop
        def asking(self, request_id, method, params, **_):
            future = self.loop.create_future()
            future.set_result({"content": []})
            return future
        def asked_over(self, request_id, headers): pass

    async def main():
        config = HttpServer(url="http://upstream.test/mcp")
        conn = UpstreamConnection("modern", config, Answering(asyncio.get_running_loop()))
        conn.negotiated = Negotiated("modern", "2026-07-28", {}, None, None)
        params = {"name": "echo", "arguments": {"text": "hi"}}
        for _ in range(N):
            await conn.request("tools/call", params, timeout=30)

    uvloop.run(main())

def needed():
    from types import SimpleNamespace
    from elicitgate.config import build_config
    from elicitgate.router.asks import GatewayAsks
    from elicitgate.router.catalog import Catalog

    config = build_config({"mcpServers": {"demo": {"command": "true"}}}, "bench", environ={})
    catalog = Catalog(["demo"], config.namespacing)
    catalog.update("demo", {"tools": [{"name": "echo", "inputSchema": {"type": "object", "required": ["text"]}}]})
    asks = GatewayAsks(config, catalog, SimpleNamespace(broker=None))
    item = catalog.find("tools", "demo", "echo")
    params = {"name": "echo", "arguments": {"text": "hi"}}
    for _ in range(N):
        assert asks.needed("tools", "demo", "echo", item, params) is None

{"response": response, "request": request, "needed": needed}[PART]()
"""

COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(src: Path, part: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as work:
        script = Path(work) / "child.py"
        script.write_text(f"SRC = {str(src)!r}\n" + CHILD)
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/out", configs.PY, str(script), part, str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
    found = COLLECTED.search(done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.upstream_instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--part", choices=("response", "request", "needed"), action="append")
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    sources = sources_to_compare(args.base)
    print(f"instructions per piece (valgrind callgrind; ({args.n * 3} runs - {args.n} runs) / {args.n * 2})")
    print("| part | base | work | change |\n|---|---:|---:|---:|")
    for part in args.part or ("response", "request", "needed"):
        each = {
            label: (instructions(src, part, args.n * 3) - instructions(src, part, args.n)) / (args.n * 2)
            for label, src in sources.items()
        }
        base, work = each["base"], each["work"]
        print(f"| {part} | {base:,.0f} | {work:,.0f} | {(work - base) / base:+.1%} |")


if __name__ == "__main__":
    main()
