"""A stdio server started before the event loop (`upstreams.prespawn`), taken over on it.

`adopt` gives it the shape of the process the SDK's spawn returns (an anyio `Process`), so the stdio
wire and the SDK's shutdown work on it unchanged: its stdout and stdin become asyncio pipe transports,
as asyncio connects the pipes of a process it starts itself, and its state is read from `Popen`.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess

import anyio
import anyio.abc
import anyio.lowlevel

PIPE_LIMIT = 1 << 16
"""The stdout buffer's high-water mark, as asyncio's own subprocess pipes."""
EXIT_POLL_INTERVAL = 0.01


async def adopt(popen: subprocess.Popen[bytes]) -> AdoptedProcess:
    """`popen` (started with pipes for stdin and stdout) on the running event loop."""
    assert popen.stdin is not None and popen.stdout is not None, "started with pipes"
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=PIPE_LIMIT, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), popen.stdout
    )
    write_transport, flow = await loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop), popen.stdin)
    writer = asyncio.StreamWriter(write_transport, flow, None, loop)
    return AdoptedProcess(popen, _PipeWriter(writer), _PipeReader(reader, read_transport))


class _PipeReader(anyio.abc.ByteReceiveStream):
    """The server's stdout, as anyio's wrapper of an asyncio subprocess's."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._reader.set_exception(anyio.ClosedResourceError())  # a read in progress ends with it
        self._transport.close()
        await anyio.lowlevel.checkpoint()


class _PipeWriter(anyio.abc.ByteSendStream):
    """The server's stdin, as anyio's wrapper of an asyncio subprocess's."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False

    async def send(self, item: bytes) -> None:
        try:
            self._writer.write(item)
            await self._writer.drain()
        except (ConnectionResetError, BrokenPipeError) as exc:  # the server closed its stdin or exited
            raise (anyio.ClosedResourceError if self._closed else anyio.BrokenResourceError) from exc

    async def aclose(self) -> None:
        self._closed = True
        self._writer.close()  # what is buffered is written first
        await anyio.lowlevel.checkpoint()


class AdoptedProcess(anyio.abc.Process):
    """An anyio `Process` over a `Popen`: its pid, exit code and signals, and the pipes above."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: _PipeWriter, stdout: _PipeReader) -> None:
        self._popen = popen
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
