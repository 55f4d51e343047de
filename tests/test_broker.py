"""The elicitation broker end to end, handshake era: real upstreams (stdio and streamable HTTP), the
gateway in-process behind real HTTP, and `mcp.Client` downstream answering through its callback.

Every test ends with the broker empty: nothing pending, no client holding an elicitation.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from elicitgate.capabilities import capabilities_dict, elicitation_modes
from elicitgate.elicitation.broker import ERRORS_META_KEY, SERVER_META_KEY
from elicitgate.elicitation.url_routes import SessionTarget
from tests.conftest import PY, inprocess_gateway
from tests.test_schema import GOOD_ANSWER, VALID_PROPERTIES

pytestmark = pytest.mark.anyio

ELICITATION_UNDELIVERABLE = -32013
ELICITATION_LIMIT = -32014
ELICITATION_RATE_LIMITED = -32015
ELICITATION_TIMEOUT = -32016
ELICITATION_SENSITIVE_BLOCKED = -32018
UPSTREAM_GONE = -32012


# -- helpers ----------------------------------------------------------------------------------------


def stdio_upstream(name: str = "x", **extra: Any) -> dict[str, Any]:
    return {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", name], "era": "handshake", **extra}


@pytest.fixture(params=["stdio", "http"])
def upstream(request: pytest.FixtureRequest, http_upstream: Any) -> Callable[..., dict[str, Any]]:
    """`upstream(name, **extra)`: an mcpServers entry for a handshake-era py_server, per transport."""

    def make(name: str = "x", **extra: Any) -> dict[str, Any]:
        if request.param == "stdio":
            return stdio_upstream(name, **extra)
        up = http_upstream("tests.peers.py_server", "--name", name)
        return {"url": f"{up.url}/mcp", "era": "handshake", **extra}

    return make


def config(servers: dict[str, Any], **elicitation: Any) -> dict[str, Any]:
    return {"mcpServers": servers, "elicitation": elicitation} if elicitation else {"mcpServers": servers}


def form(required: list[str] | None = None, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def text(result: types.CallToolResult) -> Any:
    assert not result.is_error, result
    return json.loads(result.content[0].text)


async def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


@asynccontextmanager
async def gateway(cfg: dict[str, Any]) -> AsyncIterator[Any]:
    """The in-process gateway; every client peer it ever saw must end with no elicitations."""
    async with inprocess_gateway(cfg) as gw:
        seen: list[Any] = []
        add_peer = gw.gateway.peers.add

        def recording_add_peer(peer: Any) -> None:
            seen.append(peer)
            add_peer(peer)

        gw.gateway.peers.add = recording_add_peer
        gw.seen_peers = seen
        yield gw
        await assert_settled(gw)


async def assert_settled(gw: Any) -> None:
    broker = gw.gateway.broker
    await wait_until(lambda: not broker.pending and not any(broker.asking(p) for p in gw.seen_peers), timeout=30)
    assert broker.pending == {}
    assert all(not broker.elicitations_of(p) for p in gw.seen_peers)


def ended(gw: Any, state: str | None = None) -> list[dict[str, Any]]:
    return [s for s in gw.gateway.broker.recent if state is None or s["state"] == state]


class Human:
    """An elicitation callback: records every request it is shown, answers with `answer(params)`."""

    def __init__(self, answer: Callable[[Any], Any] | types.ElicitResult | None = None) -> None:
        self.seen: list[Any] = []
        self.asked = anyio.Event()
        self.cancelled = anyio.Event()
        self._answer = answer

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params)
        self.asked.set()
        try:
            if self._answer is None:  # never answers
                await anyio.Event().wait()
            answer = self._answer(params) if callable(self._answer) else self._answer
            if hasattr(answer, "__await__"):
                answer = await answer
            return answer
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise


def accept(content: dict[str, Any]) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


@pytest.fixture
def form_only_capability(monkeypatch: pytest.MonkeyPatch) -> Callable[[types.ElicitationCapability], None]:
    """Make every `ClientSession` with an elicitation callback declare the given elicitation capability
    (the SDK declares form + url for any callback)."""

    def declare(capability: types.ElicitationCapability) -> None:
        original = ClientSession._build_capabilities

        def build(self: ClientSession, version: str) -> types.ClientCapabilities:
            caps = original(self, version)
            if caps.elicitation is not None:
                caps = caps.model_copy(update={"elicitation": capability})
            return caps

        monkeypatch.setattr(ClientSession, "_build_capabilities", build)

    return declare


# -- form mode: every variant accepted and answered -----------------------------------------------


async def test_every_form_variant_reaches_the_client_and_the_answer_reaches_the_upstream(upstream):
    human = Human(lambda params: accept({name: GOOD_ANSWER[name] for name in params.requested_schema["properties"]}))
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            for name, prop in VALID_PROPERTIES.items():
                schema = form([name], **{name: prop})
                result = text(await client.call_tool("x__elicit", {"schema": schema}))
                assert result == {"action": "accept", "content": {name: GOOD_ANSWER[name]}}, name
                assert human.seen[-1].requested_schema == schema, name
            everything = {**form(["email", "titled_multi"], **VALID_PROPERTIES), "title": "All"}
            result = text(await client.call_tool("x__elicit", {"schema": everything}))
            assert result == {"action": "accept", "content": GOOD_ANSWER}
            assert human.seen[-1].requested_schema == everything
        assert len(ended(gw, "accepted")) == len(VALID_PROPERTIES) + 1
        assert all(s["attempts"] == 1 for s in ended(gw))


async def test_defaults_reach_the_client_and_a_prefilled_answer_is_accepted(upstream):
    schema = form(
        ["name", "tags"],
        name={"type": "string", "default": "Ada"},
        guests={"type": "integer", "minimum": 1, "maximum": 8, "default": 2},
        ratio={"type": "number", "default": 0.5},
        vip={"type": "boolean", "default": False},
        colour={"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"], "default": "green"},
        size={"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
              "default": "l"},
        tags={"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2,
              "default": ["a", "c"]},
        extras={"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}, "default": []},
    )

    def prefill(params: Any) -> types.ElicitResult:
        return accept({k: v["default"] for k, v in params.requested_schema["properties"].items()})

    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=Human(prefill)) as client:
            result = text(await client.call_tool("x__elicit", {"schema": schema}))
    assert result == {"action": "accept", "content": {k: v["default"] for k, v in schema["properties"].items()}}


# -- invalid schemas are refused to the upstream ---------------------------------------------------

INVALID_SCHEMAS = {
    "nested object": (form(address={"type": "object", "properties": {"street": {"type": "string"}}}), "address",
                      "not allowed in form mode"),
    "array of objects": (form(people={"type": "array", "items": {"type": "object"}}), "people",
                         "arrays are only multi-select enums"),
    "format password": (form(secret={"type": "string", "format": "password"}), "secret", "format must be one of"),
    "unknown format": (form(ip={"type": "string", "format": "ipv4"}), "ip", "format must be one of"),
    "required undefined": (form(["a", "b"], a={"type": "string"}), "b", "listed in required but not defined"),
    "type missing": (form(a={"title": "A"}), "a", "type is missing"),
}


@pytest.mark.parametrize("case", sorted(INVALID_SCHEMAS))
async def test_invalid_schema_is_refused_to_the_upstream_naming_property_and_rule(upstream, case):
    schema, prop, rule = INVALID_SCHEMAS[case]
    human = Human(accept({}))
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": schema, "report_errors": True}))
            error = result["error"]
            assert error["code"] == -32602
            assert "not a valid form-mode schema" in error["message"]
            assert error["data"]["source"] == "elicitgate"
            assert error["data"]["server"] == "x"
            assert error["data"]["property"] == prop
            assert rule in error["data"]["rule"]
            assert {"property": prop, "rule": error["data"]["rule"]} in error["data"]["problems"]

            # Without report_errors the upstream fails its tool with the error it got; the client sees it intact.
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__elicit", {"schema": schema})
            assert caught.value.error.code == -32602
            assert caught.value.error.data["property"] == prop
    assert human.seen == []  # nothing invalid crosses to the client


async def test_a_schema_larger_than_max_schema_bytes_is_refused_with_its_size(upstream):
    """`elicitation.max_schema_bytes` counts the schema's compact JSON; the same schema asked twice is
    refused twice (the second time from the checked schemas the broker keeps)."""
    schema = form(**{f"field{i}": {"type": "string", "title": f"Field {i}"} for i in range(10)})
    size = len(json.dumps(schema, separators=(",", ":")))
    human = Human(accept({}))
    async with gateway(config({"x": upstream()}, max_schema_bytes=size - 1)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            for _ in range(2):
                error = text(await client.call_tool("x__elicit", {"schema": schema, "report_errors": True}))["error"]
                assert (error["code"], error["message"]) == (-32602, "requestedSchema too large")
                assert error["data"]["size"] == size
                assert error["data"]["rule"] == f"schema is at most {size - 1} bytes of JSON"
    async with gateway(config({"x": upstream()}, max_schema_bytes=size)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            assert text(await client.call_tool("x__elicit", {"schema": schema}))["action"] == "accept"
    assert len(human.seen) == 1


async def test_url_mode_with_a_non_http_url_is_refused(upstream):
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=Human(accept({}))) as client:
            bad_url = text(await client.call_tool(
                "x__elicit", {"mode": "url", "url": "javascript:alert(1)", "report_errors": True}))
            assert bad_url["error"]["code"] == -32602
            assert bad_url["error"]["data"]["rule"] == "url must be https"


@pytest.mark.parametrize("meta", ["x", 7, ["a"]])
async def test_a_meta_that_is_not_an_object_is_refused_to_the_upstream(meta, caplog):
    """No SDK sends such a `_meta`: the upstream is a bare stdio server (tests/peers/raw_stdio_server.py)."""
    human = Human(accept({"answer": "yes"}))
    raw = {"command": PY, "args": ["-m", "tests.peers.raw_stdio_server"], "era": "handshake"}
    request = {"message": "ok?", "requestedSchema": form(answer={"type": "string"})}
    async with gateway(config({"x": raw})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            error = text(await client.call_tool("x__ask", {"params": {**request, "_meta": meta}}))["error"]
            assert (error["code"], error["message"]) == (-32602, "elicitation/create: _meta must be an object")
            assert error["data"]["rule"] == "_meta is an object when present"
            assert error["data"]["server"] == "x"
            # An object passes through untouched, beside the gateway's own key.
            answer = text(await client.call_tool("x__ask", {"params": {**request, "_meta": {"example.com/k": 1}}}))
            assert answer == {"action": "accept", "content": {"answer": "yes"}}
    assert len(human.seen) == 1 and human.seen[0].meta["example.com/k"] == 1
    assert not [r for r in caplog.records if r.levelname == "ERROR"], [r.getMessage() for r in caplog.records]


# -- answers are checked against the schema ---------------------------------------------------------


async def test_invalid_answer_is_asked_again_with_the_errors_then_accepted(upstream):
    schema = form(["email", "guests"], email={"type": "string", "format": "email"},
                  guests={"type": "integer", "minimum": 1, "maximum": 8})
    answers = iter([accept({"email": "not-an-email", "guests": 12}), accept({"email": "ada@example.com", "guests": 4})])
    human = Human(lambda params: next(answers))
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": schema, "message": "Book a table"}))
        assert result == {"action": "accept", "content": {"email": "ada@example.com", "guests": 4}}
        first, second = human.seen
        assert first.message == "[x] Book a table"
        assert ERRORS_META_KEY not in (first.meta or {})
        assert second.message.startswith("[x] Your previous answer was not accepted (")
        assert second.message.endswith("Book a table")
        assert "email:" in second.message and "guests:" in second.message
        previous = second.meta[ERRORS_META_KEY]
        assert {p["property"] for p in previous} == {"email", "guests"}
        assert all(p["message"] for p in previous)
        assert second.meta[SERVER_META_KEY] == "x"
        assert second.requested_schema == schema
        (summary,) = ended(gw)
        assert summary["state"] == "accepted" and summary["attempts"] == 2


async def test_answer_that_stays_invalid_fails_to_the_upstream_after_max_attempts(upstream):
    schema = form(["answer"], answer={"type": "string", "minLength": 3})
    human = Human(accept({"answer": "no", "extra": "field"}))
    async with gateway(config({"x": upstream()}, max_answer_attempts=3)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": schema, "report_errors": True}))
        error = result["error"]
        assert error["code"] == -32602
        assert error["data"]["server"] == "x"
        assert error["data"]["attempts"] == 3
        problems = error["data"]["errors"]
        assert any(p["property"] == "answer" and p["message"] == "must be at least 3 characters long" for p in problems)
        assert any(p["message"].startswith("unexpected field") and "extra" in p["message"] for p in problems)
        assert len(human.seen) == 3
        (summary,) = ended(gw)
        assert summary["state"] == "failed" and summary["attempts"] == 3


async def test_decline_and_cancel_pass_through_without_content(upstream):
    async with gateway(config({"x": upstream()})) as gw:
        for action in ("decline", "cancel"):
            human = Human(types.ElicitResult(action=action, content={"answer": "should be dropped"}))
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
                result = text(await client.call_tool("x__elicit", {}))
            assert result == {"action": action}
        assert [s["state"] for s in ended(gw)] == ["declined", "cancelled"]


async def test_client_sees_which_server_asks(upstream):
    human = Human(lambda params: accept({"answer": params.meta[SERVER_META_KEY]}))
    async with gateway(config({"x": upstream("x"), "other": stdio_upstream("other")})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            assert text(await client.call_tool("x__elicit", {"message": "Hi"}))["content"] == {"answer": "x"}
            assert text(await client.call_tool("other__elicit", {"message": "Hi"}))["content"] == {"answer": "other"}
    assert [p.message for p in human.seen] == ["[x] Hi", "[other] Hi"]
    assert [p.meta[SERVER_META_KEY] for p in human.seen] == ["x", "other"]


# -- capabilities -----------------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [{}, {"form": {}}], ids=["empty", "form"])
async def test_form_only_client_never_gets_url_mode(upstream, form_only_capability, declared):
    form_only_capability(types.ElicitationCapability.model_validate(declared))
    human = Human(lambda params: accept({"answer": "form works"}))
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            await client.call_tool("x__echo", {"text": "warm"})  # the per-session upstream is started
            started = time.monotonic()
            result = text(await client.call_tool(
                "x__elicit", {"mode": "url", "url": "https://example.com/x", "report_errors": True}))
            # At once rather than after the 300 s deadline; the bound leaves room for a loaded CI machine.
            assert time.monotonic() - started < 60
            error = result["error"]
            assert error["code"] == ELICITATION_UNDELIVERABLE
            assert error["data"]["mode"] == "url"
            assert error["data"]["clientModes"] == ["form"]
            assert error["data"]["server"] == "x"
            assert human.seen == []
            assert text(await client.call_tool("x__elicit", {}))["content"] == {"answer": "form works"}
            assert [p.mode for p in human.seen] == ["form"]
            (peer,) = gw.seen_peers
            assert capabilities_dict(peer.capabilities)["elicitation"] == declared
            assert elicitation_modes(peer.capabilities) == {"form"}
            if (own := gw.gateway.links["x"].connection_of(peer)) is not None:  # a per-session upstream is told
                assert own._advertised["elicitation"] == {"form": {}}  # what this client can do


async def test_client_without_elicitation_capability_gets_undeliverable_at_once(upstream):
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client:
            await client.call_tool("x__echo", {"text": "warm"})  # the per-session upstream is started
            started = time.monotonic()
            result = text(await client.call_tool("x__elicit", {"report_errors": True}))
            assert time.monotonic() - started < 60  # not the 300 s elicitation deadline
            assert result["error"]["code"] == ELICITATION_UNDELIVERABLE
            assert result["error"]["data"]["mode"] == "form"
            assert result["error"]["data"]["clientModes"] == []
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__elicit", {})
            assert caught.value.error.code == ELICITATION_UNDELIVERABLE
        assert ended(gw) == []  # refused before it began


# -- URL mode ---------------------------------------------------------------------------------------


async def test_url_mode_passes_through_and_complete_reaches_the_same_client(upstream):
    completed = anyio.Event()
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            notes.append(message.params.elicitation_id)
            completed.set()

    bystander_notes: list[Any] = []

    async def bystander_messages(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            bystander_notes.append(message)

    human = Human(types.ElicitResult(action="accept"))
    args = {"mode": "url", "url": "https://auth.example.com/start?state=abc&x=1", "elicitation_id": "el-42",
            "message": "Sign in", "complete": True}
    async with gateway(config({"x": upstream()})) as gw:
        async with (
            Client(gw.mcp_url, mode="legacy", elicitation_callback=Human(), message_handler=bystander_messages),
            Client(gw.mcp_url, mode="legacy", elicitation_callback=human, message_handler=on_message) as client,
        ):
            result = text(await client.call_tool("x__elicit", args))
            assert result == {"action": "accept"}
            (params,) = human.seen
            assert isinstance(params, types.ElicitRequestURLParams)
            assert params.url == args["url"]
            assert params.elicitation_id == "el-42"
            assert params.message == "[x] Sign in"
            assert params.meta[SERVER_META_KEY] == "x"
            with anyio.fail_after(30):
                await completed.wait()
            assert notes == ["el-42"]
            assert bystander_notes == []
            assert len(gw.gateway.broker.url_routes) == 0  # the route is used once
        (summary,) = ended(gw)
        assert summary["mode"] == "url" and summary["state"] == "accepted"


async def test_url_mode_decline_sends_no_content_and_keeps_no_route(upstream):
    human = Human(types.ElicitResult(action="decline"))
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool(
                "x__elicit", {"mode": "url", "elicitation_id": "el-d", "complete": True}
            ))
            assert result == {"action": "decline"}
            assert len(gw.gateway.broker.url_routes) == 0


async def test_url_elicitation_required_error_reaches_the_client_intact(upstream):
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=Human()) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__url_required", {"elicitation_id": "auth-7"})
            error = caught.value.error
            assert error.code == -32042
            assert error.message == "This request requires more information."
            assert error.data == {
                "elicitations": [
                    {
                        "mode": "url",
                        "elicitationId": "auth-7",
                        "url": "https://example.com/authorize",
                        "message": "Authorize access",
                    }
                ]
            }
            (peer,) = gw.seen_peers
            assert gw.gateway.broker.url_route("x", "auth-7", pop=False) == SessionTarget(peer)


# -- secrets in forms -------------------------------------------------------------------------------

SECRET_FORM = form(["user", "password"], user={"type": "string"}, password={"type": "string", "title": "Password"})


async def test_sensitive_fields_block_refuses_a_password_form(upstream):
    human = Human(accept({"user": "ada", "password": "hunter2"}))
    async with gateway(config({"x": upstream()}, sensitive_fields="block")) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": SECRET_FORM, "report_errors": True}))
            assert result["error"]["code"] == ELICITATION_SENSITIVE_BLOCKED
            assert result["error"]["data"]["fields"] == ["password"]
            assert result["error"]["data"]["server"] == "x"
            # A form without secrets still goes through.
            human._answer = accept({"answer": "fine"})
            assert text(await client.call_tool("x__elicit", {}))["content"] == {"answer": "fine"}
    assert len(human.seen) == 1


async def test_sensitive_fields_block_is_not_evaded_by_look_alikes_other_languages_or_descriptions():
    human = Human(accept({}))
    evasions = {"p\u0430ssword": {"type": "string"}, "passw0rd": {"type": "string"},
                "field": {"type": "string", "title": "Passwort"}, "contrasena": {"type": "string"},
                "otp": {"type": "string"}, "mnemonic": {"type": "string"},
                "answer": {"type": "string", "description": "the password of your bank account"},
                "kundennummer": {"type": "string"}}  # from extra_sensitive_words
    cfg = config({"x": stdio_upstream()}, sensitive_fields="block", extra_sensitive_words=["Kundennummer"])
    async with gateway(cfg) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            for name, prop in evasions.items():
                result = text(await client.call_tool(
                    "x__elicit", {"schema": form(**{name: prop}), "report_errors": True}
                ))
                assert result["error"]["code"] == ELICITATION_SENSITIVE_BLOCKED, name
                assert result["error"]["data"]["fields"] == [name]
    assert human.seen == []


async def test_sensitive_fields_warn_lets_a_password_form_through(upstream, caplog):
    human = Human(accept({"user": "ada", "password": "hunter2"}))
    async with gateway(config({"x": upstream()}, sensitive_fields="warn")) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": SECRET_FORM}))
    assert result == {"action": "accept", "content": {"user": "ada", "password": "hunter2"}}
    assert any("asks for secrets" in r.getMessage() and "password" in r.getMessage() for r in caplog.records)
    assert not any("hunter2" in r.getMessage() for r in caplog.records)  # the answer is never logged


# -- lifecycle --------------------------------------------------------------------------------------


async def test_deadline_times_out_to_the_upstream_and_cancels_the_clients_request(upstream):
    human = Human()  # never answers
    async with gateway(config({"x": upstream(elicitation_timeout=0.5)})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"report_errors": True}))
            assert result["error"]["code"] == ELICITATION_TIMEOUT
            assert result["error"]["data"]["server"] == "x"
            (summary,) = ended(gw)
            assert summary["state"] == "timed_out"
            assert result["error"]["data"]["elicitationId"] == summary["id"]
            with anyio.fail_after(30):
                await human.cancelled.wait()  # the client was told to stop asking


async def test_upstream_cancelling_its_elicitation_tells_the_client(upstream):
    human = Human()  # never answers
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("x__elicit_then_give_up", {"seconds": 0.5})
            assert result.content[0].text == "gave up"
            with anyio.fail_after(30):
                await human.cancelled.wait()  # the client was told to stop asking
            await wait_until(lambda: len(ended(gw)) == 1)
            assert ended(gw)[0]["state"] == "cancelled"


async def test_client_cancelling_the_call_ends_the_elicitation_and_the_upstream_learns(upstream):
    human = Human()
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "x__elicit", {})
                with anyio.fail_after(30):
                    await human.asked.wait()
                tg.cancel_scope.cancel()
            await wait_until(lambda: len(ended(gw)) == 1)
            (summary,) = ended(gw)
            assert summary["state"] == "cancelled"
            await assert_settled(gw)
            with anyio.fail_after(30):
                await human.cancelled.wait()
            with anyio.fail_after(30):  # the upstream's own handler saw the cancellation
                while not text(await client.call_tool("x__last_cancelled", {})):
                    await anyio.sleep(0.02)


async def test_client_disconnecting_ends_its_open_elicitation_cancelled(upstream):
    human = Human()
    async with gateway(config({"x": upstream()})) as gw:
        other = Human(accept({"answer": "still here"}))
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=other) as survivor:
            async with anyio.create_task_group() as tg:
                async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as leaver:

                    async def call() -> None:
                        with pytest.raises(MCPError):
                            await leaver.call_tool("x__elicit", {})

                    tg.start_soon(call)
                    with anyio.fail_after(30):
                        await human.asked.wait()
                    assert len(gw.gateway.broker.pending) == 1
                # The leaver is gone (session deleted) while its elicitation was open.
            await wait_until(lambda: len(ended(gw)) == 1)
            (summary,) = ended(gw)
            assert summary["state"] == "cancelled", summary["reason"]
            assert summary["reason"] == "the client disconnected"
            await assert_settled(gw)
            # Another client is unaffected.
            assert text(await survivor.call_tool("x__elicit", {}))["content"] == {"answer": "still here"}


async def test_upstream_dying_during_an_elicitation_fails_the_call_naming_it(upstream):
    human = Human()
    async with gateway(config({"x": upstream()})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            with anyio.fail_after(30):
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("x__die_during_elicit", {})
            error = caught.value.error
            assert "'x'" in error.message, error
            assert error.data["server"] == "x"
            assert error.code == UPSTREAM_GONE
            assert human.seen  # it had reached the client
            await assert_settled(gw)
            (summary,) = ended(gw)
            assert summary["state"] in ("cancelled", "failed")


# -- limits -----------------------------------------------------------------------------------------


async def test_max_pending_per_session(upstream):
    release = anyio.Event()

    async def answer(params: Any) -> types.ElicitResult:
        await release.wait()
        return accept({"answer": "first"})

    human = Human(answer)
    async with gateway(config({"x": upstream()}, max_pending_per_session=1)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            results: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def first() -> None:
                    results.append(text(await client.call_tool("x__elicit", {})))

                tg.start_soon(first)
                with anyio.fail_after(30):
                    await human.asked.wait()
                second = text(await client.call_tool("x__elicit", {"report_errors": True}))
                assert second["error"]["code"] == ELICITATION_LIMIT
                assert second["error"]["data"]["limit"] == "max_pending_per_session"
                assert second["error"]["data"]["value"] == 1
                release.set()
            assert results == [{"action": "accept", "content": {"answer": "first"}}]
            assert len(human.seen) == 1


async def test_rate_limit(upstream):
    human = Human(accept({"answer": "ok"}))
    async with gateway(config({"x": upstream()}, rate_limit_burst=2, rate_limit_per_minute=1)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            for _ in range(2):
                assert text(await client.call_tool("x__elicit", {}))["action"] == "accept"
            third = text(await client.call_tool("x__elicit", {"report_errors": True}))
            assert third["error"]["code"] == ELICITATION_RATE_LIMITED
            assert third["error"]["data"]["limit"] == "rate_limit_per_minute"
            assert third["error"]["data"]["retryAfterSeconds"] > 0
        # The bucket is per client: a new client starts full.
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            assert text(await client.call_tool("x__elicit", {}))["action"] == "accept"
    assert len(human.seen) == 3


# -- concurrency ------------------------------------------------------------------------------------


async def test_many_simultaneous_elicitations_each_reach_their_own_caller(http_upstream):
    clients, calls_per_server = 3, 17
    servers = ("s", "h")  # one stdio (per_session), one streamable HTTP (shared)
    total = clients * calls_per_server * len(servers)
    assert total >= 100
    up = http_upstream("tests.peers.py_server", "--name", "h")
    cfg = config(
        {"s": stdio_upstream("s"), "h": {"url": f"{up.url}/mcp", "era": "handshake"}},
        max_pending_per_session=500, rate_limit_burst=1000, rate_limit_per_minute=100_000,
    )
    all_asked = anyio.Event()
    presented = 0

    def human_for(me: str) -> Human:
        async def answer(params: Any) -> types.ElicitResult:
            nonlocal presented
            presented += 1
            if presented == total:
                all_asked.set()
            await all_asked.wait()  # every elicitation is open at the same time
            return accept({"answer": f"{me} answers {params.message}"})

        return Human(answer)

    results: dict[tuple[str, str, int], Any] = {}
    async with gateway(cfg) as gw:
        async with anyio.create_task_group() as outer:

            async def run_client(me: str) -> None:
                async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human_for(me)) as client:
                    async with anyio.create_task_group() as tg:
                        for server in servers:
                            for i in range(calls_per_server):

                                async def one(server: str = server, i: int = i) -> None:
                                    message = f"call {me}/{server}/{i}"
                                    result = await client.call_tool(f"{server}__elicit", {"message": message})
                                    results[(me, server, i)] = text(result)

                                tg.start_soon(one)

            with anyio.fail_after(60):
                for n in range(clients):
                    outer.start_soon(run_client, f"client-{n}")
        assert presented == total
        assert len(results) == total
        for (me, server, i), result in results.items():
            expected = f"{me} answers [{server}] call {me}/{server}/{i}"
            assert result == {"action": "accept", "content": {"answer": expected}}
        assert len(ended(gw, "accepted")) == total
        assert len({s["client"] for s in ended(gw)}) == clients


async def test_concurrent_calls_in_one_session_answered_out_of_order():
    """One client, one per-session stdio upstream, several calls in flight at once: each elicitation
    is answered only after the call answered before it has returned, newest first."""
    n = 8
    presented: list[tuple[str, anyio.Event]] = []
    all_presented = anyio.Event()
    returned: dict[str, anyio.Event] = {f"call {i}": anyio.Event() for i in range(n)}

    async def answer(params: Any) -> types.ElicitResult:
        mine = anyio.Event()
        presented.append((params.message, mine))
        if len(presented) == n:
            all_presented.set()
        await all_presented.wait()
        order = [m for m, _ in reversed(presented)]
        position = order.index(params.message)
        if position > 0:
            await returned[order[position - 1].removeprefix("[s] ")].wait()
        return accept({"answer": params.message})

    results: dict[str, Any] = {}
    async with gateway(config({"s": stdio_upstream("s")})) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=Human(answer)) as client:
            async with anyio.create_task_group() as tg:
                for i in range(n):

                    async def one(message: str = f"call {i}") -> None:
                        results[message] = text(await client.call_tool("s__elicit", {"message": message,
                                                                                      "report_errors": True}))
                        returned[message].set()

                    tg.start_soon(one)
    assert results == {m: {"action": "accept", "content": {"answer": f"[s] {m}"}} for m in returned}
