"""How one HTTP request of the face is answered: one JSON-RPC message as one JSON body, or an SSE stream of
the messages a `Channel` carries, with keep-alive comments; and the face's refusals, as JSON-RPC errors that
say what was wrong."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Protocol

import anyio
from mcp_types import RequestId
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitgate.json_shapes import JsonObject
from elicitgate.web.http_protocol import LeanCycle
from elicitgate.wire import codec
from elicitgate.wire.wakeup import Wakeable

JSON_WINDOW = 0.25
"""Seconds a request's answer may take to go back as one JSON body. A slower request's POST turns into an
SSE stream at once: a wait for a person (an elicitation) then has a response under way, which proxies keep
open (with `SSE_PING_INTERVAL`) and which clients survive losing (the `mcp` SDK's client fails its whole
session when a POST's connection drops before any response header)."""

SSE_PING_INTERVAL = 15.0
"""Seconds between keep-alive comments on an idle SSE stream, so that proxies keep a long wait (a person
answering a form) open."""

_JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = _SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


encode: Callable[[Mapping[str, Any]], bytes] = codec.dumps
"""A message's JSON (`codec.dumps` itself: no frame of its own for every answer and event)."""


class Late(enum.Enum):
    LATE = enum.auto()


LATE = Late.LATE


class Channel(Wakeable):
    """The messages one HTTP response carries, in order: a POST's (what is sent on behalf of its request,
    then the answer, which closes it) or the session's GET stream."""

    __slots__ = ("_items", "closed")

    def __init__(self) -> None:
        super().__init__()
        self._items: deque[JsonObject] = deque()
        self.closed = False

    def put(self, message: JsonObject, *, last: bool = False) -> bool:
        """Queue `message` (False if the channel is closed: its response has ended)."""
        if self.closed:
            return False
        self._items.append(message)
        self.closed = last
        self._wake()
        return True

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def get(self, timeout: float | None = None) -> JsonObject | None | Late:
        """The next message; None once the channel is closed and drained; `LATE` when `timeout` seconds
        pass first."""
        while not self._items:
            if self.closed:
                return None
            if not await self._wait(timeout) and not self._items:
                return LATE
        return self._items.popleft()


def error_message(request_id: RequestId | None, code: int, message: str, **data: Any) -> JsonObject:
    error: JsonObject = {"code": code, "message": message}
    if data:
        error["data"] = {"source": "elicitgate", **data}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def json_headers(body: bytes, extra: list[tuple[bytes, bytes]] | None) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON answer with `body`, then `extra`."""
    headers = [*_JSON_HEADERS, (b"content-length", b"%d" % len(body))]
    if extra:
        headers.extend(extra)
    return headers


async def reply(
    send: Send,
    status: int,
    message: Mapping[str, Any] | None,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A whole response: one JSON-RPC message (or none) as JSON; `extra` headers."""
    body = encode(message) if message is not None else b""
    headers = json_headers(body, extra)
    cycle = getattr(send, "__self__", None)
    if isinstance(cycle, LeanCycle) and cycle.respond(status, headers, body):  # the face's own server: one step
        return
    with contextlib.suppress(OSError):  # the client has gone
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def reply_app(
    status: int, message: Mapping[str, Any] | None, extra: list[tuple[bytes, bytes]] | None, scope: Scope,
    receive: Receive, send: Send,
) -> None:
    """`reply` as the app of a request's task (what could not be written from the connection's step)."""
    await reply(send, status, message, extra=extra)


def reply_in_step(
    cycle: LeanCycle, status: int, message: Mapping[str, Any] | None, extra: list[tuple[bytes, bytes]] | None = None
) -> ASGIApp | None:
    """`reply` written in the caller's step (a callback of the connection: no task): None once written, else (writing
    paused, a response under way) the app that writes it from the request's task (`reply_app`)."""
    body = encode(message) if message is not None else b""
    if cycle.respond(status, json_headers(body, extra), body):
        return None
    return functools.partial(reply_app, status, message, extra)


async def disconnected(receive: Receive) -> None:
    """Return once the client has gone (what else `receive` gives meanwhile is dropped)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class Cancellable(Protocol):
    def cancel(self) -> object: ...


def on_disconnect(receive: Receive, gone: Callable[[], object]) -> Cancellable:
    """Call `gone` once the client has gone; cancel the returned watch when the response ends first.

    On the HTTP face's own server (`receive` of a `LeanCycle`) the connection's protocol calls it, with no task
    at all; elsewhere one plain task watches `receive`, where a task group around the response (its cancel
    scope, its task's state, a closure and a frame more) was held by every SSE response for as long as it stayed
    open: a question pushed to a handshake-era client keeps its POST's response open until it is answered."""
    cycle = getattr(receive, "__self__", None)
    if isinstance(cycle, LeanCycle):
        return cycle.watch(gone)
    task = asyncio.get_running_loop().create_task(disconnected(receive))
    task.add_done_callback(functools.partial(_watched, gone))
    return task


def _watched(gone: Callable[[], object], task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return  # the response ended first
    task.exception()  # retrieved, so never logged as lost: `receive` failing means the client is gone too
    gone()


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None once it is longer than `limit`."""
    cycle = getattr(receive, "__self__", None)
    if isinstance(cycle, LeanCycle) and (body := cycle.whole_body()) is not None:  # all of it came with the head
        return body if len(body) <= limit else None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] != "http.request":
            break
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not event.get("more_body", False):
            break
    return b"".join(chunks)


PING: Message = {"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True}
"""A keep-alive comment on an SSE stream."""
END: Message = {"type": "http.response.body", "body": b"", "more_body": False}
"""The end of a streamed response."""


def event_bytes(data: bytes, event_id: bytes | None = None) -> bytes:
    """One SSE `message` event carrying `data` (an encoded message, or nothing for a priming event), with `id:`
    when given."""
    head = b"id: " + event_id + b"\r\n" if event_id is not None else b""
    return head + b"event: message\r\ndata: " + data + b"\r\n\r\n"


async def send_event(send: Send, data: bytes, event_id: bytes | None = None) -> None:
    """`event_bytes` sent as a body part of the response."""
    await send({"type": "http.response.body", "body": event_bytes(data, event_id), "more_body": True})


def lean_cycle(send: Send) -> LeanCycle | None:
    """The request's cycle when `send` is the face's own server's (`LeanCycle.send`), which can write in a caller's
    step; else None."""
    cycle = getattr(send, "__self__", None)
    return cycle if isinstance(cycle, LeanCycle) else None


@contextlib.asynccontextmanager
async def sse_response(send: Send, receive: Receive, headers: list[tuple[bytes, bytes]]) -> AsyncGenerator[None]:
    """An SSE response: started on entry, ended after the body written inside, which is cancelled as soon as the
    client goes away (the response then stays unfinished)."""
    with anyio.CancelScope() as scope:
        watch = on_disconnect(receive, scope.cancel)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *headers]})
            yield
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watch.cancel()


async def stream(
    channel: Channel,
    send: Send,
    receive: Receive,
    first: JsonObject | None,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
    on_gone: Callable[[], object] | None = None,
) -> None:
    """Write `first` and then `channel` as an SSE response until the channel closes. The client going away
    closes it too, and calls `on_gone`."""
    headers = [*_SSE_HEADERS, *(extra or [])]

    def gone() -> None:
        channel.close()
        if on_gone is not None:
            on_gone()

    watch = on_disconnect(receive, gone)
    try:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        message = first
        while True:
            if message is not None:
                await send_event(send, encode(message))
            message = None
            next_message = await channel.get(SSE_PING_INTERVAL)
            if next_message is None:
                break
            if next_message is LATE:
                await send(PING)
            else:
                message = next_message
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:  # the client has gone
        gone()
    finally:
        watch.cancel()
