"""The gateway asks on its own: missing tool arguments, missing prompt arguments, confirmations.

The upstream is the bundled elicitgate/demo/tickets.py, an `mcp` SDK `MCPServer` written as its docs show (required
arguments from the function signature, a `destructiveHint` tool, a prompt with completions), over stdio
and streamable HTTP. Clients are `mcp.Client` in both eras on the HTTP face (in-process) and the stdio
face (a real `elicitgate serve` process), a client without elicitation answered through the hosted
inbox, and the TypeScript SDK client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.elicitation.argument_forms import (
    MASK,
    form_field,
    missing_arguments_form,
    prompt_arguments_form,
    shown_arguments,
)
from elicitgate.elicitation.broker import REASON_META_KEY, SERVER_META_KEY, SOURCE_META_KEY
from tests.conftest import PEERS, PY, gateway_stdio, write_config
from tests.hosted_helpers import AUTH, TOKEN, next_pending
from tests.test_broker import Human, accept, ended, gateway
from tests.test_typescript import ts_client

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
ERAS = {"handshake": "legacy", "modern": MODERN}
ELICITATION_UNDELIVERABLE = -32013
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021

TICKET_FORM = {
    "type": "object",
    "properties": {
        "priority": {"enum": ["low", "normal", "high"], "title": "Priority", "type": "string"},
        "points": {"maximum": 13, "minimum": 1, "title": "Points", "type": "integer"},
        "urgent": {"title": "Urgent", "type": "boolean"},
    },
    "required": ["priority", "points", "urgent"],
}
TICKET_ANSWER = {"priority": "high", "points": 5, "urgent": True}


def asks_upstream(**extra: Any) -> dict[str, Any]:
    return {"command": PY, "args": ["-m", "elicitgate.demo.tickets"], **extra}


@pytest.fixture(params=["stdio", "http"])
def upstream(request: pytest.FixtureRequest, http_upstream: Any) -> Callable[..., dict[str, Any]]:
    """`upstream(**extra)`: an mcpServers entry for the MCPServer peer, per transport."""

    def make(**extra: Any) -> dict[str, Any]:
        if request.param == "stdio":
            return asks_upstream(**extra)
        return {"url": f"{http_upstream('elicitgate.demo.tickets').url}/mcp", **extra}

    return make


def cfg(server: dict[str, Any], **elicitation: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"mcpServers": {"t": server}}
    if elicitation:
        out["elicitation"] = elicitation
    return out


def text_of(result: types.CallToolResult) -> str:
    return result.content[0].text


async def upstream_calls(client: Client) -> list[str]:
    return json.loads(text_of(await client.call_tool("t__calls", {})))


# -- the forms, as pure functions ---------------------------------------------------------------------


def test_form_fields_copy_type_and_constraints_and_refuse_what_a_form_cannot_ask():
    defs = {"Colour": {"enum": ["red", "blue"], "type": "string", "title": "Colour"}}
    email = {"type": "string", "format": "email", "pattern": "x", "minLength": 1, "examples": ["a"]}
    assert form_field(email, defs) == {"type": "string", "format": "email", "minLength": 1}
    assert form_field({"type": "string", "format": "uuid"}, defs) == {"type": "string"}
    assert form_field({"$ref": "#/$defs/Colour", "description": "pick"}, defs) == {
        "enum": ["red", "blue"], "type": "string", "title": "Colour", "description": "pick"}
    assert form_field({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]}, defs) == {
        "type": "integer", "minimum": 0}
    assert form_field({"type": ["number", "null"], "exclusiveMinimum": 0}, defs) == {"type": "number"}
    assert form_field({"oneOf": [{"const": "a", "title": "A"}], "type": "string"}, defs) is not None
    for impossible in (
        {"type": "object"},
        {"type": "array", "items": {"type": "string"}},
        {"enum": [1, 2]},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"$ref": "#/$defs/Nope"},
        None,
    ):
        assert missing_arguments_form({"properties": {"x": impossible}}, ["x"], max_properties=64) is None, impossible
    assert missing_arguments_form({"properties": {}}, ["x"], max_properties=64) is None  # required, not described
    # Definitions that are not objects are no definitions (they were spread into a dict: TypeError).
    for defs in ([1], "x", 3):
        schema = {"properties": {"x": {"type": "string"}}, "definitions": defs, "$defs": defs}
        assert missing_arguments_form(schema, ["x"], max_properties=64) == {
            "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}, defs
    multi = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1}
    assert missing_arguments_form({"properties": {"m": multi}}, ["m"], max_properties=64) == {
        "type": "object", "properties": {"m": multi}, "required": ["m"]}


def test_prompt_form_uses_completions_as_choices():
    arguments = [{"name": "language", "description": "Which one", "required": True},
                 {"name": "style", "required": True}]
    choices = {"language": ["py", "go", "py"]}
    assert prompt_arguments_form(arguments, ["language", "style"], choices, max_properties=64) == {
        "type": "object",
        "properties": {
            "language": {"type": "string", "description": "Which one", "enum": ["py", "go"]},
            "style": {"type": "string"},
        },
        "required": ["language", "style"],
    }


def test_confirmation_masks_secrets_by_schema_and_by_name_at_any_depth():
    schema = {"properties": {"pw": {"type": "string", "format": "password"}, "path": {"type": "string"}}}
    shown = shown_arguments(
        {"path": "/tmp/x", "pw": "hunter2", "apiKey": "k-123", "nested": {"token": "t-9", "n": 1}, "long": "z" * 500},
        schema,
    )
    for secret in ("hunter2", "k-123", "t-9"):
        assert secret not in shown
    assert shown.startswith(
        'path="/tmp/x", pw="•••", apiKey="•••", nested={"token": "•••", "n": 1}, long="zzz'
    )
    assert len(shown) < 400 and shown.endswith("…")
    assert MASK == "•••"


# -- missing tool arguments -----------------------------------------------------------------------------


async def test_missing_tool_arguments_are_asked_and_merged_in_both_eras(upstream):
    async with gateway(cfg(upstream())) as gw:
        for era, mode in ERAS.items():
            human = Human(accept(TICKET_ANSWER))
            async with Client(gw.mcp_url, mode=mode, elicitation_callback=human) as client:
                result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
                assert not result.is_error, result
                assert json.loads(text_of(result)) == {"title": "Printer on fire", "reporter": "anon", **TICKET_ANSWER}
                (asked,) = human.seen
                assert asked.requested_schema == TICKET_FORM, era
                assert asked.message == (
                    "[elicitgate] The tool t__create_ticket (server t) was called without priority, points, urgent. "
                    "Fill them in to go on."
                )
                if era == "handshake":  # 2026-07-28 input requests carry no _meta through the SDK
                    assert asked.meta == {SERVER_META_KEY: "t", SOURCE_META_KEY: "gateway",
                                          REASON_META_KEY: "missing_arguments"}
                # Nothing is asked when nothing is missing.
                full = await client.call_tool("t__create_ticket", {"title": "abc", **TICKET_ANSWER, "points": 2})
                assert json.loads(text_of(full))["points"] == 2 and len(human.seen) == 1
        (first, second) = ended(gw)
        for summary in (first, second):
            assert summary["source"] == "gateway" and summary["gateway_reason"] == "missing_arguments"
            assert summary["state"] == "accepted" and summary["server"] == "t"
        assert [first["responder"], second["responder"]] == ["client", "input_required"]
        assert gw.gateway.rounds.parked == {}


@pytest.mark.parametrize("era", ["handshake", "modern"])
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declined_or_cancelled_arguments_never_reach_the_upstream(era, action):
    human = Human(types.ElicitResult(action=action))
    async with gateway(cfg(asks_upstream())) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era], elicitation_callback=human) as client:
            result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
            assert result.is_error
            declined = "declined to provide the missing arguments of t__create_ticket"
            said = declined if action == "decline" else "cancelled"
            assert said in text_of(result) and "t__create_ticket was not called" in text_of(result)
            assert await upstream_calls(client) == []
        (summary,) = ended(gw)
        assert summary["state"] == {"decline": "declined", "cancel": "cancelled"}[action]


async def test_an_invalid_answer_is_asked_again_and_given_arguments_are_never_changed():
    answers = iter([
        accept({"priority": "urgent!", "points": 40, "urgent": True, "title": "overwritten"}),
        accept(TICKET_ANSWER),
    ])
    human = Human(lambda params: next(answers))
    async with gateway(cfg(asks_upstream())) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
            assert json.loads(text_of(result))["title"] == "Printer on fire"
        assert len(human.seen) == 2
        retry = human.seen[1].message
        assert retry.startswith("[elicitgate] Your previous answer was not accepted (")
        assert "priority:" in retry and "points:" in retry and "unexpected field(s): title" in retry
        assert ended(gw)[0]["attempts"] == 2


async def test_forwarded_unchanged_when_a_field_cannot_be_asked_or_the_client_cannot_be_asked():
    human = Human(accept({}))
    async with gateway(cfg(asks_upstream())) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("t__tag_items", {})  # a free list: no form can ask for it
            assert result.is_error and "items" in text_of(result)  # the upstream's own validation error
            assert human.seen == []
        async with Client(gw.mcp_url, mode="legacy") as client:  # no elicitation, no hosting (no admin token)
            result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
            assert result.is_error and "priority" in text_of(result)  # the upstream's own validation error
        assert ended(gw) == []


@pytest.mark.parametrize("where", ["gateway", "server"])
async def test_ask_missing_arguments_off(where):
    server = asks_upstream(ask_missing_arguments=False) if where == "server" else asks_upstream()
    elicitation = {"ask_missing_arguments": False} if where == "gateway" else {}
    human = Human(accept(TICKET_ANSWER))
    async with gateway(cfg(server, **elicitation)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
            assert result.is_error and human.seen == []
        assert ended(gw) == []


# -- missing prompt arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_missing_prompt_arguments_are_asked_with_completions_as_choices(upstream, era):
    human = Human(accept({"language": "rust", "style": "gentle"}))
    async with gateway(cfg(upstream())) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era], elicitation_callback=human) as client:
            result = await client.get_prompt("t__review", {"focus": "errors"})
            assert result.messages[0].content.text == "Review this rust code in a gentle style, focusing on errors."
        (asked,) = human.seen
        assert asked.requested_schema == {
            "type": "object",
            "properties": {
                "language": {"type": "string", "enum": ["python", "rust", "go"]},  # the server's short list
                "style": {"type": "string"},  # its list was longer than it sent: typed freely
            },
            "required": ["language", "style"],
        }
        assert asked.message.startswith(
            "[elicitgate] The prompt t__review (server t) was called without language, style."
        )
        assert ended(gw)[0]["gateway_reason"] == "missing_arguments"


async def test_a_declined_prompt_question_is_a_clear_error():
    human = Human(types.ElicitResult(action="decline"))
    async with gateway(cfg(asks_upstream())) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            with pytest.raises(MCPError) as caught:
                await client.get_prompt("t__review", {})
    error = caught.value.error
    assert error.code == -32602 and "declined" in error.message
    assert error.data == {"source": "elicitgate", "prompt": "t__review", "missing": ["language", "style"],
                          "action": "decline"}


# -- confirmations ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_destructive_tools_are_confirmed_with_secrets_masked(upstream, era):
    human = Human(accept({}))
    async with gateway(cfg(upstream(), confirm_tools=["destructive"])) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era], elicitation_callback=human) as client:
            result = await client.call_tool("t__delete_file", {"path": "/srv/data.db", "api_token": "tok-SECRET"})
            assert text_of(result) == "deleted /srv/data.db"
            assert len(human.seen) == 1  # a tool that is not destructive is not confirmed
            await client.call_tool("t__create_ticket", {"title": "abc", **TICKET_ANSWER})
            assert len(human.seen) == 1
        (asked,) = human.seen
        assert asked.message == (
            '[elicitgate] Allow t__delete_file (server t) to run? Arguments: path="/srv/data.db", api_token="•••"'
        )
        assert asked.requested_schema == {"type": "object", "properties": {}}
        if era == "handshake":
            assert asked.meta[SOURCE_META_KEY] == "gateway" and asked.meta[REASON_META_KEY] == "confirmation"
        (summary,) = ended(gw)
        assert summary["gateway_reason"] == "confirmation" and summary["state"] == "accepted"


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_a_declined_confirmation_never_calls_the_upstream(era):
    human = Human(types.ElicitResult(action="decline"))
    async with gateway(cfg(asks_upstream(), confirm_tools=["t__delete_*"])) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era], elicitation_callback=human) as client:
            result = await client.call_tool("t__delete_file", {"path": "/srv/data.db"})
            assert result.is_error
            assert text_of(result) == "The user declined to allow t__delete_file to run; t__delete_file was not called."
            assert await upstream_calls(client) == []


async def test_missing_arguments_then_confirmation_by_glob():
    human = Human(lambda params: accept(TICKET_ANSWER if params.requested_schema["properties"] else {}))
    async with gateway(cfg(asks_upstream(), confirm_tools=["*__create_*"])) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
            assert json.loads(text_of(result))["priority"] == "high"
        assert [s["gateway_reason"] for s in ended(gw)] == ["missing_arguments", "confirmation"]
        # The confirmation shows the arguments as they will be sent: the answers merged in.
        assert 'priority="high"' in human.seen[1].message and 'title="Printer on fire"' in human.seen[1].message


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_a_confirmation_nobody_can_answer_fails_the_call_without_calling_the_upstream(era):
    async with gateway(cfg(asks_upstream(), confirm_tools=["destructive"])) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era]) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("t__delete_file", {"path": "/srv/data.db"})
            assert caught.value.error.code == (ELICITATION_UNDELIVERABLE if era == "handshake"
                                               else MISSING_REQUIRED_CLIENT_CAPABILITY)
            assert await upstream_calls(client) == []


# -- the hosted fallback: a client without elicitation, answered through the admin API ----------------------


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_gateway_questions_reach_the_inbox_when_the_client_cannot_show_forms(era):
    config = {**cfg(asks_upstream(), confirm_tools=["destructive"]), "admin_token": TOKEN}
    async with gateway(config) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era]) as client, anyio.create_task_group() as tg:
            results: list[Any] = []

            async def call() -> None:
                results.append(await client.call_tool("t__create_ticket", {"title": "Printer on fire"}))
                results.append(await client.call_tool("t__delete_file", {"path": "/srv/data.db"}))

            tg.start_soon(call)
            async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
                (item,) = await next_pending(gw.url)
                assert item["source"] == "gateway" and item["gateway_reason"] == "missing_arguments"
                assert item["server"] == "t" and item["hosted"] == "inbox"
                assert "t__create_ticket" in item["message"]
                detail = (await http.get(f"/api/elicitations/{item['id']}")).json()
                assert detail["requestedSchema"] == TICKET_FORM
                async with httpx2.AsyncClient() as browser:  # the inbox link's page says who asks
                    shown = (await browser.get(item["form_url"])).text
                    assert 'elicitgate asks, before a call to the server <strong id="eg-server">t</strong>' in shown
                answered = await http.post(f"/api/elicitations/{item['id']}/answer",
                                           json={"action": "accept", "content": TICKET_ANSWER})
                assert answered.json() == {"id": item["id"], "state": "accepted"}
                with anyio.fail_after(30):
                    while not results:
                        (item,) = await next_pending(gw.url)
                        if item["gateway_reason"] == "confirmation":
                            break
                assert item["gateway_reason"] == "confirmation" and "/srv/data.db" in item["message"]
                await http.post(f"/api/elicitations/{item['id']}/answer", json={"action": "decline"})
            with anyio.fail_after(30):
                while len(results) < 2:
                    await anyio.sleep(0.01)
        assert json.loads(text_of(results[0]))["priority"] == "high"
        assert results[1].is_error and "declined" in text_of(results[1])
        assert [s["responder"] for s in ended(gw)] == ["hosted_inbox", "hosted_inbox"]


# -- the stdio face, a real `elicitgate serve` process -------------------------------------------------------


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_stdio_face_asks_for_missing_arguments_and_confirms(tmp_path, era):
    config = write_config(tmp_path, {"t": asks_upstream()}, elicitation={"confirm_tools": ["destructive"]})
    human = Human(lambda params: accept(TICKET_ANSWER if params.requested_schema["properties"] else {}))
    async with Client(gateway_stdio(config), mode=ERAS[era], elicitation_callback=human) as client:
        result = await client.call_tool("t__create_ticket", {"title": "Printer on fire"})
        assert json.loads(text_of(result))["urgent"] is True
        deleted = await client.call_tool("t__delete_file", {"path": "/srv/data.db"})
        assert text_of(deleted) == "deleted /srv/data.db"
        prompt = await client.get_prompt("t__review", {"language": "go", "style": "terse"})  # nothing missing
        assert "go code in a terse style" in prompt.messages[0].content.text
    assert [p.message.split(" ", 2)[:2] for p in human.seen] == [["[elicitgate]", "The"], ["[elicitgate]", "Allow"]]


# -- TypeScript SDK peers: the TS client asked by the gateway, a TS server's tool confirmed ----------------


@pytest.mark.node
@pytest.mark.parametrize("face", ["stdio", "http"])
def test_ts_client_is_asked_for_missing_arguments_and_confirmations(tmp_path, http_gateway, face):
    config = write_config(tmp_path, {"t": asks_upstream()}, elicitation={"confirm_tools": ["destructive"]})
    where = {"url": f"{http_gateway(config).url}/mcp"} if face == "http" else {"config": config}
    out = ts_client("--call", "t__create_ticket", "--args", json.dumps({"title": "Printer on fire"}),
                    "--answer", json.dumps(TICKET_ANSWER), **where)
    assert out["error"] is None and not out["result"].get("isError"), out
    assert json.loads(out["result"]["content"][0]["text"]) == {"title": "Printer on fire", "reporter": "anon",
                                                               **TICKET_ANSWER}
    (asked,) = out["elicitations"]
    assert asked["requestedSchema"] == TICKET_FORM
    assert asked["message"].startswith("[elicitgate] The tool t__create_ticket")
    assert asked["_meta"] == {SERVER_META_KEY: "t", SOURCE_META_KEY: "gateway", REASON_META_KEY: "missing_arguments"}

    out = ts_client("--call", "t__delete_file", "--args", json.dumps({"path": "/srv/x", "api_token": "tok-SECRET"}),
                    "--action", "decline", **where)
    assert out["result"]["isError"] is True and "was not called" in out["result"]["content"][0]["text"]
    (asked,) = out["elicitations"]
    assert "tok-SECRET" not in asked["message"] and 'api_token="•••"' in asked["message"]
    assert asked["_meta"][REASON_META_KEY] == "confirmation"


@pytest.mark.node
@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_a_ts_server_tool_is_asked_for_and_confirmed(era):
    human = Human(lambda params: accept({"path": "/tmp/old"} if params.requested_schema["properties"] else {}))
    ts = {"command": "node", "args": [str(PEERS / "ts" / "elicit_server.mjs")]}
    async with gateway(cfg(ts, confirm_tools=["destructive"])) as gw:
        async with Client(gw.mcp_url, mode=ERAS[era], elicitation_callback=human) as client:
            result = await client.call_tool("t__remove", {})
            assert text_of(result) == "removed /tmp/old"
        missing, confirm = human.seen
        assert missing.requested_schema == {"type": "object", "properties": {
            "path": {"type": "string", "description": "What to remove"}}, "required": ["path"]}
        assert confirm.message == '[elicitgate] Allow t__remove (server t) to run? Arguments: path="/tmp/old"'
        assert [s["gateway_reason"] for s in ended(gw)] == ["missing_arguments", "confirmation"]
