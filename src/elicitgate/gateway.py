"""The gateway: upstream links, the merged catalog, the broker, and the peers on the face.

It builds the parts and hands them to each other. A client's call goes down through `call` to
`router.forward`; what the servers send up comes in through `router.inbound` (each link's handler), the
one way into the broker.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND, ServerTasksCapability

from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError

from elicitgate import errors, heap
from elicitgate.audit.trail import AuditTrail
from elicitgate.bridging import subscriptions
from elicitgate.bridging.rounds import Rounds
from elicitgate.bridging.task_extension import ModernTasks
from elicitgate.config import GatewayConfig
from elicitgate.contracts import DownstreamPeer, Origin
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.hosting import Hosting
from elicitgate.elicitation.limits import pending_limit
from elicitgate.elicitation.notice_rules import every_target, unattended_for
from elicitgate.elicitation.notify import Notifier
from elicitgate.elicitation.url_policy import UrlPolicy, local_upstreams
from elicitgate.errors import PeerLost
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.router.asks import Answered, GatewayAsks
from elicitgate.router.catalog import Catalog
from elicitgate.router.elicitation_tasks import ElicitationTasks
from elicitgate.router.forward import forward
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.task_bridge import (
    bridged,
    create_on_modern,
    modern_task_request,
    run_upstream_task,
    serves_extension,
)
from elicitgate.router.task_runner import TaskRunner, task_required
from elicitgate.router.tasks import RelayedTask, TaskTable, face_capability
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.link import LinkState, UpstreamLink

if TYPE_CHECKING:
    from elicitgate.cluster.bus import Replicas
    from elicitgate.cluster.modern_tasks import SharedModernTasks
    from elicitgate.cluster.tasks import SharedTasks

logger = logging.getLogger(__name__)

EXTENSION_AS_CORE: JsonObject = {"tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
"""What a 2026-07-28 upstream with the tasks extension offers a handshake-era client through the gateway."""
STARTUP_WAIT = 30.0


Face = Literal["stdio", "http"]


class Gateway:
    """Builds the parts once and hands them to each other.

    `face` says whether the process has a web server for the gateway's own hosted pages and inbox: the
    HTTP face always, the stdio face with `http.hosted_listen`. Only then is there a `hosting`.
    """

    def __init__(self, config: GatewayConfig, face: Face = "http") -> None:
        self.config = config
        upstreams = config.upstreams()
        self.catalog = Catalog(list(upstreams), config.namespacing)
        self.audit = AuditTrail(config.audit) if config.audit.enabled else None
        self.links: dict[str, UpstreamLink] = {}
        self.hosting = Hosting(config, self.links) if face == "http" or config.http.hosted_listen else None
        self.broker = Broker(
            config.elicitation,
            self.audit,
            UrlPolicy(config.elicitation.url_policy, local_upstreams(upstreams)),
            self.hosting,
        )
        self.broker.unattended = lambda server, tool: unattended_for(config, server, tool)
        if self.hosting is not None and every_target(config):
            self.broker.notices = self.hosting.notices = Notifier(config, self.hosting)
        self.tasks = TaskTable(config)
        """2025-11-25 tasks the clients run on upstreams through the gateway (docs/tasks.md)."""
        self.elicitation_tasks = ElicitationTasks(config.tasks.max_ttl)
        """Elicitations upstreams run as tasks on the gateway (`tasks.requests.elicitation.create`)."""
        self.face_listeners: list[Callable[[], None]] = []
        """Called when what the face declares may have changed (an upstream connected)."""
        self.peers: set[DownstreamPeer] = set()
        self.inbound = InboundRouter(
            self.catalog, self.broker, self.links, self.tasks, self.peers,
            elicitation_tasks=self.elicitation_tasks,
            task_group=lambda: self.task_group,
            task_seen_ended=self._shared_end,
        )
        """What the servers send up, and the one way into the broker (`router.inbound`)."""
        self.task_runner = TaskRunner(config, self.inbound, self.tasks)
        """Tasks the gateway runs for a plain call of a tool whose `taskSupport` is `required`."""
        self.asks = GatewayAsks(config, self.catalog, self.inbound)
        self.modern_peers: dict[str, DownstreamPeer] = {}
        """2026-07-28 clients, by principal (they have no connection that could end)."""
        self.rounds = Rounds(config.bridging)
        self.modern_tasks = ModernTasks(config)
        """Tasks of the 2026-07-28 extension (`io.modelcontextprotocol/tasks`), views of parked calls."""
        self.rounds.tasks = self.modern_tasks
        self._modern_ids = itertools.count(1)
        self.links.update(
            (name, UpstreamLink(
                name, cfg, config.upstream_retry, self.inbound, self._on_link_connected, self.hosting,
                asking=self.broker.asking,
            ))
            for name, cfg in upstreams.items()
        )
        self.replicas: Replicas | None = None
        """With `redis_url`: this replica among the others (`cluster.bus.Replicas`)."""
        if config.redis_url is not None:
            from elicitgate.cluster.bus import Replicas
            from elicitgate.cluster.limits import SharedLimits

            self.replicas = Replicas(config.redis_url.get_secret_value())
            self.broker.shared_limits = SharedLimits(
                self.replicas, config.elicitation, self.broker.open_counts, self.broker.admit_here
            )
        self.shared_tasks: SharedTasks | None = None
        """With `redis_url`: tasks followed across replicas (`cluster.tasks`)."""
        if self.replicas is not None:
            from elicitgate.cluster.tasks import SharedTasks

            self.shared_tasks = SharedTasks(self.replicas, self, max_ttl=config.tasks.max_ttl)
            self.tasks.home = f"{self.replicas.id}."
        self.shared_modern_tasks: SharedModernTasks | None = None
        """With `redis_url`: the extension's tasks followed across replicas (`cluster.modern_tasks`)."""
        if self.replicas is not None:
            from elicitgate.cluster.modern_tasks import SharedModernTasks

            self.shared_modern_tasks = SharedModernTasks(self.replicas, self.modern_tasks)
        self._task_group: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def running(self, *, wait_for_upstreams: bool = True) -> AsyncGenerator[Gateway]:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for link in self.links.values():
                tg.start_soon(link.run, tg, name=f"link:{link.name}")
            tg.start_soon(self._expire_modern_peers, name="modern-peer-expiry")
            if self.broker.notices is not None:
                tg.start_soon(self.broker.notices.run, name="notices")
            if self.replicas is not None:
                tg.start_soon(self.replicas.run, name="replicas")
                await self.replicas.started.wait()
            if wait_for_upstreams:
                with anyio.move_on_after(STARTUP_WAIT):
                    for link in self.links.values():
                        await link.first_attempt_done.wait()
            heap.settle()
            if self.audit is not None:
                # After the upstreams' first attempt: with `audit.open_at_start` the writer opens the store
                # at once (importing SQLAlchemy, migrating), CPU the start-up needs; records made before it
                # is open wait in its queue.
                tg.start_soon(self.audit.run, name="audit-writer")
            try:
                yield self
            finally:
                try:
                    await self.rounds.close()  # before the audit trail closes: what they cut short is recorded
                    if self.replicas is not None:
                        await self.replicas.close()
                finally:
                    if self.audit is not None:
                        await self.audit.close()  # what is queued reaches the store; only this stops the writer
                tg.cancel_scope.cancel()

    # -- health --------------------------------------------------------------------------------

    def health(self) -> tuple[bool, JsonObject]:
        servers = {name: link.status() for name, link in self.links.items()}
        healthy = all(link.state is LinkState.UP for link in self.links.values())
        body: JsonObject = {"status": "ok" if healthy else "degraded", "upstreams": servers}
        if self.replicas is not None:
            redis = "up" if self.replicas.reachable else "unreachable"
            replica: JsonObject = {"id": self.replicas.id, "redis": redis}
            if (since := self.replicas.down_since) is not None:  # still 200: it serves its own clients alone
                replica["unreachable_for"] = round(anyio.current_time() - since, 1)
            body["replica"] = replica
        return healthy, body

    # -- peers ---------------------------------------------------------------------------------

    def add_peer(self, peer: DownstreamPeer) -> None:
        self.peers.add(peer)
        peer.connection.exit_stack.push_async_callback(self.remove_peer, peer)

    async def remove_peer(self, peer: DownstreamPeer) -> None:
        peer.closed = True
        self.peers.discard(peer)
        self.broker.stop_for_peer(peer, "the client disconnected")
        subscriptions.close_all(peer)
        self.tasks.peer_gone(peer)
        await self.release_upstreams(peer)

    async def release_upstreams(self, peer: DownstreamPeer) -> None:
        """Give back the per-client upstream connections of `peer`: a per-call client's to the pool, the
        others closed (their upstream session state was that client's)."""
        for link in self.links.values():
            await link.release_peer(peer)

    def modern_peer(
        self, principal: str | None, connection: Connection, *, resuming: Origin | None = None
    ) -> DownstreamPeer:
        """The peer of a 2026-07-28 client: one per authenticated principal, kept while it is active;
        without one (`principal` None, see `bridging.sealing.authenticated_principal_of`), one per call: a first request
        gets a new peer, a retry the one of the call it resumes."""
        if principal is None:
            if resuming is not None and resuming.peer.per_call:
                peer = resuming.peer
            else:
                peer = DownstreamPeer(id=f"m{next(self._modern_ids)}", connection=connection, per_call=True)
            peer.connection = connection
            return peer
        peer = self.modern_peers.get(principal)
        if peer is None or peer.closed:
            peer = self.modern_peers[principal] = DownstreamPeer(
                id=f"m{next(self._modern_ids)}", connection=connection, principal=principal
            )
        peer.connection = connection
        peer.last_seen = anyio.current_time()
        return peer

    async def _expire_modern_peers(self) -> None:
        """Close what an idle 2026-07-28 client held (its per-session upstream connections)."""
        idle = self.config.bridging.state_ttl
        while True:
            await anyio.sleep(min(idle, 60.0))
            now = anyio.current_time()
            for principal, peer in list(self.modern_peers.items()):
                if now - peer.last_seen > idle and not self.broker.asking(peer) and not peer.calls:
                    del self.modern_peers[principal]
                    await self.remove_peer(peer)

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        assert self._task_group is not None, "the gateway is not running"
        return self._task_group

    # -- requests from the face ----------------------------------------------------------------

    async def call(self, call: Origin, method: str, params: Mapping[str, Any]) -> JsonObject:
        """Route one client request to its upstream (tools/call, prompts/get, resources/*, completion)."""
        if method in ("tools/call", "prompts/get"):
            kind = "tool" if method == "tools/call" else "prompt"
            public_name = params.get("name")
            server, name = self.catalog.resolve_name(kind, public_name)
            params = {**params, "name": name}
            as_task = method == "tools/call" and "task" in params and call.era == "handshake"  # 2025-11-25 tasks
            if (ask := self.asks.needed(f"{kind}s", server, name, params)) is not None:
                asked = await self.asks.run(ask, self.links[server], call, params)
                if isinstance(asked, Answered):
                    if as_task:  # no task was made: a CallToolResult is not what the client waits for
                        raise errors.gateway_error(
                            INVALID_PARAMS, asked.result["content"][0]["text"], tool=public_name, as_task=True
                        )
                    return asked.result
                params = asked
            if as_task:
                return await self._create_task(call, server, params)
            if method == "tools/call" and (park := bridged(call, self.links[server],
                                                           self.catalog.find("tools", server, name))) is not None:
                return await run_upstream_task(self.inbound, self.links[server], self.tasks, park, params,
                                               max_rounds=self.config.bridging.max_rounds)
            if method == "tools/call" and "task" not in params and self._runs_as_task(server, name):
                return await self.task_runner.run(call, self.links[server], params)
        elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            server, uri = self.catalog.resolve_uri(params.get("uri"))
            params = {**params, "uri": uri}
        elif method == "completion/complete":
            server, params = self._route_completion(params)
        elif method == "logging/setLevel":
            return await self._set_log_level(call, params)
        else:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)
        link = self.links[server]
        if method in ("resources/subscribe", "resources/unsubscribe") and link.primary is not None:
            if link.primary.era == "modern":  # 2026-07-28 subscribes with subscriptions/listen
                if method == "resources/subscribe":
                    return await subscriptions.subscribe(self.task_group, call.peer, link, params["uri"])
                return subscriptions.unsubscribe(call.peer, server, params["uri"])
        result = await forward(self.inbound, link, call, method, params, max_rounds=self.config.bridging.max_rounds)
        if method in ("resources/subscribe", "resources/unsubscribe"):  # whom its updates are for
            subscriptions.remember(call.peer, server, params["uri"], subscribed=method == "resources/subscribe")
        return result

    # -- 2025-11-25 tasks ----------------------------------------------------------------------

    def tasks_capability(self) -> ServerTasksCapability | None:
        """What the face declares under `tasks`, from what the connected upstreams declared."""
        offered = [
            link.primary.negotiated.capabilities
            for link in self.links.values()
            if link.primary is not None and link.primary.negotiated is not None and link.primary.era == "handshake"
        ]
        # A 2026-07-28 upstream with the extension runs task-augmented calls too (`router.task_bridge`).
        offered += [EXTENSION_AS_CORE for link in self.links.values() if serves_extension(link)]
        return face_capability(offered)

    def task_extension_served(self) -> bool:
        """Whether a 2026-07-28 client may use the tasks extension here: the gateway makes tasks itself
        (`tasks.hand_over_after`), or a connected 2025-11-25 upstream runs task-augmented calls."""
        return self.config.tasks.hand_over_after is not None or self.tasks_capability() is not None

    def _runs_as_task(self, server: str, name: str) -> bool:
        """A tool of a 2025-11-25 upstream that can only be called as a task (`router.task_runner`)."""
        primary = self.links[server].primary
        return primary is not None and primary.era == "handshake" and task_required(
            self.catalog.find("tools", server, name))

    async def _create_task(self, call: Origin, server: str, params: Mapping[str, Any]) -> JsonObject:
        """A task-augmented `tools/call`: sent on the client's connection to `server`, which keeps the task."""
        link = self.links[server]
        if serves_extension(link):
            return await create_on_modern(link, self.tasks, call, params, timeout=link.config.request_timeout)
        sent = self.tasks.request_params(server, call.peer, params)
        if self.shared_tasks is not None and call.peer.principal is not None:  # its tasks on the other replicas
            others = await self.shared_tasks.open_elsewhere(call.peer.principal)
            if others and self.tasks.open_count(call.peer) + others >= self.config.elicitation.max_pending_per_session:
                raise pending_limit(self.config.elicitation, server, "max_pending_per_session")
        # The connection the call goes on: the client's own under per_session, else the shared one.
        conn = await link.connection_for(call.peer)
        self.tasks.creating(conn)
        relayed: RelayedTask | None = None
        try:
            result = await forward(
                self.inbound, link, call, "tools/call", sent, max_rounds=self.config.bridging.max_rounds
            )
            result, relayed = self.tasks.created(server, conn, call.peer, result)
        finally:
            early = self.tasks.created_done(conn, relayed)
        if relayed is not None and self.shared_tasks is not None:
            await self.shared_tasks.created(relayed.id, call.peer.principal, result["task"],
                                            keep=relayed.expires - anyio.current_time())
        for status in early:  # before the result, as the server sent them
            await self.inbound.notify(call.peer, "notifications/tasks/status", status)
        return result

    async def task_request(self, call: Origin, method: str, params: Mapping[str, Any]) -> JsonObject:
        """`tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list` of a client, each to the task's upstream (on
        the replica that holds it, with `redis_url`)."""
        shared = self.shared_tasks
        if shared is not None and method != "tasks/list" and shared.elsewhere(params.get("taskId")):
            return await shared.request(call, call.peer.principal, method, params)
        if method == "tasks/list":
            here = [task for relayed in self.tasks.owned(call.peer)
                    if (task := await self._task_status(relayed, call)) is not None]
            return {"tasks": here + (await shared.listed(call.peer.principal) if shared is not None else [])}
        relayed = self.tasks.find(call.peer, params.get("taskId"))
        if relayed.modern:
            last = method == "tasks/result"
            timeout = max(relayed.expires - anyio.current_time(), 0.001) if last else None
            try:
                return await modern_task_request(self.inbound, self.tasks, relayed, call, method,
                                                 timeout or relayed.connection.config.request_timeout)
            finally:
                if last:
                    self.inbound.call_ended(call, "the call that caused it ended")
        sent = {**params, "taskId": relayed.upstream_id}
        if method == "tasks/result":
            # Blocks until the task ends: bounded by the task's life, not by the server's request_timeout. The
            # task's questions arrive while it is in flight and belong to this call (`router.inbound`).
            try:
                result = await self._on_task_connection(
                    relayed, method, sent, origin=call, timeout=max(relayed.expires - anyio.current_time(), 0.001)
                )
            finally:
                self.inbound.call_ended(call, "the call that caused it ended")
            relayed.ended = True  # its result is there: it ended
            self.tasks.ended(relayed)
            await self._shared_end(relayed)
            return self.tasks.with_public_meta(relayed, result)
        result = await self._on_task_connection(relayed, method, sent)
        public = self.tasks.public_task(relayed, result)
        await self._shared_end(relayed)
        return public

    async def _shared_end(self, relayed: RelayedTask) -> None:
        """With `redis_url`: a task seen ended stops counting against its principal's limit on every replica."""
        if relayed.ended and self.shared_tasks is not None and relayed.owner.principal is not None:
            await self.shared_tasks.ended(relayed.id, keep=relayed.expires - anyio.current_time())

    def task_owner(self, task_id: str) -> DownstreamPeer | None:
        """The client owning the live task `task_id` here (another replica's request is checked against it)."""
        relayed = self.tasks.here(task_id)
        return relayed.owner if relayed is not None else None

    async def _task_status(self, relayed: RelayedTask, call: Origin) -> JsonObject | None:
        """A task's current state for `tasks/list`; None (and forgotten) when its upstream no longer has it."""
        try:
            if relayed.modern:
                return await modern_task_request(self.inbound, self.tasks, relayed, call, "tasks/get",
                                                 relayed.connection.config.request_timeout)
            result = await self._on_task_connection(relayed, "tasks/get", {"taskId": relayed.upstream_id})
        except MCPError as exc:
            if exc.error.code == INVALID_PARAMS:
                self.tasks.forget(relayed)
                return None
            raise
        return self.tasks.public_task(relayed, result)

    async def _on_task_connection(
        self, relayed: RelayedTask, method: str, params: Mapping[str, Any], *, origin: Origin | None = None,
        timeout: float | None = None,
    ) -> JsonObject:
        conn: UpstreamConnection = relayed.connection
        try:
            return await conn.request(method, params, origin=origin,
                                      timeout=timeout if timeout is not None else conn.config.request_timeout)
        except TimeoutError:
            raise errors.gateway_error(
                errors.UPSTREAM_TIMEOUT, f"upstream {conn.server!r} did not answer {method} in time",
                server=conn.server, method=method,
            ) from None
        except PeerLost as lost:
            self.tasks.forget(relayed)
            raise errors.gateway_error(
                errors.UPSTREAM_GONE, f"upstream {conn.server!r} went away during {method}: the task is lost",
                server=conn.server, method=method, reason=lost.error.message,
            ) from None

    async def call_once(self, call: Origin, method: str, params: Mapping[str, Any]) -> JsonObject:
        """`call`, then give back what a per-call client borrowed for it (its pooled upstream connections)."""
        try:
            return await self.call(call, method, params)
        finally:
            if call.peer.per_call:
                with anyio.CancelScope(shield=True):
                    await self.release_upstreams(call.peer)

    async def _set_log_level(self, call: Origin, params: Mapping[str, Any]) -> JsonObject:
        """`logging/setLevel` is remembered for the client and goes to every handshake-era upstream that
        offers logging (on the connection this client's calls use: its own under `per_session`, the
        shared one otherwise, where the last level set wins). 2026-07-28 upstreams take the remembered
        level with each request (`forward`). One upstream refusing does not fail the others."""
        if isinstance(params.get("level"), str):
            call.peer.log_level = params["level"]
        for link in self.links.values():
            negotiated = link.primary.negotiated if link.primary is not None else None
            if negotiated is None or negotiated.era == "modern" or "logging" not in negotiated.capabilities:
                continue  # a 2026-07-28 upstream gets the level with each request (`forward`)
            try:
                conn = await link.connection_for(call.peer)
                await conn.request("logging/setLevel", params, origin=call, timeout=link.config.request_timeout)
            except (MCPError, TimeoutError) as exc:
                logger.warning("upstream %r refused logging/setLevel: %s", link.name, exc)
        return {}

    def _route_completion(self, params: Mapping[str, Any]) -> tuple[str, JsonObject]:
        ref = params.get("ref")
        if not is_mapping(ref):
            raise errors.gateway_error(INVALID_PARAMS, "completion/complete needs a ref", rule="ref is required")
        if ref.get("type") == "ref/prompt":
            server, name = self.catalog.resolve_name("prompt", ref.get("name"))
            return server, {**params, "ref": {**ref, "name": name}}
        server, uri = self.catalog.resolve_uri(ref.get("uri"))
        return server, {**params, "ref": {**ref, "uri": uri}}

    async def _on_link_connected(self, link: UpstreamLink) -> None:
        assert link.primary is not None
        await self.catalog.refresh(link.name, link.primary)
        for listener in self.face_listeners:
            listener()
        await self.inbound.broadcast("notifications/tools/list_changed", None)
