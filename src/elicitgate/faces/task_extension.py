"""The tasks extension on the face: a 2026-07-28 client's `tasks/get`, `tasks/update`, `tasks/cancel`, and its
`subscriptions/listen` for `notifications/tasks` (bridging.task_extension has the tasks themselves).

The `mcp` SDK's runner refuses `tasks/get` and `tasks/cancel` on a 2026-07-28 request (they are 2025-11-25
methods to it), so this is a middleware, served before the runner's method table, as `TaskRelay` is for
handshake-era clients; a middleware that does not call the rest of the chain owns its result, envelope
included. A `subscriptions/listen` that names no `taskIds` passes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import anyio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from elicitgate._compat import connection_of, request_outbound
from elicitgate.bridging.sealing import authenticated_principal_of
from elicitgate.bridging.task_extension import EXTENSION_METHODS, missing_extension
from elicitgate.capabilities import capabilities_dict, declares_tasks
from elicitgate.gateway import Gateway
from elicitgate.json_shapes import JsonObject, is_mapping


def listens_for_tasks(params: Mapping[str, Any] | None) -> bool:
    notifications = (params or {}).get("notifications")
    return is_mapping(notifications) and "taskIds" in notifications


class TaskExtension:
    """Server middleware serving the extension's requests of 2026-07-28 clients."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        if ctx.request_id is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        if ctx.method in EXTENSION_METHODS:
            return await self.serve(ctx)
        if ctx.method == "subscriptions/listen" and listens_for_tasks(ctx.params):
            return await self.listen(ctx)
        return await call_next(ctx)

    def _checked(self, ctx: ServerRequestContext[Any, Any]) -> Any:
        """The client's peer, once the request declared the extension (-32021 otherwise)."""
        if not declares_tasks(capabilities_dict(connection_of(ctx).client_capabilities)):
            raise missing_extension(ctx.method)
        return self._gateway.peers.modern_peer(authenticated_principal_of(ctx), connection_of(ctx))

    async def serve(self, ctx: ServerRequestContext[Any, Any]) -> JsonObject:
        peer = self._checked(ctx)
        params = ctx.params or {}
        tasks = self._gateway.modern_tasks
        shared = self._gateway.shared_modern_tasks
        if shared is not None and shared.elsewhere(params.get("taskId")):  # another replica's task, served there
            return await shared.request(peer.principal, ctx.method, params)
        return tasks.serve(tasks.find(peer, params.get("taskId")), ctx.method, params)

    async def listen(self, ctx: ServerRequestContext[Any, Any]) -> JsonObject:
        """Acknowledge the caller's own tasks among `taskIds`, then send `notifications/tasks` as each changes;
        the stream ends (gracefully) once every one of them is over."""
        peer = self._checked(ctx)
        tasks = self._gateway.modern_tasks
        wanted = (ctx.params or {})["notifications"].get("taskIds")
        honored = tasks.honored(peer, wanted)
        shared = self._gateway.shared_modern_tasks
        elsewhere: list[JsonObject] = []
        if shared is not None and isinstance(wanted, list):  # other replicas' tasks: polled there
            ids = [i for i in cast("list[Any]", wanted) if isinstance(i, str) and shared.elsewhere(i)]
            elsewhere = await shared.followed(peer.principal, ids)
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        outbound = request_outbound(ctx)
        await outbound.notify("notifications/subscriptions/acknowledged",
                              {"notifications": {"taskIds": honored + [t["taskId"] for t in elsewhere]}, "_meta": meta})

        async def send(changes: AsyncIterator[JsonObject]) -> None:
            async for task in changes:
                await outbound.notify("notifications/tasks", {**task, "_meta": meta})

        async with anyio.create_task_group() as tg:
            tg.start_soon(send, tasks.changes(peer, honored))
            for first in elsewhere:
                assert shared is not None
                tg.start_soon(send, shared.changes(peer.principal, first))
        return {"_meta": meta, "resultType": "complete"}
