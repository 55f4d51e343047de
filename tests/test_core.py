"""Gateway core: many upstreams behind one face, routed, with errors, progress and cancellation intact."""

import json
import subprocess

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.errors import UPSTREAM_GONE, UPSTREAM_UNAVAILABLE
from tests.conftest import PY, Process, free_port, inprocess_gateway, stdio_server, write_config

pytestmark = pytest.mark.anyio


def py(name: str, **extra) -> dict:
    return stdio_server("tests.peers.py_server", "--name", name, **extra)


def text(result: types.CallToolResult) -> str:
    return result.content[0].text


async def wait_until(predicate, timeout: float = 20) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.02)


async def test_two_upstreams_merged_namespaced_and_routed(http_upstream):
    b = http_upstream("tests.peers.py_server", "--name", "b")
    config = {"mcpServers": {"a": py("a"), "b": {"url": f"{b.url}/mcp"}}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"a__echo", "b__echo", "a__whoami", "b__whoami"} <= tools
        assert text(await client.call_tool("a__whoami", {})) == "a"
        assert text(await client.call_tool("b__whoami", {})) == "b"

        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert {"a__greet", "b__greet"} <= prompts
        prompt = await client.get_prompt("b__greet", {"who": "ada"})
        assert prompt.messages[0].content.text == "hello ada from b"

        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {"mem://a/note", "mem://b/note"}
        read = await client.read_resource("mem://b/note")
        assert read.contents[0].text == "b:mem://b/note"
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"mem://a/items/{id}", "mem://b/items/{id}"}
        read = await client.read_resource("mem://a/items/7")
        assert read.contents[0].text == "a:mem://a/items/7"

        completion = await client.complete(types.PromptReference(name="b__greet"), {"name": "who", "value": "x"})
        assert completion.completion.values == ["b-x"]


