"""An `mcp` SDK server (MCPServer) over streamable HTTP with an event store, for resumption tests.

Run: `python -m tests.peers.resumable_server --http HOST:PORT`. Its one tool, `interrupted {text}`,
closes its own response stream 0.2 s in (the SDK's `ctx.close_sse_stream()`, the polling pattern of SEP-1699),
waits, then answers `text`: a client gets the answer only by reconnecting with `Last-Event-ID`.
Events are kept in memory; the priming event says `retry: 100` ms.
"""

from __future__ import annotations

import argparse
import itertools

import anyio
import uvicorn
from mcp_types import JSONRPCMessage

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

from elicitgate.hostport import parse_hostport


class MemoryEvents(EventStore):
    """Every event of every stream, in order, in memory."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for e, s, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in self._events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


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
    app = build().streamable_http_app(event_store=MemoryEvents(), retry_interval=100, host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")
