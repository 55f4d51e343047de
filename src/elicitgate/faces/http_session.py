"""One HTTP session's `MessageWire`: which response stream carries what the gateway sends to a client of the
HTTP face (the response of the request it answers or is sent on behalf of, else the session's GET stream), and
the context of a client's request on such a session. The endpoint that serves `/mcp` and holds the sessions is
`faces.streamable`."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import CONNECTION_CLOSED, RequestId

from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.transport_context import TransportContext

from elicitgate.faces.dispatch import RequestContext
from elicitgate.faces.event_streams import EventLimits, EventStream, SessionEvents
from elicitgate.faces.http_answers import error_message
from elicitgate.json_shapes import JsonObject, is_object
from elicitgate.wire.base import Inbound, PushedInbox, Sink
from elicitgate.wire.endpoint import is_request_id

if TYPE_CHECKING:
    from elicitgate.elicitation.model import Elicitation

logger = logging.getLogger(__name__)

STREAMABLE_HTTP = TransportContext(kind="streamable-http", can_send_request=True)

class SessionWire(PushedInbox):
    """One session's `MessageWire`: POSTs hand in the client's messages; what the gateway sends goes to the
    response stream of the request it answers or is sent on behalf of, else to the GET stream. Every stream is
    resumable (`faces.event_streams`): one whose client went away keeps what it carries until it is resumed.

    Pushed (`push`, the endpoint's read loop, as `wire.http.HttpWire` and `wire.stdio.LineReader` are): each message
    goes to the endpoint in the step of the POST that hands it in, not one loop turn later from the session's reader
    task (a client's call reaches its handler's task, and its answer to a question the task awaiting it, a turn
    sooner); a message handed in while the endpoint handles one, or while an inline request's handling (`initialize`)
    runs, queues behind it and the reader hands it on."""

    def __init__(self, limits: EventLimits) -> None:
        self._start_inbox()
        self._reader: asyncio.Future[None] | None = None
        self.closed = False
        self.events = SessionEvents(limits)
        self.answers: dict[RequestId, EventStream] = {}
        """The client's requests being served, each with its response stream (kept while the call runs, even
        once the POST that opened it broke)."""
        self.standalone: EventStream | None = None
        self._carriers: dict[RequestId, RequestId] = {}
        """Our requests to the client that were sent on behalf of one of its requests: that request's id."""

    def hand_in(self, inbound: Inbound) -> None:
        message = inbound.message
        # `type` first: a parsed message is a plain dict (no `isinstance` call for it). The client answers one of ours:
        if (type(message) is dict or isinstance(message, dict)) and "method" not in message:
            answered = message.get("id")
            if type(answered) is int or type(answered) is str or is_request_id(answered):
                self._carriers.pop(answered, None)
        self._deliver(inbound)

    def _wake(self) -> None:
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    async def _woken(self) -> None:
        """Until `_wake`: something was handed in, or the session closed."""
        self._reader = asyncio.get_running_loop().create_future()
        try:
            await self._reader
        finally:
            self._reader = None

    async def push(self, sink: Sink) -> None:
        """Hand every message to `sink` as it is handed in (`wire.base.PushWire`), from the POST's step; what queued
        (before this began, behind a message being handled or an inline request's handling) is handed on here, a
        handling `sink` returns awaited before the next. Ends as `messages` does."""
        self._sink, self._sink_context = sink, contextvars.copy_context()
        try:
            while True:
                await self._hand_out(sink)
                if self.closed:
                    return
                await self._woken()
        finally:
            self._sink = self._sink_context = self._held = None

    async def messages(self) -> AsyncGenerator[Inbound]:
        while True:
            while self._inbox:
                yield self._inbox.popleft()
            if self.closed:
                return
            await self._woken()

    def carry(self, request_id: RequestId, on_behalf_of: RequestId | None) -> None:
        if on_behalf_of is not None:
            self._carriers[request_id] = on_behalf_of

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        if "method" not in message:  # our answer to one of the client's requests
            answered = message.get("id")
            channel = (self.answers.pop(answered, None)
                       if type(answered) is int or type(answered) is str or is_request_id(answered) else None)
            if channel is None or not channel.put(message, last=True):
                logger.debug("the answer to %r has no response stream any more: dropped", answered)
            return
        request_id = message.get("id")
        carrier: RequestId | None = None
        if type(request_id) is int or type(request_id) is str or is_request_id(request_id):
            carrier = self._carriers.get(request_id)
        elif message["method"] == "notifications/cancelled" and is_object(params := message.get("params")):
            cancelled = params.get("requestId")
            carrier = self._carriers.pop(cancelled, None) if is_request_id(cancelled) else None
        self.send_on_behalf(message, carrier)

    def send_on_behalf(self, message: JsonObject, request_id: RequestId | None) -> None:
        """Send `message` on the response stream of the client's request `request_id` until its answer (kept
        for a resuming client while the stream is broken), else on the GET stream; with no GET stream it is
        dropped (as the SDK's transport does)."""
        channel = self.answers.get(request_id) if request_id is not None else None
        if channel is not None and channel.put(message):
            return
        if self.standalone is not None and self.standalone.put(message):
            return
        logger.debug("no stream open for %s: dropped", message.get("method"))

    def carry_question(self, elicitation: Elicitation, request_id: RequestId | None) -> None:
        """`elicitation` goes out on behalf of the client's request `request_id`: its stream carries it."""
        stream = self.answers.get(request_id) if request_id is not None else None
        if stream is not None:
            stream.carry(elicitation)

    def close(self) -> None:
        """End the session: every request still waiting for its answer gets `Connection closed`."""
        self.closed = True
        answers, self.answers = self.answers, {}  # a request in its JSON window is served (and let go) by `put`
        for request_id, channel in answers.items():
            channel.put(error_message(request_id, CONNECTION_CLOSED, "Connection closed: the session ended"), last=True)
        if self.standalone is not None:
            self.standalone.close()
        self._wake()
        self.events.clear()


class HttpRequestContext(RequestContext):
    """A client message's context on an HTTP session: what is sent on its behalf goes on its POST."""

    __slots__ = ()

    transport: TransportContext = STREAMABLE_HTTP

    @property
    def _wire(self) -> SessionWire:
        return self._dispatcher.wire  # pyright: ignore[reportReturnType]  # a session's is its `SessionWire` (no call)

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> CoroutineType[Any, Any, JsonObject]:
        if self.closed:
            raise NoBackChannelError(method)
        options: CallOptions = {**(opts or {})}
        request_id = options.get("request_id")
        if request_id is None:
            request_id = options["request_id"] = self._dispatcher.next_request_id()
        self._wire.carry(request_id, self.request_id)
        return self._dispatcher.send_raw_request(method, params, options)

    def carry(self, elicitation: Elicitation) -> None:
        """This request's response stream carries `elicitation` (`faces.event_streams`)."""
        self._wire.carry_question(elicitation, self.request_id)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if not self.closed and not self._wire.closed:
            message: JsonObject = {"jsonrpc": "2.0", "method": method}
            if params:
                message["params"] = params
            self._wire.send_on_behalf(message, self.request_id)
