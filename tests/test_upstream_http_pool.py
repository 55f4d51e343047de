"""More concurrent eliciting calls on one streamable HTTP upstream than httpx2's default pool (100).

Each call in flight holds a connection to the upstream (its POST's response stream) and each answer
to an elicitation needs one more: with a capped pool the answers waited for the 30 s pool timeout.
"""

import json

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import inprocess_gateway

pytestmark = pytest.mark.anyio

CALLS = 120


async def test_more_concurrent_elicitations_than_the_default_pool(http_upstream):
    up = http_upstream("tests.peers.py_server", "--name", "h")
    config = {
        "mcpServers": {"h": {"url": f"{up.url}/mcp", "era": "handshake"}},
        "elicitation": {"max_pending_per_session": 1000, "rate_limit_burst": 1000},
    }

    async def answer(ctx, params):
        return types.ElicitResult(action="accept", content={"answer": "ok"})

    results: list[str] = []
    # The test's own client needs an uncapped pool for the same reason the gateway does.
    unlimited = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
                                   timeout=httpx2.Timeout(30.0, read=300.0))
    async with inprocess_gateway(config) as gw:
        async with Client(streamable_http_client(gw.mcp_url, http_client=unlimited), mode="legacy",
                          elicitation_callback=answer) as client:

            async def one() -> None:
                result = await client.call_tool("h__elicit", {})
                results.append(result.content[0].text)

            with anyio.fail_after(25):
                async with anyio.create_task_group() as tg:
                    for _ in range(CALLS):
                        tg.start_soon(one)
        assert gw.gateway.broker.pending == {}
    assert len(results) == CALLS
    assert all(json.loads(text) == {"action": "accept", "content": {"answer": "ok"}} for text in results)


def _connections_to(port: int) -> int:
    """TCP connections to `port` on this machine, open or closed: a closed one lingers in TIME_WAIT for a
    minute on the side that closed it (counted once, from the client's end)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                _, remote, state = row.split()[1:4]
                if int(remote.rsplit(":", 1)[1], 16) == port and state != "0A":
                    count += 1
    return count


async def test_sequential_calls_reuse_connections_to_the_upstream(http_upstream):
    """The SDK closes a POST's SSE stream at the event with the response, before the stream's end, which
    made httpcore drop the connection: every call opened a new one (an eliciting call two)."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    # More eliciting calls than the default rate limit's burst lets one client make in a few seconds.
    config = {"mcpServers": {"h": {"url": f"{up.url}/mcp", "era": "handshake"}},
              "elicitation": {"rate_limit_burst": 1000}}

    async def answer(ctx, params):
        return types.ElicitResult(action="accept", content={"answer": "ok"})

    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=answer) as client:
            await client.call_tool("h__elicit", {})
            opened = _connections_to(up.port)
            for _ in range(CALLS // 4):
                result = await client.call_tool("h__elicit", {})
                assert json.loads(result.content[0].text)["action"] == "accept"
            assert _connections_to(up.port) - opened < CALLS // 8
