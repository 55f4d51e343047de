"""2025-11-25 tasks across replicas (`redis_url`, docs/tasks.md "Replicas"): a real `redis-server`, two real
`elicitgate serve --http` processes in front of `@modelcontextprotocol/server-everything` 2026.8.31, the TypeScript
SDK's task client (tests/peers/ts/task_client.mjs) and plain HTTP. A task made through replica A is followed,
answered and cancelled through B by another session of the same principal; nobody else reaches it; when A dies,
its tasks end `failed`, naming A, and a `tasks/result` waiting on B gets -32008 within seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.conftest import write_config
from tests.replicas_helpers import redis_server, replicas  # noqa: F401 (fixtures)
from tests.test_http_face import HEADERS, open_session, sse_messages
from tests.test_tasks import AMBIGUOUS, EVERYTHING_STDIO, SAME_NAMES, TOKENS, related_task, report, task_client

pytestmark = [pytest.mark.node]
ALICE, BOB = (entry["token"] for entry in TOKENS)


def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES,
                        http={"auth": {"tokens": TOKENS}})


def two_replicas(tmp_path: Path, redis_server: Any, replicas: Any) -> tuple[Any, str, str]:
    group = replicas(config(tmp_path), redis_server.url, count=2)
    a, b = group.urls
    return group, f"{a}/mcp", f"{b}/mcp"


def test_a_task_made_on_one_replica_is_followed_and_answered_on_another(tmp_path: Path, redis_server, replicas):
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    via = task_client(*AMBIGUOUS, "--answer", json.dumps({"interpretation": "snake"}), "--foreign", "--token", ALICE,
                      "--foreign-token", ALICE, "--foreign-url", b, url=a)
    task_id = via["created"]["task"]["taskId"]
    foreign = via["foreign"]
    assert foreign["get"]["ok"]["taskId"] == task_id
    # B's client waited in tasks/result: the task's question reached it there, and its answer reached the task.
    (asked,) = foreign["elicitations"]
    assert related_task(asked) == task_id and asked["requestedSchema"]["required"] == ["interpretation"]
    assert "Clarification**: snake" in foreign["result"]["ok"]["content"][0]["text"]
    assert foreign["listed"] == [task_id] and foreign["listedTasks"][0]["status"] == "completed"
    assert foreign["cancel"]["error"]["code"] == -32602  # a completed task is not cancelled, as on one replica
    assert via["statuses"][-1] == "completed" and "Clarification**: snake" in report(via)


def test_a_task_made_on_one_replica_is_cancelled_on_another(tmp_path: Path, redis_server, replicas):
    """The task waits for its owner's answer (AMBIGUOUS: asked only in tasks/result, which nobody calls before
    the cancel), so it is still running when B cancels it however slowly B's client gets there."""
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    via = task_client(*AMBIGUOUS, "--foreign", "--token", ALICE, "--foreign-token", ALICE, "--foreign-url", b,
                      "--foreign-ops", "get,cancel", url=a)
    foreign = via["foreign"]
    assert foreign["cancel"]["ok"]["status"] == "cancelled"
    assert foreign["cancel"]["ok"]["taskId"] == via["created"]["task"]["taskId"]
    assert foreign["listedTasks"][0]["status"] == "cancelled"
    assert "cancelled" in via["statuses"]  # what its creator sees on A


def test_another_principal_on_another_replica_cannot_reach_a_task(tmp_path: Path, redis_server, replicas):
    """The task waits for its owner's answer (AMBIGUOUS): it cannot end before Bob's attempts, however slow they
    are, so its owner sees it still running after them, then answers it and sees it complete."""
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    via = task_client(*AMBIGUOUS, "--answer", json.dumps({"interpretation": "snake"}), "--foreign", "--token", ALICE,
                      "--foreign-token", BOB, "--foreign-url", b, "--get", "everything/0123456789ab.forged", url=a)
    task_id = via["created"]["task"]["taskId"]
    assert via["got"]["error"]["code"] == -32602  # an id naming a replica that never made it
    for op in ("get", "result", "cancel"):
        assert via["foreign"][op]["error"]["code"] == -32602, op
        assert via["foreign"][op]["error"]["data"]["taskId"] == task_id
    assert via["foreign"]["listed"] == [] and via["foreign"]["elicitations"] == []
    # The owner's task was left alone: polled after Bob's attempts, it was still running (working for its first
    # stages, then waiting for the owner's answer), and with that answer it completed.
    assert via["statuses"] in (["working", "input_required", "completed"], ["input_required", "completed"])
    assert "Clarification**: snake" in report(via)


# -- a replica that dies -----------------------------------------------------------------------------------


