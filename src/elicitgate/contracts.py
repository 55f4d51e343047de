"""The named seams: what the layers hand each other, with no behaviour of their own.

`Origin` is a call that can be asked: the downstream request (or a 2026-07-28 client's parked call)
that caused an upstream's request for input. The face makes them, the broker and the router ask
them, the upstream link records them against its requests in flight. `DownstreamPeer` is one client
and everything the gateway keeps about it, typed. Nothing here imports from the rest of the package,
so every layer may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
from mcp_types import ClientCapabilities, RequestId

from mcp.server.connection import Connection

if TYPE_CHECKING:
    from elicitgate.elicitation.model import Elicitation
    from elicitgate.upstreams.connection import UpstreamConnection

Era = Literal["handshake", "modern"]
"""`handshake`: a 2025-06-18 .. 2025-11-25 peer (an `initialize` handshake, a session, requests pushed to
the client); `modern`: a 2026-07-28 peer (no handshake, input requests returned as `input_required`)."""

def elicitation_modes(capabilities: ClientCapabilities | None) -> frozenset[str]:
    """The elicitation modes a client declared; `{"elicitation": {}}` means form only."""
    if capabilities is None or capabilities.elicitation is None:
        return frozenset()
    declared = capabilities.elicitation
    modes = {mode for mode, said in (("form", declared.form), ("url", declared.url)) if said is not None}
    return frozenset(modes or {"form"})


def declared_capabilities(modes: frozenset[str], raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The client capabilities the gateway declares to an upstream for a client: the elicitation `modes`,
    and the sampling and roots the client itself declared (`raw`), which the gateway relays as they are."""
    caps: dict[str, Any] = {}
    if modes:
        caps["elicitation"] = {mode: {} for mode in sorted(modes)}
    for passthrough in ("sampling", "roots"):
        if raw is not None and passthrough in raw:
            caps[passthrough] = raw[passthrough]
    return caps


def capabilities_dict(capabilities: ClientCapabilities | None) -> dict[str, Any]:
    """Declared capabilities as JSON, the way the client sent them."""
    return capabilities.model_dump(by_alias=True, mode="json", exclude_none=True) if capabilities is not None else {}


class UrlCompletionTarget(Protocol):
    """Who hears that an accepted URL-mode interaction is over: a handshake-era client (its session gets
    `notifications/elicitation/complete`), or a 2026-07-28 client's parked call (its waiting retry returns)."""

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """The upstream finished the interaction named by `params["elicitationId"]`."""
        ...


class HostedModes(Protocol):
    """What the gateway's own hosting can take for a client (`elicitation.hosting.Hosting`)."""

    def modes_for(self, server: str, peer: DownstreamPeer) -> frozenset[str]:
        """The elicitation modes the gateway presents itself for `peer`'s calls to `server` (its hosted page or
        inbox): an upstream connection of that client's declares them too."""
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

    async def send_request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a server-to-client request (`elicitation/create`, sampling, roots) and return the raw
        result; raises `MCPError` with the client's error, `errors.ClientGone` if its connection closed."""
        ...

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Send a notification scoped to the call (progress, log messages)."""
        ...

    async def ask(self, method: str, params: dict[str, Any], elicitation: Elicitation | None) -> Any:
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

    def elicitation_ended(self, elicitation: Elicitation) -> None:
        """The broker recorded the end of an elicitation this call caused."""
        ...

    def carry(self, elicitation: Elicitation) -> None:
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


@dataclass(eq=False)
class DownstreamPeer:
    """One client, with what it declared, what it has pending and what the gateway keeps for it."""

    id: str
    connection: Connection
    calls: set[Origin] = field(default_factory=set[Origin])
    elicitations: set[Elicitation] = field(default_factory=set["Elicitation"])
    upstreams: dict[str, UpstreamConnection] = field(default_factory=dict[str, "UpstreamConnection"])
    upstream_locks: dict[str, anyio.Lock] = field(default_factory=dict[str, anyio.Lock])
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

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """A URL-mode elicitation this client accepted is done: `notifications/elicitation/complete`."""
        if not self.closed:
            await self.connection.outbound.notify("notifications/elicitation/complete", params)

    @property
    def identity(self) -> str:
        """Who its limits count against: its principal, else its own id."""
        return self.principal or self.id

    @property
    def capabilities(self) -> ClientCapabilities | None:
        return self.connection.client_capabilities

    @property
    def modes(self) -> frozenset[str]:
        return elicitation_modes(self.capabilities)

    @property
    def client_name(self) -> str:
        params = self.connection.client_params
        return params.client_info.name if params is not None else "unknown client"

    @property
    def protocol_version(self) -> str:
        return self.connection.protocol_version

    def raw_capabilities(self) -> dict[str, Any]:
        return capabilities_dict(self.capabilities)
