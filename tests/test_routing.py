"""Routing to the origin with peers as they are found in the wild (docs/routing.md).

- an `mcp` SDK server written as its docs show (push-style `ctx.elicit`, `ctx.session.create_message`),
  over stdio and HTTP, default config, for handshake-era and 2026-07-28 clients;
- a TypeScript SDK server in its examples' style (asks on the standalone GET stream), several clients
  at once, default config;
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.elicitation.url_routes import SessionTarget, UrlRoutes
from tests.conformance.run import TS_SERVER as TS_EVERYTHING
from tests.conformance.run import write_ts_fixtures
from tests.conftest import PY, ROOT, Process, free_port, inprocess_gateway, stdio_server
from tests.hosted_helpers import AUTH, TOKEN, next_pending
from tests.test_eras import RawModernClient

pytestmark = pytest.mark.anyio

CLIENT_MODES = {"handshake": "legacy", "modern": "2026-07-28"}
DOCS_SERVER = str(ROOT / "docs" / "examples" / "restaurant.py")


class Human:
    """An elicitation callback that accepts with `content` and remembers the messages it was shown."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content
        self.seen: list[str] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params.message)
        return types.ElicitResult(action="accept", content=self.content)


async def poet(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    prompt = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text=f"a poem: {prompt}"), model="m")


def settled(gw: Any) -> None:
    assert gw.gateway.broker.pending == {}
    assert gw.gateway.rounds.parked == {}


# -- item 0: push-style `mcp` SDK servers that also speak 2026-07-28 ---------------------------------


@pytest.fixture
def docs_server() -> Any:
    """The docs-style server as an `mcpServers` entry, with no settings but where it runs."""

    started: list[Process] = []

    def entry(transport: str) -> dict[str, Any]:
        if transport == "http":
            port = free_port()
            started.append(Process([PY, DOCS_SERVER, "--http", f"127.0.0.1:{port}"], port))
            return {"url": f"{started[-1].url}/mcp"}
        # docs/examples/routing.json as written, run from the checkout with this Python
        (server,) = json.loads((ROOT / "docs" / "examples" / "routing.json").read_text())["mcpServers"].values()
        assert server == {"command": "python", "args": ["docs/examples/restaurant.py"]}
        return {"command": PY, "args": server["args"], "cwd": str(ROOT)}

    yield entry
    for proc in started:
        proc.stop()


@pytest.mark.parametrize("client_era", ["handshake", "modern"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_written_as_the_sdk_docs_show_elicits_and_samples_with_default_config(
    docs_server, transport, client_era
):
    human = Human({"checkAlternative": True, "alternativeDate": "2024-12-27"})
    async with inprocess_gateway({"mcpServers": {"restaurant": docs_server(transport)}}) as gw:
        assert gw.gateway.links["restaurant"].status()["era"] == "handshake"
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], elicitation_callback=human,
                          sampling_callback=poet) as client:
            booked = await client.call_tool(
                "restaurant__book_table", {"date": "2024-12-25", "time": "19:00", "party_size": 2}
            )
            assert not booked.is_error, booked
            assert booked.content[0].text == "[SUCCESS] Booked for 2024-12-27"
            poem = await client.call_tool("restaurant__generate_poem", {"topic": "gateways"})
            assert not poem.is_error, poem
            assert poem.content[0].text == "a poem: Write a short poem about gateways"
        assert human.seen == [
            "[restaurant] No tables available for 2 on 2024-12-25. Would you like to try another date?"
        ]
        settled(gw)


# -- item 1: servers that ask on their standalone stream (the TypeScript SDK's usual style) ------------


@pytest.fixture
def ts_everything(tmp_path: Path) -> Any:
    """Start tests/peers/ts/everything_server.mjs over streamable HTTP; returns its /mcp URL."""
    started: list[Process] = []

    def start() -> str:
        port = free_port()
        started.append(Process(["node", str(TS_EVERYTHING), "--fixtures", str(write_ts_fixtures(tmp_path)),
                                "--http", str(port)], port))
        return f"{started[-1].url}/mcp"

    yield start
    for proc in started:
        proc.stop()


