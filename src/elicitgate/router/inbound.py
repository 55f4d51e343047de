"""What the servers send up: the twin of `router.forward`, and the one way into the broker.

`forward` takes a client's call down to its server; this module brings up what the servers send, during a
call or outside any: their requests (`elicitation/create`; sampling and roots, relayed to a client that
declared them), the questions inside their results (a 2026-07-28 `input_required` round, a -32042's URL
links) and their notifications (list changes refresh the catalog; task status, log messages, resource
updates and a URL interaction's completion go to the client they are for).

Every question comes into the broker here, and only here (`_ask`), whichever way it was born:

- pushed: a handshake-era server's `elicitation/create` (`on_server_request`);
- an input request of a 2026-07-28 server's `input_required` round (`input_request`, from `forward`);
- a task's question: pushed on the connection that runs the task, for the task's owner (`_whose`);
- the gateway's own: missing arguments, a confirmation (`gateway_question`, from `router.asks`).

Whose call a question belongs to is decided here too: at its birth (`_caller`, `_whose`) and when that call
ends (`call_ended`). The broker then owns the question's record and life (`elicitation.broker`), a responder
shows it to a human (`elicitation.responders`), and its end is recorded (`audit`).
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp_types import METHOD_NOT_FOUND, RequestId

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.bridging import subscriptions
from elicitgate.bridging.input_requests import PASSTHROUGH_INPUT_REQUESTS, relay_input_request
from elicitgate.contracts import DownstreamPeer, Origin
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.model import GatewayReason, State
from elicitgate.errors import UrlElicitationRequired
from elicitgate.fixable import warn_once
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.router.catalog import Catalog
from elicitgate.router.elicitation_tasks import ElicitationTasks
from elicitgate.router.tasks import TASK_METHODS, RelayedTask, TaskTable
from elicitgate.upstreams.clock import PausableDeadline
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.link import UpstreamLink

logger = logging.getLogger(__name__)

LIST_CHANGED = {
    "notifications/tools/list_changed": ("tools",),
    "notifications/prompts/list_changed": ("prompts",),
    "notifications/resources/list_changed": ("resources", "resourceTemplates"),
}
LIST_REFRESH_INTERVAL = 0.25
"""While a server's `list_changed` keep coming, its lists are refreshed at most this often."""
NOTIFY_TIMEOUT = 5.0
"""A client whose stream does not take a notification within this long misses that notification."""


@dataclass(frozen=True, slots=True)
class _Whose:
    """Whose call a pushed request is, as far as can be known."""

    origin: Origin | None
    named: bool
    """The wire named the call (or the task did), rather than the gateway inferring it."""
    params: Mapping[str, Any] | None
    """The request as the client is to see it (a task's id is the client's, not the upstream's)."""


