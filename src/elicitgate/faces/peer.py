"""Who is on the other side of the face: one `DownstreamPeer` per client connection, one
`DownstreamCall` per request of theirs that the gateway is serving."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import ClientCapabilities, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.dispatcher import CallOptions

from elicitgate import errors

if TYPE_CHECKING:
    from elicitgate.elicitation.model import Elicitation
    from elicitgate.upstreams.connection import UpstreamConnection

logger = logging.getLogger(__name__)

_PEER_KEY = "elicitgate.peer"
_peer_ids = itertools.count(1)
_request_ids = itertools.count(1)


def elicitation_modes(capabilities: ClientCapabilities | None) -> frozenset[str]:
    """The elicitation modes a client declared; `{"elicitation": {}}` means form only."""
    if capabilities is None or capabilities.elicitation is None:
        return frozenset()
    declared = capabilities.elicitation
    modes = {mode for mode in ("form", "url") if getattr(declared, mode) is not None}
    return frozenset(modes or {"form"})


@dataclass(eq=False)
class DownstreamPeer:
    """One client connection, with what it declared and what it has pending."""

    id: str
    connection: Connection
    calls: set[DownstreamCall] = field(default_factory=set)
    elicitations: set[Elicitation] = field(default_factory=set)
    upstreams: dict[str, UpstreamConnection] = field(default_factory=dict)
    upstream_locks: dict[str, anyio.Lock] = field(default_factory=dict)
    closed: bool = False
    state: dict[str, Any] = field(default_factory=dict)
    principal: str | None = None
    """Set for 2026-07-28 clients, which have no connection of their own: one peer per principal,
    and `connection` is the one of its latest request. For a handshake-era session, the principal
    `http.auth` vouched for, if any. Limits are kept per principal (`Broker._admit`)."""
    last_seen: float = 0.0
    per_call: bool = False
    """A client that is one call and its retries (an unauthenticated 2026-07-28 client, see
    docs/routing.md): it borrows pooled upstream connections for the call instead of owning some."""

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """A URL-mode elicitation this client accepted is done: `notifications/elicitation/complete`."""
        if not self.closed:
            await self.connection.outbound.notify("notifications/elicitation/complete", params)

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
        caps = self.capabilities
        return caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps is not None else {}


@dataclass(eq=False)
class DownstreamCall:
    """A client request the gateway is serving; elicitations it causes are routed back here."""

    peer: DownstreamPeer
    ctx: ServerRequestContext[Any, Any]
    method: str

    @property
    def request_id(self) -> RequestId | None:
        return self.ctx.request_id

    @property
    def era(self) -> str:
        return "modern" if self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else "handshake"

    @property
    def tool(self) -> str | None:
        """The tool or prompt the client called (its namespaced name), for the audit trail."""
        name = (self.ctx.params or {}).get("name") if self.method in ("tools/call", "prompts/get") else None
        return name if isinstance(name, str) else None

    @property
    def cancel_requested(self) -> bool:
        """The client asked to cancel this request (`notifications/cancelled`), not merely went away."""
        return self.ctx.session._request_outbound.cancel_requested.is_set()  # noqa: SLF001

    @property
    def modes(self) -> frozenset[str]:
        """What this request's client declared (per request in 2026-07-28, per session before)."""
        return elicitation_modes(connection_of(self.ctx).client_capabilities)

    def raw_capabilities(self) -> dict[str, Any]:
        caps = connection_of(self.ctx).client_capabilities
        return caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps is not None else {}

    async def send_request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a server-to-client request on this call's own channel (its POST stream on HTTP).

        Raw on purpose: the typed `ServerSession.send_request` re-models the params and drops fields
        it does not know (`ui`, extensions), which must reach the client untouched.
        """
        outbound = self.ctx.session._request_outbound  # noqa: SLF001 - the SDK's request-scoped channel
        request_id = f"eg-{next(_request_ids)}"
        opts: CallOptions = {"request_id": request_id}
        try:
            return await outbound.send_raw_request(method, params, opts)
        except anyio.get_cancelled_exc_class():
            # The SDK sends its courtesy `notifications/cancelled` on this call's own stream, which on
            # HTTP is gone once the client cancelled the call or the call ended: say it on the
            # session's stream too, so the client stops asking the user.
            if outbound.cancel_requested.is_set() or not outbound.can_send_request:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await self.peer.connection.outbound.notify(
                        "notifications/cancelled", {"requestId": request_id, "reason": "the gateway abandoned it"}
                    )
            raise

    async def ask(self, method: str, params: Mapping[str, Any], elicitation: Any | None) -> Any:
        """Only calls that can return `input_required` (tools, prompts, resource reads) can ask."""
        raise errors.gateway_error(
            errors.ELICITATION_UNDELIVERABLE,
            f"a 2026-07-28 client's {self.method} cannot carry input requests",
            method=self.method,
        )

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        outbound = self.ctx.session._request_outbound  # noqa: SLF001
        await outbound.notify(method, params)


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    return ctx.session._connection  # noqa: SLF001 - the per-client Connection has no public accessor


def peer_for(ctx: ServerRequestContext[Any, Any], on_new: Any) -> DownstreamPeer:
    """The peer for this request's connection, created (and `on_new` called) the first time."""
    connection = connection_of(ctx)
    peer = connection.state.get(_PEER_KEY)
    if peer is None:
        peer = DownstreamPeer(id=f"c{next(_peer_ids)}", connection=connection)
        connection.state[_PEER_KEY] = peer
        on_new(peer)
    return peer


def known_peer(ctx: ServerRequestContext[Any, Any]) -> DownstreamPeer | None:
    """The peer of this request's connection if one was made already (never makes one)."""
    return connection_of(ctx).state.get(_PEER_KEY)
