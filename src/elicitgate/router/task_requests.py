"""A client's 2025-11-25 task requests, each taken to the task's upstream: the task half of `router.requests`.

A task-augmented `tools/call` makes the task on the client's connection to its server (`create`); `tasks/get`,
`tasks/result`, `tasks/cancel` and `tasks/list` then go to the connection that keeps it (`task_request`), or,
with `redis_url`, to the replica that holds it (`cluster.tasks`, for which this is the `TaskHome`). A
2026-07-28 upstream with the tasks extension runs them too (`router.task_bridge`). The relayed tasks
themselves are the `TaskTable`'s (`router.tasks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from mcp_types import INVALID_PARAMS, ServerTasksCapability

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import GatewayConfig
from elicitgate.contracts import DownstreamPeer, Origin, SharedTaskRecords
from elicitgate.elicitation.limits import pending_limit
from elicitgate.errors import PeerLost
from elicitgate.json_shapes import JsonObject
from elicitgate.router.forward import forward
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.task_bridge import create_on_modern, modern_task_request, serves_extension
from elicitgate.router.tasks import RelayedTask, TaskTable, face_capability
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.link import UpstreamLink

EXTENSION_AS_CORE: JsonObject = {"tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
"""What a 2026-07-28 upstream with the tasks extension offers a handshake-era client through the gateway."""


class TaskRequests:
    """The 2025-11-25 task requests of the clients, to the upstream (or replica) that keeps each task."""

    def __init__(
        self, config: GatewayConfig, links: Mapping[str, UpstreamLink], inbound: InboundRouter, tasks: TaskTable
    ) -> None:
        self.config = config
        self.links = links
        self.inbound = inbound
        self.tasks = tasks
        self.shared: SharedTaskRecords | None = None
        """With `redis_url`: tasks followed across replicas (`cluster.tasks.SharedTasks`), set by the gateway."""

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

    async def create(self, call: Origin, server: str, params: Mapping[str, Any]) -> JsonObject:
        """A task-augmented `tools/call`: sent on the client's connection to `server`, which keeps the task."""
        link = self.links[server]
        if serves_extension(link):
            return await create_on_modern(link, self.tasks, call, params, timeout=link.config.request_timeout)
        sent = self.tasks.request_params(server, call.peer, params)
        if self.shared is not None and call.peer.principal is not None:  # its tasks on the other replicas
            others = await self.shared.open_elsewhere(call.peer.principal)
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
        if relayed is not None and self.shared is not None:
            await self.shared.created(relayed.id, call.peer.principal, result["task"],
                                      keep=relayed.expires - anyio.current_time())
        for status in early:  # before the result, as the server sent them
            await self.inbound.notify(call.peer, "notifications/tasks/status", status)
        return result

    async def task_request(self, call: Origin, method: str, params: Mapping[str, Any]) -> JsonObject:
        """`tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list` of a client, each to the task's upstream (on
        the replica that holds it, with `redis_url`)."""
        shared = self.shared
        if shared is not None and method != "tasks/list" and shared.elsewhere(params.get("taskId")):
            return await shared.request(call, call.peer.principal, method, params)
        if method == "tasks/list":
            here = [task for relayed in self.tasks.owned(call.peer)
                    if (task := await self._status(relayed, call)) is not None]
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
            await self.seen_ended(relayed)
            return self.tasks.with_public_meta(relayed, result)
        result = await self._on_task_connection(relayed, method, sent)
        public = self.tasks.public_task(relayed, result)
        await self.seen_ended(relayed)
        return public

    async def seen_ended(self, relayed: RelayedTask) -> None:
        """With `redis_url`: a task seen ended stops counting against its principal's limit on every replica."""
        if relayed.ended and self.shared is not None and relayed.owner.principal is not None:
            await self.shared.ended(relayed.id, keep=relayed.expires - anyio.current_time())

    def task_owner(self, task_id: str) -> DownstreamPeer | None:
        """The client owning the live task `task_id` here (another replica's request is checked against it)."""
        relayed = self.tasks.here(task_id)
        return relayed.owner if relayed is not None else None

    async def _status(self, relayed: RelayedTask, call: Origin) -> JsonObject | None:
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
