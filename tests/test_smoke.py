import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import gateway_stdio, stdio_server, write_config

pytestmark = pytest.mark.anyio


async def test_two_stdio_upstreams_merged_and_elicit(tmp_path):
    config = write_config(
        tmp_path,
        {"a": stdio_server("elicitgate.demo.server", era="handshake"), "b": stdio_server("elicitgate.demo.server")},
    )
    seen = []

    async def answer(ctx, params):
        seen.append(params)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=answer) as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        assert "a__confirm" in names and "b__confirm" in names
        result = await client.call_tool("a__confirm", {"question": "sure?"})
        assert result.content[0].text == "confirm: accepted {'ok': True}"
        result = await client.call_tool("b__confirm", {"question": "sure?"})
        assert result.content[0].text == "confirm: accepted {'ok': True}"
    assert seen[0].message == "[a] sure?"
