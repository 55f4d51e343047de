"""The `mcp` SDK's transports as `MessageWire`s: the one place where a wire meets the SDK's message models.

An SDK transport (the legacy SSE client `upstreams.transports` opens; `stdio_server`, which the stdio face
falls back on when its fds are not pipes) hands over memory streams of `SessionMessage`; `SdkStreamsWire`
turns them into the JSON-RPC dicts the endpoint reads, with the same rule for NaN and Infinity as the
gateway's own wires.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from mcp.shared.message import ClientMessageMetadata, ServerMessageMetadata, SessionMessage

from elicitgate.json_shapes import JsonObject
from elicitgate.wire import codec
from elicitgate.wire.base import Inbound
from elicitgate.wire.framing import with_non_finite


class SdkStreamsWire:
    """An SDK transport's `(read, write)` streams of `SessionMessage`, as JSON-RPC dicts."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        metadata = ClientMessageMetadata(headers=dict(headers)) if headers else None
        await self._write.send(SessionMessage(_model_of(message), metadata=metadata))

    async def messages(self) -> AsyncGenerator[Inbound]:
        try:
            async with self._read:
                async for item in self._read:
                    if isinstance(item, Exception):
                        yield Inbound(ValueError(f"an unreadable message ({item})"))
                        continue
                    metadata = item.metadata
                    related = metadata.related_request_id if isinstance(metadata, ServerMessageMetadata) else None
                    yield Inbound(_finite(_dict_of(item.message)), related)
        finally:
            await self._write.aclose()


def _model_of(message: JsonObject) -> JSONRPCMessage:
    """The SDK's model of a message the endpoint built (so unvalidated: it is ours)."""
    fields = {key: value for key, value in message.items() if key != "error"}
    if "method" in message:
        return (JSONRPCRequest if "id" in message else JSONRPCNotification).model_construct(**fields)
    if "error" in message:
        return JSONRPCError.model_construct(**fields, error=ErrorData.model_construct(**message["error"]))
    return JSONRPCResponse.model_construct(**fields)


def _finite(message: JsonObject) -> JsonObject | Exception:
    """The SDK's parser (pydantic) reads NaN and Infinity, which our own wires refuse (`with_non_finite`):
    the same rule here. The walk costs little beside the SDK's modelling of the same message."""
    if codec.first_non_finite(message) is None:
        return message
    return with_non_finite(message, "message", b"")


def _dict_of(message: JSONRPCMessage) -> JsonObject:
    if isinstance(message, JSONRPCRequest):
        return {"jsonrpc": "2.0", "id": message.id, "method": message.method, "params": message.params}
    if isinstance(message, JSONRPCNotification):
        return {"jsonrpc": "2.0", "method": message.method, "params": message.params}
    if isinstance(message, JSONRPCResponse):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    error = message.error
    return {
        "jsonrpc": "2.0", "id": message.id,
        "error": {"code": error.code, "message": error.message, "data": error.data},
    }
