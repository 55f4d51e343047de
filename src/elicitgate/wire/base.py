"""What every wire is to the JSON-RPC endpoint (`wire.endpoint`): a peer's messages as JSON-RPC dicts,
whatever carries them (`wire.stdio`, `wire.sdk_streams`, `wire.memory`, `wire.http`, the HTTP face's
sessions in `faces.streamable`)."""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from mcp_types import RequestId

from elicitgate.json_shapes import JsonObject

PLAIN_OBJECT: type[JsonObject] = dict
"""The type of a parsed JSON object (orjson's and `json`'s are plain dicts): `type(value) is PLAIN_OBJECT` tells one
with no call (`isinstance`, `is_object`) on a message's hot path, and narrows it to `JsonObject`. Anything else, a
subclass among them, is left to `is_object`."""


class MessageWire(Protocol):
    """One peer's messages as JSON-RPC dicts, whatever carries them (`wire.stdio`, `wire.http`)."""

    async def send(self, message: JsonObject, headers: Mapping[str, str] | None = None) -> None:
        """Write one message; `headers` are HTTP headers for it (ignored by pipes). Raises
        `anyio.BrokenResourceError` / `anyio.ClosedResourceError` once the wire is gone."""
        ...

    def messages(self) -> AsyncIterator[Inbound]:
        """What the peer sends, in order, until the wire ends."""
        ...


Sink = Callable[["Inbound"], "Coroutine[Any, Any, None] | None"]
"""Takes one message; returns the handling to await before the next (an `inline` request), else None."""


@runtime_checkable
class PushWire(MessageWire, Protocol):
    """A wire that can also hand each message to the endpoint as it is read (`wire.stdio.PipeWire`), with no
    task between the read and the dispatch."""

    def push(self, sink: Sink) -> Coroutine[Any, Any, None]:
        """Hand each message to `sink` until the wire ends; a handling `sink` returns (an inline request) is
        awaited before the next message is handed out."""
        ...


@runtime_checkable
class SendsAtOnce(MessageWire, Protocol):
    """A wire that can also write a message in its caller's step, with nothing to wait for (`wire.stdio.PipeWire` with
    room in its pipe, `wire.http.HttpWire` on an idle kept-alive connection): from a callback, where no task runs."""

    def send_now(self, message: JsonObject) -> bool:
        """Write `message` at once if nothing has to be waited for: True once written; else False, and nothing is
        written (`send` it then: it waits, or says what is wrong)."""
        ...


class PushedInbox:
    """A wire's messages for its endpoint, pushed (`PushWire.push`): each goes to the sink in the step that delivers
    it (`_deliver`: a read callback, the POST that hands it in), with no task woken per message; one delivered while
    the sink handles another, or while an inline request's handling runs, queues behind it and the pusher hands it
    on (`_hand_out`). Not pushed to, messages queue for `messages`. A wire that is one calls `_start_inbox` as it is
    made and wakes its pusher or reader in `_wake`."""

    _inbox: deque[Inbound]
    _sink: Sink | None
    """Where each message goes as it is delivered, while the endpoint pushes."""
    _sink_context: contextvars.Context | None
    """The pusher's context, which the sink runs in."""
    _handing: bool
    """The sink is handling a message, or the pusher hands out what waits: a message delivered meanwhile queues."""
    _held: Coroutine[Any, Any, None] | None
    """The sink's handling of an inline request, which the pusher awaits before the next message."""
    _sink_failure: BaseException | None
    """What the sink raised in `_deliver`: the pusher raises it, as a read loop would have."""

    def _start_inbox(self) -> None:
        self._inbox = deque()
        self._sink = self._sink_context = self._held = self._sink_failure = None
        self._handing = False

    def _wake(self) -> None:
        raise NotImplementedError

    def _deliver(self, inbound: Inbound) -> None:
        """One message for the endpoint: handed to the sink at once when it is pushed to and nothing waits before it;
        else queued, and the pusher or reader woken."""
        sink = self._sink
        if sink is None or self._handing or self._inbox or self._sink_failure is not None:
            self._inbox.append(inbound)
            self._wake()
            return
        assert self._sink_context is not None
        self._handing = True
        try:
            held = self._sink_context.run(sink, inbound)
        except BaseException as exc:  # the pusher raises it, as a read loop would have
            self._sink_failure = exc
            self._wake()
            return
        finally:
            self._handing = False
        if held is not None:
            self._held = held
            self._handing = True  # what comes meanwhile waits behind it
            self._wake()
        elif self._inbox:  # delivered while the sink ran: the pusher hands it on
            self._wake()

    async def _hand_out(self, sink: Sink) -> None:
        """What waits handed to `sink`, in order (an inline request's handling awaited before the next); then what
        the sink raised in `_deliver`, raised."""
        inbox = self._inbox
        self._handing = True
        try:
            while self._held is not None or inbox:
                held, self._held = self._held, None
                if held is None:
                    held = sink(inbox.popleft())
                if held is not None:
                    await held
        finally:
            self._handing = False
        if self._sink_failure is not None:
            raise self._sink_failure


@dataclass(slots=True)
class Inbound:
    """One message from the peer, or what made a line unreadable (`message` is the exception)."""

    message: JsonObject | Exception
    related_request_id: RequestId | None = None
    """Streamable HTTP: the request whose response stream carried this message; `None` elsewhere."""
    lost: bool = False
    """An error response the transport made up because the answer can no longer come (`PeerLost`)."""
    cancel_requested: bool = False
    """A request the peer has since cancelled (`notifications/cancelled`); it is not answered."""
    on_cancel: Callable[[], None] | None = None
    """Called when the peer cancels this request (set by whoever serves it and needs to hear at once)."""
    served: bool = False
    """A request whose serving has ended: its answer is written (or not, if it was cancelled) next."""
    context: contextvars.Context | None = None
    """The context a request is served in, when not the reader's (an HTTP POST's: its authenticated user)."""
    served_id: RequestId | None = None
    """A request served in a task of its own (`Endpoint._serve_in_task`): its id, kept here once its decoded message
    was let go of (a person may take minutes over a question the request caused)."""
