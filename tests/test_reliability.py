"""When a client goes away mid-question (docs/reliability.md): handshake-era streams are resumable with
`Last-Event-ID` (faces/event_streams.py), a question whose client does not come back is ended after the grace
period and its upstream told `cancel` (elicitation/carriers.py), and the places it held are freed.

Real peers: the `mcp` SDK's client (which resumes a broken stream by itself once it has seen an event id),
through a TCP relay that cuts the connection under it; SDK clients run as processes and killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from elicitgate.config import build_config
from elicitgate.errors import ConfigError
from tests.conftest import ROOT, inprocess_gateway, stdio_server
from tests.replicas_helpers import redis_server, replicas  # noqa: F401 (fixtures)
from tests.test_docs_commands import _blocks

pytestmark = pytest.mark.anyio

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"


class Relay:
    """A TCP relay in front of the gateway (`ports`: its replicas). Once the gateway sends `cut_after` to a client,
    the relay passes it on and then closes that connection both ways (the client's stream breaks after it had
    the message); with `switch`, it closes every connection and sends the new ones to the next replica, as a
    load balancer does when a replica's connections drop."""

    def __init__(self, *ports: int, cut_after: bytes, switch: bool = False) -> None:
        self._ports = ports
        self._cut_after = cut_after
        self._switch = switch
        self._open: set[asyncio.StreamWriter] = set()
        self.cuts = 0
        self.cut = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:
            writer.close()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        port = self._ports[min(self.cuts, len(self._ports) - 1)] if self._switch else self._ports[0]
        gateway_reader, gateway_writer = await asyncio.open_connection("127.0.0.1", port)
        pair = {client_writer, gateway_writer}
        self._open |= pair

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, watch: bool) -> None:
            seen = b""
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
                    seen = (seen + data)[-4096:]
                    if watch and self.cuts == 0 and self._cut_after in seen:
                        self.cuts += 1
                        for other in self._open if self._switch else pair:
                            other.close()
                        self.cut.set()
                        break
            except OSError:
                pass
            for w in pair:
                w.close()
            self._open -= pair

        await asyncio.gather(pipe(client_reader, gateway_writer, False), pipe(gateway_reader, client_writer, True))


