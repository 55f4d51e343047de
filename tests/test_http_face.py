"""The HTTP face's `/mcp` on the wire (faces/streamable.py), with a raw HTTP client against a real
`elicitgate serve --http` in front of an `mcp` SDK server: how answers come back (one JSON body, or an SSE
stream when something is sent on the request's behalf first), what it refuses and how, and how sessions end.
The SDK clients, the TypeScript SDK's and the conformance suite talk to the same face in the other tests."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import ROOT, stdio_server, write_config
from tests.test_docs_commands import _blocks

pytestmark = pytest.mark.anyio

ADMIN = "http-face-QwnrRWGQg1f-ZLpxeVhVhCy4yTMwycGr2GR839xvHiE"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"


def initialize(request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "raw-http", "version": "1"}}}


def call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def open_session(http: httpx2.AsyncClient) -> dict[str, str]:
    """Initialize a session; the headers its later requests carry."""
    opened = await http.post("/mcp", json=initialize())
    assert opened.status_code == 200, opened.text
    assert opened.headers["content-type"] == "application/json"
    assert opened.json()["result"]["protocolVersion"] == VERSION
    headers = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    done = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202 and done.content == b""
    return headers


async def sse_messages(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response, as they arrive (keep-alive comments and the priming event,
    an id with no data, skipped)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            if any(data):
                yield json.loads("\n".join(data))
            data = []


def tool_text(message: dict[str, Any]) -> Any:
    return json.loads(message["result"]["content"][0]["text"])


MODERN = "2026-07-28"
MODERN_HEADERS = {**HEADERS, "mcp-protocol-version": MODERN}


def modern(request_id: int, method: str, params: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
    """A 2026-07-28 request: its `_meta` envelope says who asks and what it can do."""
    envelope = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"}}
    params = dict(params or {})
    params["_meta"] = {**params.get("_meta", {}), **envelope}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def routing_headers(request: dict[str, Any]) -> dict[str, str]:
    """The headers a 2026-07-28 request repeats from its body (`Mcp-Method`, `Mcp-Name`)."""
    name = request["params"].get("name")
    return {"mcp-method": request["method"], **({"mcp-name": name} if name is not None else {})}


@pytest.fixture
def gateway(tmp_path, http_gateway):
    def start(**http: Any) -> Any:
        server = stdio_server("tests.peers.py_server", "--name", "s", era="handshake", session_policy="shared")
        config = write_config(tmp_path, {"s": server}, http=http, audit={"url": f"sqlite:///{tmp_path / 'audit.db'}"})
        return http_gateway(config, env={"ELICITGATE_ADMIN_TOKEN": ADMIN})

    return start


async def test_a_quick_answer_is_one_json_body_and_a_question_turns_the_post_into_an_sse_stream(gateway):
    gw = gateway()
    async with httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http:
        session = await open_session(http)
        # The catalog is the gateway's own (no upstream in the way): answered well within `JSON_WINDOW`.
        listed = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
        assert listed.headers["content-type"] == "application/json"
        assert listed.headers["mcp-session-id"] == session["mcp-session-id"]
        assert listed.json()["id"] == 2 and "s__echo" in {tool["name"] for tool in listed.json()["result"]["tools"]}

        async with http.stream("POST", "/mcp", json=call(3, "s__elicit", {}), headers=session) as asking:
            assert asking.headers["content-type"] == "text/event-stream"
            messages = sse_messages(asking)
            question = await anext(messages)
            assert question["method"] == "elicitation/create" and question["params"]["mode"] == "form"
            answer = {
                "jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"answer": "42"}}
            }
            assert (await http.post("/mcp", json=answer, headers=session)).status_code == 202
            result = await anext(messages)
            assert result["id"] == 3 and tool_text(result) == {"action": "accept", "content": {"answer": "42"}}
            assert await anext(messages, None) is None  # the answer ends the stream


async def test_what_the_face_cannot_serve_gets_a_status_and_a_json_rpc_error_saying_why(gateway):
    gw = gateway()
    async with httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http:
        listing = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}

        async def refused(status: int, response: httpx2.Response) -> dict[str, Any]:
            assert response.status_code == status, (response.status_code, response.text)
            assert response.headers["content-type"] == "application/json"
            body = response.json()
            assert body["jsonrpc"] == "2.0" and "id" in body
            return body["error"]

        error = await refused(400, await http.post("/mcp", json=listing))
        assert error["message"] == "Bad Request: Missing session ID" and error["data"]["header"] == "mcp-session-id"
        error = await refused(404, await http.post("/mcp", json=listing, headers={"mcp-session-id": "nope"}))
        assert error["message"] == "Session not found" and error["data"]["sessionId"] == "nope"
        error = await refused(406, await http.post("/mcp", json=initialize(), headers={"accept": "application/json"}))
        assert "text/event-stream" in error["message"] and error["data"]["accept"] == "application/json"
        error = await refused(415, await http.post("/mcp", content=json.dumps(initialize()),
                                                   headers={"content-type": "text/plain"}))
        assert error["data"]["contentType"] == "text/plain"

        session = await open_session(http)
        error = await refused(400, await http.post("/mcp", content=b"{not json", headers=session))
        assert error["code"] == -32700 and "not JSON" in error["message"]
        deep = b"[" * 100_000 + b"]" * 100_000
        error = await refused(400, await http.post("/mcp", content=deep, headers=session))
        assert error["code"] == -32700 and "nested more than 1024 deep" in error["message"]
        half = (b'{"jsonrpc":"2.0","id":9,"method":"tools/call",'
                b'"params":{"name":"x__echo","arguments":{"text":"\\ud800"}}}')
        error = await refused(400, await http.post("/mcp", content=half, headers=session))  # as the SDK's server does
        assert error["code"] == -32700 and "lone surrogate" in error["message"]
        error = await refused(400, await http.post("/mcp", content=b"[1, 2]", headers=session))
        assert error["code"] == -32600 and "not a JSON-RPC message" in error["message"]
        error = await refused(413, await http.post("/mcp", content=b" " * (4 * 1024 * 1024 + 1), headers=session))
        assert error["data"]["limit"] == 4 * 1024 * 1024
        error = await refused(405, await http.put("/mcp", json=listing, headers=session))
        assert error["data"]["method"] == "PUT"
        error = await refused(406, await http.get("/mcp", headers={**session, "accept": "application/json"}))
        assert "text/event-stream" in error["message"]
        async with http.stream("GET", "/mcp", headers=session) as standalone:
            assert standalone.status_code == 200 and standalone.headers["content-type"] == "text/event-stream"
            error = await refused(409, await http.get("/mcp", headers=session))
            assert error["message"] == "Conflict: Only one SSE stream is allowed per session"
        # The session still serves after all of that.
        listed = await http.post("/mcp", json=listing, headers=session)
        assert "s__echo" in {tool["name"] for tool in listed.json()["result"]["tools"]}


async def test_a_session_ends_when_deleted_and_its_waiting_call_is_told_connection_closed(gateway):
    gw = gateway()
    admin = {"authorization": f"Bearer {ADMIN}"}
    async with httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http:
        session = await open_session(http)
        async with http.stream("POST", "/mcp", json=call(7, "s__elicit", {}), headers=session) as asking:
            messages = sse_messages(asking)
            assert (await anext(messages))["method"] == "elicitation/create"
            assert len((await http.get("/api/elicitations", headers=admin)).json()["elicitations"]) == 1
            deleted = await http.delete("/mcp", headers=session)
            assert deleted.status_code == 200
            ended = await anext(messages)
            assert ended["id"] == 7 and ended["error"]["code"] == -32000
            assert "session ended" in ended["error"]["message"]
            assert await anext(messages, None) is None
        assert (await http.post("/mcp", json=call(8, "s__echo", {}), headers=session)).status_code == 404
        assert (await http.delete("/mcp", headers=session)).status_code == 404
        deadline = time.monotonic() + 60  # the audit writer stores asynchronously (the store opens at first use)
        while not (records := (await http.get("/api/audit", headers=admin)).json()["records"]):
            assert time.monotonic() < deadline, "no audit record"
            await anyio.sleep(0.1)
        assert [record["state"] for record in records] == ["cancelled"]
        assert (await http.get("/api/elicitations", headers=admin)).json()["elicitations"] == []


async def test_an_idle_session_ends_after_http_session_idle_timeout(gateway):
    gw = gateway(session_idle_timeout=0.5)
    async with httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http:
        idle = await open_session(http)
        busy = await open_session(http)
        async with http.stream("GET", "/mcp", headers=busy) as standalone:  # an open GET stream holds it
            assert standalone.status_code == 200
            await _logged(gw, f"session {idle['mcp-session-id']} idle for")  # the sweep ended it
            assert (await http.post("/mcp", json=call(2, "s__echo", {}), headers=idle)).status_code == 404
            assert (await http.post("/mcp", json=call(2, "s__echo", {"text": "on"}), headers=busy)).status_code == 200


async def test_the_clients_page_curl_example_opens_a_session(gateway):
    gw = gateway()
    (block,) = [b for b in _blocks(ROOT / "docs" / "clients.md", "bash") if b.startswith("curl -si")]
    done = subprocess.run(["bash", "-c", block.replace("127.0.0.1:8808", gw.url.removeprefix("http://"))],
                          capture_output=True, text=True, timeout=60)
    head, _, body = done.stdout.partition("\n\n")  # text mode: curl's CRLFs read as newlines
    assert head.startswith("HTTP/1.1 200 OK"), done.stdout + done.stderr
    assert "mcp-session-id: " in head and "content-type: application/json" in head
    assert json.loads(body)["result"]["serverInfo"]["name"] == "elicitgate", done.stdout


async def test_a_2026_07_28_post_is_answered_on_itself_streams_progress_and_is_cancelled_by_closing_it(gateway):
    gw = gateway(json_wait=1)
    async with httpx2.AsyncClient(base_url=gw.url, headers=MODERN_HEADERS, timeout=30) as http:
        listing = modern(1, "tools/list")
        listed = await http.post("/mcp", json=listing, headers=routing_headers(listing))
        assert listed.status_code == 200 and listed.headers["content-type"] == "application/json", listed.text
        assert "mcp-session-id" not in listed.headers  # no session in this era
        assert listed.json()["result"]["resultType"] == "complete"

        progress = modern(
            2, "tools/call", {"name": "s__progress", "arguments": {"n": 3}, "_meta": {"progressToken": "p"}}
        )
        async with http.stream("POST", "/mcp", json=progress, headers=routing_headers(progress)) as streamed:
            assert streamed.headers["content-type"] == "text/event-stream"
            messages = [message async for message in sse_messages(streamed)]
        *notes, result = messages
        assert [(n["method"], n["params"]["progressToken"], n["params"]["progress"]) for n in notes] == [
            ("notifications/progress", "p", 1), ("notifications/progress", "p", 2), ("notifications/progress", "p", 3)]
        assert result["id"] == 2 and result["result"]["content"][0]["text"] == "done 3"

        sleep = modern(3, "tools/call", {"name": "s__sleep"})
        async with http.stream("POST", "/mcp", json=sleep, headers=routing_headers(sleep)) as sleeping:
            assert sleeping.headers["content-type"] == "text/event-stream"  # no answer within `json_wait`
        # Leaving the block closed the connection: the client's cancellation in this era.
        await _upstream_saw_cancellation(http, within=20)


async def _logged(gw: Any, text: str, within: float = 60) -> None:
    """Wait (at most `within` seconds) for a line of the gateway's stderr that holds `text`."""
    with anyio.fail_after(within):
        while text not in (line := await anyio.to_thread.run_sync(gw.proc.stderr.readline, abandon_on_cancel=True)):
            assert line, "the gateway's stderr ended"