class Person:
    """One of several people answering at the same time: waits until everyone has been asked, so every
    call is in flight at once, then answers with its own name."""

    def __init__(self, name: str, everyone: list[Person], all_asked: anyio.Event) -> None:
        self.name, self.everyone, self.all_asked = name, everyone, all_asked
        self.seen: list[str] = []

    async def elicit(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params.message)
        if sum(len(p.seen) for p in self.everyone) >= len(self.everyone):
            self.all_asked.set()
        with anyio.fail_after(20):
            await self.all_asked.wait()
        return types.ElicitResult(action="accept", content={"username": self.name, "email": f"{self.name}@example.com"})

    async def sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.seen.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text=f"{self.name} says hi"),
                                         model="m")


def people(*names: str) -> list[Person]:
    everyone: list[Person] = []
    all_asked = anyio.Event()
    everyone += [Person(name, everyone, all_asked) for name in names]
    return everyone


@pytest.mark.parametrize("client_era", ["handshake", "modern"])
async def test_concurrent_clients_of_a_standalone_stream_server_each_get_only_their_own_questions(
    ts_everything, client_era
):
    url = ts_everything()
    crowd = people("alice", "bob", "carol")
    results: dict[str, Any] = {}

    async def session(person: Person) -> None:
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], elicitation_callback=person.elicit,
                          sampling_callback=person.sample) as client:
            asked = await client.call_tool("ts__test_elicitation", {"message": f"for {person.name}"})
            sampled = await client.call_tool("ts__test_sampling", {"prompt": f"prompt of {person.name}"})
            results[person.name] = (asked.content[0].text, sampled.content[0].text)

    async with inprocess_gateway({"mcpServers": {"ts": {"url": url}}}) as gw:
        async with anyio.create_task_group() as tg:
            for person in crowd:
                tg.start_soon(session, person)
        settled(gw)
    for person in crowd:
        assert person.seen == [f"[ts] for {person.name}", f"prompt of {person.name}"]
        answered, sampled = results[person.name]
        assert f'"username":"{person.name}"' in answered, answered
        assert sampled == f"LLM response: {person.name} says hi"


# -- item 2: 2026-07-28 clients that look alike ---------------------------------------------------------

USER_SCHEMA = {
    "type": "object",
    "properties": {"username": {"type": "string"}, "email": {"type": "string"}},
    "required": ["username"],
}


async def test_two_2026_clients_with_the_same_client_info_each_get_only_their_own_question(tmp_path):
    """Both send the SDK's default clientInfo; the stdio server is handshake-era (it pushes)."""
    crowd = people("alice", "bob")
    results: dict[str, Any] = {}
    same = types.Implementation(name="same-app", version="1.0")

    async def client_of(person: Person) -> None:
        async with Client(
            gw.mcp_url, mode="2026-07-28", client_info=same, elicitation_callback=person.elicit
        ) as client:
            got = await client.call_tool("py__elicit", {"message": f"confirm transfer for {person.name}",
                                                        "schema": USER_SCHEMA})
            results[person.name] = json.loads(got.content[0].text)

    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake")}}
    async with inprocess_gateway(config) as gw:
        async with anyio.create_task_group() as tg:
            for person in crowd:
                tg.start_soon(client_of, person)
        settled(gw)
        link = gw.gateway.links["py"]
        assert len(link.sessions) == 2  # one process per call in flight, now idle in the pool
    for person in crowd:
        assert person.seen == [f"[py] confirm transfer for {person.name}"]
        assert results[person.name]["content"]["username"] == person.name


