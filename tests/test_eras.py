"""Handshake-era (2025-11-25) and 2026-07-28 peers joined in all four directions, through the gateway.

Clients are `mcp.Client` in `legacy` and `2026-07-28` mode; upstreams are tests/peers/py_server.py
forced to one era (`era: handshake` pushes `elicitation/create`; `era: modern` returns
`input_required`). A raw httpx client speaks 2026-07-28 JSON-RPC by hand for the sealed-state checks.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp_types import HEADER_MISMATCH

from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, gateway_stdio, inprocess_gateway, stdio_server, write_config

pytestmark = pytest.mark.anyio

CLIENT_MODES = {"handshake": "legacy", "modern": "2026-07-28"}
DIRECTIONS = [(client, upstream) for client in CLIENT_MODES for upstream in ("handshake", "modern")]
MODERN = "2026-07-28"


def stdio(era: str, name: str) -> dict[str, Any]:
    return {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", name], "era": era}


def http(up: Any, era: str) -> dict[str, Any]:
    return {"url": f"{up.url}/mcp", "era": era}


def both_eras() -> dict[str, Any]:
    return {"mcpServers": {"handshake": stdio("handshake", "h"), "modern": stdio("modern", "m")}}


def text(result: types.CallToolResult) -> Any:
    assert not result.is_error, result
    return json.loads(result.content[0].text)


class Human:
    """An elicitation callback answering with `answer(params)`; remembers what it was shown."""

    def __init__(self, answer: Callable[[Any], types.ElicitResult]) -> None:
        self.answer = answer
        self.seen: list[Any] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params)
        return self.answer(params)


def settled(gw: Any) -> None:
    assert gw.gateway.broker.pending == {}
    assert gw.gateway.rounds.parked == {}


# -- the four directions x form / URL x accept / decline / cancel --------------------------------------


@pytest.mark.parametrize(("client_era", "upstream_era"), DIRECTIONS)
async def test_every_direction_mode_and_action(client_era, upstream_era):
    answers = {
        "accept": types.ElicitResult(action="accept", content={"answer": "yes"}),
        "decline": types.ElicitResult(action="decline"),
        "cancel": types.ElicitResult(action="cancel"),
    }
    chosen: list[str] = []
    human = Human(lambda params: answers[chosen[-1]] if params.mode == "form" or chosen[-1] != "accept"
                  else types.ElicitResult(action="accept"))
    tool = f"{upstream_era}__elicit"
    async with inprocess_gateway(both_eras()) as gw:
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], elicitation_callback=human) as client:
            for mode in ("form", "url"):
                for action in answers:
                    chosen.append(action)
                    args = {"message": f"{mode} {action}", "mode": mode, "url": "https://example.com/consent"}
                    got = text(await client.call_tool(tool, args))
                    expected = {"action": action}
                    if mode == "form" and action == "accept":
                        expected["content"] = {"answer": "yes"}
                    assert got == expected, (mode, action)
                    shown = human.seen[-1]
                    assert shown.message == f"[{upstream_era}] {mode} {action}"
                    assert shown.mode == mode
                    if mode == "url":
                        assert shown.url == "https://example.com/consent"
                        # 2026-07-28 URL mode has no elicitationId; the handshake era requires one.
                        assert (shown.elicitation_id is None) == (client_era == "modern")
        settled(gw)
        states = [s["state"] for s in gw.gateway.broker.recent]
        assert states == ["accepted", "declined", "cancelled"] * 2
        responders = {s["responder"] for s in gw.gateway.broker.recent}
        assert responders == {"input_required" if client_era == "modern" else "client"}


@pytest.mark.parametrize(("client_era", "upstream_era"), DIRECTIONS)
async def test_two_rounds_in_one_call(client_era, upstream_era):
    human = Human(lambda params: types.ElicitResult(action="accept", content={"answer": params.message}))
    async with inprocess_gateway(both_eras()) as gw:
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], elicitation_callback=human) as client:
            got = text(await client.call_tool(f"{upstream_era}__elicit_twice", {}))
        prefix = f"[{upstream_era}]"
        assert got == [
            {"action": "accept", "content": {"answer": f"{prefix} first"}},
            {"action": "accept", "content": {"answer": f"{prefix} second"}},
        ]
        settled(gw)


@pytest.mark.parametrize("upstream_era", ["handshake", "modern"])
async def test_invalid_answer_from_a_modern_client_is_asked_again_never_forwarded(upstream_era):
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]}
    answers = iter([{"age": -4}, {"age": 7}])
    human = Human(lambda params: types.ElicitResult(action="accept", content=next(answers)))
    async with inprocess_gateway(both_eras()) as gw:
        async with Client(gw.mcp_url, mode=MODERN, elicitation_callback=human) as client:
            got = text(await client.call_tool(f"{upstream_era}__elicit", {"schema": schema, "message": "Age?"}))
        assert got == {"action": "accept", "content": {"age": 7}}
        first, second = human.seen
        # 2026-07-28 input requests have no `_meta` (the SDK's wire surface drops it): the errors travel
        # in the message.
        assert first.meta is None and second.meta is None
        assert second.message.startswith(f"[{upstream_era}] Your previous answer was not accepted (age:")
        (summary,) = gw.gateway.broker.recent
        assert (summary["state"], summary["attempts"]) == ("accepted", 2)
        settled(gw)


# -- many bridged calls at once, each resumed by its own retry ---------------------------------------

CURRENT_CALL: contextvars.ContextVar[int] = contextvars.ContextVar("current_call")


async def test_fifty_concurrent_bridged_calls_each_resumed_by_its_own_retry(http_upstream):
    up = http_upstream("tests.peers.py_server", "--name", "h")
    config = {"mcpServers": {"h": http(up, "handshake")},
              "elicitation": {"rate_limit_burst": 100, "max_pending_per_session": 100}}

    async def answer(ctx: Any, params: Any) -> types.ElicitResult:
        # The 2026-07-28 client answers inside the call's own retry loop: the context is that call's.
        return types.ElicitResult(action="accept", content={"answer": f"call-{CURRENT_CALL.get()}"})

    results: dict[int, Any] = {}
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode=MODERN, elicitation_callback=answer) as client:

            async def one(i: int) -> None:
                CURRENT_CALL.set(i)
                results[i] = text(await client.call_tool("h__elicit", {"message": f"m{i}"}))

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for i in range(50):
                        tg.start_soon(one, i)
        assert results == {i: {"action": "accept", "content": {"answer": f"call-{i}"}} for i in range(50)}
        assert len(gw.gateway.broker.recent) == 50
        settled(gw)


# -- raw 2026-07-28 JSON-RPC: sealed state, parked calls that expire ---------------------------------


class RawModernClient:
    """Hand-written 2026-07-28 requests over HTTP (no SDK), to send what no SDK client would."""

    def __init__(self, url: str, name: str = "raw", capabilities: dict[str, Any] | None = None) -> None:
        self.url = url
        self.name = name
        self.capabilities = {"elicitation": {"form": {}, "url": {}}} if capabilities is None else capabilities
        self._ids = iter(range(1, 10_000))
        self.last_status: int | None = None

    async def call(self, http_client: httpx2.AsyncClient, tool: str, arguments: dict[str, Any],
                   headers: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": self.name, "version": "1.0"},
        }
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": meta, **extra}}
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN,
                   "mcp-method": "tools/call", "mcp-name": tool, **(headers or {})}
        response = await http_client.post(self.url, json=body, headers=headers, timeout=30)
        self.last_status = response.status_code
        return _last_jsonrpc_message(response)


def _last_jsonrpc_message(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        return [m for m in messages if "id" in m][-1]
    return response.json()


async def upstream_stats(client: Client, server: str) -> dict[str, Any]:
    return text(await client.call_tool(f"{server}__stats", {}))


@pytest.fixture
async def shared_upstream(http_upstream):
    """One handshake-era HTTP upstream process (shared by every client), and a legacy client to ask it."""
    return http_upstream("tests.peers.py_server", "--name", "h")


async def test_mcp_param_headers_are_checked_against_the_tool_in_the_merged_catalog():
    """A 2026-07-28 call's `Mcp-Param-*` headers must match its arguments (the SDK's check, fed the tool's
    schema by `Catalog.tool_input_schema`): the SDK client mirrors them and is served; a header that
    contradicts the body is refused before any upstream sees the call."""
    config = {"mcpServers": {"r": stdio_server("tests.peers.region_server")}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http_client:
        async with Client(gw.mcp_url, mode="2026-07-28") as client:
            routed = await client.call_tool("r__route", {"region": "eu-west"})
            assert routed.content[0].text == "routed to eu-west"
        raw = RawModernClient(gw.mcp_url)
        agreeing = await raw.call(http_client, "r__route", {"region": "eu-west"},
                                  headers={"mcp-param-region": "eu-west"})
        assert agreeing["result"]["content"][0]["text"] == "routed to eu-west"
        contradicting = await raw.call(http_client, "r__route", {"region": "eu-west"},
                                       headers={"mcp-param-region": "us-east"})
        assert contradicting["error"]["code"] == HEADER_MISMATCH, contradicting
        assert raw.last_status == 400
        assert "Mcp-Param-Region" in contradicting["error"]["message"]
        missing = await raw.call(http_client, "r__route", {"region": "eu-west"})
        assert missing["error"]["code"] == HEADER_MISMATCH, missing


async def test_tampered_expired_foreign_and_replayed_state_are_refused_before_the_upstream(shared_upstream):
    config = {"mcpServers": {"h": http(shared_upstream, "handshake")}, "bridging": {"state_ttl": 1.5}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http_client:
        raw = RawModernClient(gw.mcp_url)
        async with Client(gw.mcp_url, mode="legacy") as observer:
            first = await raw.call(http_client, "h__elicit", {"message": "hi"})
            result = first["result"]
            assert result["resultType"] == "input_required"
            (key, request), = result["inputRequests"].items()
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "[h] hi"
            state = result["requestState"]
            assert "eg.park" not in state  # sealed, not merely signed: the client cannot read it
            calls_before = (await upstream_stats(observer, "h"))["calls"]
            answer = {key: {"action": "accept", "content": {"answer": "42"}}}

            async def refused(response: dict[str, Any], reason: str | None = None) -> None:
                assert response["error"]["code"] == -32602, response
                assert response["error"]["message"] == "Invalid or expired requestState"
                if reason is not None:
                    assert response["error"]["data"]["reason"] == reason
                assert (await upstream_stats(observer, "h"))["calls"] == calls_before

            tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
            await refused(await raw.call(http_client, "h__elicit", {"message": "hi"},
                                         inputResponses=answer, requestState=tampered))
            other_args = await raw.call(http_client, "h__elicit", {"message": "changed"},
                                        inputResponses=answer, requestState=state)
            await refused(other_args)
            other_tool = await raw.call(http_client, "h__echo", {"message": "hi"},
                                        inputResponses=answer, requestState=state)
            await refused(other_tool)
            impostor = RawModernClient(gw.mcp_url, name="someone-else")
            await refused(await impostor.call(http_client, "h__elicit", {"message": "hi"},
                                              inputResponses=answer, requestState=state))

            done = await raw.call(http_client, "h__elicit", {"message": "hi"}, inputResponses=answer,
                                  requestState=state)
            assert json.loads(done["result"]["content"][0]["text"]) == {"action": "accept",
                                                                         "content": {"answer": "42"}}
            calls_before = (await upstream_stats(observer, "h"))["calls"]
            await refused(await raw.call(http_client, "h__elicit", {"message": "hi"}, inputResponses=answer,
                                         requestState=state),
                          "the call this requestState belongs to has ended or expired")

            second = (await raw.call(http_client, "h__elicit", {"message": "late"}))["result"]
            await anyio.sleep(1.6)  # past bridging.state_ttl
            calls_before = (await upstream_stats(observer, "h"))["calls"]
            await refused(await raw.call(http_client, "h__elicit", {"message": "late"},
                                         inputResponses={k: {"action": "decline"} for k in second["inputRequests"]},
                                         requestState=second["requestState"]))


async def test_a_parked_call_never_retried_expires_and_the_upstream_is_told_cancel(shared_upstream):
    config = {"mcpServers": {"h": {**http(shared_upstream, "handshake"), "elicitation_timeout": 0.5}}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http_client:
        raw = RawModernClient(gw.mcp_url)
        first = await raw.call(http_client, "h__elicit", {"message": "anyone?"})
        assert first["result"]["resultType"] == "input_required"
        async with Client(gw.mcp_url, mode="legacy") as observer:
            with anyio.fail_after(30):
                while (await upstream_stats(observer, "h"))["last_result"] != {"action": "cancel"}:
                    await anyio.sleep(0.05)
        (summary,) = gw.gateway.broker.recent
        assert summary["state"] == "timed_out"
        with anyio.fail_after(30):
            while gw.gateway.rounds.parked:  # its outcome waits for a retry only until bridging.state_ttl
                park = next(iter(gw.gateway.rounds.parked.values()))
                if park.outcome is not None:
                    gw.gateway.rounds.forget(park.id)  # stand in for that wait, which is minutes by default
                await anyio.sleep(0.01)
        settled(gw)


@pytest.mark.parametrize("upstream_era", ["handshake", "modern"])
async def test_a_modern_client_is_only_asked_in_modes_it_declared_on_that_request(http_upstream, upstream_era):
    up = http_upstream("tests.peers.py_server", "--name", "x")
    async with inprocess_gateway({"mcpServers": {"x": http(up, upstream_era)}}) as gw:
        async with httpx2.AsyncClient() as http_client:
            no_elicitation = RawModernClient(gw.mcp_url, capabilities={})
            got = await no_elicitation.call(http_client, "x__elicit", {})
            assert got["error"]["code"] == -32021, got
            assert got["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
            form_only = RawModernClient(gw.mcp_url, capabilities={"elicitation": {}})
            got = await form_only.call(http_client, "x__elicit", {"mode": "url"})
            assert got["error"]["code"] == -32021
            assert got["error"]["data"]["requiredCapabilities"] == {"elicitation": {"url": {}}}
            got = await form_only.call(http_client, "x__elicit", {"message": "form is fine"})
            assert got["result"]["resultType"] == "input_required"
            assert len(gw.gateway.broker.pending) == 1  # the form one waits for its retry
        refused = [s for s in gw.gateway.broker.recent]
        assert refused == []  # refused before they began: nothing was pending, nothing to end


async def test_unsupported_protocol_version_gets_32022(shared_upstream):
    async with inprocess_gateway({"mcpServers": {"h": http(shared_upstream, "handshake")}}) as gw:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "future", "version": "1"}}}}
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2099-01-01",
                   "mcp-method": "tools/list"}
        async with httpx2.AsyncClient() as http_client:
            response = _last_jsonrpc_message(await http_client.post(gw.mcp_url, json=body, headers=headers))
        assert response["error"]["code"] == -32022, response
        assert MODERN in response["error"]["data"]["supported"]


async def test_url_mode_retry_waits_for_the_upstreams_completion(shared_upstream):
    human = Human(lambda params: types.ElicitResult(action="accept"))
    async with inprocess_gateway({"mcpServers": {"h": http(shared_upstream, "handshake")}}) as gw:
        async with Client(gw.mcp_url, mode=MODERN, elicitation_callback=human) as client:
            args = {"mode": "url", "complete": True, "elicitation_id": "flow-7", "url": "https://example.com/pay"}
            got = text(await client.call_tool("h__elicit", args))
        assert got == {"action": "accept"}
        assert human.seen[0].url == "https://example.com/pay"
        settled(gw)


async def test_a_2026_client_over_the_stdio_face(tmp_path):
    human = Human(lambda params: types.ElicitResult(action="accept", content={"answer": "over stdio"}))
    config = write_config(tmp_path, both_eras()["mcpServers"])
    async with Client(gateway_stdio(config), mode=MODERN, elicitation_callback=human) as client:
        for upstream_era in ("handshake", "modern"):
            got = text(await client.call_tool(f"{upstream_era}__elicit_twice", {}))
            assert got == [{"action": "accept", "content": {"answer": "over stdio"}}] * 2
    assert [p.message for p in human.seen] == ["[handshake] first", "[handshake] second",
                                               "[modern] first", "[modern] second"]


@pytest.mark.parametrize(("client_era", "upstream_era"), DIRECTIONS)
async def test_sampling_input_requests_reach_a_client_that_declared_sampling(client_era, upstream_era):
    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompt = params.messages[0].content.text
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text=f"echo: {prompt}"),
                                         model="test-model")

    async with inprocess_gateway(both_eras()) as gw:
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], sampling_callback=sample) as client:
            result = await client.call_tool(f"{upstream_era}__sample", {"prompt": "ping"})
            assert result.content[0].text == "echo: ping"
        settled(gw)


async def test_a_2026_client_without_sampling_learns_what_the_server_needs():
    async with inprocess_gateway(both_eras()) as gw, httpx2.AsyncClient() as http_client:
        raw = RawModernClient(gw.mcp_url, capabilities={"elicitation": {}})
        for upstream_era in ("handshake", "modern"):
            got = await raw.call(http_client, f"{upstream_era}__sample", {})
            assert got["error"]["code"] == -32021, got
            assert got["error"]["data"]["requiredCapabilities"] == {"sampling": {}}
        settled(gw)


async def test_url_mode_from_a_2026_server_completes_for_a_handshake_client():
    completed = anyio.Event()
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            seen.append(message.params.elicitation_id)
            completed.set()

    human = Human(lambda params: types.ElicitResult(action="accept"))
    async with inprocess_gateway(both_eras()) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human, message_handler=on_message) as client:
            got = text(await client.call_tool("modern__elicit", {"mode": "url", "url": "https://example.com/k"}))
            assert got == {"action": "accept"}
            with anyio.fail_after(30):
                await completed.wait()
        minted = human.seen[0].elicitation_id
        assert minted.startswith("modern-") and seen == [minted]
        settled(gw)


@pytest.mark.parametrize("client_era", ["handshake", "modern"])
async def test_rounds_are_bounded(client_era):
    human = Human(lambda params: types.ElicitResult(action="accept", content={"answer": "again"}))
    config = {**both_eras(), "bridging": {"max_rounds": 1}}
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], elicitation_callback=human) as client:
            assert text(await client.call_tool("modern__elicit", {}))["action"] == "accept"  # one round is fine
            with pytest.raises(MCPError) as caught:
                await client.call_tool("modern__elicit_twice", {})
        assert caught.value.error.code == -32019
        assert caught.value.error.data["rule"] == "bridging.max_rounds"
        settled(gw)