async def _upstream_saw_cancellation(http: httpx2.AsyncClient, *, within: float) -> None:
    """Wait (at most `within` seconds) until the upstream says its last `sleep` was cancelled."""
    deadline = time.monotonic() + within
    while True:
        ask = modern(4, "tools/call", {"name": "s__last_cancelled"})
        asked = await http.post("/mcp", json=ask, headers=routing_headers(ask))
        if tool_text(asked.json()) is True:
            return
        assert time.monotonic() < deadline, asked.text
        await anyio.sleep(0.1)


async def test_a_2026_07_28_answer_within_json_wait_is_one_json_body_and_leaving_before_it_cancels(gateway):
    """Past a session's 0.25 s, within `http.json_wait` (15 s by default): still JSON. A client that goes away
    before any response header is seen to go (its request is cancelled upstream)."""
    gw = gateway()
    async with httpx2.AsyncClient(base_url=gw.url, headers=MODERN_HEADERS, timeout=30) as http:
        slow = modern(1, "tools/call", {"name": "s__sleep", "arguments": {"seconds": 0.6}})
        answered = await http.post("/mcp", json=slow, headers=routing_headers(slow))
        assert answered.headers["content-type"] == "application/json", answered.text
        assert answered.json()["result"]["content"][0]["text"] == "slept"

        async def calls() -> int:
            stats = modern(2, "tools/call", {"name": "s__stats"})
            return tool_text((await http.post("/mcp", json=stats, headers=routing_headers(stats))).json())["calls"]

        before = await calls()
        forever = modern(3, "tools/call", {"name": "s__sleep"})

        async def post_forever() -> None:
            await http.post("/mcp", json=forever, headers=routing_headers(forever))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(post_forever)
            with anyio.fail_after(20):
                while await calls() == before:  # until the upstream is sleeping on it
                    await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()  # the client gives up: its connection closes, no header seen yet
        await _upstream_saw_cancellation(http, within=12)  # before `json_wait` (15 s) would end