async def test_colliding_resource_uris_stay_unique():
    # Two servers both named "py" inside: both list mem://py/note.
    config = {"mcpServers": {"one": py("py"), "two": stdio_server("tests.peers.py_server")}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        uris = sorted(str(r.uri) for r in (await client.list_resources()).resources)
        assert uris == ["one+mem://py/note", "two+mem://py/note"]
        for uri in uris:
            read = await client.read_resource(uri)
            assert read.contents[0].text == "py:mem://py/note"  # the upstream sees its own URI


async def test_separator_is_configurable():
    config = {"mcpServers": {"a": py("a"), "b": py("b")}, "namespacing": {"separator": "."}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        assert "a.echo" in {t.name for t in (await client.list_tools()).tools}
        assert text(await client.call_tool("b.whoami", {})) == "b"
        with pytest.raises(MCPError) as caught:
            await client.call_tool("c.whoami", {})
        assert caught.value.error.code == types.INVALID_PARAMS
        assert caught.value.error.data["servers"] == ["a", "b"]


async def test_single_server_passes_names_through_when_asked():
    config = {"mcpServers": {"solo": py("solo")}, "namespacing": {"prefix_single_server": False}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "echo" in names and not any("__" in n for n in names)
        assert text(await client.call_tool("whoami", {})) == "solo"
        assert "greet" in {p.name for p in (await client.list_prompts()).prompts}


async def test_upstream_errors_reach_the_client_intact():
    config = {"mcpServers": {"a": py("a")}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        data = {"field": "x", "nested": [1, {"k": None}]}
        with pytest.raises(MCPError) as caught:
            await client.call_tool("a__fail", {"code": -32099, "message": "custom failure", "data": data})
        assert (caught.value.error.code, caught.value.error.message) == (-32099, "custom failure")
        assert caught.value.error.data == data


async def test_meta_and_unknown_fields_pass_both_ways():
    config = {"mcpServers": {"a": py("a")}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        result = await client.call_tool("a__echo_meta", {}, meta={"example.com/request": "r-1"})
        assert json.loads(text(result))["example.com/request"] == "r-1"
        assert result.meta == {"example.com/trace": "t-1"}
        assert result.structured_content["received"]["example.com/request"] == "r-1"


async def test_progress_travels_to_the_caller(http_upstream):
    b = http_upstream("tests.peers.py_server", "--name", "b")
    config = {"mcpServers": {"a": py("a"), "b": {"url": f"{b.url}/mcp"}}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))

        for tool in ("a__progress", "b__progress"):
            seen.clear()
            assert text(await client.call_tool(tool, {"n": 3}, progress_callback=on_progress)) == "done 3"
            assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_cancellation_reaches_the_upstream(http_upstream, kind):
    server = py("a") if kind == "stdio" else {"url": f"{http_upstream('tests.peers.py_server').url}/mcp"}
    async with inprocess_gateway({"mcpServers": {"a": server}}) as gw, Client(gw.mcp_url, mode="legacy") as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "a__sleep", {"seconds": 30})
            await wait_until(lambda: any(conn.in_flight_origins() for conn in _connections(gw, "a")))
            tg.cancel_scope.cancel()
        await wait_until(lambda: not any(conn.in_flight_origins() for conn in _connections(gw, "a")))

        async def upstream_saw_it() -> bool:
            return json.loads(text(await client.call_tool("a__last_cancelled", {}))) is True

        with anyio.fail_after(30):
            while not await upstream_saw_it():
                await anyio.sleep(0.02)


def _connections(gw, server: str) -> list:
    link = gw.gateway.links[server]
    conns = [link.primary] + [link.connection_of(peer) for peer in gw.gateway.peers.connected]
    return [c for c in conns if c is not None]


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_list_changed_propagates_to_clients(http_upstream, era):
    b = http_upstream("tests.peers.py_server", "--name", "b")
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    config = {"mcpServers": {"b": {"url": f"{b.url}/mcp", "era": era}}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy", message_handler=on_message) as client:
        assert gw.gateway.links["b"].status()["era"] == era
        assert "b__fresh" not in {t.name for t in (await client.list_tools()).tools}
        changed = anyio.Event()  # start-up may already have announced the catalog once
        await client.call_tool("b__add_tool", {"name": "fresh"})
        with anyio.fail_after(30):
            await changed.wait()
        assert "b__fresh" in {t.name for t in (await client.list_tools()).tools}
        assert text(await client.call_tool("b__fresh", {})) == "fresh from b"


async def test_sse_upstream():
    port = free_port()
    upstream = Process([PY, "-m", "tests.peers.py_server", "--name", "legacy", "--sse", f"127.0.0.1:{port}"], port)
    try:
        config = {"mcpServers": {"legacy": {"type": "sse", "url": f"{upstream.url}/sse"}}}
        seen = []

        async def answer(ctx, params):
            seen.append(params.message)
            return types.ElicitResult(action="accept", content={"answer": "over sse"})

        async with inprocess_gateway(config) as gw:
            assert gw.gateway.links["legacy"].status()["transport"] == "sse"
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=answer) as client:
                assert text(await client.call_tool("legacy__whoami", {})) == "legacy"
                result = json.loads(text(await client.call_tool("legacy__elicit", {"message": "via sse"})))
                assert result == {"action": "accept", "content": {"answer": "over sse"}}
                assert seen == ["[legacy] via sse"]
    finally:
        upstream.stop()


async def test_upstream_dying_mid_session_fails_the_call_and_the_session_recovers():
    config = {"mcpServers": {"a": py("a"), "b": py("b")}}
    async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("a__die", {})
        assert caught.value.error.code == UPSTREAM_GONE
        assert caught.value.error.data["server"] == "a"
        assert text(await client.call_tool("b__whoami", {})) == "b"  # the others keep serving
        assert text(await client.call_tool("a__whoami", {})) == "a"  # a fresh process for this session


async def test_http_upstream_death_is_reported_and_the_link_reconnects():
    port = free_port()
    argv = [PY, "-m", "tests.peers.py_server", "--name", "h", "--http", f"127.0.0.1:{port}"]
    upstream = Process(argv, port)
    config = {"mcpServers": {"h": {"url": f"{upstream.url}/mcp"}, "s": py("s")},
              "upstream_retry": {"initial_backoff": 0.1, "max_backoff": 0.2}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http:
        assert (await http.get(f"{gw.url}/healthz")).status_code == 200
        async with Client(gw.mcp_url, mode="legacy") as client:
            assert text(await client.call_tool("h__whoami", {})) == "h"
            upstream.stop()
            with pytest.raises(MCPError) as caught:
                await client.call_tool("h__whoami", {})
            assert caught.value.error.code in (UPSTREAM_UNAVAILABLE, UPSTREAM_GONE)
            assert caught.value.error.data["server"] == "h"
            await wait_until(lambda: gw.gateway.links["h"].status()["state"] == "down")
            health = await http.get(f"{gw.url}/healthz")
            assert health.status_code == 503
            assert health.json()["upstreams"]["h"]["state"] == "down"
            assert health.json()["upstreams"]["s"]["state"] == "up"
            assert text(await client.call_tool("s__whoami", {})) == "s"

            upstream = Process(argv, port)  # back on the same port: the link reconnects by itself
            try:
                await wait_until(lambda: gw.gateway.links["h"].status()["state"] == "up")
                assert (await http.get(f"{gw.url}/healthz")).status_code == 200
                assert text(await client.call_tool("h__whoami", {})) == "h"
            finally:
                upstream.stop()


async def test_upstream_dead_on_arrival_is_reported_and_the_others_serve(tmp_path):
    config = {"mcpServers": {"ghost": {"command": str(tmp_path / "no-such-server")}, "a": py("a")},
              "upstream_retry": {"initial_backoff": 0.1, "max_backoff": 0.2}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http:
        health = await http.get(f"{gw.url}/healthz")
        assert health.status_code == 503
        ghost = health.json()["upstreams"]["ghost"]
        assert ghost["state"] == "down" and ghost["error"]
        async with Client(gw.mcp_url, mode="legacy") as client:
            assert text(await client.call_tool("a__whoami", {})) == "a"
            with pytest.raises(MCPError) as caught:
                await client.call_tool("ghost__anything", {})
            assert caught.value.error.code == UPSTREAM_UNAVAILABLE
            assert caught.value.error.data["server"] == "ghost"
            assert "ghost" in caught.value.error.message


def test_doctor_prints_what_works_and_exits_1_when_something_does_not(tmp_path):
    config = write_config(tmp_path, {"ghost": {"command": str(tmp_path / "no-such-server")}, "a": py("a")})
    proc = subprocess.run([PY, "-m", "elicitgate.cli", "doctor", "--config", str(config)],
                          capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1, proc.stderr
    rows = {line.split(" ")[0]: line for line in proc.stdout.splitlines() if line.split(" ")[0] in ("a", "ghost")}
    assert "up" in rows["a"] and "handshake" in rows["a"]  # it speaks both eras: the handshake
    assert "down" in rows["ghost"]
    assert "command not found" in proc.stdout

    healthy = write_config(tmp_path, {"a": py("a")})
    proc = subprocess.run([PY, "-m", "elicitgate.cli", "doctor", "--config", str(healthy)],
                          capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", ["/mcp", "/healthz", "/metrics"])
def test_dns_rebinding_is_refused(tmp_path, http_gateway, path):
    gateway = http_gateway(write_config(tmp_path, {"a": py("a")}))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def send(**extra: str) -> httpx2.Response:
        if path == "/mcp":
            return httpx2.post(f"{gateway.url}{path}", json=init, headers={**headers, **extra})
        return httpx2.get(f"{gateway.url}{path}", headers=extra)

    assert send().status_code == 200
    refused = send(host="evil.example:8080")
    assert refused.status_code == 403
    assert refused.json()["error"]["data"]["host"] == "evil.example:8080"
    refused = send(origin="http://evil.example")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "Origin header not allowed"
    assert send(origin=f"http://localhost:{gateway.port}").status_code == 200


async def test_an_http_upstream_that_restarts_unnoticed_gets_a_new_session():
    port = free_port()
    argv = [PY, "-m", "tests.peers.py_server", "--name", "h", "--http", f"127.0.0.1:{port}"]
    upstream = Process(argv, port)
    config = {"mcpServers": {"h": {"url": f"{upstream.url}/mcp", "era": "handshake"}},
              "upstream_retry": {"initial_backoff": 0.1, "max_backoff": 0.2}}
    try:
        async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
            assert text(await client.call_tool("h__whoami", {})) == "h"
            failures_before = gw.gateway.links["h"].status()["failures"]
            upstream.stop()
            upstream = Process(argv, port)  # back before the gateway noticed: our session id is unknown there
            errors_seen = []
            with anyio.fail_after(20):
                while True:
                    try:
                        assert text(await client.call_tool("h__whoami", {})) == "h"
                        break
                    except MCPError as exc:
                        errors_seen.append(exc.error.code)
                        await anyio.sleep(0.05)
            assert set(errors_seen) <= {UPSTREAM_GONE, UPSTREAM_UNAVAILABLE}, errors_seen  # never "Session not found"
            assert gw.gateway.links["h"].status()["failures"] > failures_before  # reported, and reconnected
    finally:
        upstream.stop()


async def test_an_upstream_without_resource_templates_is_catalogued_without_errors(caplog):
    # The colour demo server declares `resources` but serves no resources/templates/list.
    config = {"mcpServers": {"colours": stdio_server("elicitgate.demo.colour_server", era="handshake"),
                             "a": py("a")}}
    with caplog.at_level("WARNING", logger="elicitgate"):
        async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
            assert "colours__pick_colour" in {t.name for t in (await client.list_tools()).tools}
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert any(uri.startswith("ui://") for uri in uris) and "mem://a/note" in uris
    assert [r.getMessage() for r in caplog.records if r.name.startswith("elicitgate")] == []
