"""The wires on pipes, one JSON-RPC message per line, written and parsed here with nothing between: the stdio
face's own stdin and stdout (`faces.stdio_pipes`) and a stdio server started with `Popen` (`upstreams.adopted`)
as `PipeWire`, on asyncio pipe transports with a `LineReader` protocol; a server the SDK spawned (where `Popen`
cannot, on Windows) as `StdioWire`, on its anyio streams.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping
from typing import Any, cast

import anyio

from mcp.os.win32.utilities import ServerProcess

from elicitgate.json_shapes import JsonObject
from elicitgate.wire import codec
from elicitgate.wire.base import Inbound, Sink
from elicitgate.wire.framing import MAX_LINE_BYTES, LineBuffer


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
    """One JSON-RPC message per line on asyncio pipe transports (the face's stdin and stdout, an adopted stdio
    server's stdout and stdin): a line is parsed in the event loop's read callback (`LineReader`) and written
    by the task that sends it. `push` hands each message to the endpoint right there, with no task between."""

    def __init__(self, reader: LineReader, transport: asyncio.WriteTransport, flow: WriteFlow) -> None:
        self._reader = reader
        self._transport = transport
        self._flow = flow

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        if self._flow.lost or self._transport.is_closing():
            raise anyio.BrokenResourceError("the pipe is closed")
        self._transport.write(codec.dumps_line(message))
        if not self._flow.writable.is_set():
            await self._flow.writable.wait()

    def send_now(self, message: JsonObject) -> bool:
        """Write `message` at once while the pipe takes writes (`wire.base.SendsAtOnce`); False, nothing written, while
        it is full or closed, or for a message `send` refuses (it says why)."""
        if self._flow.lost or self._transport.is_closing() or not self._flow.writable.is_set():
            return False
        try:
            line = codec.dumps_line(message)
        except (ValueError, TypeError):
            return False
        self._transport.write(line)
        return True

    def messages(self) -> AsyncIterator[Inbound]:
        return self._reader.messages()

    def push(self, sink: Sink) -> Coroutine[Any, Any, None]:
        return self._reader.push(sink)


READY_HIGH = 64
"""Messages read ahead of a reader that pulls them (`LineReader.messages`) before the pipe stops being read."""


class LineReader(asyncio.Protocol):
    """A read pipe's messages, one per line, parsed in the event loop's callback as the bytes come.

    Pushed (`push`, the endpoint's read loop): each message goes to the sink from `data_received` itself,
    no task woken per message; while the handling the sink returns for a message (an `inline` request,
    `initialize`) runs, the pipe is not read and what was already read waits its turn. Pulled (`messages`,
    to look at the first ones ahead of the endpoint): the messages queue, at most `READY_HIGH` before reading
    pauses. `receive_raw` reads the bytes unparsed instead (an adopted process's stdout, drained at its stop).
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._lines = LineBuffer(max_line)
        self._transport: asyncio.ReadTransport | None = None
        self._ready: deque[Inbound] = deque()
        """Read and parsed, not yet handed out."""
        self._sink: Sink | None = None
        self._context: contextvars.Context | None = None
        self._held: Coroutine[Any, Any, None] | None = None
        """The sink's handling of an inline message, which the pusher awaits before the next message."""
        self._holding = False
        """The pusher is handing out what waits (`_held`, `_ready`): what is read meanwhile queues behind it."""
        self._waiter: asyncio.Future[None] | None = None
        self._failed: BaseException | None = None
        self._paused = False
        self._raw: deque[bytes] | None = deque()
        """Bytes kept unparsed: until the wire is first read as messages, and once `receive_raw` takes over."""
        self.ended = False

    # -- the transport's callbacks ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)  # uvloop's subclass no asyncio ABC

    def data_received(self, data: bytes) -> None:
        if self._raw is not None:
            self._raw.append(data)
            self._wake()
            return
        messages = self._lines.feed(data)
        if messages:
            self._take(messages)

    def eof_received(self) -> bool | None:
        self._end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self._raw is None and (last := self._lines.end()) is not None:  # a last line without its newline
            self._take([last])
        self._wake()

    def _take(self, messages: list[JsonObject | Exception]) -> None:
        sink = self._sink
        if sink is None or self._holding or self._ready:
            self._ready.extend(Inbound(message) for message in messages)
            if sink is None and len(self._ready) >= READY_HIGH:
                self._pause()
            self._wake()
            return
        assert self._context is not None
        for i, message in enumerate(messages):
            try:
                held = self._context.run(sink, Inbound(message))
            except BaseException as exc:  # the pusher raises it, as a read loop would have
                self._failed = exc
                self._pause()
                self._wake()
                return
            if held is not None:
                self._held, self._holding = held, True
                self._ready.extend(Inbound(later) for later in messages[i + 1:])
                self._pause()
                self._wake()
                return

    def _pause(self) -> None:
        if not self._paused and self._transport is not None and not self.ended:
            self._paused = True
            self._transport.pause_reading()

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._transport is not None and not self.ended and not self._transport.is_closing():
                self._transport.resume_reading()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    # -- the reader's side -----------------------------------------------------------------

    def _as_lines(self) -> None:
        """From now on the bytes are read as messages, beginning with those that came before."""
        if self._raw is None:
            return
        unread, self._raw = self._raw, None
        for chunk in unread:
            if messages := self._lines.feed(chunk):
                self._take(messages)
        if self.ended and (last := self._lines.end()) is not None:
            self._take([last])

    async def push(self, sink: Sink) -> None:
        """Hand every message to `sink` until the pipe ends; a handling it returns is awaited before the next."""
        self._as_lines()
        self._sink, self._context = sink, contextvars.copy_context()
        try:
            while True:
                self._holding = True
                while self._held is not None or self._ready:
                    held, self._held = self._held, None
                    if held is None:
                        held = sink(self._ready.popleft())
                    if held is not None:
                        await held
                self._holding = False
                if self._failed is not None:
                    raise self._failed
                self._resume()
                if self.ended:
                    return
                await self._wait()
        finally:
            self._sink = self._context = self._held = None
            self._holding = False

    async def messages(self) -> AsyncGenerator[Inbound]:
        self._as_lines()
        while True:
            while self._ready:
                yield self._ready.popleft()
            self._resume()
            if self.ended:
                return
            await self._wait()

    async def receive_raw(self) -> bytes:
        """The next bytes read, unparsed (once messages are read, the messages pending are dropped);
        `anyio.EndOfStream` at the end."""
        if self._raw is None:
            self._raw = deque()
            self._ready.clear()
            self._resume()
        while not self._raw:
            if self.ended:
                raise anyio.EndOfStream
            await self._wait()
        return self._raw.popleft()

    def close(self) -> None:
        """Stop reading: the pipe is let go of and the reader ends."""
        if self._transport is not None:
            self._transport.close()
        self._end()


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
