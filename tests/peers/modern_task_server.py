"""A 2026-07-28 task server: the tasks extension (`io.modelcontextprotocol/tasks`) on the `mcp` SDK's low-level server.

No third-party 2026-07-28 task server exists yet, and the SDK (2.3.0) ships no tasks extension, so this one is
written as the SDK's docs and extension interface suggest: `Server(on_call_tool=..., on_list_tools=...)`,
the extension declared in `extensions`, and a middleware for `tasks/get`, `tasks/update`, `tasks/cancel` (the
SDK's runner refuses `tasks/get` and `tasks/cancel` on a 2026-07-28 request: they are 2025-11-25 methods to
it, and a `MethodBinding` may not bind them).

Run: `python -m tests.peers.modern_task_server [--http HOST:PORT]` (stdio by default).

Tool `deploy {service}`: needs the extension (-32021 without it); returns a task that goes `input_required`
with one `elicitation/create` (`{approve: boolean}`, key `approval`), then `completed` with "deployed
<service>" or "not deployed" (or `cancelled` on `tasks/cancel`). Its `statusMessage` says what it does.

Tool `summarize {text}`: a task whose `inputRequests` are a `roots/list` (key `roots`) and a
`sampling/createMessage` (key `sample`); `completed` with "<the sampled text> (<n> roots)".
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from elicitgate.demo.serving import run_server

TASKS = "io.modelcontextprotocol/tasks"
APPROVAL = {"type": "object", "properties": {"approve": {"type": "boolean", "title": "Approve"}},
            "required": ["approve"]}
TASK_STORE: dict[str, dict[str, Any]] = {}
ANSWERS: dict[str, asyncio.Future[dict[str, Any]]] = {}
"""Per task waiting for input: all of its `inputResponses`, once every key it asked has one."""
GIVEN: dict[str, dict[str, Any]] = {}
RUNNING: dict[str, asyncio.Task[None]] = {}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_params.capabilities if ctx.session.client_params else None
    return bool(capabilities and capabilities.extensions and TASKS in capabilities.extensions)


async def list_tools(_ctx: ServerRequestContext[Any, Any], _params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]}
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return types.ListToolsResult(tools=[types.Tool(name="deploy", input_schema=schema),
                                        types.Tool(name="summarize", input_schema=text)])


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
    if not _declares_tasks(ctx):
        raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "deploy runs as a task",
                       data={"requiredCapabilities": {"extensions": {TASKS: {}}}})
    task_id = secrets.token_urlsafe(12)
    task = {"taskId": task_id, "status": "working", "createdAt": _now(), "lastUpdatedAt": _now(),
            "ttlMs": 60_000, "pollIntervalMs": 100}
    TASK_STORE[task_id] = task
    arguments = params.arguments or {}
    work = _summarize(task, arguments["text"]) if params.name == "summarize" else _deploy(task, arguments["service"])
    RUNNING[task_id] = asyncio.get_running_loop().create_task(work)
    return {**task, "resultType": "task"}


async def _ask(task: dict[str, Any], requests: dict[str, Any], message: str) -> dict[str, Any] | None:
    """Wait in `input_required` for answers to every one of `requests`; None when the task was cancelled."""
    answer = ANSWERS[task["taskId"]] = asyncio.get_running_loop().create_future()
    GIVEN[task["taskId"]] = {}
    task.update(status="input_required", statusMessage=message, lastUpdatedAt=_now(), inputRequests=requests)
    try:
        return await answer
    except asyncio.CancelledError:
        task.update(status="cancelled", statusMessage="cancelled", lastUpdatedAt=_now())
        return None
    finally:
        task.pop("inputRequests", None)


async def _summarize(task: dict[str, Any], text: str) -> None:
    sample = {"messages": [{"role": "user", "content": {"type": "text", "text": f"Summarize: {text}"}}],
              "maxTokens": 50}
    given = await _ask(task, {"roots": {"method": "roots/list", "params": {}},
                              "sample": {"method": "sampling/createMessage", "params": sample}},
                       "waiting for the client's roots and a sample")
    if given is None:
        return
    summary = (given["sample"].get("content") or {}).get("text")
    roots = len(given["roots"].get("roots") or [])
    task.update(status="completed", statusMessage="summarized", lastUpdatedAt=_now(),
                result={"content": [{"type": "text", "text": f"{summary} ({roots} roots)"}]})


async def _deploy(task: dict[str, Any], service: str) -> None:
    task.update(statusMessage=f"preparing {service}")
    given = await _ask(task, {"approval": {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": f"Deploy {service}?", "requestedSchema": APPROVAL}}},
        f"waiting for approval to deploy {service}")
    if given is None:
        return
    result = given["approval"]
    approved = result.get("action") == "accept" and (result.get("content") or {}).get("approve") is True
    text = f"deployed {service}" if approved else "not deployed"
    task.update(status="completed", statusMessage=text, lastUpdatedAt=_now(),
                result={"content": [{"type": "text", "text": text}]})


async def tasks_middleware(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    if ctx.method not in ("tasks/get", "tasks/update", "tasks/cancel"):
        return await call_next(ctx)
    if not _declares_tasks(ctx):
        raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "declare the tasks extension",
                       data={"requiredCapabilities": {"extensions": {TASKS: {}}}})
    params = ctx.params or {}
    task = TASK_STORE.get(params.get("taskId"))  # type: ignore[arg-type]
    if task is None:
        raise MCPError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
    if ctx.method == "tasks/get":
        return {**task, "resultType": "complete"}
    if ctx.method == "tasks/update":
        future = ANSWERS.get(task["taskId"])
        asked = task.get("inputRequests") or {}
        given = GIVEN.setdefault(task["taskId"], {})
        given.update({k: v for k, v in (params.get("inputResponses") or {}).items() if k in asked})
        if future is not None and not future.done() and asked and set(asked) <= set(given):
            future.set_result(dict(given))
    elif (running := RUNNING.get(task["taskId"])) is not None:
        running.cancel()
    return {"resultType": "complete"}


def build() -> Server[Any]:
    server: Server[Any] = Server("modern-tasks", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    server.extensions[TASKS] = {}
    server.middleware.append(tasks_middleware)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT")
    run_server(build(), http=parser.parse_args().http)


if __name__ == "__main__":
    main()
