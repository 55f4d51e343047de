"""The gateway between TypeScript SDK peers (npm `@modelcontextprotocol/sdk`, tests/peers/ts) and
Python ones: a TS upstream answered by a Python client, and a TS client calling Python and TS
upstreams through the gateway's stdio and HTTP faces. Real processes throughout."""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcp import Client

from elicitgate.elicitation.broker import ERRORS_META_KEY, SERVER_META_KEY
from tests.conftest import PEERS, PY, ROOT, Process, free_port, inprocess_gateway, stdio_server, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.node]

TS = PEERS / "ts"
TS_SERVER = str(TS / "elicit_server.mjs")
TS_CLIENT = str(TS / "elicit_client.mjs")
TS_UPSTREAM = {"command": "node", "args": [TS_SERVER]}
PY_UPSTREAM = stdio_server("tests.peers.py_server", "--name", "py")
GATEWAY_ARGV = [PY, "-m", "elicitgate.cli", "serve", "--config"]


@pytest.fixture(autouse=True)
def _node_peers_installed() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the TypeScript SDK peers need Node.js 20+")
    if not (TS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(f"TypeScript SDK not installed: run `cd {TS} && npm ci` (scripts/test does)")


@pytest.fixture
def ts_http_upstream():
    """Start the TS server over streamable HTTP: `ts_http_upstream()` returns its /mcp URL."""
    started: list[Process] = []

    def start(*options: str) -> str:
        port = free_port()
        started.append(Process(["node", TS_SERVER, "--http", str(port), *options], port))
        return f"{started[-1].url}/mcp"

    yield start
    for proc in started:
        proc.stop()


def ts_client(*options: str, url: str | None = None, config: Path | None = None) -> dict[str, Any]:
    """Run the TS client against the gateway (its --url, or `elicitgate serve` over stdio); its JSON line."""
    target = ["--url", url] if url else ["--", *GATEWAY_ARGV, str(config)]
    done = subprocess.run(["node", TS_CLIENT, *options, *target], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)  # a gateway's start and a session: a bound
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def tool_json(result: Any) -> Any:
    return json.loads(result.content[0].text)


class Human:
    """An `mcp` elicitation callback that gives the next answer and remembers what it was asked."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = iter(answers)
        self.seen: list[Any] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params)
        return next(self.answers)


def accept(content: dict[str, Any]) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


# -- a TS upstream, answered by a Python client ------------------------------------------------------


async def test_python_client_answers_a_ts_server_form():
    human = Human(accept({"name": "Ada", "age": 36, "color": "green"}))
    async with inprocess_gateway({"mcpServers": {"ts": TS_UPSTREAM}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("ts__ask_form", {"message": "Who is there?"})
        assert tool_json(result) == {"action": "accept", "content": {"name": "Ada", "age": 36, "color": "green"}}
        (asked,) = human.seen
        assert asked.message == "[ts] Who is there?"
        assert asked.meta[SERVER_META_KEY] == "ts"
        assert asked.requested_schema["required"] == ["name"]
        assert gw.gateway.broker.pending == {}


async def test_invalid_answer_is_asked_again_and_only_the_valid_one_reaches_the_ts_server():
    # The TS SDK validates an accepted answer against its schema too: an invalid one would fail the tool.
    human = Human(accept({"age": -1}), accept({"name": "Ada", "age": 1}))
    async with inprocess_gateway({"mcpServers": {"ts": TS_UPSTREAM}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("ts__ask_form", {})
        assert tool_json(result) == {"action": "accept", "content": {"name": "Ada", "age": 1}}
        first, second = human.seen
        assert first.message == "[ts] Who are you?"
        assert ERRORS_META_KEY not in first.meta
        assert second.message.startswith("[ts] Your previous answer was not accepted (")
        assert second.message.endswith("Who are you?")
        assert {p["property"] for p in second.meta[ERRORS_META_KEY]} == {"name", "age"}
        (summary,) = gw.gateway.broker.recent
        assert (summary["state"], summary["attempts"]) == ("accepted", 2)


async def test_decline_passes_through_to_the_ts_server():
    human = Human(types.ElicitResult(action="decline"))
    async with inprocess_gateway({"mcpServers": {"ts": TS_UPSTREAM}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("ts__ask_form", {})
        assert tool_json(result) == {"action": "decline"}
        assert [s["state"] for s in gw.gateway.broker.recent] == ["declined"]


async def test_standalone_stream_elicitation_works_by_default_and_shared_names_the_fix(ts_http_upstream):
    # Like the SDK's own examples, this server sends its elicitation on the GET stream, tied to no call.
    url = ts_http_upstream("--standalone-stream")
    human = Human(accept({"name": "Ada"}))
    config = {"mcpServers": {"shared": {"url": url, "session_policy": "shared"}, "mine": {"url": url}}}
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            refused = await client.call_tool("shared__ask_form", {})
            assert refused.is_error and "-32017" in refused.content[0].text
            assert "session_policy" in refused.content[0].text
            assert not human.seen
            result = await client.call_tool("mine__ask_form", {})
        assert tool_json(result) == {"action": "accept", "content": {"name": "Ada"}}
        assert gw.gateway.broker.pending == {}


# -- a TS client, through the gateway's stdio and HTTP faces -----------------------------------------

CALLS = {
    "py": ("py__elicit", {"answer": "42"}, "[py] Please answer"),
    "ts": ("ts__ask_form", {"name": "Ada"}, "[ts] Who are you?"),
}


@pytest.mark.parametrize("upstream", ["py", "ts"])
@pytest.mark.parametrize("face", ["stdio", "http"])
def test_ts_client_through_the_gateway(tmp_path, http_gateway, face, upstream):
    config = write_config(tmp_path, {"py": PY_UPSTREAM, "ts": TS_UPSTREAM})
    tool, answer, message = CALLS[upstream]
    where = {"url": f"{http_gateway(config).url}/mcp"} if face == "http" else {"config": config}
    out = ts_client("--call", tool, "--answer", json.dumps(answer), **where)
    assert {"py__elicit", "py__echo", "ts__ask_form", "ts__ask_url", "ts__echo"} <= set(out["tools"])
    assert out["error"] is None and not out["result"].get("isError"), out
    assert json.loads(out["result"]["content"][0]["text"]) == {"action": "accept", "content": answer}
    (asked,) = out["elicitations"]
    assert asked["message"] == message
    assert asked["_meta"] == {SERVER_META_KEY: upstream}


# -- URL mode -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_ts_url_mode_and_its_completion_reach_the_ts_client(tmp_path, ts_http_upstream, transport):
    upstream = TS_UPSTREAM if transport == "stdio" else {"url": ts_http_upstream()}
    config = write_config(tmp_path, {"ts": upstream})
    args = json.dumps({"elicitationId": "u-7", "complete": True})
    out = ts_client("--modes", "form,url", "--call", "ts__ask_url", "--args", args, "--wait-complete", config=config)
    assert json.loads(out["result"]["content"][0]["text"]) == {"action": "accept"}
    (asked,) = out["elicitations"]
    assert asked == {"mode": "url", "message": "[ts] Sign in", "url": "https://example.com/login",
                     "elicitationId": "u-7", "_meta": {SERVER_META_KEY: "ts"}}
    assert out["completions"] == [{"elicitationId": "u-7"}]


def test_a_form_only_client_is_declared_form_only_to_the_ts_server(tmp_path):
    """Per-session stdio upstreams are told the client's own modes; the TS SDK then refuses URL mode."""
    out = ts_client("--call", "ts__ask_url", config=write_config(tmp_path, {"ts": TS_UPSTREAM}))
    assert out["result"]["isError"] is True
    assert out["result"]["content"][0]["text"] == "Client does not support url elicitation."
    assert out["elicitations"] == []


# -- the TypeScript SDK (handshake era only, up to 2025-11-25) bridged to 2026-07-28 peers --------------


async def test_ts_upstream_bridged_to_a_2026_client():
    human = Human(accept({"name": "Ada", "color": "red"}))
    async with inprocess_gateway({"mcpServers": {"ts": TS_UPSTREAM}}) as gw:
        async with Client(gw.mcp_url, mode="2026-07-28", elicitation_callback=human) as client:
            result = await client.call_tool("ts__ask_form", {"message": "Name?"})
        assert tool_json(result) == {"action": "accept", "content": {"name": "Ada", "color": "red"}}
        assert human.seen[0].message == "[ts] Name?"
        assert [s["responder"] for s in gw.gateway.broker.recent] == ["input_required"]
        assert gw.gateway.rounds.parked == {}


def test_ts_client_answers_a_2026_upstream(tmp_path):
    modern = stdio_server("tests.peers.py_server", "--name", "modern", era="modern")
    out = ts_client("--modes", "form,url", "--call", "modern__elicit_twice", "--answer", json.dumps({"answer": "ok"}),
                    config=write_config(tmp_path, {"modern": modern}))
    assert out["error"] is None, out
    assert json.loads(out["result"]["content"][0]["text"]) == [{"action": "accept", "content": {"answer": "ok"}}] * 2
    assert [e["message"] for e in out["elicitations"]] == ["[modern] first", "[modern] second"]


def test_the_ui_field_reaches_a_ts_client_that_renders_it_itself(tmp_path):
    # A client that shows forms gets the request as the server sent it, `ui` included (it may render the
    # server's ui:// resource itself); the gateway hosts nothing here. The SDK's own schema drops fields it
    # does not model, so such a client reads the message as it arrived.
    colours = {"command": PY, "args": ["-m", "elicitgate.demo.colour_server"], "era": "handshake"}
    out = ts_client("--call", "colours__pick_colour", "--args", '{"purpose": "the docs"}',
                    "--answer", '{"colour": "#ef4444"}', config=write_config(tmp_path, {"colours": colours}))
    (asked,) = out["rawElicitations"]
    assert asked["ui"] == {"uri": "ui://colours/picker", "mode": "modal", "context": {"defaultColor": "#3b82f6"}}
    assert asked["requestedSchema"]["properties"]["colour"]["title"] == "Colour (#rrggbb)"
    assert out["result"]["content"][0]["text"] == 'pick_colour: {"colour": "#ef4444"}'
