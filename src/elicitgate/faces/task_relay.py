"""2025-11-25 tasks on the face: a task-augmented `tools/call` and `tasks/*`, served past the SDK's result check.

The `mcp` SDK leaves tasks out of its 2025-11-25 surface: it would check a `CreateTaskResult` as a
`CallToolResult` and refuse it, and has no result shape for `tasks/*`. This middleware serves those
requests of a handshake-era client itself and returns the gateway's result as it is (a middleware that
does not call the rest of the chain owns its result). Everything else passes on, except that `initialize`
declares `tasks` only to a client whose protocol revision has them (the SDK's runner answers every revision
with the same capabilities).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.context import HandlerResult, ServerRequestContext

from elicitgate.contracts import DownstreamPeer
from elicitgate.faces.peer import DownstreamCall
from elicitgate.gateway import Gateway
from elicitgate.json_shapes import is_mapping
from elicitgate.router.tasks import TASK_METHODS

TASKS_SINCE = "2025-11-25"
"""The first protocol revision with tasks: an older client is declared none (revisions are dates)."""


def is_task_request(method: str, params: Mapping[str, Any] | None) -> bool:
    """A request the relay serves (for a handshake-era client): `tasks/*`, or `tools/call` with `task`."""
    return method in TASK_METHODS or (method == "tools/call" and params is not None and "task" in params)


class TaskRelay:
    """Server middleware serving a handshake-era client's task requests (`is_task_request`)."""

    def __init__(self, gateway: Gateway, peer_of: Callable[[ServerRequestContext[Any, Any]], DownstreamPeer]) -> None:
        self._gateway = gateway
        self._peer_of = peer_of

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        if ctx.method == "initialize":
            return _without_tasks_before_their_revision(await call_next(ctx))
        if (
            ctx.request_id is None
            or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            or not is_task_request(ctx.method, ctx.params)
        ):
            return await call_next(ctx)
        peer = self._peer_of(ctx)
        call = DownstreamCall(peer=peer, ctx=ctx, method=ctx.method)
        peer.calls.add(call)
        try:
            if ctx.method == "tools/call":
                return await self._gateway.requests.call(call, ctx.method, ctx.params or {})
            return await self._gateway.task_requests.task_request(call, ctx.method, ctx.params or {})
        finally:
            peer.calls.discard(call)


def _without_tasks_before_their_revision(result: HandlerResult) -> HandlerResult:
    """An `initialize` result without `capabilities.tasks` when the negotiated revision predates tasks."""
    if not isinstance(result, dict):
        return result
    version = result.get("protocolVersion")
    capabilities = result.get("capabilities")
    if not isinstance(version, str) or version >= TASKS_SINCE or not is_mapping(capabilities):
        return result
    if "tasks" not in capabilities:
        return result
    return {**result, "capabilities": {k: v for k, v in capabilities.items() if k != "tasks"}}
