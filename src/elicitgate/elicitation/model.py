"""An elicitation's identity and life: one id, one origin, one deadline, one end."""

from __future__ import annotations

import asyncio
import contextvars
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Literal, Protocol

import anyio

from elicitgate.elicitation.carriers import Carriers
from elicitgate.json_shapes import JsonObject
from elicitgate.random_batches import RandomBatch

if TYPE_CHECKING:
    from elicitgate.contracts import Origin


SUMMARY_FIELDS = (
    "id", "server", "mode", "source", "gateway_reason", "state", "client", "principal", "responder", "attempts",
    "reason", "created_at", "duration_s",
)
"""The keys of `Elicitation.summary()`, in its order."""


def summary_of(row: tuple[object, ...]) -> JsonObject:
    """A summary from its values (`Elicitation.summary_row`), as a fresh dict."""
    return dict(zip(SUMMARY_FIELDS, row, strict=True))


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


_STATE_VALUES = {state: state.value for state in State}
"""Each state's own string, looked up in C (`State.value` is two Python calls: enum's property)."""

_TIMER_CONTEXT = contextvars.Context()
"""What a deadline's timer runs in: it reads no context variable, so it shares one rather than copy the task's."""

ACTION_STATES = {"accept": State.ACCEPTED, "decline": State.DECLINED, "cancel": State.CANCELLED}

Source = Literal["upstream", "gateway"]
"""Who asks: an upstream server (`elicitation/create`, `input_required`), or the gateway itself."""
GatewayReason = Literal["missing_arguments", "confirmation"]
"""Why the gateway asks on its own (see `router.asks`)."""
SummaryRow = tuple[
    str, str, str, Source, GatewayReason | None, str, str | None, str | None, str | None, int, str | None, float, float
]
"""`Elicitation.summary_row()`: the values of `SUMMARY_FIELDS`, typed (`RecentEnds` reads them, no `cast` call)."""


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

    def ask(self, el: Elicitation, request: JsonObject) -> Awaitable[object]:
        """Present `request` (already prefixed with the asking server; on a repeat, carrying the errors)
        and return the raw answer, whatever its shape (the broker checks it). Raises
        `elicitation.responders.HumanGone`, or `MCPError` when the human's side failed it (a push to a client that
        went away raises the client's error: the broker tells that apart, `PushToClient.gone`).
        """
        ...

    def ended(self, el: Elicitation) -> None:
        """The broker recorded the end of `el`: drop whatever was kept to present it."""
        ...


def new_id() -> str:
    """`uuid.uuid4().hex` (a random version-4 UUID, 32 hex digits) without the `UUID` object: a third of its cost,
    paid for every elicitation; made ahead in batches (`_IDS`), not with a system call for each."""
    return _IDS.pop() if _IDS else _IDS.refill()


def _uuid4_hex(random: bytes) -> str:
    """16 random bytes as a version-4 UUID's 32 hex digits."""
    raw = bytearray(random)
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    return raw.hex()


_IDS = RandomBatch(16, _uuid4_hex)


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
    id: str = field(default_factory=new_id)
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
    waiting: asyncio.Task[object] | None = None
    """The task that waits for its answer, while it waits (the broker's): `interrupt` wakes it. No cancel scope
    per question: the deadline is one loop timer (`timer`), and a stop cancels the wait itself."""
    timer: asyncio.TimerHandle | None = None
    """Its deadline on the event loop while it waits: calls `interrupt`."""
    interrupted: bool = False
    """`interrupt` cancelled the waiting task: the broker takes that cancellation for its own, not the call's."""
    stop_state: State | None = None
    """Set by whoever stops it from outside (client gone, call cancelled) before interrupting the wait."""
    abandon: Callable[[Elicitation, str], object] | None = None
    """Set by the broker once it is admitted: what ends it when no carrier came back within `grace`."""
    grace: float = 0.0
    _carriers: Carriers | None = None
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
    def carriers(self) -> Carriers | None:
        """What carries it to its human now (a client's response stream) and the grace period when nothing does
        (`elicitation.carriers`): None before the broker admitted it and once it ended; made when first asked
        for, as most questions never have a carrier tracked (stdio, 2026-07-28 rounds)."""
        if self._carriers is None and self.abandon is not None and not self.state.terminal:
            self._carriers = Carriers(self.grace, partial(self.abandon, self))
        return self._carriers

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
        if self._carriers is not None:  # no grace timer outlives it
            self._carriers.stop()
            self._carriers = None

    def stop(self, state: State, reason: str) -> None:
        """End it from outside: the waiting task wakes and records `state`."""
        if self.state.terminal or self.stop_state is not None:
            return
        self.stop_state, self.reason = state, reason
        self.interrupt()

    def wait_begins(self, task: asyncio.Task[object] | None = None) -> int:
        """The running task (`task`, when the caller has it at hand) waits for its answer from now until `wait_ends`,
        at most until `deadline`; returns how many cancellations of that task were pending already (for `woken`)."""
        if task is None:
            task = asyncio.current_task()
            assert task is not None, "an elicitation is waited for in a task"
        self.interrupted = False
        self.timer = asyncio.get_running_loop().call_at(self.deadline, self.interrupt, context=_TIMER_CONTEXT)
        self.waiting = task
        if self.stop_state is not None:  # stopped before it could be waited for
            self.interrupt()
        return task.cancelling()

    def woken(self, cancelling: int) -> bool:
        """In the waiting task, on its `CancelledError`: whether that was `interrupt` alone (the deadline, a stop),
        now taken back; False when the task itself is being cancelled (the caller raises it again)."""
        task = self.waiting
        return self.interrupted and task is not None and task.uncancel() <= cancelling

    def wait_ends(self) -> None:
        self.waiting = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def interrupt(self) -> None:
        """Wake the task waiting for its answer (its deadline came, or it was stopped): it goes on as from a
        question nobody answered (the broker tells this cancellation from the call's by `interrupted`)."""
        task = self.waiting
        if task is None or self.interrupted:
            return
        self.interrupted = True
        if task is asyncio.current_task():
            # Asked from inside that task, which is not at its wait right now: cancelled once it is back there.
            asyncio.get_running_loop().call_soon(self._cancel_wait)
        else:
            task.cancel()

    def _cancel_wait(self) -> None:
        if self.waiting is not None and self.interrupted:
            self.waiting.cancel()

    def summary(self) -> JsonObject:
        """What may be logged or shown: never the answer's values."""
        return summary_of(self.summary_row())

    def summary_row(self) -> SummaryRow:
        """`summary()`'s values in `SUMMARY_FIELDS` order: what the broker keeps of the last ends (`RecentEnds`)."""
        origin = self.origin
        return (
            self.id,
            self.server,
            self.mode,
            self.source,
            self.gateway_reason,
            _STATE_VALUES[self.state],  # the member's own string, shared (`str(state)` makes a copy each time)
            origin.peer.id if origin is not None else None,
            origin.peer.principal if origin is not None else None,
            self.answered_by or (self.responder.name if self.responder is not None else None),
            self.attempts,
            self.reason,
            self.created_at,
            round((self.ended_at or time.time()) - self.created_at, 3),
        )
