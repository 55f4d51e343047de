"""The contracts: every Protocol the layers hand each other, `Era`, and the record of a client they all pass
around (`DownstreamPeer`), in the manner of aiohttp's `abc.py`.

Nothing here does anything: a Protocol names what its implementations (each one says where they live) must
offer, and the record holds data, with properties that only read its own fields. Nothing here imports from
the rest of the package, not even for type checking, so every layer may import it.

`Origin` is a call that can be asked: the downstream request (or a 2026-07-28 client's parked call) that
caused an upstream's request for input. The face makes them, the broker and the router ask them, the upstream
link records them against its requests in flight. A `Question` is an elicitation as a call and what carries it
to its client see it; the broker owns the whole record (`elicitation.model.Elicitation`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import anyio
from mcp_types import ClientCapabilities, RequestId

from mcp.server.connection import Connection

Era = Literal["handshake", "modern"]
"""`handshake`: a 2025-06-18 .. 2025-11-25 peer (an `initialize` handshake, a session, requests pushed to
the client); `modern`: a 2026-07-28 peer (no handshake, input requests returned as `input_required`)."""


# -- questions -----------------------------------------------------------------------------------------


class QuestionState(Protocol):
    """Where a question is in its life (`elicitation.model.State`)."""

    @property
    def terminal(self) -> bool:
        """It has ended (accepted, declined, cancelled, timed out or failed)."""
        ...


class QuestionCarriers(Protocol):
    """What carries a question to its human right now, and the grace period when nothing does
    (`elicitation.carriers.Carriers`)."""

    def attach(self, carrier: object) -> None:
        """`carrier` (a client's response stream) carries the question now: no grace period runs."""
        ...

    def detach(self, carrier: object, why: str) -> None:
        """`carrier` left (`why`: for the audit trail); the last one leaving starts the grace period."""
        ...


class Question(Protocol):
    """One elicitation as the call that caused it and the streams that carry it see it
    (`elicitation.model.Elicitation`, which the broker owns)."""

    @property
    def state(self) -> QuestionState: ...

    @property
    def carriers(self) -> QuestionCarriers | None:
        """Set by the broker once the question is admitted."""
        ...

    @property
    def hosted(self) -> bool:
        """A hosted page or the inbox shows it: it is answered elsewhere than on the call's client."""
        ...


# -- tasks ---------------------------------------------------------------------------------------------


class CallTask(Protocol):
    """A call handed to its client as a task (`bridging.task_extension.ModernTask`)."""

    def handle(self) -> dict[str, Any]:
        """The `CreateTaskResult` fields the client is answered with."""
        ...


Call_contra = TypeVar("Call_contra", contravariant=True)


class CallTasks(Protocol[Call_contra]):
    """Where a 2026-07-28 client's parked call becomes a task (`bridging.task_extension.ModernTasks`)."""

    @property
    def hand_over_after(self) -> float | None:
        """Seconds a call may wait with nothing to return before it is handed over (`tasks.hand_over_after`)."""
        ...

    def has_room(self, peer: DownstreamPeer) -> bool:
        """`peer` may hold one more task (its pending limit)."""
        ...

    def admit(self, peer: DownstreamPeer) -> None:
        """Raise the pending limit's error (-32014) when `peer` may not hold one more task."""
        ...

    def create(self, park: Call_contra, *, task_id: str | None = None, ttl_ms: float | None = None) -> CallTask:
        """`park` runs on as a task; its questions wait in the task's `inputRequests`."""
        ...


# -- calls ---------------------------------------------------------------------------------------------


class UrlCompletionTarget(Protocol):
    """Who hears that an accepted URL-mode interaction is over: a handshake-era client (its session gets
    `notifications/elicitation/complete`, `elicitation.url_routes.SessionTarget`), or a 2026-07-28 client's
    parked call (its waiting retry returns)."""

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """The upstream finished the interaction named by `params["elicitationId"]`."""
        ...


class Origin(UrlCompletionTarget, Protocol):
    """A call that can be asked: where an upstream's requests for input during the call are routed.

    Two kinds exist: `faces.peer.DownstreamCall` (one client request, answered in that request) and
    `bridging.rounds.ParkedCall` (a 2026-07-28 client's call, alive across its retries).
    """

    @property
    def peer(self) -> DownstreamPeer:
        """The client that made the call."""
        ...

    @property
    def era(self) -> Era:
        """The client's era for this call: how a question reaches it (a push, or an `input_required` round)."""
        ...

    @property
    def request_id(self) -> RequestId | None:
        """The id of the client request that started the call (log lines and the audit trail)."""
        ...

    @property
    def tool(self) -> str | None:
        """The tool or prompt called (its namespaced name), for the audit trail; None for other methods."""
        ...

    @property
    def modes(self) -> frozenset[str]:
        """The elicitation modes the client declared for this call (per request in 2026-07-28)."""
        ...

    @property
    def asks_in_rounds(self) -> bool:
        """Whether questions are gathered into rounds (several asked at once, see `expect`) instead of
        asked one after another."""
        ...

    def raw_capabilities(self) -> dict[str, Any]:
        """The client capabilities as declared, JSON (sampling and roots are relayed only when present)."""
        ...

    def send_request(self, method: str, params: Mapping[str, Any]) -> Awaitable[dict[str, Any]]:
        """Send a server-to-client request (`elicitation/create`, sampling, roots) and return the raw
        result (a coroutine, or a future no frame waits in); raises `MCPError` with the client's error,
        `errors.ClientGone` if its connection closed."""
        ...

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Send a notification scoped to the call (progress, log messages)."""
        ...

    async def ask(self, method: str, params: dict[str, Any], elicitation: Question | None) -> Any:
        """Put one question into the call's next `input_required` round and return the answer; raises
        `MCPError` when the call cannot carry input requests."""
        ...

    def expect(self, count: int) -> None:
        """`count` questions are about to be asked together: none is put to the client before all are in."""
        ...

    def require(self, capabilities: dict[str, Any]) -> None:
        """The upstream needs a capability the client did not declare: a call that can say so ends with
        -32021 (`MISSING_REQUIRED_CLIENT_CAPABILITY`); for the others this does nothing."""
        ...

    def elicitation_ended(self, elicitation: Question) -> None:
        """The broker recorded the end of an elicitation this call caused."""
        ...

    def carry(self, elicitation: Question) -> None:
        """`elicitation` was caused by this call: attach what carries the call to its client (a resumable HTTP
        response stream) to it (`elicitation.carriers`), so that the question ends once the client is gone for
        good; a channel that cannot break alone (stdio, a 2026-07-28 round) attaches nothing."""
        ...

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """The upstream finished a URL-mode interaction this call's client accepted."""
        ...


class ClientRequest(Origin, Protocol):
    """One request of a client, as the face serves it (`faces.peer.DownstreamCall`)."""

    @property
    def cancel_requested(self) -> bool:
        """The client asked to cancel this request (`notifications/cancelled`), not merely went away."""
        ...


# -- the record of a client ----------------------------------------------------------------------------


@dataclass(eq=False)
class DownstreamPeer:
    """One client: what it declared and what the gateway keeps about it. A record: its owners keep their own
    parts elsewhere, keyed by it (the broker its elicitations, each upstream link its connections)."""

    id: str
    connection: Connection
    calls: set[Origin] = field(default_factory=set[Origin])
    """Its calls in flight (the face's and the parked ones): a peer with one is not idle."""
    closed: bool = False
    principal: str | None = None
    """Set for 2026-07-28 clients, which have no connection of their own: one peer per principal,
    and `connection` is the one of its latest request. For a handshake-era session, the principal
    `http.auth` vouched for, if any. Limits are kept per principal (`Broker.admit_here`)."""
    last_seen: float = 0.0
    per_call: bool = False
    """A client that is one call and its retries (an unauthenticated 2026-07-28 client, see
    docs/routing.md): it borrows pooled upstream connections for the call instead of owning some."""
    log_level: str | None = None
    """The level a handshake-era client set with `logging/setLevel`, sent along to 2026-07-28 upstreams."""
    subscribed: set[tuple[str, str]] = field(default_factory=set[tuple[str, str]])
    """(server, upstream URI) a handshake-era upstream accepted `resources/subscribe` for."""
    listens: dict[tuple[str, str], anyio.CancelScope] = field(default_factory=dict[tuple[str, str], anyio.CancelScope])
    """(server, upstream URI) carried to a 2026-07-28 upstream as an open `subscriptions/listen`."""
    headless: bool = False
    """A request of this client carried an `elicitation.headless.headers` header: nobody watches it, its
    questions go to their hosted page (`elicitation.headless`)."""

    @property
    def identity(self) -> str:
        """Who its limits count against: its principal, else its own id."""
        return self.principal or self.id

    @property
    def capabilities(self) -> ClientCapabilities | None:
        return self.connection.client_capabilities

    @property
    def client_name(self) -> str:
        params = self.connection.client_params
        return params.client_info.name if params is not None else "unknown client"

    @property
    def protocol_version(self) -> str:
        return self.connection.protocol_version


# -- what the upstream side is handed --------------------------------------------------------------------

C_contra = TypeVar("C_contra", contravariant=True)


class InboundHandler(Protocol[C_contra]):
    """Who hears what a server sends up (`router.inbound.InboundRouter`, which decides whose call it is): its
    requests (`elicitation/create`, sampling, roots) and its notifications. `C_contra` is the upstream
    connection they came on (`upstreams.connection.UpstreamConnection`); `related`, the request of ours the
    wire says the message belongs to (a streamable HTTP POST's response stream names it), None on a wire that
    names none (stdio, SSE, the standalone GET stream)."""

    def on_server_request(
        self, connection: C_contra, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> Awaitable[dict[str, Any]]: ...

    async def on_server_notification(
        self, connection: C_contra, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> None: ...


class HostedModes(Protocol):
    """What the gateway's own hosting can take for a client (`elicitation.hosting.Hosting`)."""

    def modes_for(self, server: str, peer: DownstreamPeer) -> frozenset[str]:
        """The elicitation modes the gateway presents itself for `peer`'s calls to `server` (its hosted page or
        inbox): an upstream connection of that client's declares them too."""
        ...


# -- what the broker and the hosting are handed ----------------------------------------------------------


class SharedLimits(Protocol):
    """The broker's admission counted over all replicas (`cluster.limits.SharedLimits`, with `redis_url`);
    without it the broker counts in its process (`Broker.admit_here`)."""

    async def admit(self, server: str, peer: DownstreamPeer) -> str:
        """Check the pending and rate limits for `peer`'s identity; returns the identity it is counted
        against. Raises `MCPError` (-32014 a pending limit, -32015 the rate limit) when one is reached."""
        ...

    async def release(self, identity: str) -> None:
        """An elicitation admitted for `identity` ended."""
        ...


class SharedTaskRecords(Protocol):
    """2025-11-25 tasks followed across replicas (`cluster.tasks.SharedTasks`, with `redis_url`), as the task
    requests see them (`router.task_requests`)."""

    def elsewhere(self, task_id: Any) -> bool:
        """A task id that names another replica."""
        ...

    async def request(
        self, call: Origin, principal: str | None, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`tasks/get`, `tasks/result` or `tasks/cancel` of a task another replica holds, sent there."""
        ...

    async def listed(self, principal: str | None) -> list[dict[str, Any]]:
        """The principal's tasks on the other replicas."""
        ...

    async def open_elsewhere(self, principal: str) -> int:
        """The principal's tasks open on the other live replicas."""
        ...

    async def created(self, task_id: str, principal: str | None, task: Mapping[str, Any], keep: float) -> None:
        """A task made here, recorded for the principal's sessions on any replica."""
        ...

    async def ended(self, task_id: str, *, keep: float) -> None:
        """A task of this replica was seen ended."""
        ...


class Announces(Protocol):
    """The notifier as the hosting sees it (`elicitation.notify.Notifier`)."""

    def reaches(self, server: str, tool: str | None) -> bool:
        """A hosted question of this server and tool is announced to a person: its page needs no inbox."""
        ...


# -- resumable streams across replicas -----------------------------------------------------------------


class NamedStream(Protocol):
    """A resumable response stream as the replicas see it (`faces.event_streams.EventStream`)."""

    @property
    def name(self) -> str: ...


class Mirror(Protocol):
    """Where a broken stream's events are copied so that another replica can resume it
    (`cluster.streams.SharedStreams`)."""

    def appended(self, stream: NamedStream, seq: int, message: dict[str, Any], last: bool) -> None: ...

    def forget(self, stream: NamedStream) -> None: ...
