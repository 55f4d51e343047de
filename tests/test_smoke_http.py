import json

import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import PY, inprocess_gateway

pytestmark = pytest.mark.anyio


async def test_inprocess_http_gateway_with_http_upstream(http_upstream):
    up = http_upstream("tests.peers.py_server", "--name", "h")
    config = {"mcpServers": {"h": {"url": f"{up.url}/mcp", "era": "handshake"},
                             "s": {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "s"]}}}

    async def answer(ctx, params):
        return types.ElicitResult(action="accept", content={"answer": "42"})

    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=answer) as client:
            result = await client.call_tool("h__elicit", {})
            assert json.loads(result.content[0].text) == {"action": "accept", "content": {"answer": "42"}}
            result = await client.call_tool("s__elicit", {})
            assert json.loads(result.content[0].text) == {"action": "accept", "content": {"answer": "42"}}
        assert gw.gateway.broker.pending == {}
