"""A bare Python relay for stdio MCP: `python -m bench.bare_relay COMMAND [ARGS...]`.

It starts COMMAND and moves every line between its own stdin/stdout and COMMAND's, parsing each line as
JSON and serialising it again on the way, on uvloop and asyncio pipes as the gateway does, and nothing
else: no routing, no ids rewritten, no checks. It is the floor for anything written in Python that sits
between a client and a server over stdio (`bench.floor` measures it beside the direct call and
elicitgate).
"""

from __future__ import annotations

import asyncio
import json
import sys

import uvloop

LINE_LIMIT = 1 << 26
"""The longest line it relays, each way (64 MB: `bench.big_message` sends tens of megabytes)."""


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter | asyncio.WriteTransport) -> None:
    while line := await source.readline():
        sink.write(json.dumps(json.loads(line), separators=(",", ":")).encode() + b"\n")


async def relay(argv: list[str]) -> int:
    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT
    )
    assert child.stdin is not None and child.stdout is not None
    stdin = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    stdout, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    client_done = asyncio.ensure_future(_pump(stdin, child.stdin))
    client_done.add_done_callback(lambda _: child.stdin.close() if child.stdin is not None else None)
    await _pump(child.stdout, stdout)  # until the server exits (after its stdin closed with the client's)
    client_done.cancel()
    return await child.wait()


def main() -> None:
    sys.exit(uvloop.run(relay(sys.argv[1:])))


if __name__ == "__main__":
    main()
