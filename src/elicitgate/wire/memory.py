"""Two connected `MessageWire`s in memory (`memory_wires`), for unit tests of the core: what one end sends, the
other reads, in order, with the headers it was sent with. No bytes: messages pass as the dicts they are (a test
that needs the codec's refusals wraps a `send`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp_types import RequestId

from elicitgate.json_shapes import JsonObject
from elicitgate.wire.base import Inbound

Sent = tuple[Inbound, Mapping[str, str] | None]
"""One message on its way, and the HTTP headers it was sent with."""


class MemoryWire:
    """One end of two connected wires. `close` ends the other end's `messages` once it has read what was sent;
    `say` sends what a transport would hand the endpoint besides a plain message (a related request id, an
    error response made up because the answer can no longer come, or an unreadable message)."""

    def __init__(self, outgoing: MemoryObjectSendStream[Sent], incoming: MemoryObjectReceiveStream[Sent]) -> None:
        self._outgoing = outgoing
        self._incoming = incoming

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        await self._outgoing.send((Inbound(message), headers))

    async def messages(self) -> AsyncGenerator[Inbound]:
        async for inbound, _ in self._incoming:
            yield inbound

    async def say(
        self, message: JsonObject | Exception, related: RequestId | None = None, *, lost: bool = False
    ) -> None:
        """Send `message` as a transport would hand it over: carried on the stream of request `related`, or made
        up by the transport (`lost`); an exception stands for what could not be read."""
        await self._outgoing.send((Inbound(message, related, lost), None))

    async def receive(self) -> tuple[JsonObject | Exception, Mapping[str, str] | None]:
        """The next message the other end sent, and its headers."""
        inbound, headers = await self._incoming.receive()
        return inbound.message, headers

    def receive_nowait(self) -> tuple[JsonObject | Exception, Mapping[str, str] | None]:
        """The next message the other end sent, and its headers; raises `anyio.WouldBlock` if none is waiting."""
        inbound, headers = self._incoming.receive_nowait()
        return inbound.message, headers

    @property
    def unread(self) -> int:
        """Messages the other end sent that this end has not read."""
        return self._incoming.statistics().current_buffer_used

    def close(self) -> None:
        """Stop sending: the other end's `messages` ends after what was sent."""
        self._outgoing.close()


def memory_wires(buffer: int = 100) -> tuple[MemoryWire, MemoryWire]:
    """Two wires, each reading what the other sends; a `send` waits while `buffer` messages are unread."""
    a_to_b, b_from_a = anyio.create_memory_object_stream[Sent](buffer)
    b_to_a, a_from_b = anyio.create_memory_object_stream[Sent](buffer)
    return MemoryWire(a_to_b, a_from_b), MemoryWire(b_to_a, b_from_a)
