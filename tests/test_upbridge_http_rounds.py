"""A handshake-era client's call through the gateway to the demo server in 2026-07-28 mode over HTTP, whose
`confirm` asks in an `input_required` round (issue #34): the question reaches the client as `elicitation/create`,
its answer goes back in the retry, and the result comes through, as before; on the upstream's side each request's
answer resumes its caller with no callback of the endpoint's in between (`UpstreamConnection.request` settles it in
its own step), and both POSTs go on one kept-alive connection. The real `mcp` SDK client, the in-process gateway's
HTTP face, the demo server as its own process."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp import Client

from elicitgate.wire import endpoint as endpoint_module
from tests.conftest import inprocess_gateway

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _CountedAsked(endpoint_module._Asked):  # pyright: ignore[reportPrivateUsage]
    made = 0

    def __init__(self, *args: Any) -> None:
        _CountedAsked.made += 1
        super().__init__(*args)


async def test_a_bridged_round_is_answered_and_its_upstream_requests_settled_by_their_callers(
    http_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    up = http_upstream("elicitgate.demo.server")
    config = {"mcpServers": {"demo": {"url": f"{up.url}/mcp", "era": "modern"}}}
    shown: list[types.ElicitRequestParams] = []

    async def human(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.append(params)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            await client.call_tool("demo__echo", {"text": "warm"})  # the upstream's connection is open and idle
            monkeypatch.setattr(endpoint_module, "_Asked", _CountedAsked)
            with anyio.fail_after(30):
                result = await client.call_tool("demo__confirm", {"question": "Deploy?"})
            monkeypatch.undo()
        link = gw.gateway.links["demo"]
        assert link.primary is not None
        client_connections = link.primary.endpoint._wire._client.connections  # pyright: ignore
    assert not result.is_error, result
    assert [params.message for params in shown] == ["[demo] Deploy?"]
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "confirm: accepted {'ok': True}"
    assert _CountedAsked.made == 0  # both of the call's upstream requests (the round's and the retry)
    assert client_connections == 1
    assert gw.gateway.broker.pending == {}
    assert [row["state"] for row in gw.gateway.broker.recent] == ["accepted"]
