"""One live connection to an upstream server, on its JSON-RPC endpoint.

Messages are plain dicts (`wire.endpoint`): the gateway forwards what it does not act on
without re-modelling it. The connection negotiates the era once (the `initialize` handshake, then
a `server/discover` probe as the fallback), stamps every request the way that era wants, and
remembers which downstream call each in-flight upstream request belongs to, so a server-initiated
request can be traced back to its origin (by `router.inbound`, from what the wire names and what is in flight).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.abc
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    RequestId,
)
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)

from elicitgate import __version__
from elicitgate.config import HttpServer, StdioServer
from elicitgate.contracts import DownstreamPeer, Era, InboundHandler, Origin
from elicitgate.errors import ConnectError, describe_failure
from elicitgate.json_shapes import JsonObject, is_array, is_mapping, is_object
from elicitgate.logs import forget_request
from elicitgate.upstreams.clock import PausableDeadline
from elicitgate.upstreams.transports import STDERR_TAIL_LINES, open_transport
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint, ProgressCallback

logger = logging.getLogger(__name__)

GATEWAY_CLIENT_INFO: JsonObject = {"name": "elicitgate", "version": __version__}
DISCOVER_TIMEOUT = 10.0
MAX_KEPT_HEADERS = 256
"""The 2026-07-28 requests' header dicts a connection keeps (`UpstreamConnection._stamp`): one per method and name
called; past this many (a server with more tools, or resources read by many URIs), they are made again."""
ENDING_WAIT = 5.0
"""Seconds `UpstreamConnection.unreachable` waits for a failed transport to end (its DELETE and its tasks'
ends are bounded to 2 s each)."""

@dataclass
class Negotiated:
    era: Era
    protocol_version: str
    capabilities: JsonObject
    server_info: JsonObject | None
    instructions: str | None


_InFlight = tuple[Origin | None, PausableDeadline, list[str] | None]
"""A request in flight: the downstream call it was sent for, its clock, and where the caller of `request` hears of
server requests that may belong to it (`asked`). A tuple: no `__init__` of its own to run for every request."""


@dataclass(eq=False)
class UpstreamConnection:
    """A negotiated connection; create with `UpstreamConnection.open`."""

    server: str
    config: StdioServer | HttpServer
    endpoint: Endpoint
    negotiated: Negotiated | None = None
    owner: DownstreamPeer | None = None
    """The downstream session that owns this connection under `per_session`; `None` when shared."""
    closed: anyio.Event = field(default_factory=anyio.Event)
    stderr_tail: deque[str] = field(default_factory=lambda: deque[str]())
    """A stdio server's last lines of stderr."""
    _in_flight: dict[RequestId, _InFlight] = field(default_factory=dict[RequestId, _InFlight])
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _advertised: JsonObject = field(default_factory=JsonObject)
    _version_headers: dict[str, str] | None = None
    """The headers of every handshake-era message: the negotiated version (`_stamp`)."""
    _modern_headers: dict[tuple[str, str | None], dict[str, str]] = field(
        default_factory=dict[tuple[str, str | None], dict[str, str]])
    """A 2026-07-28 request's headers by (method, the name it calls), one dict for every request alike (`_stamp`):
    at most `MAX_KEPT_HEADERS`."""
    pool_key: str = ""
    """What it declared to the server, for the link's pool of per-call connections."""
    probing: bool = False
    """The link is pinging it to see whether the upstream is still there."""
    last_active: float = 0.0
    """When a request on it last ended (anyio clock): the link closes connections idle too long."""
    last_answer: float = 0.0
    """When the server last answered a request on it with a result (anyio clock): a sign of life while a
    probe's ping waits behind a busy server."""
    _cancel: anyio.CancelScope | None = None
    """Stops the transport's task (`close`)."""
    _loop: asyncio.AbstractEventLoop | None = None
    """The event loop its requests run in, asked for at the first (each request's clock holds it)."""
    failure: BaseException | None = None
    """What ended the transport, once `closed` is set (a cancellation when the gateway closed it)."""
    live_tasks: dict[str, float] = field(default_factory=dict[str, float])
    """Upstream task ids a client reaches through this connection, with when the gateway forgets each (anyio
    clock; `router.tasks`): while one is alive the link neither reaps nor evicts the connection."""

    async def unreachable(self) -> str | None:
        """Why, when the connection ended because its streamable HTTP server could not be reached at all
        (the connection refused, no address): no request sent then got there. Waits (briefly) for the
        transport to have ended and said why."""
        if not isinstance(self.config, HttpServer) or self.config.transport != "http":
            return None
        with anyio.move_on_after(ENDING_WAIT):
            await self.closed.wait()
        failure = self.failure
        if isinstance(failure, BaseExceptionGroup):
            failure = _first_leaf(cast("BaseExceptionGroup[BaseException]", failure))
        from elicitgate.errors import HttpConnectError as Unreachable

        return describe_failure(failure) if isinstance(failure, Unreachable) else None

    def runs_tasks(self) -> bool:
        now = anyio.current_time()
        return any(expires > now for expires in self.live_tasks.values())

    def touch(self) -> None:
        self.last_active = anyio.current_time()

    @property
    def era(self) -> Era:
        return self.negotiated.era if self.negotiated else "handshake"

    # -- requests to the upstream -------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        origin: Origin | None = None,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        client_capabilities: JsonObject | None = None,
        asked: list[str] | None = None,
    ) -> JsonObject:
        """Send one request and return its raw result; upstream errors raise `MCPError` intact.

        `asked` gets the method of every request the server sends while this one is in flight and that may
        belong to it (on a wire that names no request: every one of them).
        """
        request_id = f"eg-{next(self._ids)}"
        sent, headers = self._stamp(method, params, client_capabilities)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        with PausableDeadline(timeout, loop) as clock:
            self._in_flight[request_id] = (origin, clock, asked)
            endpoint = self.endpoint
            try:
                result = await endpoint.asking(
                    request_id, method, sent, headers=headers, on_progress=on_progress, settled_by_caller=True
                )
            finally:
                # Settled here, in this step: a done callback of the endpoint's ran a loop turn of its own first.
                endpoint.asked_over(request_id, headers)
                del self._in_flight[request_id]
                self.last_active = clock.loop.time()  # `now()`: the loop in hand, no `getpid` to find it
            self.last_answer = self.last_active  # the clock read once for both
            return result

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        stamped, headers = self._stamp(method, params, None)
        await self.endpoint.notify(method, stamped, headers=headers)

    def _stamp(
        self, method: str, given: Mapping[str, Any] | None, client_capabilities: JsonObject | None
    ) -> tuple[Mapping[str, Any] | None, Mapping[str, str] | None]:
        """`params` and the HTTP headers as the negotiated era wants them: in the handshake era `given` itself and
        one headers dict for every request, in 2026-07-28 a copy of `given` with the era's `_meta` and one headers
        dict for every request of the same method and name (no headers dict is written to on the way: a call in
        flight keeps its own)."""
        negotiated = self.negotiated
        if negotiated is None:
            return given, None
        if negotiated.era != "modern":
            headers = self._version_headers
            if headers is None or headers[MCP_PROTOCOL_VERSION_HEADER] != negotiated.protocol_version:
                headers = self._version_headers = {MCP_PROTOCOL_VERSION_HEADER: negotiated.protocol_version}
            return given, headers
        params: JsonObject = dict(given) if given else {}
        meta = dict(params.get("_meta") or {})
        meta[PROTOCOL_VERSION_META_KEY] = negotiated.protocol_version
        meta[CLIENT_INFO_META_KEY] = GATEWAY_CLIENT_INFO
        meta[CLIENT_CAPABILITIES_META_KEY] = (
            client_capabilities if client_capabilities is not None else self._advertised
        )
        params["_meta"] = meta
        name_key = NAME_BEARING_METHODS.get(method)
        name = params.get(name_key) if name_key is not None else None
        key = (method, name if isinstance(name, str) else None)
        headers = self._modern_headers.get(key)
        if headers is None or headers[MCP_PROTOCOL_VERSION_HEADER] != negotiated.protocol_version:
            # Made once per method and name, not per request (`encode_header_value` runs two regular expressions).
            headers = {MCP_PROTOCOL_VERSION_HEADER: negotiated.protocol_version, MCP_METHOD_HEADER: method}
            if key[1] is not None:
                headers[MCP_NAME_HEADER] = encode_header_value(key[1])
            if len(self._modern_headers) >= MAX_KEPT_HEADERS:
                self._modern_headers.clear()
            self._modern_headers[key] = headers
        return params, headers

    def origin_of(self, request_id: RequestId) -> Origin | None:
        """The downstream call our request `request_id` was sent for, while it is in flight."""
        entry = self._in_flight.get(request_id)
        return entry[0] if entry is not None else None

    @property
    def tags_origin(self) -> bool:
        """Its wire names the request a server message belongs to (streamable HTTP), where one is in flight."""
        return isinstance(self.config, HttpServer) and self.config.transport == "http"

    def note_asked(self, inbound: Inbound, method: str) -> None:
        """Tell the requests in flight that asked to hear of it (`request(asked=...)`) that the server sent
        `method`: the one whose stream carried it, or, on a wire that names none, every one of them."""
        named = inbound.related_request_id
        entries = [self._in_flight.get(named)] if named is not None else list(self._in_flight.values())
        for entry in entries:
            if entry is not None and (asked := entry[2]) is not None:
                asked.append(method)

    def clocks_for(self, origin: Origin) -> list[PausableDeadline]:
        return [clock for of, clock, _ in self._in_flight.values() if of is origin]

    def clocks_in_flight(self) -> list[PausableDeadline]:
        """The clocks of every call in flight on this connection that has a downstream origin."""
        return [clock for origin, clock, _ in self._in_flight.values() if origin is not None]

    def in_flight_origins(self) -> list[Origin]:
        return [origin for origin, _, _ in self._in_flight.values() if origin is not None]

    # -- lifecycle --------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        server: str,
        config: StdioServer | HttpServer,
        handler: InboundHandler[UpstreamConnection],
        task_group: anyio.abc.TaskGroup,
        *,
        advertised_capabilities: JsonObject,
        connect_timeout: float,
        owner: DownstreamPeer | None = None,
    ) -> UpstreamConnection:
        """Start the transport in `task_group`, negotiate, and return the ready connection.

        The connection lives until `close()` or until the upstream goes away; `closed` is set then.
        """
        ready: anyio.Event = anyio.Event()
        holder = _Opening()
        stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

        async def run() -> None:
            forget_request()  # the connection serves later requests too: not the one that opened it
            try:
                async with AsyncExitStack() as stack:
                    wire = await stack.enter_async_context(open_transport(config, stderr_tail, server=server))
                    endpoint = Endpoint(wire.messages, f"upstream {server!r}")
                    conn = holder.conn = cls(server=server, config=config, endpoint=endpoint, owner=owner)
                    conn._advertised = advertised_capabilities

                    def on_request(inbound: Inbound, method: str, params: JsonObject | None) -> Awaitable[JsonObject]:
                        # The handler's awaitable itself: no frame of ours held while a person answers.
                        if method == "ping":
                            return _pong()
                        conn.note_asked(inbound, method)
                        if params is None:
                            return handler.on_server_request(conn, inbound.related_request_id, method, params)
                        # The handler gets the params' fields in a dict of its own, and the server's message (decoded
                        # for this alone) is emptied: the endpoint keeps the `Inbound` and these params for as long as
                        # a person answers, and the broker keeps its own copy of what it asks (with the schema every
                        # question asking the same shares), so the server's ~1 KB need not be held besides.
                        answer = handler.on_server_request(conn, inbound.related_request_id, method, dict(params))
                        params.clear()
                        inbound.message = _READ
                        return answer

                    async def on_notify(inbound: Inbound, method: str, params: JsonObject | None) -> None:
                        await handler.on_server_notification(conn, inbound.related_request_id, method, params)

                    async with anyio.create_task_group() as inner:
                        holder.scope = inner.cancel_scope
                        await inner.start(endpoint.run, on_request, on_notify)
                        with anyio.fail_after(connect_timeout):
                            conn.negotiated = await _negotiate(endpoint, advertised_capabilities, config.era)
                        if conn.negotiated.era == "handshake":
                            await wire.standalone_settled()
                        ready.set()
                        # The endpoint returns when the upstream closes its end.
            except BaseException as exc:  # noqa: BLE001 - reported through `holder`, re-raised below
                if holder.error is None:
                    holder.error = exc
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    raise
            finally:
                if holder.conn is not None:
                    holder.conn.failure = holder.error
                    holder.conn.closed.set()
                ready.set()

        task_group.start_soon(run, name=f"upstream:{server}")
        await ready.wait()
        conn = holder.conn
        if conn is None or conn.negotiated is None:
            error = holder.error
            if isinstance(error, BaseExceptionGroup):
                error = _first_leaf(cast("BaseExceptionGroup[BaseException]", error))
            if isinstance(error, HandshakeRefused):
                # `auto` and no handshake: a 2026-07-28-only server. Ask it on a fresh wire (a stdio
                # server takes its era from the first request it sees).
                modern = config.model_copy(update={"era": "modern"})
                conn = await cls.open(
                    server, modern, handler, task_group, advertised_capabilities=advertised_capabilities,
                    connect_timeout=connect_timeout, owner=owner,
                )
                conn.config = config
                return conn
            url = config.url if isinstance(config, HttpServer) else None
            raise ConnectError(server, error, url=url, stderr_tail=list(stderr_tail))
        conn._cancel = holder.scope
        conn.stderr_tail = stderr_tail
        return conn

    async def close(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
        await self.closed.wait()


_READ: JsonObject = {}
"""What a served server request's `Inbound.message` becomes once its handler read it (never written to)."""


async def _pong() -> JsonObject:
    return {}


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first: BaseException = group.exceptions[0] if group.exceptions else group
    if first is not group and isinstance(first, BaseExceptionGroup):
        return _first_leaf(cast("BaseExceptionGroup[BaseException]", first))
    return first


@dataclass
class _Opening:
    """What `UpstreamConnection.open`'s transport task tells the caller waiting for it."""

    conn: UpstreamConnection | None = None
    scope: anyio.CancelScope | None = None
    """Cancels the transport's task (`UpstreamConnection.close`)."""
    error: BaseException | None = None


class HandshakeRefused(Exception):
    """`auto`: the server refused `initialize`, so it may speak only 2026-07-28."""


ELICITATION_TASKS: JsonObject = {"list": {}, "cancel": {}, "requests": {"elicitation": {"create": {}}}}
"""The `tasks` a handshake-era upstream is told of when it is told of elicitation: it may ask an elicitation as a
task (`tasks.requests.elicitation.create`; `Gateway.on_server_request` serves them, docs/tasks.md)."""


async def _negotiate(endpoint: Endpoint, capabilities: JsonObject, era: str) -> Negotiated:
    """The era to speak with the server: `auto` prefers the handshake.

    A server that speaks both eras gets the handshake: the `mcp` SDK's push-style servers (`ctx.elicit`,
    `ctx.session.create_message`, most Python servers) can only ask in that era, and the gateway bridges
    it to 2026-07-28 clients anyway. Only a server that refuses `initialize` is asked `server/discover`.
    """
    if era == "modern":
        return await _discover(endpoint, capabilities)
    try:
        return await _initialize(endpoint, capabilities)
    except MCPError as exc:
        if era == "handshake":
            raise
        raise HandshakeRefused(exc.error.message) from exc


async def _discover(endpoint: Endpoint, capabilities: JsonObject) -> Negotiated:
    raw = await endpoint.request(
        "eg-discover",
        "server/discover",
        {
            "_meta": {
                PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION,
                CLIENT_INFO_META_KEY: GATEWAY_CLIENT_INFO,
                CLIENT_CAPABILITIES_META_KEY: capabilities,
            }
        },
        timeout=DISCOVER_TIMEOUT,
        cancel_on_abandon=False,
        headers={MCP_PROTOCOL_VERSION_HEADER: LATEST_MODERN_VERSION, MCP_METHOD_HEADER: "server/discover"},
    )
    supported = raw.get("supportedVersions")
    supported = supported if is_array(supported) else []
    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in supported]
    if not mutual:
        raise MCPError(code=-32022, message=f"server supports only {supported}, not 2026-07-28")
    meta = raw.get("_meta")
    server_info = meta.get("io.modelcontextprotocol/serverInfo") if is_mapping(meta) else None
    return Negotiated(
        era="modern",
        protocol_version=mutual[-1],
        capabilities=raw.get("capabilities") or {},
        server_info=server_info if is_object(server_info) else None,
        instructions=raw.get("instructions"),
    )


async def _initialize(endpoint: Endpoint, capabilities: JsonObject) -> Negotiated:
    result = await endpoint.request(
        "eg-initialize",
        "initialize",
        {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            # With elicitation, the gateway runs an elicitation as a task when asked (router.elicitation_tasks).
            "capabilities": {**capabilities, "tasks": ELICITATION_TASKS} if "elicitation" in capabilities
            else capabilities,
            "clientInfo": GATEWAY_CLIENT_INFO,
        },
        cancel_on_abandon=False,
    )
    version = result.get("protocolVersion", LATEST_HANDSHAKE_VERSION)
    await endpoint.notify("notifications/initialized", None, headers={MCP_PROTOCOL_VERSION_HEADER: version})
    return Negotiated(
        era="handshake",
        protocol_version=version,
        capabilities=result.get("capabilities") or {},
        server_info=result.get("serverInfo"),
        instructions=result.get("instructions"),
    )
