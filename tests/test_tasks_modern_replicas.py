"""The 2026-07-28 tasks extension across replicas (`redis_url`, docs/tasks.md "Replicas"): a real `redis-server`,
two real `elicitgate serve --http` processes in front of `@modelcontextprotocol/server-everything` 2026.8.31, and the
`mcp` SDK's 2026-07-28 client with the extension (tests/peers/task_extension_client.py). A task made through
replica A is followed, answered and cancelled through B by the same principal; another principal does not reach
it; when A dies, B reports the task `failed`, naming A, and refuses to answer or cancel it, at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp.shared.exceptions import MCPError

from tests.conftest import write_config
from tests.peers.task_extension_client import AnyResult, follow, task_request
from tests.replicas_helpers import redis_server, replicas  # noqa: F401 (fixtures)
from tests.test_tasks_modern import (
    EVERYTHING_STDIO,
    INVALID_PARAMS,
    SAME_NAMES,
    TOKENS,
    create,
    modern_client,
    text_of,
    until,
)

pytestmark = [pytest.mark.anyio, pytest.mark.node]
ALICE, BOB = ({"Authorization": f"Bearer {entry['token']}"} for entry in TOKENS)
REPLICA_GONE = -32008


def two_replicas(tmp_path: Path, redis_server: Any, replicas: Any) -> tuple[Any, str, str]:
    path = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES,
                        http={"auth": {"tokens": TOKENS}})
    group = replicas(path, redis_server.url, count=2)
    a, b = group.urls
    return group, f"{a}/mcp", f"{b}/mcp"


async def replica_id(mcp_url: str) -> str:
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.get(mcp_url.removesuffix("/mcp") + "/healthz")).json()["replica"]["id"]


async def refused(client: Any, method: str, task_id: str, **params: Any) -> Any:
    with pytest.raises(MCPError) as caught:
        await task_request(client.session, method, task_id, **params)
    return caught.value.error


async def test_a_task_made_on_one_replica_is_followed_and_answered_on_another(tmp_path: Path, redis_server,
                                                                              replicas):
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    home = await replica_id(a)
    with anyio.fail_after(180):
        async with modern_client(a, headers=ALICE) as on_a, modern_client(b, headers=ALICE) as on_b:
            task_id = await create(on_a)
            asked = await until(on_b, task_id, "input_required")
            (key,) = asked["inputRequests"]
            invalid = await refused(on_b, "tasks/update", task_id,
                                    inputResponses={key: {"action": "accept", "content": {"interpretation": "bogus"}}})
            await task_request(on_b.session, "tasks/update", task_id,
                               inputResponses={key: {"action": "accept", "content": {"interpretation": "snake"}}})
            final = await until(on_b, task_id, "completed")
            seen_on_a = await task_request(on_a.session, "tasks/get", task_id)
    assert task_id.startswith(f"everything/{home}.")  # the id names the replica that runs it
    assert asked["inputRequests"][key]["method"] == "elicitation/create"
    assert asked["inputRequests"][key]["params"]["requestedSchema"]["required"] == ["interpretation"]
    # An answer given on B is checked on A, as every answer: a bad one is refused there and the question stays.
    assert invalid.code == INVALID_PARAMS and invalid.data["errors"][key][0]["property"] == "interpretation"
    assert "Clarification**: snake" in text_of(final["result"])
    assert seen_on_a["status"] == "completed" and seen_on_a["result"] == final["result"]


async def test_a_task_made_on_one_replica_is_cancelled_on_another(tmp_path: Path, redis_server, replicas):
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    with anyio.fail_after(180):
        async with modern_client(a, headers=ALICE) as on_a, modern_client(b, headers=ALICE) as on_b:
            task_id = await create(on_a)
            await until(on_b, task_id, "input_required")
            cancelled = await task_request(on_b.session, "tasks/cancel", task_id)
            seen_on_a = await until(on_a, task_id, "cancelled")
            seen_on_b = await task_request(on_b.session, "tasks/get", task_id)
            late = await refused(on_b, "tasks/update", task_id, inputResponses={"q1": {"action": "decline"}})
    assert cancelled.get("resultType") == "complete"
    assert seen_on_a["status"] == "cancelled" and seen_on_b["status"] == "cancelled"
    assert late.code == INVALID_PARAMS and late.data["status"] == "cancelled"


async def test_another_principal_on_another_replica_cannot_reach_a_task(tmp_path: Path, redis_server, replicas):
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    home = await replica_id(a)
    with anyio.fail_after(180):
        async with modern_client(a, headers=ALICE) as owner, modern_client(b, headers=BOB) as other:
            task_id = await create(owner)
            await until(owner, task_id, "input_required")
            errors = {method: await refused(other, method, task_id, **extra) for method, extra in (
                ("tasks/get", {}), ("tasks/cancel", {}),
                ("tasks/update", {"inputResponses": {"q1": {"action": "decline"}}}))}
            forged = await refused(other, "tasks/get", f"elicitgate/{home}.forged")
            still = await task_request(owner.session, "tasks/get", task_id)
            await task_request(owner.session, "tasks/cancel", task_id)
    for method, error in errors.items():
        assert error.code == INVALID_PARAMS and error.data["taskId"] == task_id and "fix" in error.data, method
    assert forged.code == INVALID_PARAMS and forged.data["taskId"] == f"elicitgate/{home}.forged"
    assert still["status"] == "input_required"  # the owner's task was left alone


async def test_a_replica_that_dies_leaves_its_tasks_failed_naming_it(tmp_path: Path, redis_server, replicas):
    group, a, b = two_replicas(tmp_path, redis_server, replicas)
    lost = await replica_id(a)
    with anyio.fail_after(180):
        async with modern_client(a, headers=ALICE) as on_a:
            task_id = await create(on_a)
            await until(on_a, task_id, "input_required")
        await anyio.to_thread.run_sync(group.kill, 0)
        async with modern_client(b, headers=ALICE) as on_b, modern_client(b, headers=BOB) as other:
            got = await task_request(on_b.session, "tasks/get", task_id)
            answer = await refused(on_b, "tasks/update", task_id, inputResponses={"q1": {"action": "decline"}})
            cancel = await refused(on_b, "tasks/cancel", task_id)
            foreign = await refused(other, "tasks/get", task_id)
    assert got["status"] == "failed" and lost in got["statusMessage"]
    assert got["error"]["code"] == REPLICA_GONE and got["error"]["data"]["replica"] == lost
    assert got["createdAt"] and got["ttlMs"] > 0
    for error in (answer, cancel):
        assert error.code == INVALID_PARAMS and error.data["replica"] == lost and error.data["reason"] == "lost"
        assert lost in error.message
    assert foreign.code == INVALID_PARAMS and "replica" not in foreign.data  # another principal learns nothing


async def test_a_task_the_gateway_made_without_authentication_is_followed_on_another_replica(
        tmp_path: Path, redis_server, replicas):
    # Without `http.auth` an extension task's id is all that names it, on its replica as on the others.
    path = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES,
                        tasks={"hand_over_after": 0.3})
    a, b = (f"{url}/mcp" for url in replicas(path, redis_server.url, count=2).urls)
    home = await replica_id(a)
    with anyio.fail_after(180):
        async with modern_client(a) as on_a, modern_client(b) as on_b:
            task_id = await create(on_a, "trigger-long-running-operation", {"duration": 2, "steps": 2})
            final = await follow(on_b.session, task_id)
    assert task_id.startswith(f"elicitgate/{home}.")  # the gateway's own task ids name their replica too
    assert final["status"] == "completed" and "Long running operation" in text_of(final["result"])


async def test_a_client_listening_on_another_replica_is_told_of_each_change_of_the_task(tmp_path: Path,
                                                                                         redis_server, replicas):
    _, a, b = two_replicas(tmp_path, redis_server, replicas)
    notified: list[dict[str, Any]] = []
    with anyio.fail_after(180):
        async with modern_client(a, headers=ALICE) as on_a, \
                modern_client(b, headers=ALICE, notified=notified) as on_b:
            task_id = await create(on_a)
            request = types.SubscriptionsListenRequest(params=types.SubscriptionsListenRequestParams(
                notifications=types.SubscriptionFilter.model_validate({"taskIds": [task_id]})))
            ended: list[Any] = []

            async def listen() -> None:
                ended.append(await on_b.session.send_request(request, AnyResult))

            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                while not any(n["status"] == "input_required" for n in notified):  # told, not polled by the test
                    await anyio.sleep(0.05)
                (key,) = next(n for n in notified if n["status"] == "input_required")["inputRequests"]
                await task_request(on_b.session, "tasks/update", task_id,
                                   inputResponses={key: {"action": "accept", "content": {"interpretation": "snake"}}})
                while not ended:
                    await anyio.sleep(0.05)
                final = await task_request(on_b.session, "tasks/get", task_id)
    statuses = [n["status"] for n in notified]
    assert "input_required" in statuses and statuses[-1] == "completed"
    assert all(n["taskId"] == task_id for n in notified)
    assert notified[-1]["result"] == final["result"]
    assert ended, "the stream ends once the task it follows is over"