async def test_each_first_request_of_an_unauthenticated_2026_client_is_a_client_of_its_own():
    """Two look-alike raw 2026-07-28 clients: each call gets its own peer and its own upstream process;
    answering one never touches the other."""
    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake")}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http:
        raw = RawModernClient(gw.mcp_url, capabilities={"elicitation": {}})
        first = await raw.call(http, "py__elicit", {"message": "one"})
        second = await raw.call(http, "py__elicit", {"message": "two"})
        asked = [r["result"]["inputRequests"]["q1"]["params"]["message"] for r in (first, second)]
        assert asked == ["[py] one", "[py] two"]
        peers = {park.peer for park in gw.gateway.rounds.parked.values()}
        assert len(peers) == 2 and all(p.per_call for p in peers)
        assert len(gw.gateway.links["py"].sessions) == 2
        for result, message in ((second, "two"), (first, "one")):
            answer = {"q1": {"action": "accept", "content": {"answer": f"for {message}"}}}
            done = await raw.call(http, "py__elicit", {"message": message},
                                  requestState=result["result"]["requestState"], inputResponses=answer)
            assert json.loads(done["result"]["content"][0]["text"]) == answer["q1"]
        again = await raw.call(http, "py__elicit", {"message": "one"}, requestState=first["result"]["requestState"],
                               inputResponses={})
        assert again["error"]["code"] == -32602
        settled(gw)


# -- item 3: bounded upstream sessions ------------------------------------------------------------------


