"""A stdio server started with `Popen` (`upstreams.prespawn`), taken over on the event loop.

Its stdout and stdin become asyncio pipe transports, read by a `wire.stdio.LineReader` (each line parsed in the
read callback and handed to the endpoint, no task woken per message) and written straight to the transport:
`AdoptedProcess.wire` is the connection's `PipeWire`, the same as the stdio face's. For the SDK's shutdown it has
the shape of the process the SDK's spawn returns (an anyio `Process`: its pipes as byte streams, its state read
from `Popen`).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess

import anyio
import anyio.abc
import anyio.lowlevel

from elicitgate.wire.stdio import LineReader, PipeWire, WriteFlow

EXIT_POLL_INTERVAL = 0.01


async def adopt(popen: subprocess.Popen[bytes]) -> AdoptedProcess:
    """`popen` (started with pipes for stdin and stdout) on the running event loop."""
    assert popen.stdin is not None and popen.stdout is not None, "started with pipes"
    loop = asyncio.get_running_loop()
    reader = LineReader()
    flow = WriteFlow()
    await loop.connect_read_pipe(lambda: reader, popen.stdout)
    write_transport, _ = await loop.connect_write_pipe(lambda: flow, popen.stdin)
    return AdoptedProcess(popen, PipeWire(reader, write_transport, flow), _PipeWriter(write_transport, flow),
                          _PipeReader(reader))


class _PipeReader(anyio.abc.ByteReceiveStream):
    """The server's stdout as a byte stream (the SDK's shutdown drains and closes it); the wire reads it as lines."""

    def __init__(self, reader: LineReader) -> None:
        self._reader = reader

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._reader.receive_raw()

    async def aclose(self) -> None:
        self._reader.close()
        await anyio.lowlevel.checkpoint()


class _PipeWriter(anyio.abc.ByteSendStream):
    """The server's stdin as a byte stream (the SDK's shutdown closes it)."""

    def __init__(self, transport: asyncio.WriteTransport, flow: WriteFlow) -> None:
        self._transport = transport
        self._flow = flow
        self._closed = False

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._flow.lost or self._transport.is_closing():  # the server closed its stdin or exited
            raise anyio.BrokenResourceError
        self._transport.write(item)
        if not self._flow.writable.is_set():
            await self._flow.writable.wait()

    async def aclose(self) -> None:
        self._closed = True
        self._transport.close()  # what is buffered is written first
        await anyio.lowlevel.checkpoint()


class AdoptedProcess(anyio.abc.Process):
    """An anyio `Process` over a `Popen`: its pid, exit code and signals, and the pipes above."""

    def __init__(
        self, popen: subprocess.Popen[bytes], wire: PipeWire, stdin: _PipeWriter, stdout: _PipeReader
    ) -> None:
        self._popen = popen
        self.wire = wire
        """The connection's messages over the server's pipes."""
        self._stdin = stdin
        self._stdout = stdout

    async def wait(self) -> int:
        # Polled, as the SDK waits for a server (an asyncio watcher only knows the processes asyncio started).
        while (code := self._popen.poll()) is None:
            await anyio.sleep(EXIT_POLL_INTERVAL)
        return code

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: signal.Signals) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None  # the pump of `prespawn` reads it

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._stdin.aclose()
            await self._stdout.aclose()
            await self.wait()
