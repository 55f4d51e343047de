"""One JSON-RPC connection as plain dicts: our requests matched to their responses, the peer's requests
and notifications handed to a handler, over any `MessageWire` (`wire.base`). It serves both ends of the
gateway: each upstream connection (we are the client) and the faces (we are the server, `faces.dispatch`
adapts it to the SDK's `Dispatcher`).

Messages are plain dicts from end to end. A request in flight costs one future and one table entry:
no task, no memory stream and no model of its own (the SDK's `JSONRPCDispatcher`, which this
replaces, spent more CPU per request than the rest of the relay). Only what the peer sends unasked
(its own requests, notifications other than progress) runs in a task.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import Any, Protocol, TypeGuard

import anyio
import anyio.abc
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    URL_ELICITATION_REQUIRED,
    RequestId,
)
from pydantic import ValidationError

from mcp.shared.exceptions import MCPError

from elicitgate.errors import (
    ClientGone,
    MethodNotFound,
    NonFiniteParams,
    NotAMessage,
    NotSent,
    PeerLost,
    TooDeep,
    UrlElicitationRequired,
)
from elicitgate.json_shapes import JsonObject, is_mapping, is_object
from elicitgate.wire.base import PLAIN_OBJECT, Inbound, MessageWire, PushWire, SendsAtOnce
from elicitgate.wire.scopes import TaskCancel, cancel_scope

logger = logging.getLogger(__name__)

ABANDON_WRITE_TIMEOUT = 2.0
"""Seconds a courtesy `notifications/cancelled` for an abandoned request may take to write."""

CLOSING_WRITE_TIMEOUT = 2.0
"""Seconds a serving endpoint's last answers (`Connection closed` to requests still in flight) may take."""

CLOSED = "Connection closed"
"""The message of `CONNECTION_CLOSED` when the whole connection ended (the SDK's words)."""

SESSION_LOST = "the upstream no longer knows this session (it restarted)"
"""The message of `CONNECTION_CLOSED` when a streamable HTTP server answered 404 to our session id: it
refused the request unread, so sending it again on a new session is safe (`upstreams.link.forgot_session`)."""


def progress_params(
    token: object, progress: float, total: float | None, message: str | None
) -> JsonObject:
    """The params of a `notifications/progress`."""
    params: JsonObject = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    return params


class ProgressCallback(Protocol):
    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


OnRequest = Callable[[Inbound, str, "JsonObject | None"], Awaitable["JsonObject"]]
OnNotify = Callable[[Inbound, str, "JsonObject | None"], Awaitable[None]]


_Cancels = asyncio.Task[Any] | TaskCancel | anyio.CancelScope
"""What stops a request of the peer's being served: its task (a `TaskCancel` once asked), or its scope (inline)."""

_CALLBACK_CONTEXT = contextvars.Context()
"""What a serving task's done callback runs in (it reads no context variable)."""


