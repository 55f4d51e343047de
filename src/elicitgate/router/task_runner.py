"""Tasks the gateway runs for a client: a plain `tools/call` of a tool whose `execution.taskSupport` is
`required` (docs/tasks.md, "A client that does not ask for a task").

Such a tool cannot be called without a task, and a client that declares no tasks (or whose SDK refuses to call
a `required` tool plainly, as the TypeScript SDK's `callTool` does) could not use it at all. The gateway makes
the call task-augmented upstream and waits on `tasks/result` for the client: the task's questions arrive while
that request is in flight and reach the client through the broker like any question of its call; each change of
the task's status (its `notifications/tasks/status`, and `tasks/get` polled at the task's `pollInterval`) is sent
as the call's progress when the client gave a progress token; the final result answers the client's call. The
client's cancellation cancels the task upstream. The task counts against the client's pending limit while it
runs, and is forgotten when the call ends.

`tools/list` shows such a client the tool as `optional` (`seen_by`): through the gateway a plain call works.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import GatewayConfig
from elicitgate.contracts import Origin
from elicitgate.errors import PeerLost
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.router.forward import forward
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.tasks import RELATED_TASK, TERMINAL, RelayedTask, TaskTable
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.link import UpstreamLink
from elicitgate.wire.endpoint import progress_params

logger = logging.getLogger(__name__)

MIN_POLL = 0.5
MAX_POLL = 5.0
"""Seconds between the `tasks/get` polls that report progress, whatever `pollInterval` the server suggests."""
CANCEL_WAIT = 5.0
"""How long the upstream's `tasks/cancel` may take when the client cancels its call."""


def task_required(tool: Mapping[str, Any] | None) -> bool:
    """A tool that can only be called as a task."""
    execution = tool.get("execution") if tool is not None else None
    return execution is not None and is_mapping(execution) and execution.get("taskSupport") == "required"


def seen_by(tools: Iterable[JsonObject], *, knows_tasks: bool) -> list[JsonObject]:
    """`tools/list` as a client sees it: a client that declares no tasks sees `required` as `optional`, since
    the gateway runs the task for its plain call (a client that refuses a `required` tool could not use it)."""
    if knows_tasks:
        return list(tools)
    return [{**tool, "execution": {**tool["execution"], "taskSupport": "optional"}} if task_required(tool) else tool
            for tool in tools]


