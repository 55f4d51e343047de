"""Tasks the gateway runs for a client that made a plain call (docs/tasks.md, "A client that does not ask for a
task"), against the official `@modelcontextprotocol/server-everything` 2026.8.31, whose `simulate-research-query`
has `execution.taskSupport: "required"`. Clients: the `mcp` SDK of both eras, and the TypeScript SDK's (which
refuses to call a `required` tool without a task, so it must see the tool as `optional`). Directly, neither can use
the tool with a plain call; through the gateway both get the task's result, its question and its progress.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.conftest import gateway_stdio, write_config
from tests.test_tasks import (
    AMBIGUOUS,
    EVERYTHING,
    EVERYTHING_STDIO,
    PLAIN,
    SAME_NAMES,
    directly,
    execution_of,
    report,
    through_gateway,
)
from tests.test_tasks import _peers_installed as _peers_installed  # noqa: F401 (an autouse fixture)

pytestmark = [pytest.mark.node]
RESEARCH = "simulate-research-query"
SNAKE = {"interpretation": "snake"}


class Human:
    """An elicitation callback accepting with `content`; remembers what it was asked."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content
        self.asked: list[Any] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action="accept", content=self.content)


def logged_everything(log: Path) -> dict[str, Any]:
    """server-everything over stdio, with every line the gateway sends it copied to `log` (`tee`)."""
    return {"command": "sh", "args": ["-c", f'tee -a "{log}" | exec node "{EVERYTHING}" stdio']}


def sent_upstream(log: Path, method: str) -> list[dict[str, Any]]:
    lines = log.read_text().splitlines() if log.exists() else []
    messages = [json.loads(line) for line in lines if line.strip()]
    return [m for m in messages if m.get("method") == method]


