"""Opening the wire to one upstream server: stdio, streamable HTTP or legacy SSE.

Each opener yields a `Wire` whose `messages` carry JSON-RPC dicts (`jsonrpc.MessageWire`);
the SDK's transports are adapted by `SessionWire`. The streamable HTTP opener differs
from the SDK's `streamable_http_client` in one way: a request or notification that the server
sends on the response stream of one of our POSTs is tagged with that POST's request id
(`ServerMessageMetadata.related_request_id`), so an upstream `elicitation/create` can be traced to
the exact call that caused it (design invariant 1).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp.os.win32.utilities import ServerProcess
from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import MCP_SESSION_ID, StreamableHTTPTransport
from mcp.shared._context_streams import create_context_streams
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.message import ClientMessageMetadata, ServerMessageMetadata, SessionMessage

from elicitgate import sdk
from elicitgate.config import HttpServer, StdioServer
from elicitgate.jsonrpc import Inbound, MessageWire, parse_lines
from elicitgate.upstreams import prespawn
from elicitgate.upstreams.adopted import adopt
from elicitgate.upstreams.prespawn import STDERR_TAIL_LINES, StderrPump


UPSTREAM_HTTP_LIMITS = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
"""No cap on connections to one streamable HTTP upstream. Every call in flight holds a connection
(its POST's response stream) and each answer to an elicitation needs one more, so with httpx2's
default cap (100) the 100th concurrent eliciting call left no connection for any answer: every call
hung until the 30 s pool timeout."""

DRAIN_WAIT = 1.0
"""Seconds a POST's response closed before its end may take to end by itself (see `_DrainOnClose`)."""

STANDALONE_WAIT = 5.0
"""Seconds a new session waits for its standalone GET stream to be answered before it carries calls."""


class LostAnswer(JSONRPCError):
    """The error the HTTP transport itself makes up for a request whose answer can no longer come (its
    response stream ended without one, or the server forgot the session): the endpoint raises
    `PeerLost` for it. A type of its own, so no server can send one."""


class SessionWire:
    """An SDK transport's `(read, write)` streams of `SessionMessage`, as JSON-RPC dicts."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
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
                    yield Inbound(_dict_of(item.message), related, lost=isinstance(item.message, LostAnswer))
        finally:
            await self._write.aclose()


def _model_of(message: dict[str, Any]) -> JSONRPCMessage:
    """The SDK's model of a message the endpoint built (so unvalidated: it is ours)."""
    fields = {key: value for key, value in message.items() if key != "error"}
    if "method" in message:
        return (JSONRPCRequest if "id" in message else JSONRPCNotification).model_construct(**fields)
    if "error" in message:
        return JSONRPCError.model_construct(**fields, error=ErrorData.model_construct(**message["error"]))
    return JSONRPCResponse.model_construct(**fields)


def _dict_of(message: JSONRPCMessage) -> dict[str, Any]:
    if isinstance(message, JSONRPCRequest):
        return {"jsonrpc": "2.0", "id": message.id, "method": message.method, "params": message.params}
    if isinstance(message, JSONRPCNotification):
        return {"jsonrpc": "2.0", "method": message.method, "params": message.params}
    if isinstance(message, JSONRPCResponse):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    error = message.error
    return {"jsonrpc": "2.0", "id": message.id, "error": {"code": error.code, "message": error.message, "data": error.data}}


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


class _DrainOnClose(httpx2.AsyncByteStream):
    """A response body that, closed before its end, is read to the end first, briefly.

    The SDK stops reading a POST's SSE stream at the event that carries the response and closes it (and
    closes a 202 unread); the server ends the body right after, but httpcore drops a connection whose
    response was closed mid-body, so every call would open a new TCP connection to the upstream (an
    eliciting call two). Reading the few bytes left lets the connection go back to the pool; a server that
    keeps the stream open longer than `DRAIN_WAIT` gets its connection closed.
    """

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._ended = False

    async def __aiter__(self) -> AsyncGenerator[bytes]:
        async for chunk in self._inner:
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        try:
            if not self._ended:
                with anyio.move_on_after(DRAIN_WAIT):
                    async for _ in self._inner:
                        pass
        except (httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the connection is going anyway
        finally:
            await self._inner.aclose()


class _DrainingTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport with the response of every POST wrapped in `_DrainOnClose`.

    Only POSTs: the standalone GET stream and a DELETE's response are closed because the session is
    going, and waiting on them would hold up what comes next."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport(limits=UPSTREAM_HTTP_LIMITS)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST" and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _DrainOnClose(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _TaggingWriter:
    """Forwards to the transport's read-stream writer, tagging server-initiated messages."""

    def __init__(self, inner: Any, related_request_id: RequestId) -> None:
        self._inner = inner
        self._related = related_request_id

    async def send(self, item: SessionMessage | Exception) -> None:
        if (
            isinstance(item, SessionMessage)
            and item.metadata is None
            and isinstance(item.message, JSONRPCRequest | JSONRPCNotification)
        ):
            item.metadata = ServerMessageMetadata(related_request_id=self._related)
        await self._inner.send(item)


class _SessionLossWriter:
    """Turns the error for a request the server refused with 404 (its session is gone) into a lost stream."""

    def __init__(self, inner: Any, transport: OriginTaggingHTTPTransport) -> None:
        self._inner = inner
        self._transport = transport

    async def send(self, item: Any) -> None:
        message = item.message if isinstance(item, SessionMessage) else None
        if self._transport.session_lost and isinstance(message, JSONRPCError):
            error = ErrorData(code=CONNECTION_CLOSED, message="the upstream no longer knows this session (it restarted)")
            item = SessionMessage(LostAnswer(jsonrpc="2.0", id=message.id, error=error))
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class OriginTaggingHTTPTransport(StreamableHTTPTransport):
    """The SDK's streamable HTTP client transport, plus what a gateway needs to know of it.

    - Server messages on a POST's response stream are tagged with that POST's request id, so an
      upstream's `elicitation/create` names the call that caused it.
    - A POST's stream that ends without a response gives a `LostAnswer`, not a server's error.
    - A 404 for a request that carried our session id means the server forgot the session (it
      restarted before we noticed): the connection ends, so the link reconnects, instead of every
      later call failing with "Session not found".
    """

    session_lost = False

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.standalone_answered = anyio.Event()

    async def on_response(self, response: httpx2.Response) -> None:
        """httpx response hook: notices the session going away, and the standalone stream's answer."""
        if response.status_code == 404 and MCP_SESSION_ID in response.request.headers:
            self.session_lost = True
        if response.request.method == "GET":
            self.standalone_answered.set()

    async def handle_get_stream(self, client: httpx2.AsyncClient, read_stream_writer: Any) -> None:
        try:
            await super().handle_get_stream(client, read_stream_writer)
        finally:
            self.standalone_answered.set()

    async def _handle_post_request(self, ctx: Any) -> None:
        ctx = dataclasses.replace(ctx, read_stream_writer=_SessionLossWriter(ctx.read_stream_writer, self))
        await super()._handle_post_request(ctx)
        if self.session_lost:
            await ctx.read_stream_writer.aclose()  # the dispatcher sees the end of the connection

    async def _handle_sse_event(
        self,
        sse: Any,
        read_stream_writer: Any,
        original_request_id: RequestId | None = None,
        resumption_callback: Callable[[str], Awaitable[None]] | None = None,
    ) -> bool:
        if original_request_id is not None:
            read_stream_writer = _TaggingWriter(read_stream_writer, original_request_id)
        return await super()._handle_sse_event(sse, read_stream_writer, original_request_id, resumption_callback)

    async def _resolve_abandoned_request(
        self, read_stream_writer: Any, request_id: RequestId, message: str, *, code: int = CONNECTION_CLOSED
    ) -> None:
        error = ErrorData(code=code, message=message)
        answer = (LostAnswer if code == CONNECTION_CLOSED else JSONRPCError)(jsonrpc="2.0", id=request_id, error=error)
        try:
            await read_stream_writer.send(SessionMessage(answer))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session is tearing down


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncGenerator[Wire]:
    transport = OriginTaggingHTTPTransport(url)
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx2.AsyncClient(
                event_hooks={"response": [transport.on_response]},
                headers=headers or None,
                timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                transport=_DrainingTransport(),
            )
        )
        read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_reader = create_context_streams[SessionMessage](0)
        async with read_writer, read_stream, write_stream, write_reader, anyio.create_task_group() as tg:

            def start_get_stream() -> None:
                tg.start_soon(transport.handle_get_stream, client, read_writer)

            tg.start_soon(transport.post_writer, client, write_reader, read_writer, write_stream, start_get_stream, tg)
            try:
                yield Wire(SessionWire(read_stream, write_stream), transport.standalone_answered)
            finally:
                if transport.session_id:
                    with anyio.move_on_after(2, shield=True):
                        await transport.terminate_session(client)
                tg.cancel_scope.cancel()


class StdioWire:
    """A stdio server's pipes: one JSON-RPC message per line, written and parsed here, nothing between."""

    def __init__(self, process: ServerProcess) -> None:
        assert process.stdin is not None and process.stdout is not None, "spawned with pipes"
        self._stdin = process.stdin
        self._stdout = process.stdout

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        try:
            await self._stdin.send(line)
        except OSError as exc:  # the server closed its stdin or exited
            raise anyio.BrokenResourceError from exc

    async def messages(self) -> AsyncGenerator[Inbound]:
        pending = b""
        while True:
            try:
                chunk = await self._stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return
            messages, pending = parse_lines(pending + chunk)
            for message in messages:
                yield Inbound(message)


@asynccontextmanager
async def _stdio(server: str | None, config: StdioServer, tail: deque[str]) -> AsyncGenerator[Wire]:
    process, stderr = await _start_stdio(server, config, tail)
    try:
        yield Wire(StdioWire(process))
    finally:
        # Shielded and bounded (the SDK's shutdown): a cancelled caller must not leave the server running.
        # Its stdout is drained meanwhile, so a server blocked writing can read its stdin's end and exit.
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as drain:
                drain.start_soon(_discard, process)
                await sdk.stop_stdio_server(process)
                drain.cancel_scope.cancel()
            await anyio.to_thread.run_sync(stderr.wait_drained)


async def _start_stdio(server: str | None, config: StdioServer, tail: deque[str]) -> tuple[ServerProcess, StderrPump]:
    """The server's process, and the pump of its stderr (last lines in `tail`): the one `prespawn` started
    for the server's first attempt, else a new one."""
    started = prespawn.claim(server, config) if server is not None else None
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
        return await sdk.spawn_stdio_server(config.command, config.args, env, stderr.child_end, config.cwd), stderr
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
    """Open the wire to one upstream; raises `OSError` / httpx errors when it cannot. A stdio server's
    last lines of stderr are kept in `stderr_tail`; `server` names it, so its first attempt takes over the
    process `prespawn` started for it."""
    if isinstance(config, StdioServer):
        tail = stderr_tail if stderr_tail is not None else deque[str](maxlen=STDERR_TAIL_LINES)
        async with _stdio(server, config, tail) as wire:
            yield wire
    elif config.transport == "sse":
        async with sse_client(config.url, headers=config.headers or None) as (read, write):
            yield Wire(SessionWire(read, write))
    else:
        async with _streamable_http(config.url, config.headers) as wire:
            yield wire
