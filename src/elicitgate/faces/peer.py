"""Who is on the other side of the face: one `DownstreamPeer` (`elicitgate.contracts`) per client
connection, one `DownstreamCall` per request of theirs that the gateway is serving."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Generic, TypeVar

import anyio
from mcp_types import CONNECTION_CLOSED, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate._compat import connection_of, request_outbound
from elicitgate.capabilities import Declared, capabilities_dict, elicitation_modes
from elicitgate.contracts import DownstreamPeer, Era, Question
from elicitgate.elicitation.url_routes import SessionTarget
from elicitgate.json_shapes import JsonObject

logger = logging.getLogger(__name__)

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key of a client connection's `state` (the SDK's `Connection.state`, a dict by name), in the
    manner of aiohttp's `AppKey`: what is kept under it has type `T`, and only the key reads or writes it."""

    __slots__ = ("name", "kind")

    def __init__(self, name: str, kind: type[T]) -> None:
        self.name = name
        self.kind = kind
        """What is kept under the key: it types `get` (nothing is checked at run time, as in aiohttp)."""

    def __repr__(self) -> str:
        return f"<StateKey({self.name}, type={self.kind.__name__})>"

    def get(self, state: Mapping[str, Any]) -> T | None:
        return state.get(self.name)

    def set(self, state: MutableMapping[str, Any], value: T) -> None:
        state[self.name] = value


PEER = StateKey("elicitgate.peer", DownstreamPeer)
"""The peer of a client connection, made with its first request."""
_peer_ids = itertools.count(1)
_request_ids = itertools.count(1)
_UNREAD = object()
_NO_MODES: frozenset[str] = frozenset()
_NO_RAW: JsonObject = {}


