"""The lean relay for stdio MCP: `python -m bench.lean_relay COMMAND [ARGS...]`.

It starts COMMAND and moves every newline-delimited JSON-RPC message between its own stdin/stdout and
COMMAND's, each parsed with `orjson.loads` and written again with `orjson.dumps`, and nothing else: no
routing, no ids rewritten, no checks, no task per message. Everything runs in protocol callbacks on uvloop:
its own stdin and stdout through `connect_read_pipe` / `connect_write_pipe`, COMMAND's pipes through
`subprocess_exec` with a `SubprocessProtocol` (COMMAND's stderr is this process's). It is the lowest floor
for anything written in Python between a client and a server over stdio (`bench.bare_relay` is the same job
on asyncio streams and the standard `json`); `bench.floor` and `bench.latency` measure it beside the direct
call and elicitgate.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from typing import Protocol, cast

import orjson
import uvloop


class Lines:
    """Splits a byte stream into lines and writes each one, parsed and serialised again, to `out`."""

    def __init__(self, out: Callable[[bytes], None]) -> None:
        self.out = out
        self.pending = bytearray()

    def feed(self, data: bytes) -> None:
        if not self.pending and data.endswith(b"\n") and data.count(b"\n") == 1:  # the usual case: one whole line
            if data.strip():
                self.out(orjson.dumps(orjson.loads(data)) + b"\n")
            return
        self.pending += data
        if b"\n" not in data:  # part of a long line: wait for its end (without scanning what came before again)
            return
        start = 0
        out: list[bytes] = []
        while (end := self.pending.find(b"\n", start)) >= 0:
            line = self.pending[start:end]
            if line.strip():
                out.append(orjson.dumps(orjson.loads(line)))
            start = end + 1
        if start:
            del self.pending[:start]
        if out:
            self.out(b"\n".join(out) + b"\n")


class Feed(Protocol):
    """What a pipe's bytes are fed to: `Lines` here, or another relay's splitter (`bench.lean_work_relay`)."""

    def feed(self, data: bytes) -> None: ...


class ClientSide(asyncio.Protocol):
    """This process's stdin: its bytes go to `lines` (here, each line to the server's stdin); at EOF the server's
    stdin closes."""

    def __init__(self, server: ServerSide, lines: Feed) -> None:
        self.server = server
        self.lines = lines

    def data_received(self, data: bytes) -> None:
        self.lines.feed(data)

    def eof_received(self) -> bool:
        self.server.close_stdin()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.close_stdin()


class ServerSide(asyncio.SubprocessProtocol):
    """COMMAND's pipes: its stdout's bytes go to `lines` (here, each line to this process's stdout); `done` resolves
    with its exit code."""

    def __init__(self, lines: Feed, done: asyncio.Future[int]) -> None:
        self.done = done
        self.lines = lines
        self.transport: asyncio.SubprocessTransport | None = None
        self.stdin: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.SubprocessTransport, transport)  # uvloop's transports subclass no asyncio ABC
        self.stdin = cast(asyncio.WriteTransport, self.transport.get_pipe_transport(0))

    def write(self, data: bytes) -> None:
        if self.stdin is not None and not self.stdin.is_closing():
            self.stdin.write(data)

    def close_stdin(self) -> None:
        if self.stdin is not None:
            self.stdin.close()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.lines.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:  # after the process exited and its pipes closed
        assert self.transport is not None
        if not self.done.done():
            self.done.set_result(self.transport.get_returncode() or 0)

    def signal(self, signum: int) -> None:
        if self.transport is not None and self.transport.get_returncode() is None:
            self.transport.send_signal(signum)


class Output(asyncio.Protocol):
    """This process's stdout: `closed` resolves once the pipe has closed (its buffer written out first)."""

    def __init__(self, closed: asyncio.Future[None]) -> None:
        self.closed = closed

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def relay(
    argv: list[str],
    server_lines: Callable[[Callable[[bytes], None]], Feed] = Lines,
    client_lines: Callable[[Callable[[bytes], None]], Feed] = Lines,
) -> int:
    """Relay between this process's stdio and COMMAND's; `server_lines` and `client_lines` split what each side writes
    (`bench.cpu_price` gives its own)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    closed: asyncio.Future[None] = loop.create_future()
    stdout, _ = await loop.connect_write_pipe(lambda: Output(closed), sys.stdout.buffer)
    _, server = await loop.subprocess_exec(lambda: ServerSide(server_lines(stdout.write), done), *argv, stderr=None)
    await loop.connect_read_pipe(lambda: ClientSide(server, client_lines(server.write)), sys.stdin.buffer)
    for signum in (signal.SIGINT, signal.SIGTERM):  # passed on to the server; the relay exits after it
        loop.add_signal_handler(signum, server.signal, signum)
    code = await done
    stdout.close()  # after what the server wrote last is out
    await closed
    return code


def main() -> None:
    sys.exit(uvloop.run(relay(sys.argv[1:])))


if __name__ == "__main__":
    main()