class TaskRunner:
    """Runs a `required` tool's task for a plain call, and answers the call with the task's result."""

    def __init__(self, config: GatewayConfig, inbound: InboundRouter, tasks: TaskTable) -> None:
        self._config = config
        self._inbound = inbound
        self._tasks = tasks

    async def run(self, call: Origin, link: UpstreamLink, params: Mapping[str, Any]) -> JsonObject:
        """`params` (a `tools/call` without `task`) run as a task on `link`; the task's result."""
        sent = self._tasks.request_params(link.name, call.peer, {**params, "task": {}})
        conn = await link.connection_for(call.peer)
        self._tasks.creating(conn)
        relayed: RelayedTask | None = None
        try:
            created = await forward(self._inbound, link, call, "tools/call", sent,
                                    max_rounds=self._config.bridging.max_rounds)
            _, relayed = self._tasks.created(link.name, conn, call.peer, created, on_behalf=True)
        finally:
            early = self._tasks.created_done(conn, relayed)
        if relayed is None:
            return created  # the server ran the call at once
        progress = _Progress(call, _progress_token(params))
        relayed.on_status = progress.report
        try:
            for status in early:
                await progress.report(status)
            task = created.get("task")
            result = await self._wait(relayed, call, progress, task if is_mapping(task) else {})
        except BaseException:
            if not relayed.ended:
                await self._cancel(relayed)
            raise
        finally:
            self._tasks.forget(relayed)
            self._inbound.call_ended(call, "the call that caused it ended")
        return _without_related_task(result)

    async def _wait(
        self, relayed: RelayedTask, call: Origin, progress: _Progress, task: Mapping[str, Any]
    ) -> JsonObject:
        """`tasks/result` (blocking until the task ends, bounded by its life), with `tasks/get` polled beside it
        for progress while the client listens for it."""
        result: JsonObject = {}
        async with anyio.create_task_group() as tg:
            if progress.token is not None:
                tg.start_soon(self._poll, relayed, progress, _poll_interval(task))
            result = await _request(relayed, "tasks/result", origin=call,
                                    timeout=max(relayed.expires - anyio.current_time(), 0.001))
            relayed.ended = True
            tg.cancel_scope.cancel()
        return result

    async def _poll(self, relayed: RelayedTask, progress: _Progress, interval: float) -> None:
        while True:
            await anyio.sleep(interval)
            try:
                task = await _request(relayed, "tasks/get", timeout=relayed.connection.config.request_timeout)
            except MCPError as exc:
                logger.debug("tasks/get of %s for progress failed: %s", relayed.id, exc.error.message)
                continue
            await progress.report(task)
            if task.get("status") in TERMINAL:
                return
            interval = _poll_interval(task, interval)

    async def _cancel(self, relayed: RelayedTask) -> None:
        """The client cancelled its call (or it failed): the task is cancelled upstream too."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WAIT):
            try:
                await _request(relayed, "tasks/cancel", timeout=CANCEL_WAIT)
            except MCPError as exc:  # it may have ended meanwhile
                logger.debug("tasks/cancel of %s: %s", relayed.id, exc.error.message)


class _Progress:
    """The task's status changes, as `notifications/progress` of the client's call (each change one step)."""

    def __init__(self, call: Origin, token: Any) -> None:
        self.call = call
        self.token = token
        self._steps = 0
        self._last: tuple[Any, Any] | None = None

    async def report(self, task: Mapping[str, Any]) -> None:
        seen = (task.get("status"), task.get("statusMessage"))
        if self.token is None or seen == self._last or seen[0] is None:
            return
        self._last = seen
        self._steps += 1
        message = seen[1] if isinstance(seen[1], str) else f"task {seen[0]}"
        try:
            await self.call.notify("notifications/progress", progress_params(self.token, self._steps, None, message))
        except Exception as exc:  # a client that cannot take it misses one step, the call goes on
            logger.debug("progress of a task not relayed: %s", exc)


async def _request(
    relayed: RelayedTask, method: str, *, timeout: float, origin: Origin | None = None
) -> JsonObject:
    conn: UpstreamConnection = relayed.connection
    try:
        return await conn.request(method, {"taskId": relayed.upstream_id}, origin=origin, timeout=timeout)
    except TimeoutError:
        raise errors.gateway_error(
            errors.UPSTREAM_TIMEOUT, f"upstream {conn.server!r} did not end its task in time", server=conn.server,
            method=method,
        ) from None
    except PeerLost as lost:
        raise errors.gateway_error(
            errors.UPSTREAM_GONE, f"upstream {conn.server!r} went away during {method}: the task is lost",
            server=conn.server, method=method, reason=lost.error.message,
        ) from None


def _progress_token(params: Mapping[str, Any]) -> Any:
    meta = params.get("_meta")
    return meta.get("progressToken") if is_mapping(meta) else None


def _poll_interval(task: Mapping[str, Any], default: float = 1.0) -> float:
    interval = task.get("pollInterval")
    seconds = interval / 1000 if isinstance(interval, int | float) and not isinstance(interval, bool) else default
    return min(max(seconds, MIN_POLL), MAX_POLL)


def _without_related_task(result: JsonObject) -> JsonObject:
    """The task's result as the plain call's: the client knows no task, so none is named in it."""
    meta = result.get("_meta")
    if not is_mapping(meta) or RELATED_TASK not in meta:
        return result
    rest = {k: v for k, v in meta.items() if k != RELATED_TASK}
    return {**{k: v for k, v in result.items() if k != "_meta"}, **({"_meta": rest} if rest else {})}
