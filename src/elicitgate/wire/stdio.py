"""The wires on pipes, one JSON-RPC message per line, written and parsed here with nothing between: a stdio
server's (`StdioWire`, on the process `upstreams.transports` spawns) and the stdio face's own stdin and stdout
(`PipeWire`, on the asyncio pipe transports `faces.stdio_pipes` opens).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping

import anyio

from mcp.os.win32.utilities import ServerProcess

from elicitgate.json_shapes import JsonObject
from elicitgate.wire import codec
from elicitgate.wire.base import Inbound
from elicitgate.wire.framing import LineBuffer

READ_CHUNK = 1 << 16


class StdioWire:
    """A stdio server's pipes: one JSON-RPC message per line, written and parsed here, nothing between."""

    def __init__(self, process: ServerProcess) -> None:
        assert process.stdin is not None and process.stdout is not None, "spawned with pipes"
        self._stdin = process.stdin
        self._stdout = process.stdout

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        line = codec.dumps_line(message)
        try:
            await self._stdin.send(line)
        except OSError as exc:  # the server closed its stdin or exited
            raise anyio.BrokenResourceError from exc

    async def messages(self) -> AsyncGenerator[Inbound]:
        lines = LineBuffer()
        while True:
            try:
                chunk = await self._stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return
            for message in lines.feed(chunk):
                yield Inbound(message)


class PipeWire:
    """One JSON-RPC message per line: a line is parsed by the task that reads it and written by the task
    that sends it."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.WriteTransport, flow: WriteFlow) -> None:
        self._reader = reader
        self._transport = transport
        self._flow = flow

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        if self._flow.lost or self._transport.is_closing():
            raise anyio.BrokenResourceError("stdout is closed")
        self._transport.write(codec.dumps_line(message))
        if not self._flow.writable.is_set():
            await self._flow.writable.wait()

    async def messages(self) -> AsyncGenerator[Inbound]:
        lines = LineBuffer()
        while True:
            chunk = await self._reader.read(READ_CHUNK)
            if not chunk:
                last = lines.end()  # a last line without its newline
                if last is not None:
                    yield Inbound(last)
                return
            for message in lines.feed(chunk):
                yield Inbound(message)


class WriteFlow(asyncio.Protocol):
    """Write-side flow control: `writable` is clear while the pipe's buffer is full."""

    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()
        self.lost = False
        self.gone = asyncio.Event()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.writable.set()
        self.gone.set()