class DownstreamCall:
    """A client request the gateway is serving; elicitations it causes are routed back here (an `Origin`).

    It keeps what the call reads of its request while it is served (its id, its protocol version, its tool's name for
    the audit trail, the request's channel back to the client and the client's connection), not the SDK's request
    context: that context holds the decoded params and a session of its own, which a call waiting on a human would
    keep for as long as the human takes (design invariant 8: a pending question costs a record, not what made it)."""

    __slots__ = (
        "peer",
        "method",
        "request_id",
        "protocol_version",
        "tool",
        "_outbound",
        "_connection",
        "_modes_of",
        "_modes",
        "_raw_of",
        "_raw",
    )

    asks_in_rounds = False

    def __init__(
        self,
        *,
        peer: DownstreamPeer,
        ctx: ServerRequestContext[Any, Any],
        method: str,
        connection: Connection | None = None,
        declared: Declared | None = None,
    ) -> None:
        """`connection`: the request's (`connection_of(ctx)`), where the caller has it already; `declared`: its
        capabilities read already (a 2026-07-28 request's envelope, `faces.modern.EnvelopeConnection.declared`)."""
        self.peer = peer
        self.method = method
        self.request_id: RequestId | None = ctx.request_id
        self.protocol_version = ctx.protocol_version
        self.tool = _tool_of(method, ctx.params)
        """The tool or prompt the client called (its namespaced name), for the audit trail."""
        self._outbound: Any = request_outbound(ctx)
        if connection is None:
            connection = connection_of(ctx)
        self._connection = connection
        if declared is not None:
            self._modes_of = self._raw_of = declared[0]
            self._raw, self._modes = declared[1], declared[2]
            return
        self._modes_of = _UNREAD
        """The capabilities model `_modes` was read from: read again once the connection holds another."""
        self._modes = _NO_MODES
        self._raw_of = _UNREAD
        """The capabilities model `_raw` was dumped from, as `_modes_of`."""
        self._raw = _NO_RAW

    @property
    def era(self) -> Era:
        return "modern" if self.protocol_version in MODERN_PROTOCOL_VERSIONS else "handshake"

    @property
    def cancel_requested(self) -> bool:
        """The client asked to cancel this request (`notifications/cancelled`), not merely went away."""
        return bool(self._outbound.cancel_requested.is_set())

    @property
    def modes(self) -> frozenset[str]:
        """What this request's client declared (per request in 2026-07-28, per session before). Kept while the
        connection holds the same capabilities model: read for every try upstream and every question."""
        capabilities = self._connection.client_capabilities
        if capabilities is not self._modes_of:
            self._modes = elicitation_modes(capabilities)
            self._modes_of = capabilities
        return self._modes

    def raw_capabilities(self) -> JsonObject:
        """Kept as `modes` is (read it, do not change it: `capabilities_dict`'s own)."""
        capabilities = self._connection.client_capabilities
        if capabilities is not self._raw_of:
            self._raw = capabilities_dict(capabilities)
            self._raw_of = capabilities
        return self._raw

    def send_request(self, method: str, params: Mapping[str, Any]) -> Awaitable[JsonObject]:
        """Send a server-to-client request on this call's own channel (its POST stream on HTTP).

        Raw on purpose: the typed `ServerSession.send_request` re-models the params and drops fields
        it does not know (`ui`, extensions), which must reach the client untouched. On stdio, the face endpoint's
        future for the request (`faces.dispatch.RequestContext.asking`), no coroutine at all: no frame is held while a
        human is asked (the face's endpoint raises `ClientGone` itself, tells the client with `notifications/cancelled`
        when the request is abandoned, and the pipe is the one stream to tell of a cancel).
        """
        outbound = self._outbound
        request_id = f"eg-{next(_request_ids)}"
        if outbound.transport.kind == "stdio":
            asking = getattr(outbound, "asking", None)  # a context the SDK wrapped has none: its own request then
            if asking is not None:
                return asking(method, params, request_id)
            return outbound.send_raw_request(method, params, {"request_id": request_id})
        return self._send_request(outbound, request_id, method, params)

    async def _send_request(self, outbound: Any, request_id: str, method: str, params: Mapping[str, Any]) -> JsonObject:
        opts: CallOptions = {"request_id": request_id}
        try:
            return await outbound.send_raw_request(method, params, opts)
        except MCPError as exc:
            # The wire ending (`PeerLost`), or the client saying so: the `mcp` SDK's client answers what it
            # was asked with this code as it closes its session, before its DELETE arrives.
            if exc.error.code == CONNECTION_CLOSED:
                raise errors.ClientGone(exc.error.code, exc.error.message, exc.error.data) from exc
            raise
        except anyio.get_cancelled_exc_class():
            # The dispatcher sends its courtesy `notifications/cancelled` on this call's own stream, which on
            # HTTP is gone once the client cancelled the call or the call ended: say it on the session's
            # stream too, so the client stops asking the user.
            if outbound.cancel_requested.is_set() or not outbound.can_send_request:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await self.peer.connection.outbound.notify(
                        "notifications/cancelled", {"requestId": request_id, "reason": "the gateway abandoned it"}
                    )
            raise

    async def ask(self, method: str, params: JsonObject, elicitation: Question | None) -> Any:
        """Only calls that can return `input_required` (tools, prompts, resource reads) can ask."""
        raise errors.gateway_error(
            errors.ELICITATION_UNDELIVERABLE,
            f"a 2026-07-28 client's {self.method} cannot carry input requests",
            method=self.method,
        )

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        await self._outbound.notify(method, params)

    def expect(self, count: int) -> None:
        """Questions are asked one after another on the client's session: nothing to hold back."""

    def require(self, capabilities: JsonObject) -> None:
        """Without rounds there is no -32021 to end with: the caller's own error says what was missing."""

    def elicitation_ended(self, elicitation: Question) -> None:
        """Nothing kept per elicitation."""

    def carry(self, elicitation: Question) -> None:
        """The request's channel attaches its carrier (its response stream on an HTTP session)."""
        carry = getattr(self._outbound, "carry", None)  # a context the SDK wrapped has none
        if carry is not None:
            carry(elicitation)

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """The client's session hears it: the request itself may have ended long before."""
        await SessionTarget(self.peer).url_completed(params)


def _tool_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The name a tools/call or prompts/get names (None for other methods, or a name that is no string). Read and
    typed without a call: a call is made of every request."""
    name = params["name"] if params is not None and method in _NAMING and "name" in params else None
    return name if type(name) is str or isinstance(name, str) else None


_NAMING = frozenset({"tools/call", "prompts/get"})


def peer_for(ctx: ServerRequestContext[Any, Any], on_new: Callable[[DownstreamPeer], object]) -> DownstreamPeer:
    """The peer for this request's connection, created (and `on_new` called) the first time."""
    connection = connection_of(ctx)
    peer = PEER.get(connection.state)
    if peer is None:
        peer = DownstreamPeer(id=f"c{next(_peer_ids)}", connection=connection)
        PEER.set(connection.state, peer)
        on_new(peer)
    return peer


def known_peer(ctx: ServerRequestContext[Any, Any]) -> DownstreamPeer | None:
    """The peer of this request's connection if one was made already (never makes one)."""
    return PEER.get(connection_of(ctx).state)