class Held:
    """An elicitation callback that keeps every question open until `release` is set."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.release = anyio.Event()

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.set()
        await self.release.wait()
        return types.ElicitResult(action="accept", content={"answer": "late"})


async def test_a_flood_of_sessions_never_passes_max_upstream_sessions_and_the_one_too_many_fails_at_once():
    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake", max_upstream_sessions=2)}}
    async with inprocess_gateway(config) as gw:
        link = gw.gateway.links["py"]
        held = [Held(), Held()]
        results: list[Any] = []
        leave = anyio.Event()

        async def busy(human: Held) -> None:
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
                results.append(await client.call_tool("py__elicit", {}))
                await leave.wait()

        async with anyio.create_task_group() as tg:
            for human in held:
                tg.start_soon(busy, human)
            with anyio.fail_after(20):
                for human in held:
                    await human.asked.wait()
            assert len(link.sessions) == 2
            async with Client(gw.mcp_url, mode="legacy") as third:
                with anyio.fail_after(30), pytest.raises(MCPError) as refused:
                    await third.call_tool("py__echo", {"text": "hi"})
                error = refused.value.error
                assert error.code == -32010 and "max_upstream_sessions" in error.message
                assert error.data["limit"] == "mcpServers.py.max_upstream_sessions" and error.data["value"] == 2
                assert "fix" in error.data
                for human in held:
                    human.release.set()
                with anyio.fail_after(20):
                    while len(results) < 2:
                        await anyio.sleep(0.05)
                # The busy sessions are idle now (their clients still connected): the least recently used
                # one makes room.
                assert (await third.call_tool("py__echo", {"text": "hi"})).content[0].text == "hi"
                assert len(link.sessions) == 2
                leave.set()
        settled(gw)


async def test_a_flood_of_2026_calls_shares_a_bounded_pool():
    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake", max_upstream_sessions=2)}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http:
        link = gw.gateway.links["py"]
        raw = RawModernClient(gw.mcp_url, capabilities={"elicitation": {}})
        waiting = [await raw.call(http, "py__elicit", {"message": str(i)}) for i in range(2)]
        assert all(w["result"]["resultType"] == "input_required" for w in waiting)
        refused = await raw.call(http, "py__echo", {"text": "x"})
        assert refused["error"]["code"] == -32010
        assert refused["error"]["data"]["limit"] == "mcpServers.py.max_upstream_sessions"
        answer = {"q1": {"action": "accept", "content": {"answer": "ok"}}}
        done = await raw.call(http, "py__elicit", {"message": "0"}, requestState=waiting[0]["result"]["requestState"],
                              inputResponses=answer)
        assert "result" in done, done
        for _ in range(3):  # the pooled connection is reused, not reopened
            assert (await raw.call(http, "py__echo", {"text": "again"}))["result"]["content"][0]["text"] == "again"
        assert len(link.sessions) == 2


async def test_idle_upstream_sessions_are_closed_even_when_the_client_never_says_goodbye():
    """mcp-remote exits without DELETE: its session lingers on the face, its upstream process must not."""
    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake", idle_session_timeout=0.5)}}
    async with inprocess_gateway(config) as gw:
        link = gw.gateway.links["py"]
        async with Client(gw.mcp_url, mode="legacy") as client:
            await client.call_tool("py__echo", {"text": "hi"})
            (conn,) = link.sessions
            with anyio.fail_after(30):
                await conn.closed.wait()  # while the client is still connected
            assert link.sessions == set()
            assert (await client.call_tool("py__echo", {"text": "back"})).content[0].text == "back"
            assert len(link.sessions) == 1


# -- the other bounds -------------------------------------------------------------------------------------


def test_url_routes_are_bounded_in_number_per_error_and_time():
    from elicitgate.config import ElicitationConfig
    from elicitgate.elicitation.broker import Broker

    broker = Broker(ElicitationConfig())
    peer = object()
    huge = [{"mode": "url", "elicitationId": f"e{i}", "url": "https://example.com", "message": "m"}
            for i in range(1_000_000)]
    broker.remember_url_elicitations("s", peer, huge)
    assert len(broker.url_routes) == broker.url_routes.per_error
    assert broker.url_route("s", "e0", pop=False) == SessionTarget(peer)
    assert broker.url_route("s", f"e{broker.url_routes.per_error}", pop=False) is None

    routes = UrlRoutes(ttl=60, limit=3)
    for i in range(5):
        routes.add("s", f"u{i}", peer)
    assert len(routes) == 3 and routes.get("s", "u0", pop=False) is None and routes.get("s", "u4", pop=False) is peer
    expired = UrlRoutes(ttl=0)  # every entry is expired at once: never delivered, never kept
    for i in range(3):
        expired.add("s", f"gone{i}", peer)
    assert expired.get("s", "gone2", pop=False) is None
    assert len(expired) == 0


async def test_a_list_changed_flood_costs_a_few_refreshes_not_one_each():
    changed = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message)

    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake", session_policy="shared")}}
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", message_handler=on_message) as client:
            before = json.loads((await client.call_tool("py__stats", {})).content[0].text)["lists"]
            await client.call_tool("py__list_changed_flood", {"n": 200})
            await client.call_tool("py__add_tool", {"name": "fresh"})
            with anyio.fail_after(20):
                while "py__fresh" not in {t.name for t in (await client.list_tools()).tools}:
                    await anyio.sleep(0.05)
            after = json.loads((await client.call_tool("py__stats", {})).content[0].text)["lists"]
    # Without coalescing: 201 refreshes and 201 notices. With it, a refresh absorbs what came while the one
    # before ran, and refreshes are at least 0.25 s apart: 20 means a flood of 200 notices spread over 5 s.
    assert 1 <= after - before <= 20, after - before
    assert 1 <= len(changed) <= 20, len(changed)


def open_a_stream_nobody_reads(mcp_url: str, uri: str) -> socket.socket:
    """A handshake-era client that subscribes to `uri`, opens its standalone GET stream and never reads
    it (a tiny receive buffer, so what the gateway sends it stops moving at once)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "stuck", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    response = httpx2.post(mcp_url, json=init, headers=headers)
    headers |= {"Mcp-Session-Id": response.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
    httpx2.post(mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}
    assert httpx2.post(mcp_url, json=subscribe, headers=headers).status_code == 200
    url = httpx2.URL(mcp_url)
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    stuck.connect((url.host, url.port))
    stuck.sendall((f"GET {url.path} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nAccept: text/event-stream\r\n"
                   f"Mcp-Session-Id: {headers['Mcp-Session-Id']}\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n"
                   ).encode())
    return stuck


async def test_a_client_that_does_not_read_its_stream_holds_up_no_other_client():
    changed: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message)

    uri = "mem://py/" + "x" * 65536  # each update to the stuck client is 64 KB: its buffers fill in a few
    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake", session_policy="shared")}}
    async with inprocess_gateway(config) as gw:
        stuck = await anyio.to_thread.run_sync(open_a_stream_nobody_reads, gw.mcp_url, uri)
        try:
            async with Client(gw.mcp_url, mode="legacy", message_handler=on_message) as other:
                for _ in range(64):
                    await other.call_tool("py__touch", {"uri": uri})
                # Each change is broadcast to both clients; without a bound, the first broadcast waits on the
                # stuck client forever and every later change of py's lists waits behind it.
                await other.call_tool("py__add_tool", {"name": "first"})
                await other.call_tool("py__add_tool", {"name": "second"})
                with anyio.fail_after(30):
                    while "py__second" not in {t.name for t in (await other.list_tools()).tools}:
                        await anyio.sleep(0.05)
                    while not changed:
                        await anyio.sleep(0.05)
        finally:
            stuck.close()