async def test_a_2026_07_28_sdk_client_gets_a_large_answer_that_took_a_moment(gateway):
    """The `mcp` SDK's client refuses an SSE event over 1 MiB: a 2 MB result that took 0.6 s must come back as
    JSON (it was an SSE event past 0.25 s, and the call failed)."""
    gw = gateway()
    async with Client(f"{gw.url}/mcp", mode="2026-07-28") as client:
        result = await client.call_tool("s__sleep", {"seconds": 0.6, "pad": 2_000_000})
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "slept" + "." * 2_000_000


async def test_a_2026_07_28_request_the_face_cannot_serve_gets_the_sdk_ladders_verdict(gateway):
    gw = gateway()
    async with httpx2.AsyncClient(base_url=gw.url, headers=MODERN_HEADERS, timeout=30) as http:
        listing = modern(1, "tools/list")
        unnamed = await http.post("/mcp", json=listing)  # no `Mcp-Method` header
        assert unnamed.status_code == 400 and unnamed.json()["error"] == {
            "code": -32020, "message": "mcp-method header does not match the request body's method"}
        older = modern(1, "tools/list", version="2025-11-25")
        mismatched = await http.post("/mcp", json=older, headers=routing_headers(older))
        assert mismatched.status_code == 400 and mismatched.json()["error"]["code"] == -32020, mismatched.text
        unknown = modern(2, "no/such/method")
        refused = await http.post("/mcp", json=unknown, headers=routing_headers(unknown))
        assert refused.status_code == 404 and refused.json()["error"]["code"] == -32601, refused.text
        batch = await http.post("/mcp", json=[modern(3, "tools/list")])
        assert batch.status_code == 400 and batch.json() == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "Body must be a single JSON-RPC request or notification object"}}
        garbled = await http.post("/mcp", content=b"{")
        assert garbled.status_code == 400 and garbled.json()["error"]["code"] == -32700
        deep = await http.post("/mcp", content=b"[" * 100_000 + b"]" * 100_000)
        assert deep.status_code == 400 and deep.json()["error"]["code"] == -32700
        assert "nested more than 1024 deep" in deep.json()["error"]["data"]["reason"]
        noted = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
        assert noted.status_code == 202
        got = await http.get("/mcp")
        assert got.status_code == 405 and got.headers["allow"] == "POST"


