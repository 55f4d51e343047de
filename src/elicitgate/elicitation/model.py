"""An elicitation's identity and life: one id, one origin, one deadline, one end."""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

import anyio

from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from elicitgate.contracts import Origin
    from elicitgate.elicitation.carriers import Carriers


class State(enum.StrEnum):
    PENDING = "pending"
    PRESENTED = "presented"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self not in (State.PENDING, State.PRESENTED)


ACTION_STATES = {"accept": State.ACCEPTED, "decline": State.DECLINED, "cancel": State.CANCELLED}

Source = Literal["upstream", "gateway"]
"""Who asks: an upstream server (`elicitation/create`, `input_required`), or the gateway itself."""
GatewayReason = Literal["missing_arguments", "confirmation"]
"""Why the gateway asks on its own (see `router.asks`)."""


class Responder(Protocol):
    """Who shows an elicitation to a human and brings the raw answer back (`elicitation.responders`,
    `elicitation.hosting`, `elicitation.beside`); the broker picks one per elicitation."""

    @property
    def name(self) -> str:
        """Shown in the audit event: `client`, `input_required`, `hosted_page`, `hosted_inbox`."""
        ...

    @property
    def cancel_on_timeout(self) -> bool:
        """At the deadline the upstream gets `{"action": "cancel"}` instead of a timeout error."""
        ...

    async def ask(self, el: Elicitation, request: JsonObject) -> object:
        """Present `request` (already prefixed with the asking server; on a repeat, carrying the errors)
        and return the raw answer, whatever its shape (the broker checks it). Raises
        `elicitation.responders.HumanGone`, or `MCPError` when the human's side failed it.
        """
        ...

    def ended(self, el: Elicitation) -> None:
        """The broker recorded the end of `el`: drop whatever was kept to present it."""
        ...


@dataclass(eq=False, slots=True)
class Elicitation:
    server: str
    mode: str
    params: JsonObject
    deadline: float
    """On the anyio clock."""
    origin: Origin | None = None
    """The call that caused it (None only for a request refused before it had one)."""
    candidates: Callable[[], list[Origin]] | None = None
    """When `origin` is a guess (a per-session pipe with several calls in flight): the calls it may
    belong to, so that it can move to another one instead of ending with the guessed call."""
    responder: Responder | None = None
    """Who presents it to a human."""
    source: Source = "upstream"
    gateway_reason: GatewayReason | None = None
    """Set when `source` is `gateway`. (`reason` below is why it *ended*.)"""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)
    state: State = State.PENDING
    attempts: int = 0
    """Times it was put to the human (the first ask and every re-ask)."""
    answers: int = 0
    """Answers the human gave (a timeout or a vanished client gives none)."""
    answer: JsonObject | None = None
    """The accepted content, kept only for an audit trail that stores answers (`audit.store_content`)."""
    reason: str | None = None
    answered_by: str | None = None
    """Which surface ended it when several could (`client`, `notice_page`), or `unattended` when the policy for
    an unanswered question did (docs/notify.md); None: its responder's (the audit trail's `responder`)."""
    ended_at: float | None = None
    scope: anyio.CancelScope | None = None
    stop_state: State | None = None
    """Set by whoever stops it from outside (client gone, call cancelled) before cancelling `scope`."""
    carriers: Carriers | None = None
    """What carries it to its human now (a client's response stream) and the grace period when nothing does
    (`elicitation.carriers`); set by the broker once it is admitted."""
    _ended: anyio.Event | None = None
    """Made only when someone waits for the end (`wait_ended`): most elicitations never need one."""

    def asked(self) -> Origin:
        """The call it is put to (the broker admits none without one)."""
        assert self.origin is not None, "an elicitation without an origin is refused before it is asked"
        return self.origin

    @property
    def hosted(self) -> bool:
        return self.responder is not None and self.responder.name.startswith("hosted")

    @property
    def requested_schema(self) -> JsonObject:
        return self.params.get("requestedSchema") or {}

    async def wait_ended(self) -> None:
        """Until the broker has recorded its end."""
        if self.state.terminal:
            return
        if self._ended is None:
            self._ended = anyio.Event()
        await self._ended.wait()

    def mark_ended(self) -> None:
        if self._ended is not None:
            self._ended.set()

    def stop(self, state: State, reason: str) -> None:
        """End it from outside: the waiting task wakes and records `state`."""
        if self.state.terminal or self.stop_state is not None:
            return
        self.stop_state, self.reason = state, reason
        if self.scope is not None:
            self.scope.cancel()

    def summary(self) -> JsonObject:
        """What may be logged or shown: never the answer's values."""
        return {
            "id": self.id,
            "server": self.server,
            "mode": self.mode,
            "source": self.source,
            "gateway_reason": self.gateway_reason,
            "state": str(self.state),
            "client": self.origin.peer.id if self.origin is not None else None,
            "principal": self.origin.peer.principal if self.origin is not None else None,
            "responder": self.answered_by or (self.responder.name if self.responder is not None else None),
            "attempts": self.attempts,
            "reason": self.reason,
            "created_at": self.created_at,
            "duration_s": round((self.ended_at or time.time()) - self.created_at, 3),
        }
