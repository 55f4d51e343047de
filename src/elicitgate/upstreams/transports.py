"""Opening the wire to one upstream server: stdio, streamable HTTP or legacy SSE.

Each opener yields a `Wire` whose `messages` carry JSON-RPC dicts (`wire.base.MessageWire`). Stdio
(`wire.stdio.PipeWire` on the pipes of the process started here, `StdioWire` on one the SDK spawned) and
streamable HTTP (`wire.http.HttpWire`) run on the gateway's own wires; the SDK's legacy SSE transport is
adapted by `wire.sdk_streams.SdkStreamsWire`. On streamable HTTP a request or notification that the server sends
on the response stream of one of our POSTs is tagged with that POST's request id, so an upstream
`elicitation/create` can be traced to the exact call that caused it (design invariant 1).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio

from mcp.client.stdio import get_default_environment
from mcp.os.win32.utilities import ServerProcess

from elicitgate import _compat
from elicitgate.config import HttpServer, StdioServer
from elicitgate.upstreams import prespawn
from elicitgate.upstreams.adopted import AdoptedProcess, adopt
from elicitgate.upstreams.prespawn import STDERR_TAIL_LINES, StderrPump
from elicitgate.wire.base import MessageWire
from elicitgate.wire.sdk_streams import SdkStreamsWire
from elicitgate.wire.stdio import StdioWire

STANDALONE_WAIT = 5.0
"""Seconds a new session waits for its standalone GET stream to be answered before it carries calls."""


@dataclasses.dataclass
class Wire:
    """One upstream's messages, and what the transport knows of its set-up."""

    messages: MessageWire
    standalone_answered: anyio.Event | None = None
    """Streamable HTTP: set once the server answered the session's standalone GET (or the transport
    gave up on it). The SDK opens that stream after `notifications/initialized`, in the background."""

    async def standalone_settled(self) -> None:
        """Wait (at most `STANDALONE_WAIT`) until a new session's standalone stream is open.

        A server that asks on that stream (the TypeScript SDK's way, without `relatedRequestId`) drops
        what it sends before the stream is there: a call sent at once could lose its question.
        """
        if self.standalone_answered is not None:
            with anyio.move_on_after(STANDALONE_WAIT):
                await self.standalone_answered.wait()


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str], max_event_bytes: int) -> AsyncGenerator[Wire]:
    from elicitgate.wire.http import HttpWire  # see `open_transport`

    wire = HttpWire(url, headers, max_event_bytes=max_event_bytes)
    async with anyio.create_task_group() as watching:
        watching.start_soon(wire.watch)
        try:
            yield Wire(wire, wire.standalone_answered)
        finally:
            await wire.aclose()
            watching.cancel_scope.cancel()


@asynccontextmanager
async def _stdio(server: str | None, config: StdioServer, tail: deque[str]) -> AsyncGenerator[Wire]:
    process, stderr = await _start_stdio(server, config, tail)
    try:
        yield Wire(process.wire if isinstance(process, AdoptedProcess) else StdioWire(process))
    finally:
        # Shielded and bounded (the SDK's shutdown): a cancelled caller must not leave the server running.
        # Its stdout is drained meanwhile, so a server blocked writing can read its stdin's end and exit.
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as drain:
                drain.start_soon(_discard, process)
                await _compat.stop_stdio_server(process)
                drain.cancel_scope.cancel()
            await anyio.to_thread.run_sync(stderr.wait_drained)


async def _start_stdio(server: str | None, config: StdioServer, tail: deque[str]) -> tuple[ServerProcess, StderrPump]:
    """The server's process, and the pump of its stderr (last lines in `tail`): the one `prespawn` started
    for the server's first attempt, else a new one, started the same way (asyncio's pipes, `upstreams.adopted`).
    anyio's process streams put one more turn of the event loop on every write and read, ~25 us of the gateway's
    CPU per call (bench/README.md). Where `Popen` refuses, and on Windows, the SDK starts it and says why."""
    started = prespawn.claim(server, config) if server is not None else None
    if started is None and sys.platform != "win32":
        started = prespawn.spawn(server or config.command, config)
    if started is not None:
        started.stderr.keep_tail_in(tail)
        try:
            with anyio.CancelScope(shield=True):  # claimed: this connection is the one to stop it
                return await adopt(started.popen), started.stderr
        except BaseException:
            started.kill()
            raise
    stderr = StderrPump(tail)
    # The SDK merges `env` over its safe default environment, nothing else of ours.
    env = get_default_environment() | (config.env or {})
    try:
        return await _compat.spawn_stdio_server(config.command, config.args, env, stderr.child_end, config.cwd), stderr
    except FileNotFoundError as exc:
        if exc.filename is None:  # uvloop's spawn does not say which file (asyncio's, from subprocess, does)
            missing_cwd = config.cwd is not None and not os.path.isdir(config.cwd)
            exc.filename = str(config.cwd) if missing_cwd else config.command
        raise
    finally:
        stderr.close_child_end()


async def _discard(process: ServerProcess) -> None:
    assert process.stdout is not None
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        while True:
            await process.stdout.receive()


@asynccontextmanager
async def open_transport(
    config: StdioServer | HttpServer, stderr_tail: deque[str] | None = None, *, server: str | None = None
) -> AsyncGenerator[Wire]:
    """Open the wire to one upstream; raises `OSError` / `errors.HttpError` (httpx2's for legacy SSE) when it
    cannot. A stdio server's last lines of stderr are kept in `stderr_tail`; `server` names it, so its first
    attempt takes over the process `prespawn` started for it.

    The HTTP clients (`wire.http`; httpx2 and the SDK's SSE client) are imported with the first HTTP upstream:
    a gateway in front of stdio servers never loads it."""
    if isinstance(config, StdioServer):
        tail = stderr_tail if stderr_tail is not None else deque[str](maxlen=STDERR_TAIL_LINES)
        async with _stdio(server, config, tail) as wire:
            yield wire
    elif config.transport == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(config.url, headers=config.headers or None) as (read, write):
            yield Wire(SdkStreamsWire(read, write))
    else:
        async with _streamable_http(config.url, config.headers, config.max_event_bytes) as wire:
            yield wire