class Endpoint:
    """Our side of one connection. `run` reads until the wire ends; `request` and `notify` work while it
    runs; once it has ended, `request` raises `PeerLost` and `notify` does nothing.

    `peer` names the other side in log lines ("upstream 'x'", "the client"). An endpoint that is `serving`
    (the face) answers what it cannot read with the JSON-RPC error that says why, and a request still in
    flight when the connection ends with `Connection closed`; the methods in `inline` are handled before
    the next message is read (`initialize`, whose outcome the requests after it depend on). A serving
    endpoint's own requests to a client that went away raise `ClientGone`, not `PeerLost`: what the face asks
    its client (an elicitation, a relayed sampling request) fails as the client's loss, not the loss of the
    upstream whose call it serves, without a coroutine around each request to say so. Each request of the peer's
    but the `inline` ones runs as its handler's own coroutine in a task, the handler called as the message is
    dispatched, and the task's end writes the answer: a client's endpoint (not `serving`: an upstream connection)
    keeps no `Inbound` of it (`_serve_direct`, `on_cancel` is not called), a serving one keeps it while the request
    is served (`_serve_in_task`).
    """

    def __init__(
        self, wire: MessageWire, peer: str, *, serving: bool = False, inline: frozenset[str] = frozenset()
    ) -> None:
        self._wire = wire
        self._peer = peer
        self._serving = serving
        self._inline = inline
        self._waiters: dict[RequestId, asyncio.Future[JsonObject]] = {}
        """Our requests in flight: the future each one's answer settles (no record around it: one per request in flight,
        held for as long as a person takes over a question)."""
        self._on_progress: dict[RequestId, ProgressCallback] = {}
        """The requests in flight that asked for progress notifications: what each one's go to."""
        self._handling: dict[RequestId, tuple[_Cancels, Inbound]] = {}
        """The peer's requests being served: what cancels each, and the message. A request served in a task of its own
        is cancelled through that task (`TaskCancel`, made when the cancellation is asked for), one served inline
        through a cancel scope."""
        self._direct: dict[RequestId, asyncio.Task[JsonObject] | TaskCancel] = {}
        """The peer's requests served by their handler's own task (`_serve_direct`): the task, or its `TaskCancel` once
        the peer cancelled the request or the connection ended (it is not answered then). No `Inbound` kept: nothing
        reads it after the handler was called."""
        self._serving_tasks: dict[asyncio.Task[Any], RequestId | Inbound | None] = {}
        """The tasks serving the peer's requests (and writing their answers), which `run` waits for at its end; for a
        task that runs a handler's own coroutine, the request's id (`_serve_direct`) or its `Inbound`
        (`_serve_in_task`)."""
        self._task_name = f"serving a request of {peer}"
        """Every serving task's name, one string (Python 3.11 makes a `Task-<n>` string for each task otherwise)."""
        self._served = self._forget_task
        self._direct_done = self._answer_direct
        self._served_done = self._answer_served
        self._settled = self._answer_settled
        """Bound once: each task's done callback (a bound method per task otherwise)."""
        self._tasks: anyio.abc.TaskGroup | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop `run` runs in, kept: `asyncio.get_running_loop()` is a `getpid` system call on Python 3.11,
        and every request and every task made while it runs would ask for it (asked of asyncio only before `run`)."""
        self._handlers: tuple[OnRequest, OnNotify] | None = None
        """What `run` hands the peer's messages to, for a wire that pushes them (`_dispatch_pushed`)."""
        self._closed = False
        self._lost: type[MCPError] = ClientGone if serving else PeerLost
        self._send_now = wire.send_now if isinstance(wire, SendsAtOnce) else None
        """Writes an answer in the caller's step where the wire can (`_answer_direct`)."""
        self._unsent: type[MCPError] = ClientGone if serving else NotSent

    # -- to the peer -----------------------------------------------------------------------

    async def request(
        self,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        headers: Mapping[str, str] | None = None,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
        cancel_on_abandon: bool = True,
    ) -> JsonObject:
        """Send a request and return its result; an error response raises `MCPError` as the peer
        said it. `timeout` raises `MCPError(REQUEST_TIMEOUT)`. Cancelled or timed out after it was
        written, the peer is told with `notifications/cancelled` (unless `cancel_on_abandon` is off)."""
        message, future = self._opened(request_id, method, params, on_progress)
        written = False
        try:
            if timeout is None:
                # No cancel scope, and no `with` at all: it would keep its exit method for every request in flight.
                await self._write_request(message, headers)
                written = True
                del message, params  # written: not held for as long as the answer takes (a human's, for a question)
                return await future
            # `move_on_after`, not `fail_after`: a plain cancel scope, where `fail_after` is a generator around one.
            with anyio.move_on_after(timeout):
                await self._write_request(message, headers)
                written = True
                del message, params
                return await future
            if written and cancel_on_abandon:
                await self._cancel_peer(request_id, f"timed out after {timeout}s", headers, shield=False)
            raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out")
        except anyio.get_cancelled_exc_class():
            answered = future.done() and not future.cancelled()
            if written and cancel_on_abandon and not answered:
                await self._cancel_peer(request_id, "caller cancelled", headers, shield=True)
            raise
        finally:
            del self._waiters[request_id]
            if on_progress is not None:
                del self._on_progress[request_id]
            if future.done() and not future.cancelled():
                future.exception()  # an outcome that came as the caller left is not an unretrieved error

    def _opened(
        self, request_id: RequestId, method: str, params: Mapping[str, Any] | None, on_progress: ProgressCallback | None
    ) -> tuple[JsonObject, asyncio.Future[JsonObject]]:
        """A request of ours before its write (`request`, `asking`): refused once the connection ended or while its
        id is in flight; else its message, and the future its answer settles (awaited from now on)."""
        if self._closed or self._tasks is None:
            raise self._unsent(code=CONNECTION_CLOSED, message=CLOSED)
        if request_id in self._waiters:
            raise ValueError(f"request id {request_id!r} is already in flight")
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if on_progress is not None:
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": request_id}
        if params:
            message["params"] = params
        future: asyncio.Future[JsonObject] = (self._loop or asyncio.get_running_loop()).create_future()
        self._waiters[request_id] = future
        if on_progress is not None:
            self._on_progress[request_id] = on_progress
        return message, future

    def asking(
        self,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        headers: Mapping[str, str] | None = None,
        on_progress: ProgressCallback | None = None,
        settled_by_caller: bool = False,
    ) -> Awaitable[JsonObject]:
        """`request` with no timeout, its message written as it is called: the future its answer settles, which the
        caller awaits with no frame of the endpoint's held (a call upstream waits for as long as a person takes over a
        question it caused). What `request` does around the wait is the future's done callback's (`_Asked`): the
        request forgotten once answered, and the peer told with `notifications/cancelled` when the caller was
        cancelled while it waited; or, `settled_by_caller`, the caller's own once its wait ended (`asked_over`, in its
        step: no callback runs a loop turn of its own between the answer and the caller). Raises at once what
        `request` raises before its write; a write that cannot end at once (a full pipe) is waited for as `request`
        waits for it."""
        message, future = self._opened(request_id, method, params, on_progress)
        # The write's first step runs here, in the caller's task: the wires write a message without waiting (a pipe
        # with room, an HTTP request's POST written at once or started in a task), so the caller awaits the future
        # alone.
        writing = self._write_request(message, headers)
        del message, params
        try:
            waits_on = writing.send(None)
        except StopIteration:
            if not settled_by_caller:
                future.add_done_callback(_Asked(self._settled, request_id, headers), context=_CALLBACK_CONTEXT)
            return future
        except BaseException:
            self._forget(request_id, future)
            raise
        return self._written_then(writing, waits_on, request_id, future, headers, settled_by_caller)

    def asked_over(self, request_id: RequestId, headers: Mapping[str, str] | None) -> None:
        """The caller of `asking(..., settled_by_caller=True)` is done waiting (answered, failed, or it left): what
        `_Asked` does otherwise. A caller that left cancels the request's future (done already when it was answered),
        and the peer is told."""
        # `_answer_settled` written out (its `_forget` looked the future up again): this runs at the end of every call
        # upstream.
        future = self._waiters.pop(request_id, None)
        if future is None:
            return
        if self._on_progress:
            self._on_progress.pop(request_id, None)
        future.cancel()
        if not future.cancelled():
            future.exception()  # an outcome that came as the caller left is not an unretrieved error
        elif not self._closed:
            self._spawn(self._abandoned, request_id, headers)

    async def _written_then(
        self,
        writing: Coroutine[Any, Any, None],
        waits_on: Any,
        request_id: RequestId,
        future: asyncio.Future[JsonObject],
        headers: Mapping[str, str] | None,
        settled_by_caller: bool,
    ) -> JsonObject:
        """`asking` whose write waits (a pipe full): the rest of the write, then the answer, as `request` does."""
        try:
            await _resumed(writing, waits_on)
        except BaseException:
            self._forget(request_id, future)
            raise
        if not settled_by_caller:
            future.add_done_callback(_Asked(self._settled, request_id, headers), context=_CALLBACK_CONTEXT)
        return await future

    def _answer_settled(
        self, request_id: RequestId, headers: Mapping[str, str] | None, future: asyncio.Future[JsonObject]
    ) -> None:
        """A request of `asking` was answered, failed, or its caller left (the future cancelled, after the write):
        forgotten, and in the last case the peer is told."""
        if self._waiters.get(request_id) is future:  # `_forget` written out: this runs as each question is answered
            del self._waiters[request_id]
            if self._on_progress:
                self._on_progress.pop(request_id, None)
        if not future.cancelled():
            future.exception()  # an outcome that came as the caller left is not an unretrieved error
        elif not self._closed:
            self._spawn(self._abandoned, request_id, headers)

    def _forget(self, request_id: RequestId, future: asyncio.Future[JsonObject]) -> None:
        """A request of `asking` is over: nothing waits for its answer any more."""
        if self._waiters.get(request_id) is future:
            del self._waiters[request_id]
            if self._on_progress:
                self._on_progress.pop(request_id, None)

    async def _write_request(self, message: JsonObject, headers: Mapping[str, str] | None) -> None:
        try:
            await self._wire.send(message, headers)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise self._unsent(code=CONNECTION_CLOSED, message=CLOSED) from None

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, *, headers: Mapping[str, str] | None = None
    ) -> None:
        """Send a notification; a wire already gone drops it (there is nobody left to tell)."""
        message: JsonObject = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        try:
            await self._wire.send(message, headers)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped %s to %s: the connection is closed", method, self._peer)

    async def _cancel_peer(
        self, request_id: RequestId, reason: str, headers: Mapping[str, str] | None, *, shield: bool
    ) -> None:
        with anyio.move_on_after(ABANDON_WRITE_TIMEOUT, shield=shield):
            await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason}, headers=headers)

    async def _abandoned(self, request_id: RequestId, headers: Mapping[str, str] | None) -> None:
        """A request of `asking` whose caller was cancelled after it was written: the peer is told, as `request` tells
        it (shielded: the connection's end does not cut it short, `ABANDON_WRITE_TIMEOUT` does)."""
        await self._cancel_peer(request_id, "caller cancelled", headers, shield=True)

    # -- from the peer ---------------------------------------------------------------------

    async def run(
        self,
        on_request: OnRequest,
        on_notify: OnNotify,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read until the wire ends; then every request still waiting raises `PeerLost` (`ClientGone` if serving)."""
        self._loop = asyncio.get_running_loop()
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                task_status.started()
                try:
                    if isinstance(self._wire, PushWire):  # each message dispatched as it is read, no task woken
                        self._handlers = (on_request, on_notify)
                        await self._wire.push(self._dispatch_pushed)
                    else:
                        async for inbound in self._wire.messages():
                            inline = self._dispatch(inbound, on_request, on_notify)
                            if inline is not None:
                                await inline
                except anyio.ClosedResourceError:
                    pass  # the transport closed its end under the read: the same as its end
                finally:
                    self._close()
                    tasks.cancel_scope.cancel()  # what the peer asked of us has nobody to answer to
                    await self._end_serving()
        finally:
            self._close()

    async def _end_serving(self) -> None:
        """Cancel the peer's requests still being served and wait for them (a serving endpoint tells the
        peer `Connection closed`, each within CLOSING_WRITE_TIMEOUT)."""
        for request_id, (cancels, _) in list(self._handling.items()):
            self._cancel(request_id, cancels, "the connection ended")
        for request_id in list(self._direct):
            self._cancel_direct(request_id, "the connection ended")
        if self._serving_tasks:
            with anyio.CancelScope(shield=True):
                while self._serving_tasks:  # a handler that ends now may start its answer's write
                    await asyncio.wait(list(self._serving_tasks))

    def _close(self) -> None:
        self._closed = True
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(self._lost(code=CONNECTION_CLOSED, message=CLOSED))

    def _dispatch_pushed(self, inbound: Inbound) -> Coroutine[Any, Any, None] | None:
        assert self._handlers is not None
        return self._dispatch(inbound, *self._handlers)

    def _dispatch(
        self, inbound: Inbound, on_request: OnRequest, on_notify: OnNotify
    ) -> Coroutine[Any, Any, None] | None:
        """Route one message; returns the handling of an `inline` request, for the read loop to await."""
        message = inbound.message
        # A parsed message is a plain dict: the failures' two checks only for anything else (every message's).
        if type(message) is not dict and isinstance(message, Exception):
            self._refuse(message)
            return None
        method = message.get("method")
        request_id = message.get("id")
        if type(method) is str or (method is not None and isinstance(method, str)):  # a response's is None
            params = message.get("params")
            if params is not None and type(params) is not PLAIN_OBJECT and not is_object(params):
                logger.warning("%s sent %s with params that are not an object: dropped", self._peer, method)
                if is_request_id(request_id):
                    self._spawn(self._answer_error, request_id, INVALID_REQUEST, "params must be an object")
                return None
            if request_id is None:
                self._on_notification(inbound, method, params, on_notify)
            # An id's commonest types looked at first, without `is_request_id`'s call (every request of the peer's).
            elif type(request_id) is str or type(request_id) is int or is_request_id(request_id):
                if method in self._inline:
                    scope = cancel_scope()
                    self._handling[request_id] = (scope, inbound)
                    return self._handle(scope, inbound, request_id, method, params, on_request)
                if self._serving:
                    self._serve_in_task(inbound, request_id, method, params, on_request)
                else:
                    self._serve_direct(inbound, request_id, method, params, on_request)
            else:
                logger.warning("%s sent %s with an id that is neither a string nor a number: dropped",
                               self._peer, method)
                if self._serving:
                    self._spawn(
                        self._answer_error, None, INVALID_REQUEST, "the request id must be a string or a number"
                    )
            return None
        if not (type(request_id) is str or type(request_id) is int or is_request_id(request_id)):  # as above
            logger.warning("%s sent a message that is neither a request, a notification nor a "
                           "response: dropped", self._peer)
            if self._serving:
                self._spawn(self._answer_error, None, INVALID_REQUEST,
                            "not a JSON-RPC request, notification or response")
            return None
        waiter = self._waiters.get(request_id)
        if waiter is None or waiter.done():
            logger.debug("%s answered %r, which nobody waits for (any more)", self._peer, request_id)
            return None
        if inbound.lost:
            waiter.set_exception(self._lost(code=CONNECTION_CLOSED, message=_lost_reason(message)))
        elif "error" in message:
            waiter.set_exception(_error_of(message["error"], self._peer))
        elif type(result := message.get("result")) is PLAIN_OBJECT or is_object(result):
            waiter.set_result(result)  # pyright: ignore[reportArgumentType]  # a JSON object (pyright keeps `None` in)
        else:
            waiter.set_exception(MCPError(
                code=INTERNAL_ERROR,
                message=f"{self._peer} answered with a result that is not a JSON object",
                data={"id": request_id},
            ))
        return None

    def _refuse(self, message: Exception) -> None:
        """A message that could not be read (`NonFiniteParams`, another failure): logged, and answered where it is
        owed."""
        if isinstance(message, NonFiniteParams):
            logger.warning("%s sent %s: refused", self._peer, message)
            if is_request_id(message.request_id):
                self._spawn(self._answer_error, message.request_id, INVALID_PARAMS, str(message))
            return
        logger.warning("%s sent %s", self._peer, message)
        if self._serving:
            code = INVALID_REQUEST if isinstance(message, NotAMessage) else PARSE_ERROR
            self._spawn(self._answer_error, None, code, str(message))

    def _handler_task(
        self, inbound: Inbound, request_id: RequestId, method: str, params: JsonObject | None, on_request: OnRequest
    ) -> asyncio.Task[JsonObject] | None:
        """The task running the handler's own coroutine for a request of the peer's (`_serve_direct`,
        `_serve_in_task`), the handler called here in the context the task then runs in; None when the handler
        refused the request before any await (params that do not fit, an era's rule, no call to own it: -32017),
        which is answered at once."""
        context = inbound.context if inbound.context is not None else contextvars.copy_context()
        try:
            handling = context.run(on_request, inbound, method, params)
        except Exception as exc:
            inbound.served = True
            self._write_soon(self._write_answer(self._failed(request_id, exc)))
            return None
        coroutine: Coroutine[Any, Any, JsonObject]
        # A native coroutine's type first: the ABC's `isinstance` runs a Python frame (`ABCMeta.__instancecheck__`).
        if type(handling) is types.CoroutineType or isinstance(handling, Coroutine):
            coroutine = handling  # pyright: ignore[reportAssignmentType, reportUnknownVariableType]
        else:
            coroutine = _awaited(handling)
        return (self._loop or asyncio.get_running_loop()).create_task(
            coroutine, name=self._task_name, context=context  # pyright: ignore[reportUnknownArgumentType]
        )

    def _serve_direct(
        self, inbound: Inbound, request_id: RequestId, method: str, params: JsonObject | None, on_request: OnRequest
    ) -> None:
        """A request of a peer we are the client of (a server's `elicitation/create`, held while a person answers): its
        task runs the handler's own coroutine, with no frame of `_handle` around it, and its done callback writes the
        answer (`_answer_direct`). The handler is called here, in the context its task runs in: an upstream
        connection's only decides who the request is for and makes the coroutine (no I/O, no task of its own needed).
        Cancelled (the peer's `notifications/cancelled`, the connection's end), it is not answered, as `_handle` does
        for a client's endpoint."""
        task = self._handler_task(inbound, request_id, method, params, on_request)
        if task is None:
            return
        self._direct[request_id] = task
        self._serving_tasks[task] = request_id
        task.add_done_callback(self._direct_done, context=_CALLBACK_CONTEXT)

    def _serve_in_task(
        self, inbound: Inbound, request_id: RequestId, method: str, params: JsonObject | None, on_request: OnRequest
    ) -> None:
        """A request of the peer's we serve (a client's call on a face, held for as long as a person takes over a
        question it causes): as `_serve_direct`, its task runs the handler's own coroutine, with no frame of
        `_handle` around it, the handler called here in the context the task then runs in; its done callback writes
        the answer (`_answer_served`). The request and its `Inbound` are kept (`_handling`) for the peer's
        `notifications/cancelled` and the handler's context (which reads it while it serves).

        A plain asyncio task, not one of the task group's: anyio's adds a handle, an event and a done-callback closure
        to every request in flight. `run` cancels and awaits these at the end. No cancel scope either (two sets, a dozen
        slots and the task's anyio state, for as long as the request waits on a human): the task is cancelled as a scope
        around all of it would be, shields honoured (`TaskCancel`, made only when asked for), so a handler's shielded
        steps (giving back a per-call client's connections, telling an upstream its task is cancelled) run to their
        end."""
        # Its id named before the handler is called: the context it makes reads it there (twice, the SDK's).
        inbound.served_id = request_id
        task = self._handler_task(inbound, request_id, method, params, on_request)
        if task is None:
            return
        self._handling[request_id] = (task, inbound)
        self._serving_tasks[task] = inbound
        # The handler has the request (its params, its method): the `Inbound` keeps only what its context reads while
        # it is served, not the decoded message (its keys and values, for as long as a person takes over a question).
        inbound.message = _while_served(params)
        # In a context of its own, not a copy of the current one made for every request in flight.
        task.add_done_callback(self._served_done, context=_CALLBACK_CONTEXT)

    def _answer_served(self, task: asyncio.Task[JsonObject]) -> None:
        """A task of `_serve_in_task` ended: nothing cancels it from now on, and it is answered as `_handle` answers:
        its result or its error, nothing when the peer cancelled the request, `Connection closed` when it was cut
        short (the connection's end, or the gateway stopping)."""
        inbound = self._serving_tasks.pop(task, None)
        if type(inbound) is not Inbound and not isinstance(inbound, Inbound):  # by type first: no call for it
            return
        request_id = inbound.served_id
        assert request_id is not None  # set as its task was made
        self._handler_ended(request_id, inbound)
        inbound.served = True
        if task.cancelled():
            if not inbound.cancel_requested:
                self._write_soon(self._cut_short(inbound, request_id))
            return
        if inbound.cancel_requested:
            task.exception()  # retrieved even when it is not answered
            return
        response = self._outcome(request_id, task)
        if self._send_now is not None and self._send_now(response):  # a face's pipe with room (no coroutine)
            return
        writing = self._write_answer(response)
        # Written here when the wire takes it at once (a face's pipe with room, an HTTP session's stream): no task per
        # answer. One that has to wait (a full pipe) goes on in a task of its own.
        try:
            waits_on = writing.send(None)
        except StopIteration:
            return
        self._write_soon(_rest_of(writing, waits_on))

    def _answer_direct(self, task: asyncio.Task[JsonObject]) -> None:
        """A handler's task ended (`_serve_direct`): nothing cancels it from now on, and its answer is written unless
        it was cancelled or the peer cancelled the request."""
        request_id = self._serving_tasks.pop(task, None)
        if request_id is None or (type(request_id) is not int and type(request_id) is not str  # an id: no call
                                  and isinstance(request_id, Inbound)):
            return
        served = self._direct.get(request_id)
        if served is task:
            del self._direct[request_id]
        elif isinstance(served, TaskCancel) and served.task is task:  # the peer cancelled it, or the connection ended
            del self._direct[request_id]
            served.stop()
            return
        # else a later request under the same id took its place (the peer's mistake): this one is answered all the same
        if task.cancelled():
            return
        response = self._outcome(request_id, task)
        # Written at once where the wire can: no task per answer, and the answer goes before the callbacks after this
        # one (the broker's metrics, log line and audit record of the question's end: `Broker._after_answer`).
        if self._send_now is not None and self._send_now(response):
            return
        self._write_soon(self._write_answer(response))

    def _outcome(self, request_id: RequestId, task: asyncio.Task[JsonObject]) -> JsonObject:
        """The answer to a request whose handler's task ended, not cancelled: its result, or its error."""
        exc = task.exception()
        if exc is not None:
            return self._failed(request_id, exc)
        return {"jsonrpc": "2.0", "id": request_id, "result": task.result()}

    def _failed(self, request_id: RequestId, exc: BaseException) -> JsonObject:
        """The error response for a handler that raised `exc`, as `_handle` makes it."""
        if isinstance(exc, MCPError):
            return {"jsonrpc": "2.0", "id": request_id, "error": exc.error.model_dump(exclude_none=True)}
        if isinstance(exc, ValidationError):
            # Params a handler could not model: no pydantic text on the wire (the SDK's dispatchers agree).
            return {"jsonrpc": "2.0", "id": request_id,
                    "error": {"code": INVALID_PARAMS, "message": "Invalid request parameters", "data": ""}}
        logger.error("handling request %r from %s failed", request_id, self._peer, exc_info=exc)
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": str(exc)}}

    def _write_soon(self, writing: Coroutine[Any, Any, None]) -> None:
        """Write an answer in a task of its own, which `run` waits for at its end as for a serving task."""
        task = (self._loop or asyncio.get_running_loop()).create_task(writing, name=self._task_name)
        self._serving_tasks[task] = None
        task.add_done_callback(self._served, context=_CALLBACK_CONTEXT)

    def _forget_task(self, task: asyncio.Task[Any]) -> None:
        self._serving_tasks.pop(task, None)

    def _cancel_direct(self, request_id: RequestId, reason: str) -> None:
        """Stop serving a request `_serve_direct` serves, once (`TaskCancel`, as `_cancel` does for a task)."""
        served = self._direct[request_id]
        if isinstance(served, asyncio.Task):
            self._direct[request_id] = TaskCancel(served, reason)

    def _cancel(self, request_id: RequestId, cancels: _Cancels, reason: str) -> None:
        """Stop serving a request: a scope at once; a task as a cancel scope around its handler would, honouring the
        handler's shields (`TaskCancel`), once."""
        if isinstance(cancels, asyncio.Task):
            handling = self._handling[request_id]
            self._handling[request_id] = (TaskCancel(cancels, reason), handling[1])
        elif isinstance(cancels, anyio.CancelScope):
            cancels.cancel()

    def _handler_ended(self, request_id: RequestId, inbound: Inbound) -> bool:
        """The request's handler returned or raised: nothing cancels it from now on (its answer is not cut short).
        True when its task was cancelled here (`_cancel`), that cancellation now taken back, and from nowhere else."""
        handling = self._handling.get(request_id)
        if handling is None or handling[1] is not inbound:
            return False
        del self._handling[request_id]
        cancels = handling[0]
        # Its task, unless it was cancelled (`TaskCancel`, not subclassed): told by type, no call.
        return type(cancels) is TaskCancel and cancels.stop()

    def _on_notification(
        self, inbound: Inbound, method: str, params: JsonObject | None, on_notify: OnNotify
    ) -> None:
        if method == "notifications/progress" and params is not None:
            token = params.get("progressToken")
            progress = params.get("progress")
            on_progress = self._on_progress.get(token) if is_request_id(token) else None
            if on_progress is not None and _is_number(progress):
                total = params.get("total")
                note = params.get("message")
                self._spawn(
                    on_progress,
                    float(progress),
                    float(total) if _is_number(total) else None,
                    note if isinstance(note, str) else None,
                )
                return
        elif method == "notifications/cancelled" and params is not None:
            cancelled = params.get("requestId")
            if is_request_id(cancelled) and cancelled in self._direct:
                self._cancel_direct(cancelled, "the peer cancelled it")
            elif is_request_id(cancelled) and (handling := self._handling.get(cancelled)) is not None:
                cancels, request = handling
                if not request.cancel_requested:
                    request.cancel_requested = True
                    if request.on_cancel is not None:
                        request.on_cancel()
                    self._cancel(cancelled, cancels, "the peer cancelled it")
        self._spawn(self._notify_contained, on_notify, inbound, method, params)

    async def _handle(
        self,
        scope: anyio.CancelScope,
        inbound: Inbound,
        request_id: RequestId,
        method: str,
        params: JsonObject | None,
        on_request: OnRequest,
    ) -> None:
        """Answer one `inline` request of the peer's, before the next message is read. The peer's
        `notifications/cancelled` and the end of the connection (`_end_serving`) cancel `scope`. One the peer
        cancelled is not answered (the spec says so); one the connection's end cut short is answered `Connection
        closed` by a serving endpoint."""
        response: JsonObject | None = None
        try:
            with scope:  # it takes its own cancellation: `response` stays None
                try:
                    result = await on_request(inbound, method, params)
                finally:
                    self._handler_ended(request_id, inbound)
                response = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except MCPError as exc:
            response = {"jsonrpc": "2.0", "id": request_id, "error": exc.error.model_dump(exclude_none=True)}
        except ValidationError:
            # Params a handler could not model: no pydantic text on the wire (the SDK's dispatchers agree).
            response = {"jsonrpc": "2.0", "id": request_id,
                        "error": {"code": INVALID_PARAMS, "message": "Invalid request parameters", "data": ""}}
        except Exception as exc:
            logger.exception("handling %s from %s failed", method, self._peer)
            response = {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": str(exc)}}
        except anyio.get_cancelled_exc_class():  # cancelled from outside (the gateway is stopping)
            await self._cut_short(inbound, request_id)
            raise
        finally:
            inbound.served = True
        if response is None:  # cancelled: by the peer, or the connection's end
            await self._cut_short(inbound, request_id)
        elif not inbound.cancel_requested:
            await self._write_answer(response)

    async def _cut_short(self, inbound: Inbound, request_id: RequestId) -> None:
        """The connection is ending under the request: a serving endpoint says so rather than leave the peer
        waiting; a request the peer cancelled gets nothing."""
        if self._serving and not inbound.cancel_requested:
            with anyio.move_on_after(CLOSING_WRITE_TIMEOUT, shield=True):
                await self._answer_error(request_id, CONNECTION_CLOSED, CLOSED)

    async def _answer_error(
        self, request_id: RequestId | None, code: int, message: str, *, fallback: bool = True
    ) -> None:
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        await self._write_answer(error, fallback=fallback)

    async def _write_answer(self, response: JsonObject, *, fallback: bool = True) -> None:
        """Send an answer; one the wire refuses with a `ValueError` (`TooDeep`, or a wire that could not
        send it) is answered with an error instead, once."""
        try:
            await self._wire.send(response)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped the answer to %r of %s: the connection is closed", response["id"], self._peer)
        except ValueError as exc:
            if not fallback:  # the error in its place failed too: the wire cannot send at all
                logger.error("dropped the answer to %r of %s: %s", response["id"], self._peer, exc)
                return
            why = "cannot be written as JSON" if isinstance(exc, TooDeep) else "could not be sent"
            logger.warning("the answer to %r of %s %s: %s", response["id"], self._peer, why, exc)
            await self._answer_error(response["id"], INTERNAL_ERROR, f"the answer {why}: {exc}", fallback=False)

    async def _notify_contained(
        self, on_notify: OnNotify, inbound: Inbound, method: str, params: JsonObject | None
    ) -> None:
        try:
            await on_notify(inbound, method, params)
        except Exception:  # one notification must not end the connection
            logger.exception("handling %s from %s failed", method, self._peer)

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        assert self._tasks is not None
        self._tasks.start_soon(fn, *args)


async def _awaited(handling: Awaitable[JsonObject]) -> JsonObject:
    return await handling


@types.coroutine
def _resumed(coroutine: Coroutine[Any, Any, None], waits_on: Any) -> Generator[Any, Any, None]:
    """The rest of `coroutine`, whose first step ran already and waits on `waits_on`: what `await` would have done with
    it from there (what the task sends or throws in goes on to the coroutine)."""
    while True:
        try:
            sent = yield waits_on
        except BaseException as exc:  # noqa: BLE001  # a cancellation, thrown on into the coroutine
            try:
                waits_on = coroutine.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waits_on = coroutine.send(sent)
            except StopIteration:
                return


async def _rest_of(writing: Coroutine[Any, Any, None], waits_on: Any) -> None:
    await _resumed(writing, waits_on)


class _Asked:
    """What `Endpoint.request` does after its answer came or its caller left, for a request of `Endpoint.asking`: the
    future's done callback (one small object per request in flight, not a suspended coroutine)."""

    __slots__ = ("_settled", "_request_id", "_headers")

    def __init__(
        self,
        settled: Callable[[RequestId, Mapping[str, str] | None, asyncio.Future[JsonObject]], None],
        request_id: RequestId,
        headers: Mapping[str, str] | None,
    ) -> None:
        self._settled = settled
        self._request_id = request_id
        self._headers = headers

    def __call__(self, future: asyncio.Future[JsonObject]) -> None:
        self._settled(self._request_id, self._headers, future)


def _while_served(params: JsonObject | None) -> JsonObject:
    """What a served request's `Inbound.message` becomes once its handler has it: what the request's context reads of
    it while it is served (`faces.dispatch.RequestContext`: its progress token; its id is `Inbound.served_id`), the
    rest let go of. Without a progress token, one empty message shared by all (a dict of its own is ~200 bytes held
    by every request in flight)."""
    meta = params.get("_meta") if params is not None else None
    if meta is not None and is_mapping(meta) and "progressToken" in meta:  # most requests have no `_meta`
        return {"params": {"_meta": {"progressToken": meta["progressToken"]}}}
    return _LET_GO


_LET_GO: JsonObject = {}
"""The message of every served request without a progress token, once its handler has it (never written to)."""


def is_request_id(value: object) -> TypeGuard[RequestId]:
    # The two types ids come as looked at first, with no `isinstance` call (asked of every message's id).
    kind = type(value)
    return kind is str or kind is int or (isinstance(value, (str, int)) and not isinstance(value, bool))


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lost_reason(message: JsonObject) -> str:
    error = message.get("error")
    reason = error.get("message") if is_mapping(error) else None
    return reason if isinstance(reason, str) else CLOSED


def _error_of(error: object, peer: str) -> MCPError:
    """The peer's error as `MCPError`, typed where the gateway acts on it; a malformed one says so
    instead of being dropped."""
    if is_object(error):
        code = error.get("code")
        message = error.get("message")
        if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
            typed = _TYPED_ERRORS.get(code, MCPError)
            return typed(code=code, message=message, data=error.get("data"))
    return MCPError(
        code=INTERNAL_ERROR,
        message=f"{peer} answered with a malformed error (code must be an integer, message a string)",
        data={"error": error},
    )


_TYPED_ERRORS: dict[int, type[MCPError]] = {
    METHOD_NOT_FOUND: MethodNotFound,
    URL_ELICITATION_REQUIRED: UrlElicitationRequired,
}