async def sse_events(response: httpx2.Response) -> AsyncIterator[tuple[str | None, dict[str, Any] | None]]:
    """(id, message) of each SSE event as it arrives; the priming event has no message."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and (data or event_id is not None):
            yield event_id, json.loads("\n".join(data)) if any(data) else None
            event_id, data = None, []


async def open_session(http: httpx2.AsyncClient) -> dict[str, str]:
    opened = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "raw-http", "version": "1"}}})
    headers = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def shared_server(**extra: Any) -> dict[str, Any]:
    return stdio_server("tests.peers.py_server", era="handshake", session_policy="shared", **extra)


async def test_the_sdk_client_resumes_a_broken_stream_with_last_event_id_and_its_call_completes():
    config = {"mcpServers": {"s": shared_server()}}
    async with inprocess_gateway(config) as gw, Relay(gw.port, cut_after=b'"elicitation/create"') as relay:
        asked: list[str] = []

        async def human(ctx: Any, params: Any) -> types.ElicitResult:
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"answer": "42"})

        resumed = await _metric(gw.url, "elicitgate_stream_resumptions_total", outcome="resumed")
        async with Client(f"{relay.url}/mcp", mode="legacy", elicitation_callback=human) as client:
            with anyio.fail_after(30):
                result = await client.call_tool("s__elicit", {"message": "resume me"})
        assert relay.cuts == 1  # the call's stream really broke, right after the question went through
        assert json.loads(result.content[0].text) == {"action": "accept", "content": {"answer": "42"}}
        assert asked == ["[s] resume me"]  # asked once: the resumed stream replays only what followed
        after = await _metric(gw.url, "elicitgate_stream_resumptions_total", outcome="resumed")
        assert after == resumed + 1
        assert gw.gateway.broker.pending == {}


async def test_a_stream_resumed_by_hand_replays_what_followed_its_id_then_the_answer():
    config = {"mcpServers": {"s": shared_server()}}
    async with (
        inprocess_gateway(config) as gw,
        httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http,
    ):
        session = await open_session(http)
        other = await open_session(http)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "s__elicit", "arguments": {}}}
        async with http.stream("POST", "/mcp", json=call, headers=session) as asking:
            events = sse_events(asking)
            priming, nothing = await anext(events)
            assert nothing is None and priming is not None and priming.endswith("/0")
            question_id, question = await anext(events)
            assert question is not None and question["method"] == "elicitation/create" and question_id is not None
        # The client went away before answering: the call is not cancelled, the question waits for it.
        assert len(gw.gateway.broker.pending) == 1

        async def refused(status: int, headers: dict[str, str], last_event_id: str) -> dict[str, Any]:
            response = await http.get("/mcp", headers={**headers, "last-event-id": last_event_id})
            assert response.status_code == status, response.text
            error = response.json()["error"]
            assert error["data"]["header"] == "last-event-id" and error["data"]["fix"]
            return error

        assert "malformed" in (await refused(400, session, "not-an-id"))["message"]
        assert (await refused(404, session, "999999/1"))["message"] == "Last-Event-ID not found in this session"
        assert (await refused(404, session, f"{priming.split('/')[0]}/99"))["data"]["value"].endswith("/99")
        await refused(404, other, question_id)  # another session's event: nothing of it is replayed there

        async with http.stream("GET", "/mcp", headers={**session, "last-event-id": priming}) as resumed:
            events = sse_events(resumed)
            replayed_id, replayed = await anext(events)
            assert (replayed_id, replayed) == (question_id, question)
            accept = {"action": "accept", "content": {"answer": "x"}}
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": accept}
            assert (await http.post("/mcp", json=answer, headers=session)).status_code == 202
            _, result = await anext(events)
            assert result is not None and result["id"] == 7
            assert json.loads(result["result"]["content"][0]["text"])["action"] == "accept"
            assert await anext(events, None) is None  # the answer ends the resumed stream
        # Its events are gone once the client had its end.
        gone = await http.get("/mcp", headers={**session, "last-event-id": question_id})
        assert gone.status_code == 404


async def test_another_principal_cannot_resume_a_stream_even_with_its_session_id_and_event_id():
    tokens = [{"token": "alice-x8p4mE5Krz8RTdu3pQ-HR9Nhv01Rl0-BQmVwI90_KLs", "principal": "alice"},
              {"token": "bob-osRV1psqa7mQB_QRNa5SRMo45u2QSRwrtap_vtHXq8s", "principal": "bob"}]
    config = {"mcpServers": {"s": shared_server()}, "http": {"auth": {"tokens": tokens}}}
    alice = {**HEADERS, "authorization": "Bearer alice-x8p4mE5Krz8RTdu3pQ-HR9Nhv01Rl0-BQmVwI90_KLs"}
    bob = {**HEADERS, "authorization": "Bearer bob-osRV1psqa7mQB_QRNa5SRMo45u2QSRwrtap_vtHXq8s"}
    async with (
        inprocess_gateway(config) as gw,
        httpx2.AsyncClient(base_url=gw.url, headers=alice, timeout=30) as http,
    ):
        session = await open_session(http)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "s__elicit", "arguments": {}}}
        async with http.stream("POST", "/mcp", json=call, headers=session) as asking:
            events = sse_events(asking)
            priming, _ = await anext(events)
            _, question = await anext(events)
        assert priming is not None and question is not None
        stolen = await http.get("/mcp", headers={**bob, **session, "last-event-id": priming})
        assert stolen.status_code == 404 and stolen.json()["error"]["message"] == "Session not found"
        assert "elicitation/create" not in stolen.text
        async with http.stream("GET", "/mcp", headers={**session, "last-event-id": priming}) as resumed:
            assert (await anext(sse_events(resumed)))[1] == question  # its own principal resumes it


async def test_a_question_whose_client_does_not_come_back_ends_after_the_grace_period_and_the_server_is_told_cancel():
    config = {"mcpServers": {"s": shared_server()}, "elicitation": {"abandoned_grace": 1}}
    async with (
        inprocess_gateway(config) as gw,
        httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http,
    ):
        session = await open_session(http)
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "s__elicit", "arguments": {}}}
        async with http.stream("POST", "/mcp", json=call, headers=session) as asking:
            events = sse_events(asking)
            await anext(events)
            _, question = await anext(events)
            assert question is not None and question["method"] == "elicitation/create"
        broker = gw.gateway.broker
        with anyio.fail_after(20):
            while broker.pending:
                await anyio.sleep(0.05)
        ended = broker.recent[-1]
        assert ended["state"] == "cancelled" and ended["reason"].startswith("client gone: "), ended
        # The server got `cancel` (its tool returned it as its result), and the session, gone quiet since its
        # stream broke, ended: what it held upstream is free.
        with anyio.fail_after(20):
            while gw.gateway.peers.connected:
                await anyio.sleep(0.05)
        async with Client(gw.mcp_url, mode="legacy") as fresh:
            stats = json.loads((await fresh.call_tool("s__stats", {})).content[0].text)
        assert stats["last_result"] == {"action": "cancel"}, stats


async def test_with_abandoned_keep_a_question_outlives_the_grace_period_and_a_late_client_still_answers_it():
    config = {"mcpServers": {"s": shared_server()}, "elicitation": {"abandoned_grace": 0.5, "abandoned": "keep"}}
    async with (
        inprocess_gateway(config) as gw,
        httpx2.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=30) as http,
    ):
        session = await open_session(http)
        call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "s__elicit", "arguments": {}}}
        async with http.stream("POST", "/mcp", json=call, headers=session) as asking:
            events = sse_events(asking)
            priming, _ = await anext(events)
            _, question = await anext(events)
        kept = await _metric(gw.url, "elicitgate_elicitations_abandoned_total", server="s", outcome="keep")
        with anyio.fail_after(20):
            while kept == 0:
                await anyio.sleep(0.05)
                kept = await _metric(gw.url, "elicitgate_elicitations_abandoned_total", server="s", outcome="keep")
        assert len(gw.gateway.broker.pending) == 1 and gw.gateway.peers.connected  # still pending, the session open
        assert priming is not None and question is not None
        async with http.stream("GET", "/mcp", headers={**session, "last-event-id": priming}) as resumed:
            events = sse_events(resumed)
            assert (await anext(events))[1] == question
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}
            assert (await http.post("/mcp", json=answer, headers=session)).status_code == 202
            _, result = await anext(events)
        assert result is not None and json.loads(result["result"]["content"][0]["text"]) == {"action": "decline"}


@pytest.mark.timeout(300)  # 20 client processes and 16 upstream processes starting on a loaded machine
async def test_twenty_clients_killed_while_asked_free_their_upstream_sessions_and_a_fresh_client_is_served():
    """Per-session upstreams at the default cap (16): 20 SDK clients killed (SIGKILL, no DELETE) with their
    questions pending. Within the grace period their questions end as `client gone`, their upstream processes
    are released, and a new client is served at once."""
    server = stdio_server("tests.peers.py_server", era="handshake", session_policy="per_session")
    config = {"mcpServers": {"s": server}, "elicitation": {"abandoned_grace": 2}}
    async with inprocess_gateway(config) as gw:
        link = gw.gateway.links["s"]
        procs = [subprocess.Popen([sys.executable, "-m", "tests.peers.waiting_client", gw.mcp_url, "s__elicit"],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
                 for _ in range(20)]
        try:
            broker = gw.gateway.broker
            with anyio.fail_after(120):
                while len(broker.pending) < 16:  # past the cap the others are refused -32010 at once
                    await anyio.sleep(0.1)
            assert len(link.sessions) == 16
            for proc in procs:
                proc.send_signal(signal.SIGKILL)
            killed_at = anyio.current_time()
            with anyio.fail_after(60):
                while broker.pending or link.sessions:
                    await anyio.sleep(0.1)
            assert anyio.current_time() - killed_at < 60
            reasons = {summary["reason"] for summary in broker.recent}
            assert reasons == {"client gone: the client's stream broke before the call's answer"}, reasons
            async with Client(gw.mcp_url, mode="legacy") as fresh:
                with anyio.fail_after(10):
                    answered = await fresh.call_tool("s__echo", {"text": "hi"})
            assert answered.content[0].text == "hi"
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()


async def _metric(url: str, name: str, **labels: str) -> float:
    """One sample of `/metrics` (0 when absent), read without blocking the loop the gateway runs on."""
    async with httpx2.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


INSPECTOR = ROOT / "tests" / "peers" / "ts" / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
ADMIN = "reliability-_jd-az8ttKOXw-wOSWXOiMP6Ko99ylRZ6qePntu0vTI"


@pytest.mark.node
@pytest.mark.timeout(300)  # the Inspector waits its 60 s before it gives up
async def test_the_inspector_cli_giving_up_after_60s_leaves_no_question_in_the_inbox(tmp_path, http_gateway):
    """The MCP Inspector CLI declares no elicitation (the gateway hosts its question in the inbox), waits 60 s
    for a call (the TypeScript SDK's request timeout, not configurable there), then exits without DELETE."""
    if not INSPECTOR.is_dir():
        pytest.fail("tests/peers/ts has no @modelcontextprotocol/inspector-cli: run npm ci there")
    config = tmp_path / "elicitgate.json"
    config.write_text(json.dumps({"mcpServers": {"s": shared_server()}, "elicitation": {"abandoned_grace": 2}}))
    gw = http_gateway(config, env={"ELICITGATE_ADMIN_TOKEN": ADMIN})
    admin = {"authorization": f"Bearer {ADMIN}"}
    inspector = subprocess.Popen(
        ["node", str(INSPECTOR / "index.js"), f"{gw.url}/mcp", "--method", "tools/call", "--tool-name", "s__elicit"],
        cwd=INSPECTOR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # it finds its package.json there
    try:
        async with httpx2.AsyncClient(base_url=gw.url, headers=admin, timeout=30) as http:

            async def listed(state: str) -> list[dict[str, Any]]:
                return (await http.get("/api/elicitations", params={"state": state})).json()["elicitations"]

            with anyio.fail_after(30):
                while not await listed("pending"):
                    await anyio.sleep(0.2)
            with anyio.fail_after(120):
                while inspector.poll() is None:
                    await anyio.sleep(0.5)
            gave_up_at = anyio.current_time()
            out, err = inspector.communicate()
            assert inspector.returncode != 0 and "request timed out" in (out + err).lower(), (out, err)
            with anyio.fail_after(30):
                while await listed("pending"):
                    await anyio.sleep(0.2)
            assert anyio.current_time() - gave_up_at < 30
            ended = await listed("ended")
            assert len(ended) == 1 and ended[0]["state"] == "cancelled", ended
            assert ended[0]["reason"].startswith("client gone: "), ended
    finally:
        if inspector.poll() is None:
            inspector.kill()
            inspector.communicate()


def test_the_documented_settings_are_the_defaults_and_a_vanished_client_frees_its_places_within_30_seconds():
    (block,) = _blocks(ROOT / "docs" / "reliability.md", "yaml")
    documented = build_config({"mcpServers": {}, **yaml.safe_load(block)}, "docs/reliability.md", environ={})
    default = build_config({"mcpServers": {}}, "defaults", environ={})
    assert documented.elicitation == default.elicitation and documented.http == default.http
    # The question ends after the grace period, the session at the sweep after it (a quarter of it later).
    assert default.elicitation.abandoned_grace * 1.25 <= 30
    for bad, says in (({"abandoned_grace": 0}, "abandoned_grace"), ({"abandoned": "host"}, "abandoned")):
        with pytest.raises(ConfigError) as caught:
            build_config({"mcpServers": {}, "elicitation": bad}, "test", environ={})
        assert f"elicitation.{says}: " in caught.value.render()
    with pytest.raises(ConfigError) as caught:
        build_config({"mcpServers": {}, "http": {"resume_events_per_session": 0}}, "test", environ={})
    assert "http.resume_events_per_session: " in caught.value.render()


@pytest.mark.parametrize("auth", [False, True], ids=["open", "bearer"])
async def test_a_client_that_comes_back_through_another_replica_resumes_its_stream_there(
    tmp_path, redis_server, replicas, auth
):
    """Two replicas on one Redis: the client's stream to the first breaks, and everything it sends next reaches
    the second (its resumption, its answer, its DELETE). The second replays the stream from Redis, the answer
    goes to the first, which holds the call (and checks its token as its own), and the result comes back
    through the second."""
    token = "carol-z3bCGf1eLqP221MJ3KgcDwj4Efp7AIlvuabAZZ0EAdw"
    settings: dict[str, Any] = {"mcpServers": {"s": shared_server()}}
    if auth:
        settings["http"] = {"auth": {"tokens": [{"token": token, "principal": "carol"}]}}
    config = tmp_path / "elicitgate.json"
    config.write_text(json.dumps(settings))
    group = replicas(config, redis_server.url, count=2)
    first, second = group.procs
    redis = redis_server.client()
    relay = Relay(first.port, second.port, cut_after=b'"elicitation/create"', switch=True)
    async with relay:
        asked: list[str] = []

        async def human(ctx: Any, params: Any) -> types.ElicitResult:
            asked.append(params.message)
            # The person answers once the connection broke and the first replica copied the stream to Redis (a
            # person takes longer than that).
            await relay.cut.wait()
            with anyio.fail_after(30):
                while not redis.keys("elicitgate:session:*"):
                    await anyio.sleep(0.05)
            return types.ElicitResult(action="accept", content={"answer": "elsewhere"})

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"} if auth else {},
                                  timeout=httpx2.Timeout(30, read=300))
        target = streamable_http_client(f"{relay.url}/mcp", http_client=http)
        async with Client(target, mode="legacy", elicitation_callback=human) as client:
            with anyio.fail_after(60):
                result = await client.call_tool("s__elicit", {"message": "across replicas"})
        assert relay.cuts == 1
        assert json.loads(result.content[0].text) == {"action": "accept", "content": {"answer": "elsewhere"}}
        assert asked == ["[s] across replicas"]
    resumed = await _metric(second.url, "elicitgate_stream_resumptions_total", outcome="resumed")
    assert resumed >= 1
    with anyio.fail_after(30):  # the session ended (its DELETE went to the first replica): its copy goes too
        while redis.keys("elicitgate:events*") or redis.keys("elicitgate:session:*"):
            await anyio.sleep(0.1)