def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def answer_of(http: httpx2.AsyncClient, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """The response to `message` (a JSON body, or the SSE stream's answer)."""
    async with http.stream("POST", "/mcp", json=message, headers=headers) as response:
        if response.headers["content-type"].startswith("application/json"):
            return json.loads(await response.aread())
        async for received in sse_messages(response):
            if received.get("id") == message["id"] and "method" not in received:
                return received
    raise AssertionError(f"no answer to {message['method']}")


@pytest.mark.anyio
async def test_a_replica_that_dies_ends_its_tasks_failed_naming_it(tmp_path: Path, redis_server, replicas):
    group, a, b = two_replicas(tmp_path, redis_server, replicas)
    auth = {**HEADERS, "authorization": f"Bearer {ALICE}"}
    timeout = httpx2.Timeout(30, read=120)
    async with httpx2.AsyncClient(base_url=a.removesuffix("/mcp"), headers=auth, timeout=timeout) as on_a, \
            httpx2.AsyncClient(base_url=b.removesuffix("/mcp"), headers=auth, timeout=timeout) as on_b:
        lost_replica = (await on_a.get("/healthz")).json()["replica"]["id"]
        session_a, session_b = await open_session(on_a), await open_session(on_b)
        created = await answer_of(on_a, request(2, "tools/call", {
            "name": "simulate-research-query", "arguments": {"topic": "python", "ambiguous": True},
            "task": {"ttl": 60_000}}), session_a)
        task_id = created["result"]["task"]["taskId"]
        assert task_id.startswith(f"everything/{lost_replica}.")  # the id names the replica that runs it
        # B's client waits in tasks/result; when the task's question reaches it, A is killed.
        waiting = request(3, "tasks/result", {"taskId": task_id})
        asked: list[dict[str, Any]] = []
        ended: dict[str, Any] = {}
        with anyio.fail_after(120):
            async with on_b.stream("POST", "/mcp", json=waiting, headers=session_b) as response:
                async for received in sse_messages(response):
                    if received.get("method") == "elicitation/create":
                        asked.append(received)
                        await anyio.to_thread.run_sync(group.kill, 0)
                    elif received.get("id") == 3:
                        ended = received
                        break
        assert len(asked) == 1 and related_task(asked[0]["params"]) == task_id
        assert ended["error"]["code"] == -32008 and ended["error"]["data"]["replica"] == lost_replica
        assert lost_replica in ended["error"]["message"]
        got = await answer_of(on_b, request(4, "tasks/get", {"taskId": task_id}), session_b)
        assert got["result"]["status"] == "failed" and lost_replica in got["result"]["statusMessage"]
        listed = await answer_of(on_b, request(5, "tasks/list", {}), session_b)
        assert [(t["taskId"], t["status"]) for t in listed["result"]["tasks"]] == [(task_id, "failed")]
        cancelled = await answer_of(on_b, request(6, "tasks/cancel", {"taskId": task_id}), session_b)
        assert cancelled["error"]["code"] == -32602 and cancelled["error"]["data"]["replica"] == lost_replica


@pytest.mark.anyio
async def test_a_flood_of_tasks_counts_against_the_pending_limit_across_replicas(tmp_path: Path, redis_server,
                                                                                  replicas):
    limited = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES,
                           http={"auth": {"tokens": TOKENS}},
                           elicitation={"max_pending_per_session": 1, "max_pending_total": 10})
    a, b = replicas(limited, redis_server.url, count=2).urls
    auth = {**HEADERS, "authorization": f"Bearer {ALICE}"}
    research = {"name": "simulate-research-query", "arguments": {"topic": "python", "ambiguous": True},
                "task": {"ttl": 60_000}}
    async with httpx2.AsyncClient(base_url=a, headers=auth, timeout=60) as on_a, \
            httpx2.AsyncClient(base_url=b, headers=auth, timeout=60) as on_b:
        session_a, session_b = await open_session(on_a), await open_session(on_b)
        # The first task waits for its question (nobody calls tasks/result): it stays open on A.
        first = await answer_of(on_a, request(2, "tools/call", research), session_a)
        task_id = first["result"]["task"]["taskId"]
        refused = await answer_of(on_b, request(3, "tools/call", research), session_b)
        assert refused["error"]["code"] == -32014
        assert refused["error"]["data"]["limit"] == "max_pending_per_session"
        cancelled = await answer_of(on_b, request(4, "tasks/cancel", {"taskId": task_id}), session_b)
        assert cancelled["result"]["status"] == "cancelled"
        allowed = await answer_of(on_b, request(5, "tools/call", research), session_b)  # the first one ended
        assert allowed["result"]["task"]["status"] == "working"
        await answer_of(on_b, request(6, "tasks/cancel", {"taskId": allowed["result"]["task"]["taskId"]}), session_b)
