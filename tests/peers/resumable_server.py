"""An `mcp` SDK server (MCPServer) over streamable HTTP with an event store, for resumption tests.

Run: `python -m tests.peers.resumable_server --http HOST:PORT`. Its one tool, `interrupted {text}`,
closes its own response stream 0.2 s in (the SDK's `ctx.close_sse_stream()`, the polling pattern of SEP-1699),
waits, then answers `text`: a client gets the answer only by reconnecting with `Last-Event-ID`.
Events are kept in memory; the priming event says `retry: 100` ms.
"""

from __future__ import annotations

import argparse

import anyio
import uvicorn

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from elicitgate.hostport import parse_hostport
from tests.peers.event_store import MemoryEventStore


def build() -> MCPServer:
    server = MCPServer("resumable")

    @server.tool()
    async def interrupted(text: str, ctx: Context) -> str:
        await anyio.sleep(0.2)  # the priming event (its id) reaches the client first
        await ctx.close_sse_stream()
        await anyio.sleep(0.3)
        return text

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    host, port = parse_hostport(parser.parse_args().http)
    app = build().streamable_http_app(event_store=MemoryEventStore(), retry_interval=100, host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")
