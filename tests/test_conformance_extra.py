"""Our own conformance scenarios, for what the pinned suite lacks, each run against the conformance server
(tests/conformance/server.py) directly and through the gateway (HTTP upstream, stdio upstream): what a
client sees must be the same, up to the `[server]` prefix the gateway puts on elicitation messages.

Mapping to what tests/test_broker.py already covers is in docs/conformance.md; these add the
direct-vs-gateway comparison for URL mode (SEP-1036, as the suite's next URL-mode scenario checks it),
a completion after -32042 reaching the client that got the error, decline/cancel in both modes,
clients that lack a capability (elicitation, URL mode, sampling), and an upstream that closes its SSE
response stream mid-call (SEP-1699; the suite's own scenario speaks 2025-03-26 there and so never
gets the stream closed).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import anyio
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conformance import fixtures as fx
from tests.conftest import PY, inprocess_gateway
from tests.test_broker import Human, form_only_capability  # noqa: F401 - form_only_capability is a fixture

pytestmark = pytest.mark.anyio

SERVER = "tests.conformance.server"


class Endpoint(NamedTuple):
    target: str
    """direct, gateway-http or gateway-stdio"""
    url: str


@pytest.fixture(params=["direct", "gateway-http", "gateway-stdio"])
async def endpoint(request: pytest.FixtureRequest, http_upstream: Any) -> AsyncIterator[Endpoint]:
    """What a client talks to: the server itself, or the gateway in front of it."""
    if request.param == "gateway-stdio":
        upstream: dict[str, Any] = {"command": PY, "args": ["-m", SERVER]}
    else:
        server = http_upstream(SERVER)
        if request.param == "direct":
            yield Endpoint(request.param, f"{server.url}/mcp")
            return
        upstream = {"url": f"{server.url}/mcp"}
    config = {
        "mcpServers": {"conformance": {**upstream, "era": "handshake"}},
        "namespacing": {"prefix_single_server": False},
    }
    async with inprocess_gateway(config) as gw:
        yield Endpoint(request.param, gw.mcp_url)


def tool_json(result: types.CallToolResult) -> Any:
    assert not result.is_error, result
    return json.loads(result.content[0].text)


class Completions:
    """A message handler that collects `notifications/elicitation/complete` and lets a test await one."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.ids.append(message.params.elicitation_id)
            self.arrived.set()

    async def wait(self) -> list[str]:
        with anyio.fail_after(30):
            await self.arrived.wait()
        return self.ids


async def test_url_mode_request_answer_completion_and_url_required(endpoint: Endpoint) -> None:
    human = Human(types.ElicitResult(action="accept"))
    completions = Completions()
    async with Client(endpoint.url, mode="legacy", elicitation_callback=human, message_handler=completions) as client:
        asked = tool_json(await client.call_tool("test_elicitation_sep1036_url", {}))
        assert asked["action"] == "accept"
        params = human.seen[0]
        assert isinstance(params, types.ElicitRequestURLParams)
        assert params.mode == "url" and params.url == fx.URL
        assert params.elicitation_id == asked["elicitationId"]
        assert params.message.endswith("Please complete authorization")

        completed = tool_json(await client.call_tool("test_elicitation_sep1036_complete", {}))
        assert await completions.wait() == [completed["elicitationId"]]

        with pytest.raises(MCPError) as caught:
            await client.call_tool("test_elicitation_sep1036_error", {"elicitationId": "auth-1"})
        assert caught.value.error.code == types.URL_ELICITATION_REQUIRED
        assert caught.value.error.data == {
            "elicitations": [{"mode": "url", "elicitationId": "auth-1", "url": fx.URL, "message": "Authorize access"}]
        }


async def test_completion_after_url_required_reaches_the_client_that_got_the_error(endpoint: Endpoint) -> None:
    requester, bystander = Completions(), Completions()
    async with (
        Client(endpoint.url, mode="legacy", elicitation_callback=Human(), message_handler=requester) as client,
        Client(endpoint.url, mode="legacy", elicitation_callback=Human(), message_handler=bystander) as other,
    ):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("test_elicitation_sep1036_error", {"elicitationId": "auth-9"})
        assert caught.value.error.code == types.URL_ELICITATION_REQUIRED
        # The out-of-band flow ends; someone else's call makes the server say so.
        await other.call_tool("finish_url_elicitation", {"elicitationId": "auth-9"})
        assert await requester.wait() == ["auth-9"]
        await other.list_tools()  # one more round trip for the bystander
        assert bystander.ids == []


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server_without_content(endpoint: Endpoint, action: str) -> None:
    human = Human(types.ElicitResult(action=action))
    async with Client(endpoint.url, mode="legacy", elicitation_callback=human) as client:
        form = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        assert not form.is_error
        assert form.content[0].text == f"Elicitation completed: action={action}, content={{}}"
        url = tool_json(await client.call_tool("test_elicitation_sep1036_url", {}))
        assert url["action"] == action
    assert [p.mode for p in human.seen] == ["form", "url"]


async def test_clients_without_a_capability_get_an_error_result_and_are_never_asked(
    endpoint: Endpoint,
    form_only_capability: Any,  # noqa: F811 - the fixture imported above
) -> None:
    async with Client(endpoint.url, mode="legacy") as client:  # declares neither elicitation nor sampling
        for tool, args in [("test_elicitation", {"message": "Who are you?"}), ("test_sampling", {"prompt": "Hi"})]:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, result)
    form_only_capability(types.ElicitationCapability(form=types.FormElicitationCapability()))
    human = Human(types.ElicitResult(action="accept"))
    async with Client(endpoint.url, mode="legacy", elicitation_callback=human) as client:
        result = await client.call_tool("test_elicitation_sep1036_url", {})
        assert result.is_error, result
    assert human.seen == []


async def test_a_call_whose_response_stream_the_upstream_closes_still_completes(endpoint: Endpoint) -> None:
    async with Client(endpoint.url, mode="legacy") as client:
        with anyio.fail_after(20):
            result = await client.call_tool("test_reconnection", {})
    assert not result.is_error, result
    over_http = endpoint.target != "gateway-stdio"  # a stdio upstream has no stream to close
    assert result.content[0].text == "Reconnection test completed (stream " + (
        "closed mid-call)" if over_http else "kept)"
    )
