"""The process's stdin and stdout as the face's `MessageWire` (`wire.stdio.PipeWire`), on asyncio pipe transports.

The SDK's `stdio_server` moves every line through anyio worker threads (a thread hop and a queue
per line each way, about a quarter of the gateway's CPU on the stdio face). Here the event loop
reads and writes the pipes itself: a line is parsed in the read callback, which hands it to the
endpoint (`wire.stdio.LineReader`), and written by the task that sends it, with no task or thread in
between. When stdin or stdout is not a pipe, a socket or a terminal (a regular file, /dev/null), the SDK's
transport serves instead.

Like the SDK's, while serving fd 0 reads the null device and fd 1 writes to stderr, so a stray
`print` or a child that inherits them cannot corrupt the wire; both are restored on exit.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio

from mcp.server.stdio import stdio_server

from elicitgate.wire.base import MessageWire
from elicitgate.wire.sdk_streams import SdkStreamsWire
from elicitgate.wire.stdio import LineReader, PipeWire, WriteFlow

CLOSE_TIMEOUT = 2.0
"""Seconds to finish writing buffered lines on exit, for a client that stopped reading."""


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on `fd`: a pipe, a socket or a terminal (not a regular file or
    /dev/null, which epoll refuses). On a terminal the SDK's transport would read in a worker thread that
    Ctrl-C cannot stop."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


@asynccontextmanager
async def stdio_wire() -> AsyncGenerator[MessageWire]:
    """The client's messages over fds 0 and 1, one JSON-RPC message per line."""
    if not (_pollable(0) and _pollable(1)):
        async with stdio_server() as (read_stream, write_stream):
            yield SdkStreamsWire(read_stream, write_stream)
        return
    loop = asyncio.get_running_loop()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = LineReader()
    flow = WriteFlow()
    read_transport: asyncio.ReadTransport | None = None
    write_transport: asyncio.WriteTransport | None = None
    # Each transport gets a descriptor of its own to close: uvloop's close the descriptor they are given,
    # asyncio's close the file object (so there it owns the descriptor). `wire_in` / `wire_out` stay ours.
    owns = isinstance(loop, asyncio.BaseEventLoop)
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: reader, open(os.dup(wire_in), "rb", buffering=0, closefd=owns)
        )
        write_transport, _ = await loop.connect_write_pipe(
            lambda: flow, open(os.dup(wire_out), "wb", buffering=0, closefd=owns)
        )
        yield PipeWire(reader, write_transport, flow)
    finally:
        if read_transport is not None:
            read_transport.close()
        if write_transport is not None:
            write_transport.close()  # writes what is buffered, then lets go of the pipe
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await flow.gone.wait()
            if not flow.gone.is_set():
                write_transport.abort()
        for fd, wire in ((1, wire_out), (0, wire_in)):
            os.set_blocking(wire, True)
            os.dup2(wire, fd)
            os.close(wire)
