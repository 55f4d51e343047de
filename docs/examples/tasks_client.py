"""A 2026-07-28 client with the tasks extension: a research task whose question is answered by `tasks/update`.

    python docs/examples/tasks_client.py   # runs `elicitgate serve` on docs/examples/tasks.json

The `mcp` SDK has the extension points but no tasks extension of its own: the few lines below are one.
"""

import sys
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
from pydantic import ConfigDict, Field

from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters

CONFIG = Path(__file__).with_name("tasks.json")


class Ack(types.Result):  # what tasks/update and tasks/cancel return
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Task(Ack):  # the extension's CreateTaskResult and DetailedTask, fields kept as sent
    task_id: str = Field(alias="taskId")
    status: str


class CreateTaskResult(Task):
    result_type: Literal["task"] = Field(alias="resultType")


class TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")


class TaskRequest(types.Request[TaskParams, str]):  # tasks/get, tasks/update, tasks/cancel
    name_param = "taskId"  # on HTTP, Mcp-Name carries the task id


async def never(created: CreateTaskResult, ctx: Any) -> types.CallToolResult:
    raise RuntimeError("this example follows its task itself")


class Tasks(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=never)]


async def main() -> None:
    gateway = StdioServerParameters(command=sys.executable, args=["-m", "elicitgate.cli", "serve", "-c", str(CONFIG)])
    async with Client(gateway, mode="2026-07-28", extensions=[Tasks()],
                      elicitation_callback=lambda ctx, params: never(None, None)) as client:  # declares forms
        async def tasks(method: str, task_id: str, **params: Any) -> Any:
            request = TaskRequest(method=method, params=TaskParams(taskId=task_id, **params))
            return await client.session.send_request(request, Task if method == "tasks/get" else Ack)

        created = await client.session.call_tool(
            "everything__simulate-research-query", {"topic": "python", "ambiguous": True}, allow_claimed=True)
        print("tools/call:", created.result_type, created.task_id.split("/")[0] + "/…", created.status)
        while (task := await tasks("tasks/get", created.task_id)).status not in ("completed", "failed", "cancelled"):
            if task.status == "input_required":
                for key, request in task.model_extra["inputRequests"].items():  # a person would answer these
                    print(f"tasks/get: input_required, {key}:", request["params"]["message"])
                    schema = request["params"]["requestedSchema"]["properties"]["interpretation"]
                    print("  choices:", ", ".join(option["const"] for option in schema["oneOf"]))
                    await tasks("tasks/update", created.task_id,
                                inputResponses={key: {"action": "accept", "content": {"interpretation": "snake"}}})
            await anyio.sleep(0.2)
        print("tasks/get:", task.status)
        print(task.model_extra["result"]["content"][0]["text"].splitlines()[0])


anyio.run(main)