async def until(condition: Any, timeout: float = 60.0) -> None:
    """Wait for `condition()` to hold (an event the test can only see by looking), at most `timeout` seconds."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.05)


# -- the mcp SDK client of both eras ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_plain_call_of_a_task_only_tool_gets_the_tasks_result_and_its_question(tmp_path: Path, era: str):
    config = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES)
    human = Human(SNAKE)
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with Client(gateway_stdio(config), mode=era, elicitation_callback=human) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        if era == "legacy":  # 2026-07-28's Tool has no `execution` (tasks are an extension there)
            execution = tools[RESEARCH].execution
            assert execution is not None and execution.task_support == "optional"
        result = await client.call_tool(RESEARCH, {"topic": "python", "ambiguous": True},
                                        progress_callback=on_progress)
    assert not result.is_error
    text = result.content[0]
    assert isinstance(text, types.TextContent) and "Clarification**: snake" in text.text
    (question,) = human.asked  # the task's question, asked of the caller like any question of its call
    assert question.requested_schema["required"] == ["interpretation"]
    assert "io.modelcontextprotocol/related-task" not in (question.meta or {})  # it knows no task
    if era == "legacy":  # the task's status changes, as the call's progress
        assert "Gathering sources..." in progress and "Generating report..." in progress


@pytest.mark.anyio
async def test_directly_a_plain_call_of_a_task_only_tool_fails():
    # What the gateway improves on: the server refuses a plain call of its task-only tool.
    server = StdioServerParameters(command="node", args=[EVERYTHING, "stdio"])
    async with Client(server, mode="legacy", elicitation_callback=Human(SNAKE)) as client:
        refused = await client.call_tool(RESEARCH, {"topic": "python"})
    assert refused.is_error and "requires task augmentation" in str(refused.content[0])


@pytest.mark.anyio
async def test_a_client_cancelling_its_plain_call_cancels_the_task_upstream(tmp_path: Path):
    log = tmp_path / "upstream.jsonl"
    config = write_config(tmp_path, {"everything": logged_everything(log)}, namespacing=SAME_NAMES,
                          tasks={"max_ttl": 120})
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=Human(SNAKE)) as client:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await client.call_tool(RESEARCH, {"topic": "python"}, progress_callback=on_progress)

            tg.start_soon(call)
            await until(lambda: progress)  # the task runs upstream
            tg.cancel_scope.cancel()
        (created,) = [c for c in sent_upstream(log, "tools/call") if c["params"].get("name") == RESEARCH]
        assert created["params"]["task"] == {"ttl": 120_000}  # the gateway's task lives at most tasks.max_ttl
        await until(lambda: sent_upstream(log, "tasks/cancel"))
        (cancel,) = sent_upstream(log, "tasks/cancel")
        # The gateway goes on serving the client.
        echoed = await client.call_tool("echo", {"message": "still here"})
        assert "still here" in str(echoed.content[0])
    (result_request,) = sent_upstream(log, "tasks/result")
    assert cancel["params"]["taskId"] == result_request["params"]["taskId"]


@pytest.mark.anyio
async def test_plain_calls_of_task_only_tools_count_against_the_pending_limit(tmp_path: Path):
    config = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES,
                          elicitation={"max_pending_per_session": 1, "max_pending_total": 10})
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=Human(SNAKE)) as client:
        first: list[types.CallToolResult] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                first.append(await client.call_tool(RESEARCH, {"topic": "python"}, progress_callback=on_progress))

            tg.start_soon(call)
            await until(lambda: progress)
            with pytest.raises(MCPError) as refused:
                await client.call_tool(RESEARCH, {"topic": "rust"})
        again = await client.call_tool(RESEARCH, {"topic": "go"})  # the first one's end made room
    assert refused.value.error.code == -32014
    assert refused.value.error.data["limit"] == "max_pending_per_session"
    assert "Research Report" in str(first[0].content[0]) and "Research Report" in str(again.content[0])


# -- the TypeScript SDK client ----------------------------------------------------------------------------


def test_the_typescript_client_that_knows_no_tasks_calls_the_tool_through_the_gateway_only(tmp_path: Path):
    answer = ["--answer", json.dumps(SNAKE)]
    direct = directly(*AMBIGUOUS, *answer, "--plain")
    via = through_gateway(tmp_path, *AMBIGUOUS, *answer, "--plain")
    # Directly its SDK refuses to call a `required` tool without a task; through the gateway it is `optional`.
    assert execution_of(direct, RESEARCH) == {"taskSupport": "required"}
    assert direct["error"] is not None and "requires task-based execution" in direct["error"]["message"]
    assert execution_of(via, RESEARCH) == {"taskSupport": "optional"}
    assert via["error"] is None, via["error"]
    assert "Clarification**: snake" in report(via)
    (question,) = via["elicitations"]
    assert question["requestedSchema"]["required"] == ["interpretation"]
    assert [p["message"] for p in via["progress"]][:1] == ["Gathering sources..."]
    assert [p["progress"] for p in via["progress"]] == sorted(p["progress"] for p in via["progress"])


def test_a_client_that_knows_tasks_still_sees_the_tool_as_required(tmp_path: Path):
    via = through_gateway(tmp_path, *PLAIN)
    assert execution_of(via, RESEARCH) == {"taskSupport": "required"}
    assert via["statuses"][-1] == "completed"


# -- an upstream runs its elicitation as a task on the gateway (tasks.requests.elicitation.create) ----------

ASYNC = "trigger-elicitation-request-async"
ADA = {"name": "Ada", "favoriteColor": "Blue"}


def test_an_upstream_asks_its_elicitation_as_a_task_and_the_client_answers_it(tmp_path: Path):
    # server-everything offers the tool only to a client that runs elicitations as tasks: the gateway does (the
    # broker owns the question), so every client sees it and answers the question as any other.
    assert ASYNC not in [t["name"] for t in directly()["tools"]]
    via = through_gateway(tmp_path, "--plain", "--call", ASYNC, "--answer", json.dumps(ADA))
    assert ASYNC in [t["name"] for t in via["tools"]]
    assert via["error"] is None, via["error"]
    (question,) = via["elicitations"]
    assert question["requestedSchema"]["required"] == ["name"] and "task" not in question
    text = " ".join(block["text"] for block in via["result"]["content"])
    assert "[COMPLETED] User provided the requested information!" in text
    assert "- Name: Ada" in text and "- Favorite Color: Blue" in text
    assert "Task created: " in text and "[SYNC]" not in text  # it ran as a task on the gateway


def test_an_invalid_answer_to_an_elicitation_task_is_asked_again_and_never_reaches_the_server(tmp_path: Path):
    via = through_gateway(tmp_path, "--plain", "--call", ASYNC, "--answer", json.dumps({"favoriteColor": "Blue"}),
                          elicitation={"max_answer_attempts": 2})
    first, again = via["elicitations"]
    assert again["_meta"]["io.elicitgate/previousErrors"][0]["property"] == "name"
    text = " ".join(block["text"] for block in via["result"]["content"])
    assert "[FAILED]" in text and "User inputs" not in text  # the task failed; no answer reached the server


@pytest.mark.anyio
async def test_an_elicitation_task_declined_by_the_person_completes_with_the_decline(tmp_path: Path):
    config = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES)

    async def decline(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=decline) as client:
        result = await client.call_tool(ASYNC, {})
    assert "[DECLINED] User declined" in str(result.content[0])


# -- the pending limit (unit) -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_task_seen_ended_no_longer_counts_against_the_pending_limit():
    from elicitgate.config import build_config
    from elicitgate.contracts import DownstreamPeer
    from elicitgate.router.tasks import TaskTable

    table = TaskTable(build_config({"elicitation": {"max_pending_per_session": 1, "max_pending_total": 10}}, "test"))
    peer = DownstreamPeer(id="c1", connection=None)  # type: ignore[arg-type]
    class Connection:  # what the table reads of an upstream connection
        live_tasks: dict[str, float] = {}
        closed = anyio.Event()

    connection = Connection()
    _, relayed = table.created("s", connection, peer, {"task": {"taskId": "u1", "status": "working"}})  # type: ignore[arg-type]
    assert relayed is not None
    with pytest.raises(MCPError) as refused:
        table.request_params("s", peer, {"task": {}})
    assert refused.value.error.code == -32014 and refused.value.error.data["limit"] == "max_pending_per_session"
    assert "elicitation.max_pending_per_session" in refused.value.error.data["fix"]
    table.public_task(relayed, {"taskId": "u1", "status": "completed"})  # a tasks/get saw it end
    assert table.request_params("s", peer, {"task": {}})["task"]["ttl"] == 3_600_000


@pytest.mark.anyio
async def test_an_elicitation_tasks_ttl_over_the_maximum_is_lowered(tmp_path: Path):
    log = tmp_path / "upstream.jsonl"
    config = write_config(tmp_path, {"everything": logged_everything(log)}, namespacing=SAME_NAMES,
                          tasks={"max_ttl": 10})
    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=Human(ADA)) as client:
        result = await client.call_tool(ASYNC, {})
    assert "- Name: Ada" in " ".join(str(block) for block in result.content)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    (created,) = [m["result"]["task"] for m in lines if "task" in (m.get("result") or {})]
    assert created["ttl"] == 10_000  # the server asked for 600000
    assert created["status"] == "working"
