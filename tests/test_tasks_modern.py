"""The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) through the gateway (docs/tasks.md).

Clients: the `mcp` SDK's 2026-07-28 client with the extension as the SDK's extension points allow
(tests/peers/task_extension_client.py: its `tasks/get`, `tasks/update`, `tasks/cancel` and `subscriptions/listen`
requests), over the stdio face and the HTTP face. Upstream: the official `@modelcontextprotocol/server-everything`
2026.8.31 (npm, tests/peers/ts), a 2025-11-25 task server, whose `simulate-research-query` runs as a task and asks
the person to pick an interpretation. The everything server speaks 2025-11-25 only, so no 2026-07-28 client can
use it directly: what the client gets is compared with what its own 2025-11-25 task client gets (test_tasks.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.extension import NotificationBinding
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from elicitgate.bridging.task_extension import TASKS_EXTENSION
from elicitgate.config import build_config
from tests.conftest import PEERS, PY, gateway_stdio, inprocess_gateway, write_config
from tests.hosted_helpers import AUTH, TOKEN, next_pending
from tests.peers.task_extension_client import AnyResult, TasksExtension, follow, task_request

pytestmark = [pytest.mark.anyio, pytest.mark.node]

MODERN = "2026-07-28"
EVERYTHING = str(PEERS / "ts" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js")
EVERYTHING_STDIO = {"command": "node", "args": [EVERYTHING, "stdio"]}
SAME_NAMES = {"prefix_single_server": False}
AMBIGUOUS = {"topic": "python", "ambiguous": True}
RESEARCH = "simulate-research-query"
TOKENS = [{"token": "alice-nQjvhGy56VgDVTsh89Gu4Cq_Ha7FlBSGErEQZ_fUgL0", "principal": "alice"},
          {"token": "bob-u1Ih8ZndFujdVQ_2yRwUqoMQHPTD8RN60ry81HvCdek", "principal": "bob"}]
INVALID_PARAMS = -32602
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021


@pytest.fixture(autouse=True)
def _peers_installed() -> None:
    if shutil.which("node") is None or not Path(EVERYTHING).is_file():
        pytest.fail("server-everything not installed: run `cd tests/peers/ts && npm ci` (scripts/test does)")


def config(**sections: Any) -> dict[str, Any]:
    return {"mcpServers": {"everything": EVERYTHING_STDIO}, "namespacing": SAME_NAMES, **sections}


def answering(interpretation: str, asked: list[dict[str, Any]] | None = None) -> Any:
    async def human(_ctx: Any, params: Any) -> types.ElicitResult:
        if asked is not None:
            asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return types.ElicitResult(action="accept", content={"interpretation": interpretation})

    return human


async def by_hand(_ctx: Any, _params: Any) -> types.ElicitResult:
    """Declares elicitation; the test answers with its own tasks/update."""
    raise AssertionError("the test answers this task's questions itself")


@asynccontextmanager
async def modern_client(target: Any, *, human: Any = by_hand, headers: dict[str, str] | None = None,
                        notified: list[dict[str, Any]] | None = None, mode: str = MODERN) -> AsyncIterator[Client]:
    """The SDK's 2026-07-28 client declaring the extension, at an HTTP URL or a stdio gateway."""
    extension = TasksExtension()
    if notified is not None:
        async def keep(params: AnyResult) -> None:
            notified.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))

        extension.notifications = lambda: [NotificationBinding(method="notifications/tasks", params_type=AnyResult,
                                                               handler=keep)]
    if headers is not None:
        target = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)), target
        async with target[0]:
            from mcp.client.streamable_http import streamable_http_client

            async with Client(streamable_http_client(target[1], http_client=target[0]), mode=mode,
                              elicitation_callback=human, extensions=[extension]) as client:
                yield client
        return
    async with Client(target, mode=mode, elicitation_callback=human, extensions=[extension]) as client:
        yield client


def text_of(result: Any) -> str:
    return result["content"][0]["text"] if isinstance(result, dict) else result.content[0].text


async def create(client: Client, name: str = RESEARCH, arguments: dict[str, Any] | None = None) -> str:
    created = await client.session.call_tool(name, arguments if arguments is not None else AMBIGUOUS,
                                             allow_claimed=True)
    assert created.result_type == "task"  # type: ignore[union-attr]
    return created.task_id  # type: ignore[union-attr]


async def until(client: Client, task_id: str, status: str) -> dict[str, Any]:
    """Poll `tasks/get` until the task shows `status` (bounded by the test's own timeout)."""
    while (task := await task_request(client.session, "tasks/get", task_id))["status"] != status:
        assert task["status"] not in ("completed", "failed", "cancelled") or status == task["status"], task
        await anyio.sleep(0.05)
    return task


# -- the research query as a task of the extension (bridged to the 2025-11-25 task server) -------------


@pytest.mark.parametrize("face", ["stdio", "http"])
async def test_the_research_query_is_a_task_whose_question_is_an_input_request(tmp_path: Path, face: str):
    asked: list[dict[str, Any]] = []
    statuses: list[str] = []
    if face == "stdio":
        path = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES)
        target: Any = gateway_stdio(path)
        gateway = None
    async with inprocess_gateway(config()) if face == "http" else _nothing() as gw:
        if gw is not None:
            target, gateway = gw.mcp_url, gw.gateway
        async with modern_client(target, human=answering("snake", asked)) as client:
            task_id = await create(client)
            final = await follow(client.session, task_id, seen=lambda t: changed(statuses, t["status"]))
            # The SDK client with the extension finishes a task itself: call_tool returns the tool's result.
            again = await client.call_tool(RESEARCH, AMBIGUOUS)
    assert task_id.startswith("everything/")
    # The extension's state diagram: back to working once answered, then the end.
    assert statuses[:2] == ["working", "input_required"] and statuses[-1] == "completed"
    assert set(statuses) == {"working", "input_required", "completed"}
    assert final["status"] == "completed" and "Clarification**: snake" in text_of(final["result"])
    assert "Clarification**: snake" in text_of(again)
    # The question came as an inputRequest, through the broker (prefixed with its server), naming the task.
    first = asked[0]
    assert first["requestedSchema"]["required"] == ["interpretation"]
    assert first["message"].startswith("[everything] ")
    assert first["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
    if gateway is not None:
        assert not gateway.broker.pending and not gateway.tasks._by_id  # the relayed upstream task is forgotten


def changed(statuses: list[str], status: str) -> None:
    if statuses[-1:] != [status]:
        statuses.append(status)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield None


async def test_an_invalid_answer_is_refused_and_its_question_stays_open_until_a_valid_one():
    async with inprocess_gateway(config()) as gw, modern_client(gw.mcp_url) as client:
        task_id = await create(client)
        task = await until(client, task_id, "input_required")
        (key,) = task["inputRequests"]
        with pytest.raises(MCPError) as refused:
            await task_request(client.session, "tasks/update", task_id,
                               inputResponses={key: {"action": "accept", "content": {"interpretation": "bogus"}}})
        again = await task_request(client.session, "tasks/get", task_id)
        await task_request(client.session, "tasks/update", task_id,
                           inputResponses={key: {"action": "accept", "content": {"interpretation": "comedy"}}})
        final = await until(client, task_id, "completed")
    assert refused.value.error.code == INVALID_PARAMS
    assert refused.value.error.data["errors"][key][0]["property"] == "interpretation"
    assert "fix" in refused.value.error.data
    assert again["status"] == "input_required" and list(again["inputRequests"]) == [key]
    assert again["inputRequests"][key]["params"]["_meta"]["io.elicitgate/previousErrors"][0]["property"] == (
        "interpretation")
    assert "Clarification**: comedy" in text_of(final["result"])
    assert "bogus" not in text_of(final["result"])


async def test_tasks_update_for_a_question_never_asked_or_a_task_not_waiting_is_refused():
    async with inprocess_gateway(config()) as gw, modern_client(gw.mcp_url) as client:
        task_id = await create(client)
        with pytest.raises(MCPError) as early:  # still working: nothing to answer
            await task_request(client.session, "tasks/update", task_id, inputResponses={})
        task = await until(client, task_id, "input_required")
        with pytest.raises(MCPError) as never:
            await task_request(client.session, "tasks/update", task_id,
                               inputResponses={"q99": {"action": "accept", "content": {"interpretation": "snake"}}})
        with pytest.raises(MCPError) as not_an_object:
            await task_request(client.session, "tasks/update", task_id, inputResponses=["snake"])
        (key,) = task["inputRequests"]
        await task_request(client.session, "tasks/update", task_id, inputResponses={key: {"action": "decline"}})
        final = await until(client, task_id, "completed")
        with pytest.raises(MCPError) as after:
            await task_request(client.session, "tasks/update", task_id, inputResponses={key: {"action": "decline"}})
    assert early.value.error.code == INVALID_PARAMS and early.value.error.data["status"] == "working"
    assert never.value.error.code == INVALID_PARAMS and never.value.error.data["unknownKeys"] == ["q99"]
    assert never.value.error.data["outstanding"] == [key]
    assert not_an_object.value.error.code == INVALID_PARAMS
    assert after.value.error.data["status"] == "completed"
    assert final["status"] == "completed"


async def test_a_task_is_cancelled_and_its_question_ends_with_it():
    async with inprocess_gateway(config()) as gw, modern_client(gw.mcp_url) as client:
        task_id = await create(client)
        await until(client, task_id, "input_required")
        cancelled = await task_request(client.session, "tasks/cancel", task_id)
        final = await until(client, task_id, "cancelled")
        gateway = gw.gateway
    assert cancelled == {"resultType": "complete"} or cancelled.get("resultType") == "complete"
    assert final["status"] == "cancelled" and "result" not in final
    assert not gateway.broker.pending


# -- ownership and bad ids ------------------------------------------------------------------------------------


async def test_another_principal_cannot_see_answer_or_cancel_a_task():
    cfg = config(http={"auth": {"tokens": TOKENS}})
    alice, bob = ({"Authorization": f"Bearer {t['token']}"} for t in TOKENS)
    async with inprocess_gateway(cfg) as gw, modern_client(gw.mcp_url, headers=alice) as owner, \
            modern_client(gw.mcp_url, headers=bob) as other, modern_client(gw.mcp_url, headers=alice) as again:
        task_id = await create(owner)
        refused = {}
        for method, extra in (("tasks/get", {}), ("tasks/cancel", {}),
                              ("tasks/update", {"inputResponses": {"q1": {"action": "decline"}}})):
            with pytest.raises(MCPError) as caught:
                await task_request(other.session, method, task_id, **extra)
            refused[method] = caught.value.error
        seen_by_alice_elsewhere = await task_request(again.session, "tasks/get", task_id)
        await task_request(owner.session, "tasks/cancel", task_id)
    for method, error in refused.items():
        assert error.code == INVALID_PARAMS, method
        assert error.data["taskId"] == task_id and "fix" in error.data, method
    assert seen_by_alice_elsewhere["taskId"] == task_id


async def test_an_unknown_task_id_is_refused():
    async with inprocess_gateway(config()) as gw, modern_client(gw.mcp_url) as client:
        with pytest.raises(MCPError) as unknown:
            await task_request(client.session, "tasks/get", "everything/no-such-task")
    assert unknown.value.error.code == INVALID_PARAMS
    assert unknown.value.error.data["taskId"] == "everything/no-such-task"


async def test_the_extensions_methods_need_the_extension_declared_on_the_request():
    async with inprocess_gateway(config()) as gw, Client(gw.mcp_url, mode=MODERN) as plain:
        with pytest.raises(MCPError) as missing:
            await task_request(plain.session, "tasks/get", "everything/whatever")
    assert missing.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert missing.value.error.data["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}


async def test_listening_for_tasks_needs_the_extension_declared():
    request = types.SubscriptionsListenRequest(params=types.SubscriptionsListenRequestParams(
        notifications=types.SubscriptionFilter.model_validate({"taskIds": ["everything/whatever"]})))
    async with inprocess_gateway(config()) as gw, Client(gw.mcp_url, mode=MODERN) as plain:
        with pytest.raises(MCPError) as missing:
            await plain.session.send_request(request, AnyResult)
    assert missing.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_server_discover_declares_the_extension_when_something_can_serve_it():
    async with inprocess_gateway(config()) as gw, Client(gw.mcp_url, mode="auto") as client:
        assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})
    async with inprocess_gateway(config(tasks={"hand_over_after": None}), ) as gw:
        async with Client(gw.mcp_url, mode="auto") as client:
            # The everything server runs tasks (2025-11-25), which the gateway bridges.
            assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})
    no_tasks = {"mcpServers": {"plain": {"command": "node", "args": [str(PEERS / "ts" / "elicit_server.mjs")]}},
                "tasks": {"hand_over_after": None}}
    async with inprocess_gateway(no_tasks) as gw, Client(gw.mcp_url, mode="auto") as client:
        assert TASKS_EXTENSION not in (client.server_capabilities.extensions or {})


async def test_a_flood_of_tasks_stops_at_the_clients_pending_limit():
    cfg = config(elicitation={"max_pending_per_session": 1, "max_pending_total": 10},
                 http={"auth": {"tokens": TOKENS[:1]}})
    alice = {"Authorization": f"Bearer {TOKENS[0]['token']}"}
    async with inprocess_gateway(cfg) as gw, modern_client(gw.mcp_url, headers=alice) as client:
        first = await create(client)
        with pytest.raises(MCPError) as refused:
            await create(client)
        await task_request(client.session, "tasks/cancel", first)
    assert refused.value.error.code == -32014
    assert refused.value.error.data["limit"] == "max_pending_per_session"


# -- tasks the gateway makes itself ---------------------------------------------------------------------------


async def test_a_call_that_waits_longer_than_hand_over_after_becomes_a_task():
    slow = {"duration": 2, "steps": 2}
    async with inprocess_gateway(config(tasks={"hand_over_after": 0.3})) as gw:
        async with modern_client(gw.mcp_url) as client:
            task_id = await create(client, "trigger-long-running-operation", slow)
            final = await follow(client.session, task_id)
            quick = await client.session.call_tool("echo", {"message": "hi"}, allow_claimed=True)
        async with Client(gw.mcp_url, mode=MODERN) as without_extension:
            waited = await without_extension.call_tool("trigger-long-running-operation", slow)
    assert task_id.startswith("elicitgate/")
    assert final["status"] == "completed" and "Long running operation" in text_of(final["result"])
    assert isinstance(quick, types.CallToolResult)  # answered in time: no task
    assert "Long running operation" in text_of(waited)  # a client without the extension waits, as before


async def test_a_question_sent_to_the_hosted_inbox_hands_the_client_a_task_at_once():
    cfg = config(admin_token=TOKEN, tasks={"hand_over_after": 60})
    async with inprocess_gateway(cfg) as gw, modern_client(gw.mcp_url, human=None) as client:  # hosted
        with anyio.fail_after(60):
            task_id = await create(client, "trigger-elicitation-request", {})
        (item,) = await next_pending(gw.url)
        async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
            answered = await http.post(f"/api/elicitations/{item['id']}/answer",
                                       json={"action": "accept", "content": {"name": "Ada"}})
        final = await follow(client.session, task_id)
    assert task_id.startswith("elicitgate/")
    assert answered.status_code == 200, answered.text
    assert final["status"] == "completed" and "Ada" in json.dumps(final["result"])


# -- notifications/tasks through subscriptions/listen ---------------------------------------------------------


async def test_a_listening_client_is_told_of_each_change_of_its_task():
    notified: list[dict[str, Any]] = []
    async with inprocess_gateway(config()) as gw, \
            modern_client(gw.mcp_url, human=answering("snake"), notified=notified) as client:
        task_id = await create(client)
        request = types.SubscriptionsListenRequest(params=types.SubscriptionsListenRequestParams(
            notifications=types.SubscriptionFilter.model_validate({"taskIds": [task_id, "everything/not-mine"]})))
        ended: list[Any] = []

        async def listen() -> None:
            ended.append(await client.session.send_request(request, AnyResult))

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            final = await follow(client.session, task_id)
    statuses = [n["status"] for n in notified]
    assert statuses[0] in ("working", "input_required") and statuses[-1] == "completed"
    assert "input_required" in statuses
    assert all(n["taskId"] == task_id for n in notified)
    assert notified[-1]["result"] == final["result"]
    assert ended, "the stream ends once every task it follows is over"


# -- configuration --------------------------------------------------------------------------------------------


def test_hand_over_after_defaults_to_ten_seconds_and_must_be_positive_or_null():
    assert build_config({}, "test").tasks.hand_over_after == 10.0
    assert build_config({"tasks": {"hand_over_after": None}}, "test").tasks.hand_over_after is None
    with pytest.raises(Exception, match="hand_over_after"):
        build_config({"tasks": {"hand_over_after": 0}}, "test")


# -- a handshake-era client's task on a 2026-07-28 task server ---------------------------------------------------


def deploy_server() -> dict[str, Any]:
    """tests/peers/modern_task_server.py: the SDK's server answers both eras, so the gateway is told which."""
    return {"command": PY, "args": ["-m", "tests.peers.modern_task_server"], "era": "modern"}


def ts_task_client(tmp_path: Path, *options: str) -> dict[str, Any]:
    """The TypeScript SDK's 2025-11-25 task client (tests/peers/ts/task_client.mjs) through a stdio gateway."""
    from tests.test_tasks import GATEWAY_ARGV, task_client

    path = write_config(tmp_path, {"deploy": deploy_server()}, namespacing=SAME_NAMES)
    return task_client("--call", "deploy", "--args", json.dumps({"service": "web"}), *options,
                       command=[*GATEWAY_ARGV, str(path)])


