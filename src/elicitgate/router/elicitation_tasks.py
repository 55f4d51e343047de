"""Elicitations an upstream runs as tasks on the gateway (2025-11-25 `tasks.requests.elicitation.create`,
docs/tasks.md "Elicitation as a task, toward upstreams").

The gateway declares the capability to handshake-era upstreams: it owns each elicitation's life already (the
broker: deadline, re-asks, hosting, audit), so a task is only another view of the same record. An
`elicitation/create` with `task: {ttl}` is answered at once with a `CreateTaskResult`; the question goes through
the broker exactly as a plain one (to the client whose call caused it, or hosted) while the server polls
`tasks/get` and fetches the answer with `tasks/result`. What that buys: the person's time is bounded by the
elicitation's own deadline, not by the server's timeout for one request (the TypeScript SDK's 60 s default
otherwise bounds how long a person has to answer). `tasks/cancel` ends the question (the client is told); a
task is forgotten with its ttl (at most `tasks.max_ttl`) or its connection.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp_types import INVALID_PARAMS

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.bridging.task_extension import task_time
from elicitgate.json_shapes import JsonObject
from elicitgate.upstreams.connection import UpstreamConnection

logger = logging.getLogger(__name__)

POLL_INTERVAL_MS = 1000


@dataclass(eq=False)
class ElicitationTask:
    id: str
    ttl_ms: int
    expires: float
    created_at: str = field(default_factory=task_time)
    updated_at: str = field(default_factory=task_time)
    status: str = "working"
    message: str | None = None
    result: JsonObject | None = None
    error: MCPError | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def public(self) -> JsonObject:
        task: JsonObject = {"taskId": self.id, "status": self.status, "createdAt": self.created_at,
                                "lastUpdatedAt": self.updated_at, "ttl": self.ttl_ms, "pollInterval": POLL_INTERVAL_MS}
        if self.message is not None:
            task["statusMessage"] = self.message
        return task

    def end(self, status: str, message: str | None = None) -> None:
        if self.done.is_set():
            return
        self.status, self.message, self.updated_at = status, message, task_time()
        self.done.set()


class ElicitationTasks:
    """The elicitation tasks of every upstream connection, by (connection, task id)."""

    def __init__(self, max_ttl: float) -> None:
        self.max_ttl = max_ttl
        self._tasks: dict[tuple[UpstreamConnection, str], ElicitationTask] = {}

    def start(
        self, tg: anyio.abc.TaskGroup, connection: UpstreamConnection, task: Mapping[str, Any],
        ask: Callable[[], Awaitable[JsonObject]],
    ) -> JsonObject:
        """Run the question `ask` asks in the background; the `CreateTaskResult` the server gets now."""
        self._purge()
        ttl = task.get("ttl")
        cap = int(self.max_ttl * 1000)
        ttl_ms = cap if not isinstance(ttl, int | float) or isinstance(ttl, bool) or ttl < 0 or ttl > cap else int(ttl)
        running = ElicitationTask(id=secrets.token_urlsafe(12), ttl_ms=ttl_ms,
                                  expires=anyio.current_time() + ttl_ms / 1000)
        self._tasks[(connection, running.id)] = running
        tg.start_soon(self._run, running, ask, name=f"elicitation-task:{connection.server}")
        return {"task": running.public()}

    async def _run(self, running: ElicitationTask, ask: Callable[[], Awaitable[JsonObject]]) -> None:
        with running.scope:
            try:
                running.result = await ask()
                running.end("completed")
                return
            except MCPError as exc:
                running.error = exc
                running.end("failed", exc.error.message)
                return
            except Exception as exc:  # the server gets a failed task, never a hang
                logger.exception("elicitation task %s failed", running.id)
                running.error = errors.gateway_error(errors.ELICITATION_FAILED, f"internal error: {type(exc).__name__}")
                running.end("failed", running.error.error.message)
                return
        running.end("cancelled", "cancelled by the server")  # its scope was cancelled (tasks/cancel)

    async def serve(self, connection: UpstreamConnection, method: str, params: Mapping[str, Any]) -> JsonObject:
        """An upstream's `tasks/get`, `tasks/result`, `tasks/cancel` or `tasks/list` of its elicitation tasks."""
        self._purge()
        if method == "tasks/list":
            return {"tasks": [t.public() for (conn, _), t in self._tasks.items() if conn is connection]}
        task_id = params.get("taskId")
        running = self._tasks.get((connection, task_id)) if isinstance(task_id, str) else None
        if running is None:
            raise errors.gateway_error(
                INVALID_PARAMS, f"unknown task {task_id!r}", taskId=task_id,
                fix="use a taskId the gateway returned for an elicitation/create on this session",
            )
        if method == "tasks/get":
            return running.public()
        if method == "tasks/cancel":
            if running.done.is_set():
                raise errors.gateway_error(INVALID_PARAMS, f"cannot cancel task {task_id!r}: it is {running.status}",
                                           taskId=task_id, status=running.status)
            running.scope.cancel()
            await running.done.wait()
            return running.public()
        with anyio.move_on_after(max(running.expires - anyio.current_time(), 0.001)):
            await running.done.wait()
        if running.result is not None:
            return running.result
        if running.error is not None:
            raise running.error
        raise errors.gateway_error(INVALID_PARAMS, f"task {task_id!r} is {running.status}: it has no result",
                                   taskId=task_id, status=running.status)

    def _purge(self) -> None:
        now = anyio.current_time()
        for key, running in list(self._tasks.items()):
            if now >= running.expires or key[0].closed.is_set():
                running.scope.cancel()
                del self._tasks[key]