@pytest.mark.parametrize("policy", ["shared", "per_session"])
async def test_resource_updates_reach_only_the_clients_that_subscribed(policy):
    got: dict[str, list[str]] = {"alice": [], "bob": []}

    def listener(name: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                got[name].append(str(message.params.uri))
        return on_message

    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="handshake", session_policy=policy)}}
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", message_handler=listener("alice")) as alice, \
                Client(gw.mcp_url, mode="legacy", message_handler=listener("bob")) as bob:
            await alice.subscribe_resource("mem://py/note")
            toucher = bob if policy == "shared" else alice  # per_session: only alice's own process knows her
            await toucher.call_tool("py__touch", {"uri": "mem://py/note"})
            await bob.call_tool("py__touch", {"uri": "mem://py/other"})
            with anyio.fail_after(30):
                while not got["alice"]:
                    await anyio.sleep(0.02)
            await alice.call_tool("py__echo", {"text": "flush"})
            await bob.call_tool("py__echo", {"text": "flush"})
    assert got == {"alice": ["mem://py/note"], "bob": []}


async def test_a_2026_client_whose_waiting_retry_is_lost_resumes_with_the_same_state():
    """The person is still on the hosted page when the client's retry (its HTTP request) goes away: the
    elicitation stays pending, and a retry with the last requestState it got receives the result."""
    config = {"mcpServers": {"x": stdio_server("tests.peers.py_server", era="handshake")}, "admin_token": TOKEN}
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http:
        raw = RawModernClient(gw.mcp_url, capabilities={"elicitation": {"url": {}}})  # URL only: the page hosts it
        args = {"message": "Which one?", "schema": schema}
        first = (await raw.call(http, "x__elicit", args))["result"]
        (link,) = first["inputRequests"].values()
        assert link["params"]["mode"] == "url" and "/e/" in link["params"]["url"]
        consent = {key: {"action": "accept"} for key in first["inputRequests"]}
        with anyio.move_on_after(1):  # the client's retry waits for the page... and is lost
            await raw.call(http, "x__elicit", args, requestState=first["requestState"], inputResponses=consent)
        (item,) = await next_pending(gw.url)  # still pending
        answered = await http.post(f"{gw.url}/api/elicitations/{item['id']}/answer", headers=AUTH,
                                   json={"action": "accept", "content": {"answer": "the page's"}})
        assert answered.status_code == 200
        with anyio.fail_after(30):  # at once, not after bridging.url_complete_wait (60 s)
            again = await raw.call(http, "x__elicit", args, requestState=first["requestState"],
                                   inputResponses=consent)
        assert json.loads(again["result"]["content"][0]["text"]) == {"action": "accept",
                                                                    "content": {"answer": "the page's"}}
        settled(gw)
