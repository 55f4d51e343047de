"""Tasks of the 2026-07-28 extension across replicas (`redis_url`): a task made through replica A is followed,
answered and cancelled through any other, the way a parked call's retry is (`retries`).

A task of the extension is a view of a parked call, which lives on A. Its id names A (the gateway's own tasks:
`elicitgate/<A>.<random>`; a bridged upstream task: `<server>/<A>.<random>`, `tasks.home_of`). Replica B that gets
`tasks/get`, `tasks/update` or `tasks/cancel` for it sends the request, with the caller's principal, to A over A's
channel (`MODERN_TASK_OP`); A checks the principal against the task's owner as for a request of its own (another
principal's gets -32602, as an unknown id) and serves it. Redis also keeps a record of each task
(`modern-task:<id>`: its home, principal and creation, for its ttl), read only when A is gone: then the task is
`failed` for `tasks/get`, with a message naming A, and `tasks/update` / `tasks/cancel` get -32602 saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
from mcp_types import INVALID_PARAMS
from redis.exceptions import RedisError

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.bridging.task_extension import (
    EXTENSION_METHODS,
    POLL_INTERVAL_MS,
    ModernTask,
    ModernTasks,
    unknown_task,
)
from elicitgate.cluster.bus import Replicas
from elicitgate.cluster.tasks import LOST, home_of
from elicitgate.json_shapes import JsonObject, is_mapping, is_object

logger = logging.getLogger(__name__)

MODERN_TASK_OP = "modern-task"
"""Served by a task's home replica: `tasks/get`, `tasks/update` or `tasks/cancel` of a client on another one."""
TERMINAL = ("completed", "failed", "cancelled")
FORWARD_TIMEOUT = 30.0
"""None of the three waits for anything: the home answers at once, or its lease lapses first."""


class SharedModernTasks:
    """This replica's extension tasks, reachable from the others, and the others' tasks followed from here."""

    def __init__(self, replicas: Replicas, tasks: ModernTasks) -> None:
        self.replicas = replicas
        self.tasks = tasks
        tasks.home = f"{replicas.id}."
        tasks.on_created = self._created
        replicas.handlers[MODERN_TASK_OP] = self._serve
        self._recording: set[asyncio.Task[None]] = set()

    def _record_key(self, task_id: str) -> str:
        return self.replicas.key("modern-task", task_id)

    def elsewhere(self, task_id: Any) -> bool:
        """A task id that names another replica."""
        home = home_of(task_id)
        return home is not None and home != self.replicas.id

    # -- the task's home -----------------------------------------------------------------------------

    def _created(self, task: ModernTask) -> None:
        """Record a task made here, for the others to report it should this replica stop."""
        record = {"home": self.replicas.id, "principal": task.owner.principal,
                  "task": {"taskId": task.id, "createdAt": task.created_at, "ttlMs": task.ttl_ms,
                           "pollIntervalMs": POLL_INTERVAL_MS}}
        recording = asyncio.get_running_loop().create_task(self._record(task.id, record, task.ttl_ms))
        self._recording.add(recording)
        recording.add_done_callback(self._recording.discard)

    async def _record(self, task_id: str, record: JsonObject, ttl_ms: int) -> None:
        try:
            async with self.replicas.redis.pipeline(transaction=False) as pipe:
                pipe.set(self._record_key(task_id), json.dumps(record), ex=max(ttl_ms // 1000, 1))
                await pipe.execute()
        except RedisError as exc:  # the task works through the other replicas as long as this one runs
            logger.warning("task %s not recorded in Redis (%s): should this replica stop, the others will not "
                           "know it", task_id, exc)

    async def _serve(self, args: JsonObject) -> JsonObject:
        """Another replica's client asks about one of this replica's tasks: checked as if it had asked here."""
        method, params, principal = str(args.get("method")), args.get("params"), args.get("principal")
        task_id = params.get("taskId") if is_mapping(params) else None
        task = self.tasks.here(task_id) if isinstance(task_id, str) else None
        if task is None or method not in EXTENSION_METHODS or not is_mapping(params) \
                or task.owner.principal != principal:
            raise unknown_task(task_id)
        return self.tasks.serve(task, method, params)

    # -- another replica ------------------------------------------------------------------------------

    async def request(self, principal: str | None, method: str, params: Mapping[str, Any]) -> JsonObject:
        """`tasks/get`, `tasks/update` or `tasks/cancel` of a task another replica holds, served there."""
        task_id = params.get("taskId")
        home = str(home_of(task_id))
        args: JsonObject = {"method": method, "params": dict(params), "principal": principal}
        try:
            result = await self.replicas.ask(home, MODERN_TASK_OP, args, what="this task", timeout=FORWARD_TIMEOUT)
        except MCPError as exc:
            if exc.error.code != errors.REPLICA_GONE:
                raise
            return await self._lost(home, principal, task_id, method)
        return dict(result) if is_mapping(result) else {}

    async def _lost(self, home: str, principal: str | None, task_id: Any, method: str) -> JsonObject:
        """The replica that ran the task stopped: the task failed, saying so (to its owner; unknown to others)."""
        try:
            raw = await self.replicas.redis.get(self._record_key(str(task_id)))
        except RedisError as exc:
            raise self.replicas.failure(exc) from None
        record = json.loads(raw) if raw else None
        if not is_object(record) or record.get("home") != home or record.get("principal") != principal:
            raise unknown_task(task_id)
        message = f"the gateway replica {home} that ran this task stopped; the task is lost"
        if method != "tasks/get":
            verb = "answer" if method == "tasks/update" else "cancel"
            raise errors.gateway_error(INVALID_PARAMS, f"cannot {verb} task {task_id!r}: it failed ({message})",
                                       taskId=task_id, status="failed", replica=home, reason=LOST,
                                       fix="start the call again: the task cannot be resumed")
        task = record.get("task")
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        error = {"code": errors.REPLICA_GONE, "message": message,
                 "data": {"replica": home, "taskId": task_id, "reason": LOST}}
        return {**(dict(task) if is_mapping(task) else {}), "taskId": task_id, "status": "failed",
                "statusMessage": message, "lastUpdatedAt": now, "error": error, "resultType": "complete"}

    async def followed(self, principal: str | None, task_ids: list[str]) -> list[JsonObject]:
        """For `subscriptions/listen`: the current state of each of `task_ids` (another replica's) that the caller
        may follow; the others are left out, as another's task on this replica is."""
        seen: list[JsonObject] = []
        for task_id in task_ids:
            try:
                seen.append(await self.request(principal, "tasks/get", {"taskId": task_id}))
            except MCPError as exc:
                if exc.error.code != INVALID_PARAMS:
                    raise
        return seen

    async def changes(self, principal: str | None, first: JsonObject) -> AsyncIterator[JsonObject]:
        """Another replica's task as `subscriptions/listen` follows it: `first`, then each change its home
        shows, polled every `pollIntervalMs`; ends when the task is over (or failed with its replica)."""
        task, last = first, None
        while True:
            seen = (task.get("status"), tuple(task.get("inputRequests") or ()))
            if seen != last:
                last = seen
                yield {k: v for k, v in task.items() if k != "resultType"}
            if task.get("status") in TERMINAL:
                return
            await anyio.sleep(POLL_INTERVAL_MS / 1000)
            task = await self.request(principal, "tasks/get", {"taskId": task.get("taskId")})
