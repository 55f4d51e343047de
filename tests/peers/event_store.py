"""An in-memory `EventStore` for the `mcp` SDK's streamable HTTP server: the test peers that resume streams
(tests/peers/resumable_server.py, tests/conformance/server.py) keep their events here."""

from __future__ import annotations

import itertools

from mcp_types import JSONRPCMessage

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore


class MemoryEventStore(EventStore):
    """Every SSE event of this process, replayable after a `Last-Event-ID` (SEP-1699)."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(next(self._ids))
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        for s, event_id, message in self._events:
            if s == stream and int(event_id) > int(last_event_id) and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream
