"""2025-11-25 tasks through the gateway (docs/tasks.md), against the official
`@modelcontextprotocol/server-everything` 2026.8.31 (npm, tests/peers/ts) and the TypeScript SDK's task
client (tests/peers/ts/task_client.mjs). Every probe runs directly too, and the gateway does what direct does:
same capabilities, same `execution.taskSupport`, same statuses, the task's question asked and answered, the
same errors for another client's or an unknown task. Real processes over stdio and streamable HTTP.

The `mcp` Python SDK (2.3.0) has the tasks types but no task support in its client or server (it leaves
`tasks/*` out of its 2025-11-25 surface), so the client here is the TypeScript SDK's.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from elicitgate.config import build_config
from elicitgate.contracts import DownstreamPeer
from elicitgate.router.tasks import TaskTable, face_capability
from tests.conftest import PEERS, PY, ROOT, Process, free_port, write_config
from tests.hosted_helpers import AUTH, TOKEN, next_pending_sync

TS = PEERS / "ts"
TASK_CLIENT = str(TS / "task_client.mjs")
EVERYTHING = str(TS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js")
EVERYTHING_STDIO = {"command": "node", "args": [EVERYTHING, "stdio"]}
GATEWAY_ARGV = [PY, "-m", "elicitgate.cli", "serve", "--config"]
RESEARCH = ["--call", "simulate-research-query"]
AMBIGUOUS = [*RESEARCH, "--args", json.dumps({"topic": "python", "ambiguous": True})]
PLAIN = [*RESEARCH, "--args", json.dumps({"topic": "python"})]
SAME_NAMES = {"prefix_single_server": False}
"""One upstream, its names unprefixed: the same probe runs directly and through the gateway."""
TOKENS = [{"token": "alice-nQjvhGy56VgDVTsh89Gu4Cq_Ha7FlBSGErEQZ_fUgL0", "principal": "alice"},
          {"token": "bob-u1Ih8ZndFujdVQ_2yRwUqoMQHPTD8RN60ry81HvCdek", "principal": "bob"}]


@pytest.fixture(autouse=True)
def _peers_installed() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the TypeScript peers need Node.js 20+")
    if not Path(EVERYTHING).is_file():
        pytest.fail(f"server-everything not installed: run `cd {TS} && npm ci` (scripts/test does)")


def task_client(*options: str, url: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """Run the TS task client against `url` or the stdio server `command`; its JSON line."""
    target = ["--url", url] if url else ["--", *(command or [])]
    done = subprocess.run(["node", TASK_CLIENT, *options, *target], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def through_gateway(tmp_path: Path, *options: str, **sections: Any) -> dict[str, Any]:
    config = write_config(tmp_path, {"everything": EVERYTHING_STDIO}, namespacing=SAME_NAMES, **sections)
    return task_client(*options, command=[*GATEWAY_ARGV, str(config)])


def directly(*options: str) -> dict[str, Any]:
    return task_client(*options, command=["node", *EVERYTHING_STDIO["args"]])


def execution_of(output: dict[str, Any], tool: str) -> Any:
    return next(t["execution"] for t in output["tools"] if t["name"] == tool)


def related_task(message: dict[str, Any]) -> Any:
    return message["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]


def report(output: dict[str, Any]) -> str:
    return output["result"]["content"][0]["text"]


@pytest.fixture
def everything_http():
    """server-everything over streamable HTTP (one task store per session, as it ships)."""
    port = free_port()
    proc = Process(["node", EVERYTHING, "streamableHttp"], port, env={"PORT": str(port)})
    yield f"{proc.url}/mcp"
    proc.stop()


@pytest.fixture
def http_gateway(tmp_path: Path):
    """`elicitgate serve --http` in front of `servers`: `http_gateway(servers, **sections)` returns its /mcp URL."""
    started: list[Process] = []

    def start(servers: dict[str, Any], **sections: Any) -> str:
        config = write_config(tmp_path, servers, namespacing=SAME_NAMES, **sections)
        port = free_port()
        started.append(Process([*GATEWAY_ARGV, str(config), "--http", f"127.0.0.1:{port}"], port))
        return f"{started[-1].url}/mcp"

    yield start
    for proc in started:
        proc.stop()


# -- the research query, run as a task --------------------------------------------------------------


@pytest.mark.node
def test_research_query_runs_as_a_task_and_its_question_reaches_the_client_as_directly(tmp_path: Path):
    answer = ["--answer", json.dumps({"interpretation": "snake"})]
    direct = directly(*AMBIGUOUS, *answer)
    via = through_gateway(tmp_path, *AMBIGUOUS, *answer)

    assert via["error"] is None and direct["error"] is None
    assert via["capabilities"]["tasks"] == direct["capabilities"]["tasks"] == {
        "list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert execution_of(via, "simulate-research-query") == execution_of(direct, "simulate-research-query") == {
        "taskSupport": "required"}
    assert execution_of(via, "echo") == execution_of(direct, "echo")
    assert via["statuses"] == direct["statuses"] == ["working", "input_required", "completed"]
    # The task's question: the same form, naming the task by the id this client knows.
    (asked,), (asked_directly,) = via["elicitations"], direct["elicitations"]
    assert asked["requestedSchema"] == asked_directly["requestedSchema"]
    task_id = via["created"]["task"]["taskId"]
    assert task_id.startswith("everything/") and task_id != direct["created"]["task"]["taskId"]
    assert related_task(asked) == task_id
    assert via["listed"] == [task_id]
    assert "Clarification**: snake" in report(via) and "Clarification**: snake" in report(direct)
    assert related_task(via["result"]) == task_id
    # notifications/tasks/status, each naming the task by the client's id (relayed as they come: the last may
    # still be on its way when the client leaves, so the statuses are compared as sets).
    assert {n["status"] for n in direct["notified"]} >= {n["status"] for n in via["notified"]} >= {
        "working", "input_required"}
    assert {n["taskId"] for n in via["notified"]} == {task_id}


@pytest.mark.node
def test_tasks_result_waits_for_the_task_past_the_servers_request_timeout(tmp_path: Path):
    # The research takes four 1 s stages; tasks/result waits from the question to the end, over 1.5 s.
    config = write_config(tmp_path, {"everything": {**EVERYTHING_STDIO, "request_timeout": 1.5}},
                          namespacing=SAME_NAMES)
    via = task_client(*AMBIGUOUS, "--answer", json.dumps({"interpretation": "snake"}),
                      command=[*GATEWAY_ARGV, str(config)])
    assert via["error"] is None
    assert via["statuses"] == ["working", "input_required", "completed"]
    assert "Clarification**: snake" in report(via)


@pytest.mark.node
def test_an_invalid_answer_to_a_tasks_question_is_asked_again_and_never_reaches_the_server(tmp_path: Path):
    via = through_gateway(tmp_path, *AMBIGUOUS, "--answer", json.dumps({"interpretation": "bogus"}),
                          elicitation={"max_answer_attempts": 2})
    first, again = via["elicitations"]
    assert "io.elicitgate/previousErrors" not in first["_meta"]
    assert again["_meta"]["io.elicitgate/previousErrors"][0]["property"] == "interpretation"
    # The server heard the elicitation failed and went on with its default; "bogus" never reached it.
    assert via["statuses"][-1] == "completed"
    assert "bogus" not in report(via) and "elicitation unavailable" in report(via)


@pytest.mark.node
def test_a_tasks_question_is_hosted_when_the_owners_client_cannot_show_it(http_gateway: Any):
    url = http_gateway({"everything": EVERYTHING_STDIO}, admin_token=TOKEN)
    base = url.removesuffix("/mcp")
    client = subprocess.Popen(["node", TASK_CLIENT, *AMBIGUOUS, "--no-elicitation", "--url", url], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (item,) = next_pending_sync(base)  # in the operator's inbox: the client declared no elicitation
        with httpx2.Client(base_url=base, headers=AUTH) as http:
            detail = http.get(f"/api/elicitations/{item['id']}").json()
            bad = http.post(f"/api/elicitations/{item['id']}/answer",
                            json={"action": "accept", "content": {"interpretation": "bogus"}})
            ok = http.post(f"/api/elicitations/{item['id']}/answer",
                           json={"action": "accept", "content": {"interpretation": "comedy"}})
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, err
    assert detail["requestedSchema"]["required"] == ["interpretation"]
    assert bad.status_code == 422 and ok.status_code == 200
    via = json.loads(out)
    assert via["elicitations"] == [] and via["statuses"][-1] == "completed"
    assert "Clarification**: comedy" in report(via)


@pytest.mark.node
def test_a_task_is_cancelled_as_directly(tmp_path: Path):
    direct = directly(*PLAIN, "--cancel")
    via = through_gateway(tmp_path, *PLAIN, "--cancel")
    assert via["cancelled"]["status"] == direct["cancelled"]["status"] == "cancelled"
    assert via["cancelled"]["taskId"] == via["created"]["task"]["taskId"]
    assert via["statuses"] == direct["statuses"] == ["cancelled"]


@pytest.mark.node
def test_a_tool_the_person_must_confirm_is_confirmed_before_its_task_is_made(tmp_path: Path):
    declined = through_gateway(tmp_path, *PLAIN, "--action", "decline",
                               elicitation={"confirm_tools": ["simulate-research-query"]})
    assert declined["created"] is None and declined["listed"] == []
    assert declined["error"]["code"] == -32602
    assert declined["error"]["data"]["tool"] == "simulate-research-query"
    (confirmation,) = declined["elicitations"]
    assert "simulate-research-query" in confirmation["message"]


# -- ownership ----------------------------------------------------------------------------------------


@pytest.mark.node
def test_another_session_cannot_see_or_touch_a_task_as_directly(everything_http: str, http_gateway: Any):
    direct = task_client(*PLAIN, "--foreign", url=everything_http)
    via = task_client(*PLAIN, "--foreign", url=http_gateway({"everything": {"url": everything_http}}))
    for op in ("get", "result", "cancel"):
        assert direct["foreign"][op]["error"]["code"] == via["foreign"][op]["error"]["code"] == -32602, op
    assert direct["foreign"]["listed"] == via["foreign"]["listed"] == []
    assert via["foreign"]["get"]["error"]["data"]["taskId"] == via["created"]["task"]["taskId"]
    # The owner's task was left alone.
    assert via["statuses"] == direct["statuses"] == ["working", "completed"]
    assert via["listed"] == [via["created"]["task"]["taskId"]]


@pytest.mark.node
def test_another_principal_cannot_see_or_touch_a_task(http_gateway: Any):
    url = http_gateway({"everything": EVERYTHING_STDIO}, http={"auth": {"tokens": TOKENS}})
    via = task_client(*PLAIN, "--foreign", "--token", TOKENS[0]["token"], "--foreign-token", TOKENS[1]["token"],
                      url=url)
    for op in ("get", "result", "cancel"):
        assert via["foreign"][op]["error"]["code"] == -32602, op
    assert via["foreign"]["listed"] == []
    assert via["statuses"] == ["working", "completed"]


@pytest.mark.node
def test_the_upstream_session_running_a_task_is_not_evicted_for_another_client(http_gateway: Any):
    # One upstream session allowed: the task's owns it while the task lives, so another client's call is
    # refused (-32010) instead of closing the session under the task.
    url = http_gateway({"everything": {**EVERYTHING_STDIO, "max_upstream_sessions": 1}})
    via = task_client(*PLAIN, "--foreign", url=url)
    assert via["foreign"]["call"]["error"]["code"] == -32010
    assert via["statuses"] == ["working", "completed"]
    assert "Research Report" in report(via)


@pytest.mark.node
def test_another_session_of_the_same_principal_reaches_the_task(http_gateway: Any):
    url = http_gateway({"everything": EVERYTHING_STDIO}, http={"auth": {"tokens": TOKENS}})
    token = TOKENS[0]["token"]
    via = task_client(*PLAIN, "--foreign", "--token", token, "--foreign-token", token, url=url)
    task_id = via["created"]["task"]["taskId"]
    assert via["foreign"]["get"]["ok"]["taskId"] == task_id
    assert via["foreign"]["listed"] == [task_id]
    assert "Research Report" in via["foreign"]["result"]["ok"]["content"][0]["text"]  # waited for the end
    assert via["statuses"][-1] == "completed"


# -- bad input ----------------------------------------------------------------------------------------


@pytest.mark.node
def test_an_unknown_task_id_is_refused_as_directly(tmp_path: Path):
    direct = directly("--get", "no-such-task")
    via = through_gateway(tmp_path, "--get", "no-such-task")
    assert via["got"]["error"]["code"] == direct["got"]["error"]["code"] == -32602
    assert via["got"]["error"]["data"]["taskId"] == "no-such-task"
    assert "fix" in via["got"]["error"]["data"]


@pytest.mark.node
def test_a_ttl_over_the_maximum_is_lowered_and_a_negative_one_refused(tmp_path: Path):
    lowered = through_gateway(tmp_path, *PLAIN, "--ttl", "600000", "--cancel", tasks={"max_ttl": 10})
    assert lowered["created"]["task"]["ttl"] == 10_000  # the server chose 300000; the gateway keeps it 10 s
    refused = through_gateway(tmp_path, *PLAIN, "--ttl", "-5")
    assert refused["error"]["code"] == -32602
    assert refused["error"]["data"]["rule"] == "task.ttl"


@pytest.mark.node
def test_a_flood_of_tasks_from_one_client_stops_at_its_pending_limit(tmp_path: Path):
    via = through_gateway(tmp_path, *PLAIN, "--more", "2", "--cancel",
                          elicitation={"max_pending_per_session": 2, "max_pending_total": 10})
    allowed, refused = via["more"]
    assert allowed["ok"]["task"]["taskId"].startswith("everything/")
    assert refused["error"]["code"] == -32014
    assert refused["error"]["data"]["limit"] == "max_pending_per_session"
    assert via["cancelled"]["status"] == "cancelled"  # the client's first task is unharmed


# -- the task table (unit) ------------------------------------------------------------------------------


def test_the_ttl_sent_upstream_is_at_most_the_maximum():
    table = TaskTable(build_config({"tasks": {"max_ttl": 10}}, "test"))
    peer = DownstreamPeer(id="c1", connection=None)  # type: ignore[arg-type]
    assert table.request_params("s", peer, {"task": {"ttl": 600_000}})["task"]["ttl"] == 10_000
    assert table.request_params("s", peer, {"task": {}})["task"]["ttl"] == 10_000
    assert table.request_params("s", peer, {"task": {"ttl": 5_000}})["task"]["ttl"] == 5_000


def test_the_face_declares_tasks_only_when_an_upstream_offers_task_augmented_calls():
    assert face_capability([{"tools": {}}]) is None
    assert face_capability([{"tasks": {"list": {}}}]) is None
    declared = face_capability([{"tools": {}}, {"tasks": {"requests": {"tools": {"call": {}}}}}])
    assert declared is not None
    assert declared.model_dump(exclude_none=True) == {"list": {}, "requests": {"tools": {"call": {}}}}


class _Connection:
    """What the table reads of an upstream connection: its live tasks, whether it closed."""

    def __init__(self) -> None:
        import anyio

        self.live_tasks: dict[str, float] = {}
        self.closed = anyio.Event()


@pytest.mark.anyio
async def test_a_relayed_task_is_forgotten_keep_finished_after_its_end_and_at_its_ttl_without_anyone_asking():
    import anyio

    table = TaskTable(build_config({"tasks": {"max_ttl": 3600, "keep_finished": 0.05}}, "test"))
    peer = DownstreamPeer(id="c1", connection=None)  # type: ignore[arg-type]
    conn = _Connection()
    made = [table.created("s", conn, peer, {"task": {"taskId": f"u{i}", "status": "working", "ttl": 600_000}})[1]
            for i in range(4)]
    short = table.created("s", conn, peer, {"task": {"taskId": "brief", "status": "working", "ttl": 50}})[1]
    assert short is not None and len(table) == 5
    for relayed in made:
        assert relayed is not None
        table.public_task(relayed, {"taskId": relayed.upstream_id, "status": "completed"})  # its tasks/get said so
    with anyio.fail_after(10):  # a bound: the table's timers drop them, nobody asks the table
        while len(table) or conn.live_tasks:
            await anyio.sleep(0.01)
