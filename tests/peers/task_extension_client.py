"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for the `mcp` SDK's 2026-07-28 client.

The SDK (2.3.0) has the extension points (`ClientExtension`, `ResultClaim`, `NotificationBinding`, requests
with `name_param` for `Mcp-Name`) but no tasks extension of its own, so this is one, written on those points
as the SDK's docs describe: `TasksExtension()` in `Client(extensions=[...])` declares the extension on every
request and finishes a `resultType: "task"` the way a host would (poll `tasks/get`, answer `inputRequests`
with the client's own callbacks through `tasks/update`, return the final `CallToolResult`). The requests are
also usable one by one (`task_request`), for tests that drive a task themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from pydantic import ConfigDict, Field

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")


class TaskRequest(types.Request[TaskParams, str]):
    method: str
    params: TaskParams
    name_param = "taskId"


class AnyResult(types.Result):
    """A result kept as the server sent it (`model_extra`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class CreateTaskResult(types.Result):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    ttl_ms: int | None = Field(alias="ttlMs", default=None)
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)


async def task_request(session: ClientSession, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    """One of the extension's requests (`tasks/get`, `tasks/update`, `tasks/cancel`); its result as a dict."""
    request = TaskRequest(method=method, params=TaskParams(taskId=task_id, **params))
    result = await session.send_request(request, AnyResult)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def follow(
    session: ClientSession, task_id: str, *, seen: Callable[[dict[str, Any]], None] | None = None,
    poll: float = 0.05,
) -> dict[str, Any]:
    """Poll `tasks/get` until the task ends, answering its `inputRequests` with the client's callbacks."""
    answered: set[str] = set()
    while True:
        task = await task_request(session, "tasks/get", task_id)
        if seen is not None:
            seen(task)
        if task["status"] in TERMINAL:
            return task
        if task["status"] == "input_required":
            responses: dict[str, Any] = {}
            for key, request in task["inputRequests"].items():
                if key in answered:
                    continue
                parsed = types.ElicitRequest.model_validate(request) if request["method"] == "elicitation/create" \
                    else None
                if parsed is None:
                    continue
                ctx = ClientRequestContext(session=session, request_id=f"task-{key}", meta=None)
                answer = await session.dispatch_input_request(ctx, parsed)
                if isinstance(answer, types.ErrorData):
                    raise MCPError.from_error_data(answer)
                responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                answered.add(key)
            if responses:
                await task_request(session, "tasks/update", task_id, inputResponses=responses)
                continue
        await anyio.sleep(poll)


async def _resolve(created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
    task = await follow(ctx.session, created.task_id)
    if task["status"] == "completed":
        return types.CallToolResult.model_validate(task["result"])
    if task["status"] == "failed":
        raise MCPError(code=task["error"]["code"], message=task["error"]["message"], data=task["error"].get("data"))
    raise MCPError(code=-32603, message=f"task {created.task_id} was {task['status']}")


class TasksExtension(ClientExtension):
    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_resolve)]