async def test_stopping_the_gateway_ends_open_streams_and_tells_waiting_calls(gateway):
    """uvicorn waits for open connections before it stops: a client's GET stream, or a call waiting on a person,
    must not hold it (the face ends them as the shutdown starts)."""
    gw = gateway()
    async with httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http:
        session = await open_session(http)
        async with (
            http.stream("GET", "/mcp", headers=session) as standalone,
            http.stream("POST", "/mcp", json=call(2, "s__elicit", {}), headers=session) as asking,
        ):
            messages = sse_messages(asking)
            assert (await anext(messages))["method"] == "elicitation/create"  # nobody will answer it
            stopped_at = time.monotonic()
            gw.proc.terminate()
            ended = await anext(messages)
            assert ended["id"] == 2 and ended["error"]["code"] == -32000, ended
            assert await anext(messages, None) is None
            sent = [line async for line in standalone.aiter_lines() if line.startswith("data:")]
            assert [line for line in sent if line[5:].strip()] == []  # its priming event has no data
        with anyio.fail_after(20):
            while gw.proc.poll() is None:
                await anyio.sleep(0.05)
        # uvicorn raises the signal again once it has stopped: -SIGTERM is a clean stop.
        assert gw.proc.returncode in (0, -signal.SIGTERM) and time.monotonic() - stopped_at < 15


async def test_http_max_sessions_refuses_one_more_initialize_until_a_session_ends(gateway):
    gw = gateway(max_sessions=1)
    async with httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http:
        first = await open_session(http)
        full = await http.post("/mcp", json=initialize())
        assert full.status_code == 503 and full.json()["error"]["message"] == "Too many open sessions"
        assert full.json()["error"]["data"]["limit"] == 1
        assert (await http.delete("/mcp", headers=first)).status_code == 200
        await open_session(http)