async def test_a_handshake_clients_task_runs_on_a_2026_task_server_as_the_2026_client_sees_it_directly():
    async with Client(StdioServerParameters(command=PY, args=deploy_server()["args"], env=dict(os.environ)),
                      mode=MODERN, elicitation_callback=approving, extensions=[TasksExtension()]) as direct:
        directly = await direct.call_tool("deploy", {"service": "web"})
    via = ts_task_client(Path(tempfile.mkdtemp()), "--answer", json.dumps({"approve": True}))
    assert via["error"] is None
    assert via["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    task_id = via["created"]["task"]["taskId"]
    assert task_id.startswith("deploy/") and via["created"]["task"]["ttl"] == 60_000
    assert via["statuses"][-1] == "completed" and "input_required" in via["statuses"]
    (asked,) = via["elicitations"]  # the task's inputRequest, pushed through the broker, naming the task
    assert asked["message"] == "[deploy] Deploy web?"
    assert asked["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
    assert text_of(via["result"]) == text_of(directly) == "deployed web"
    assert via["listed"] == [task_id]


async def test_an_invalid_answer_to_a_2026_servers_task_question_is_asked_again_and_a_task_cancelled(tmp_path: Path):
    invalid = ts_task_client(tmp_path, "--answer", json.dumps({"approve": "yes"}))
    cancelled = ts_task_client(tmp_path, "--cancel")
    first, again = invalid["elicitations"][:2]
    assert "io.elicitgate/previousErrors" not in first["_meta"]
    assert again["_meta"]["io.elicitgate/previousErrors"][0]["property"] == "approve"
    assert text_of(invalid["result"]) == "not deployed"  # "yes" never reached the server: it heard "cancel"
    assert cancelled["cancelled"]["taskId"] == cancelled["created"]["task"]["taskId"]
    assert cancelled["statuses"][-1] == "cancelled"


async def approving(_ctx: Any, _params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


# -- the task table (unit) ------------------------------------------------------------------------------------


class _FirstRequest:
    request_id = 1


def _park(peer: Any, cfg: Any) -> Any:
    from elicitgate.bridging.rounds import ParkedCall

    return ParkedCall(peer, "tools/call", _FirstRequest(), cfg.bridging)  # type: ignore[arg-type]


async def test_a_task_is_its_principals_and_without_one_its_ids():
    from elicitgate.bridging.task_extension import ModernTasks
    from elicitgate.contracts import DownstreamPeer

    cfg = build_config({}, "test")
    table = ModernTasks(cfg)
    alice, alice_again, bob = (DownstreamPeer(id=i, connection=None, principal=p)  # type: ignore[arg-type]
                               for i, p in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")))
    anonymous, other_anonymous = (DownstreamPeer(id=i, connection=None) for i in ("m1", "m2"))  # type: ignore[arg-type]
    owned = table.create(_park(alice, cfg))
    bearer = table.create(_park(anonymous, cfg))
    assert table.find(alice_again, owned.id) is owned
    assert table.find(other_anonymous, bearer.id) is bearer  # no identity: the unguessable id is the bearer
    for peer, task in ((bob, owned), (anonymous, owned), (alice, bearer)):
        with pytest.raises(MCPError) as refused:
            table.find(peer, task.id)
        assert refused.value.error.code == INVALID_PARAMS
    assert owned.id.startswith("elicitgate/") and len(owned.id) > 30


async def test_a_task_past_its_ttl_is_forgotten_and_its_call_cancelled():
    from elicitgate.bridging.task_extension import ModernTasks
    from elicitgate.contracts import DownstreamPeer

    cfg = build_config({"tasks": {"max_ttl": 0.05}}, "test")
    table = ModernTasks(cfg)
    peer = DownstreamPeer(id="m1", connection=None)  # type: ignore[arg-type]
    park = _park(peer, cfg)
    started = anyio.Event()

    async def work(_call: object) -> dict[str, Any]:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with anyio.create_task_group() as tg:
        tg.start_soon(park.run, work)
        await started.wait()  # a call becomes a task while it runs (rounds, the task bridge)
        task = table.create(park, ttl_ms=600_000)  # asked for more than tasks.max_ttl: lowered
        assert task.ttl_ms == 50
        await anyio.sleep(0.1)  # past the ttl (a bound the table is asked about, not a synchronisation)
        with pytest.raises(MCPError):
            table.find(peer, task.id)
    assert isinstance(park.outcome, MCPError)  # cancelled, not left running


async def test_a_2026_clients_task_on_a_2026_task_server_is_followed_by_the_gateway(tmp_path: Path):
    path = write_config(tmp_path, {"deploy": deploy_server()}, namespacing=SAME_NAMES)
    async with modern_client(gateway_stdio(path)) as client:
        task_id = await create(client, "deploy", {"service": "web"})
        task = await until(client, task_id, "input_required")
        (key,) = task["inputRequests"]
        with pytest.raises(MCPError) as refused:
            await task_request(client.session, "tasks/update", task_id,
                               inputResponses={key: {"action": "accept", "content": {"approve": "yes"}}})
        await task_request(client.session, "tasks/update", task_id,
                           inputResponses={key: {"action": "accept", "content": {"approve": True}}})
        final = await until(client, task_id, "completed")
    assert task_id.startswith("deploy/")
    assert task["inputRequests"][key]["params"]["message"] == "[deploy] Deploy web?"
    assert refused.value.error.data["errors"][key][0]["property"] == "approve"
    assert text_of(final["result"]) == "deployed web"


def _initialize_over_stdio(tmp_path: Path, revision: str) -> dict[str, Any]:
    """The gateway's `initialize` result for a client of `revision`, over its stdio face (raw JSON-RPC lines)."""
    import subprocess

    path = write_config(tmp_path, {"deploy": deploy_server()}, namespacing=SAME_NAMES)
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    proc = subprocess.Popen([PY, "-m", "elicitgate.cli", "serve", "--config", str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(hello) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())["result"]
    finally:
        proc.kill()
        proc.wait()


def test_tasks_are_declared_only_to_clients_whose_revision_has_them(tmp_path: Path):
    assert _initialize_over_stdio(tmp_path, "2025-11-25")["capabilities"]["tasks"]["requests"] == {
        "tools": {"call": {}}}
    old = _initialize_over_stdio(tmp_path, "2025-06-18")
    assert old["protocolVersion"] == "2025-06-18" and "tasks" not in old["capabilities"]


async def _until_empty(table: Any, bound: float = 10.0) -> None:
    """Wait (at most `bound` seconds) for `table` to hold nothing: its timers drop tasks, nobody asks."""
    with anyio.fail_after(bound):
        while len(table):
            await anyio.sleep(0.01)


async def test_a_finished_task_is_dropped_keep_finished_after_its_end_and_a_running_one_at_its_ttl():
    from elicitgate.bridging.task_extension import ModernTasks
    from elicitgate.contracts import DownstreamPeer

    cfg = build_config({"tasks": {"max_ttl": 3600, "keep_finished": 0.05}}, "test")
    table = ModernTasks(cfg)
    peer = DownstreamPeer(id="m1", connection=None)  # type: ignore[arg-type]
    parks = [_park(peer, cfg) for _ in range(5)]
    for park in parks:
        table.create(park)

    async def done() -> dict[str, Any]:
        return {"content": []}

    for park in parks:
        await park.run(done)
    assert len(table) == 5  # kept for their owner to fetch, then dropped without anyone asking again
    await _until_empty(table)

    short = ModernTasks(build_config({"tasks": {"max_ttl": 0.05, "keep_finished": 3600}}, "test"))
    park = _park(peer, cfg)
    started = anyio.Event()

    async def forever(_call: object) -> dict[str, Any]:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with anyio.create_task_group() as tg:
        tg.start_soon(park.run, forever)
        await started.wait()  # a call becomes a task while it runs
        short.create(park)
        await _until_empty(short)  # its ttl: dropped, and its call cancelled, though nobody asked
    assert isinstance(park.outcome, MCPError) and len(short) == 0


def test_keep_finished_defaults_to_five_minutes_and_must_be_positive():
    assert build_config({}, "test").tasks.keep_finished == 300
    with pytest.raises(Exception, match="keep_finished"):
        build_config({"tasks": {"keep_finished": 0}}, "test")


def test_a_2026_servers_status_messages_reach_a_handshake_client_in_tasks_get_and_status_notifications(
    tmp_path: Path,
):
    via = ts_task_client(tmp_path, "--answer", json.dumps({"approve": True}))
    task_id = via["created"]["task"]["taskId"]
    assert "waiting for approval to deploy web" in via["messages"] and via["messages"][-1] == "deployed web"
    told = [(n["status"], n.get("statusMessage")) for n in via["notified"]]
    assert ("input_required", "waiting for approval to deploy web") in told
    assert told[-1] == ("completed", "deployed web")
    assert {n["taskId"] for n in via["notified"]} == {task_id}  # the gateway's id, never the upstream's


def summarize_client(tmp_path: Path, *options: str) -> dict[str, Any]:
    from tests.test_tasks import GATEWAY_ARGV, task_client

    path = write_config(tmp_path, {"deploy": deploy_server()}, namespacing=SAME_NAMES)
    return task_client("--call", "summarize", "--args", json.dumps({"text": "a long text"}), *options,
                       command=[*GATEWAY_ARGV, str(path)])


def test_a_2026_servers_task_asking_sampling_and_roots_is_answered_by_the_handshake_client(tmp_path: Path):
    via = summarize_client(tmp_path, "--sampling", "short", "--roots")
    assert via["error"] is None, via["error"]
    task_id = via["created"]["task"]["taskId"]
    assert text_of(via["result"]) == "short (1 roots)"
    (sampled,) = via["sampled"]
    (rooted,) = via["rooted"]
    for asked in (sampled, rooted):  # each names the client's task, as a 2025-11-25 server's would
        assert asked["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
    assert sampled["messages"][0]["content"]["text"] == "Summarize: a long text"


def test_a_2026_servers_task_asking_what_the_client_did_not_declare_fails_at_once_and_is_cancelled(
    tmp_path: Path,
):
    via = summarize_client(tmp_path, "--roots")  # no sampling
    assert via["result"] is None
    error = via["error"]
    assert error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["data"]["requiredCapabilities"] == {"sampling": {}} and error["data"]["inputRequest"] == "sample"
    assert "sampling" in error["data"]["fix"]


async def test_an_answer_with_no_valid_action_is_refused_and_a_finished_task_is_gone_after_keep_finished():
    async with inprocess_gateway(config(tasks={"keep_finished": 0.2})) as gw, modern_client(gw.mcp_url) as client:
        task_id = await create(client)
        (key,) = (await until(client, task_id, "input_required"))["inputRequests"]
        with pytest.raises(MCPError) as no_action:
            await task_request(client.session, "tasks/update", task_id, inputResponses={key: {"action": "maybe"}})
        await task_request(client.session, "tasks/update", task_id, inputResponses={key: {"action": "decline"}})
        await until(client, task_id, "completed")
        with anyio.fail_after(30):  # a bound: the gateway's timer forgets it keep_finished after its end
            while gw.gateway.modern_tasks._by_id:  # pyright: ignore[reportPrivateUsage]
                await anyio.sleep(0.05)
        with pytest.raises(MCPError) as gone:
            await task_request(client.session, "tasks/get", task_id)
    assert no_action.value.error.code == INVALID_PARAMS
    assert "action" in no_action.value.error.data["errors"][key][0]["message"]
    assert gone.value.error.code == INVALID_PARAMS and gone.value.error.data["taskId"] == task_id


def _raw_requests(tmp_path: Path, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    """Raw JSON-RPC `requests` of a 2025-11-25 client over the gateway's stdio face (after `initialize`); their
    responses, in order."""
    import subprocess

    path = write_config(tmp_path, {"deploy": deploy_server()}, namespacing=SAME_NAMES)
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    proc = subprocess.Popen([PY, "-m", "elicitgate.cli", "serve", "--config", str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        lines = [hello, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 *({"jsonrpc": "2.0", "id": i, **r} for i, r in enumerate(requests, 1))]
        proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        proc.stdin.flush()
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < len(requests) + 1:
            message = json.loads(proc.stdout.readline())
            if "id" in message and "method" not in message:
                answers[message["id"]] = message
        return [answers[i] for i in range(1, len(requests) + 1)]
    finally:
        proc.kill()
        proc.wait()


def test_a_handshake_clients_malformed_task_requests_get_a_clear_error(tmp_path: Path):
    not_an_object, bad_id, no_id = _raw_requests(
        tmp_path,
        {"method": "tools/call", "params": {"name": "deploy", "arguments": {"service": "web"}, "task": "soon"}},
        {"method": "tasks/get", "params": {"taskId": 42}},
        {"method": "tasks/cancel", "params": {}},
    )
    assert not_an_object["error"]["code"] == INVALID_PARAMS
    assert not_an_object["error"]["data"]["rule"] == "task is {ttl?: number}"
    for refused in (bad_id, no_id):
        assert refused["error"]["code"] == INVALID_PARAMS and refused["error"]["data"]["rule"] == "taskId is required"
