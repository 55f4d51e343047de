"""The gateway's upstream timeout measures the upstream, not the human."""

import json

import anyio
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, inprocess_gateway

pytestmark = pytest.mark.anyio


def _config(request_timeout: float) -> dict:
    return {
        "mcpServers": {
            "x": {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "x"], "era": "handshake",
                  "request_timeout": request_timeout}
        }
    }


async def test_human_time_does_not_count_against_request_timeout():
    async def slow_human(ctx, params):
        await anyio.sleep(1.2)  # the person takes longer than the upstream request timeout
        return types.ElicitResult(action="accept", content={"answer": "late but fine"})

    async with inprocess_gateway(_config(0.8)) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=slow_human) as client:
            result = await client.call_tool("x__elicit", {})
            assert json.loads(result.content[0].text)["content"] == {"answer": "late but fine"}
        assert gw.gateway.broker.pending == {}


async def test_upstream_that_is_slow_itself_times_out_with_a_named_error():
    async with inprocess_gateway(_config(0.5)) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__sleep", {"seconds": 5})
            assert caught.value.error.code == -32011
            assert caught.value.error.data["server"] == "x"