class InboundRouter:
    """The upstream-to-client direction; every upstream connection's `InboundHandler`."""

    def __init__(
        self,
        catalog: Catalog,
        broker: Broker,
        links: Mapping[str, UpstreamLink],
        tasks: TaskTable,
        peers: set[DownstreamPeer],
        elicitation_tasks: ElicitationTasks,
        task_group: Callable[[], anyio.abc.TaskGroup],
        task_seen_ended: Callable[[RelayedTask], Awaitable[None]],
    ) -> None:
        self.catalog = catalog
        self.broker = broker
        self.links = links
        self.tasks = tasks
        self.elicitation_tasks = elicitation_tasks
        """The questions servers asked the gateway to run as tasks (`tasks.requests.elicitation.create`)."""
        self._task_group = task_group
        self._task_seen_ended = task_seen_ended
        self.peers = peers
        """The handshake-era clients on the face (the gateway's own set): whom a broadcast reaches."""
        self._list_changes: dict[str, set[str]] = {}
        """Per server, while a refresh of its lists runs: the `list_changed` methods that came meanwhile."""
        self._stalled: weakref.WeakSet[DownstreamPeer] = weakref.WeakSet()
        """Clients that missed a notification (said once at WARNING, then at DEBUG)."""

    # -- the one way into the broker ---------------------------------------------------------------

    def _ask(
        self,
        server: str,
        origin: Origin | None,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        clocks: Sequence[PausableDeadline] = (),
        guessed_on: UpstreamConnection | None = None,
        url_ids: bool = True,
        reason: GatewayReason | None = None,
        own_task: bool = False,
    ) -> Awaitable[JsonObject]:
        """The broker's coroutine itself, not one around it: one frame less held while a human is asked.

        `guessed_on`: the connection whose calls in flight may each own the question (see `_whose`).
        `reason` is set for the gateway's own questions only. `own_task`: the awaiting task serves this question
        alone and ends with it (see `Broker.elicit`).
        """
        return self.broker.elicit(
            server=server,
            origin=origin,
            params=params,
            timeout=timeout,
            clocks=clocks,
            candidates=guessed_on.in_flight_origins if guessed_on is not None else None,
            url_ids=url_ids,
            source="gateway" if reason is not None else "upstream",
            gateway_reason=reason,
            own_task=own_task,
        )

    def gateway_question(
        self, link: UpstreamLink, call: Origin, request: JsonObject, reason: GatewayReason
    ) -> Awaitable[JsonObject]:
        """The gateway asks before a call goes to `link` (missing arguments, a confirmation: `router.asks`)."""
        return self._ask(link.name, call, request, timeout=link.config.elicitation_timeout, reason=reason)

    def task_question(
        self, server: str, call: Origin, params: Mapping[str, Any], *, timeout: float | None
    ) -> Awaitable[JsonObject]:
        """A question in a 2026-07-28 server's task, for the handshake-era client that follows the task
        (`router.task_bridge`): the gateway reads it from `tasks/get` and answers it with `tasks/update`."""
        return self._ask(server, call, params, timeout=timeout, url_ids=False)

    # -- whose call it is ----------------------------------------------------------------------------

    @staticmethod
    def _caller(connection: UpstreamConnection, related: RequestId | None) -> tuple[Origin | None, bool]:
        """The downstream call a server message belongs to (or None if unknowable), and whether the wire
        named it (True) rather than the gateway inferring it.

        On streamable HTTP a message on a POST's response stream names its request. Anything else (a stdio
        or SSE pipe, the standalone GET stream) names none: a connection owned by one client answers for
        that client's newest call in flight, and a shared one only when exactly one call is in flight on a
        wire that never names calls (stdio, SSE).
        """
        if related is not None:
            return connection.origin_of(related), True
        calls = connection.in_flight_origins()
        if connection.owner is not None and calls:
            return calls[-1], False
        if len(calls) == 1 and not connection.tags_origin:
            return calls[0], False
        return None, False

    def _whose(
        self, connection: UpstreamConnection, related: RequestId | None, params: Mapping[str, Any] | None
    ) -> _Whose:
        """Whose call a pushed request is: the call the wire names (`_caller`); a task's question goes to the
        task's owner, whichever of its calls (its `tasks/result`) is in flight."""
        origin, named = self._caller(connection, related)
        upstream_id = TaskTable.upstream_id_in(params)
        relayed = self.tasks.of_upstream(connection, upstream_id) if upstream_id is not None else None
        if relayed is None:
            return _Whose(origin, named, params)
        named = named and origin is not None and relayed.owned_by(origin.peer)
        if not named:
            owners = [o for o in connection.in_flight_origins() if relayed.owned_by(o.peer)]
            origin = owners[-1] if owners else None
        return _Whose(origin, named, self.tasks.with_public_meta(relayed, params or {}))

    def call_ended(self, call: Origin, reason: str) -> None:
        """The call a question was for ended. A question whose call was only a guess (a per-session pipe with
        several calls in flight) moves to another call it may belong to; any other ends `cancelled`."""
        for el in list(self.broker.elicitations_of(call.peer)):
            if el.origin is not call:
                continue
            others = [c for c in el.candidates() if c is not call] if el.candidates is not None else []
            if others:
                el.origin = others[-1]
            else:
                el.stop(State.CANCELLED, reason)

    # -- the servers' requests -------------------------------------------------------------------------

    def on_server_request(
        self, connection: UpstreamConnection, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> Awaitable[JsonObject]:
        """A request a server pushed: an elicitation to the broker, sampling and roots relayed to the client;
        `tasks/*` about the elicitations the gateway runs as tasks for the server. A plain elicitation's answer is
        the broker's own coroutine (`_ask`): no frame of this router is held while a person answers it."""
        if method == "elicitation/create" and not is_mapping((params or {}).get("task")):
            whose = self._whose(connection, related, params)
            if whose.origin is None:
                raise self._origin_unknown(connection, method)
            # The upstream endpoint serves it in a task of its own, which writes the answer and ends.
            return self._pushed_question(connection, whose.origin, whose.named, whose.params, own_task=True)()
        return self._serve_server_request(connection, related, method, params)

    def _pushed_question(
        self, connection: UpstreamConnection, origin: Origin, named: bool, params: Mapping[str, Any] | None,
        *, own_task: bool = False,
    ) -> Callable[[], Awaitable[JsonObject]]:
        """How to ask a server's `elicitation/create` of the call it belongs to (`origin`)."""
        guessed = not named and connection.owner is not None
        # A per-session pipe names no call: the elicitation may belong to any call in flight on it, so
        # none of them spends human time against its request timeout.
        clocks = connection.clocks_in_flight() if guessed else connection.clocks_for(origin)

        def ask() -> Awaitable[JsonObject]:
            return self._ask(connection.server, origin, params, timeout=connection.config.elicitation_timeout,
                             clocks=clocks, guessed_on=connection if guessed else None, own_task=own_task)

        return ask

    async def _serve_server_request(
        self, connection: UpstreamConnection, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> JsonObject:
        """`on_server_request` for the rest: an elicitation asked as a task, sampling, roots, `tasks/*`."""
        if method in TASK_METHODS:
            return await self.elicitation_tasks.serve(connection, method, params or {})
        capability = PASSTHROUGH_INPUT_REQUESTS.get(method)
        as_task = (params or {}).get("task") if method == "elicitation/create" else None
        if is_mapping(as_task):  # the question is asked as any other; the task is its view for the server
            params = {k: v for k, v in (params or {}).items() if k != "task"}
        whose = self._whose(connection, related, params)
        origin, params = whose.origin, whose.params
        if origin is None and (method == "elicitation/create" or capability is not None):
            raise self._origin_unknown(connection, method)
        if method == "elicitation/create" and is_mapping(as_task):
            assert origin is not None  # refused above
            ask = self._pushed_question(connection, origin, whose.named, params)
            return self.elicitation_tasks.start(self._task_group(), connection, as_task, ask)
        if origin is not None and capability is not None:
            timeout = self.broker.human_timeout(connection.config.elicitation_timeout)
            relayed = await relay_input_request(origin, method, params or {}, timeout=timeout, server=connection.server)
            if relayed is not None:
                return relayed
        raise MCPError(
            code=METHOD_NOT_FOUND,
            message=f"{method} cannot be relayed: the originating client did not declare it"
            if capability
            else "Method not found",
            data={"source": "elicitgate", "method": method, "server": connection.server},
        )

    def _origin_unknown(self, connection: UpstreamConnection, method: str) -> MCPError:
        """-32017 for a server request no call can own; on a shared connection, the fix is per_session."""
        server = connection.server
        data: JsonObject = {"server": server, "method": method}
        if connection.owner is None and self.links[server].policy == "shared":
            data["fix"] = (
                f'remove "session_policy": "shared" from server {server!r} (the default, per_session, gives each '
                "client its own upstream session, so a request on a stream that names no call has one owner)"
            )
            return warn_once(logger, errors.gateway_error(
                errors.ELICITATION_ORIGIN_UNKNOWN,
                f"{method} from upstream {server!r} arrived on a stream that names no call, on a connection "
                f'every client shares: remove "session_policy": "shared" from server {server!r}',
                **data,
            ), key=("origin_unknown", server))
        return errors.gateway_error(
            errors.ELICITATION_ORIGIN_UNKNOWN,
            f"{method} from upstream {server!r} arrived while none of its client's calls was in flight",
            **data,
        )

    # -- questions inside results (from `forward`) -----------------------------------------------------

    def input_request(
        self, link: UpstreamLink, call: Origin, key: str, request: Any, minted: list[str]
    ) -> Awaitable[Any]:
        """The answer to one input request of a 2026-07-28 server's `input_required` round
        (`bridging.input_requests.answer_input_requests` puts the round together). URL-mode ids the gateway
        makes up for a handshake-era client are added to `minted` (see `complete_minted`)."""
        method, given = (request.get("method"), request.get("params")) if is_mapping(request) else (None, None)
        request_params: Mapping[str, Any] = given if is_mapping(given) else {}
        if method == "elicitation/create":
            if request_params.get("mode") == "url" and "elicitationId" not in request_params and call.era != "modern":
                # The handshake-era client needs an id to match the completion the gateway sends it later.
                minted.append(f"{link.name}-{uuid.uuid4().hex}")
                request_params = {**request_params, "elicitationId": minted[-1]}
            return self._ask(
                link.name, call, request_params, timeout=link.config.elicitation_timeout, url_ids=call.era != "modern"
            )
        return self._relay_input(link, call, key, method, request_params)

    async def _relay_input(
        self, link: UpstreamLink, call: Origin, key: str, method: object, request_params: Mapping[str, Any]
    ) -> Any:
        """An input request other than an elicitation: sampling or roots, relayed to the client if it can."""
        relayable = isinstance(method, str) and method in PASSTHROUGH_INPUT_REQUESTS
        if relayable:
            timeout = self.broker.human_timeout(link.config.elicitation_timeout)
            relayed = await relay_input_request(call, str(method), request_params, timeout=timeout, server=link.name)
            if relayed is not None:
                return relayed
        raise errors.gateway_error(
            errors.ELICITATION_UNDELIVERABLE,
            f"upstream {link.name!r} asked for input the client cannot give"
            if relayable
            else f"upstream {link.name!r} asked for input the gateway cannot relay",
            server=link.name,
            inputRequest=key,
            method=method,
        )

    async def complete_minted(self, server: str, minted: list[str]) -> None:
        """The upstream's retry came back: the URL interactions of that round are over."""
        for elicitation_id in minted:
            target = self.broker.url_route(server, elicitation_id, pop=True)
            if target is not None:
                await target.url_completed({"elicitationId": elicitation_id})
        minted.clear()

    async def url_required(self, link: UpstreamLink, call: Origin, exc: UrlElicitationRequired) -> None:
        """A -32042 on its way to the client: its links pass the URL policy (or it is refused), and their
        later `notifications/elicitation/complete` are routed to the client."""
        await self.broker.check_url_elicitations(link.name, exc.elicitations)
        self.broker.remember_url_elicitations(link.name, call.peer, exc.elicitations)

    # -- the servers' notifications ---------------------------------------------------------------------

    async def on_server_notification(
        self, connection: UpstreamConnection, related: RequestId | None, method: str, params: Mapping[str, Any] | None
    ) -> None:
        server = connection.server
        if method in LIST_CHANGED:
            # Whichever connection hears it (a client's own, under per_session), the catalog is refreshed
            # through the primary one, which speaks for the catalog.
            primary = self.links[server].primary
            if primary is not None:
                await self._refresh_lists(server, primary, method)
        elif method == "notifications/elicitation/complete":
            elicitation_id = (params or {}).get("elicitationId")
            # The client that accepted it: a handshake-era peer, or a 2026-07-28 client's parked call.
            target = (
                self.broker.url_route(server, elicitation_id, pop=True) if isinstance(elicitation_id, str) else None
            )
            if target is not None:
                await target.url_completed(params or {})
        elif method == "notifications/tasks/status":
            relayed = self.tasks.of_upstream(connection, (params or {}).get("taskId"))
            if relayed is not None and relayed.on_status is not None:  # a task run for a plain call: its progress
                relayed.saw(params or {})
                await relayed.on_status(params or {})
            elif relayed is not None and not relayed.owner.closed:  # only to the task's owner
                await self.notify(relayed.owner, method, self.tasks.public_task(relayed, params or {}))
                await self._task_seen_ended(relayed)
            elif relayed is None:
                self.tasks.early(connection, params or {})
        elif method == "notifications/message":
            origin = self._caller(connection, related)[0]
            if origin is not None:
                await origin.notify(method, params)
        elif method == "notifications/resources/updated" and isinstance(raw_uri := (params or {}).get("uri"), str):
            # Only to clients that subscribed: a client's own connection speaks for that client alone.
            owner = connection.owner
            targets = [p for p in ([owner] if owner is not None else self.peers)
                       if subscriptions.subscribed(p, server, raw_uri)]
            updated = {**(params or {}), "uri": self.catalog.public_uri(server, raw_uri)}
            await self._notify_each(targets, method, updated)

    async def _refresh_lists(self, server: str, connection: UpstreamConnection, method: str) -> None:
        """Coalesced: while one refresh of `server`'s lists runs, further `list_changed` of it only mark
        what to refresh once more afterwards, so a flood costs a few refreshes, not one each."""
        waiting = self._list_changes.get(server)
        if waiting is not None:
            waiting.add(method)
            return
        waiting = self._list_changes[server] = {method}
        try:
            while waiting:
                started = anyio.current_time()
                methods = sorted(waiting)
                waiting.clear()
                kinds = tuple(dict.fromkeys(kind for m in methods for kind in LIST_CHANGED[m]))
                await self.catalog.refresh(server, connection, kinds)
                for changed in methods:
                    await self.broadcast(changed, None)
                # Refreshing at once again would make the number of refreshes depend on how fast the
                # flood arrives; a short pause lets it gather.
                if waiting:
                    await anyio.sleep_until(started + LIST_REFRESH_INTERVAL)
        finally:
            del self._list_changes[server]

    # -- to the clients ------------------------------------------------------------------------------------

    async def broadcast(self, method: str, params: Mapping[str, Any] | None) -> None:
        await self._notify_each(list(self.peers), method, params)

    async def _notify_each(
        self, peers: list[DownstreamPeer], method: str, params: Mapping[str, Any] | None
    ) -> None:
        """Every client at once, each for at most NOTIFY_TIMEOUT: one whose stream does not drain
        delays no other client and holds no refresh for longer than that."""
        if len(peers) == 1:
            await self.notify(peers[0], method, params)
            return
        async with anyio.create_task_group() as tg:
            for peer in peers:
                tg.start_soon(self.notify, peer, method, params)

    async def notify(self, peer: DownstreamPeer, method: str, params: Mapping[str, Any] | None) -> None:
        """One notification to one client, for at most NOTIFY_TIMEOUT; never raises."""
        with anyio.move_on_after(NOTIFY_TIMEOUT) as bound:
            try:
                await peer.connection.outbound.notify(method, params)
            except Exception as exc:  # a client that cannot take a notification must not stop the rest
                logger.debug("could not notify client %s of %s: %s", peer.id, method, exc)
        if bound.cancelled_caught:
            level = logging.DEBUG if peer in self._stalled else logging.WARNING
            self._stalled.add(peer)
            logger.log(level, "client %s did not take %s within %.0f s (its stream is not being read); "
                       "it misses this notification", peer.id, method, NOTIFY_TIMEOUT)
