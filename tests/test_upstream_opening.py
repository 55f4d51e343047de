"""Many clients opening their per-session upstream sessions at once take turns (`max_opening_sessions`), so a
server that sets sessions up slowly opens every one within `connect_timeout`, counted from its own turn."""

from __future__ import annotations

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import PY, Process, free_port, inprocess_gateway

pytestmark = pytest.mark.anyio

CLIENTS = 40
INITIALIZE_SECONDS = 0.15
"""Each initialize the server takes, one after another: all 40 at once would end after 6 s."""
CONNECT_TIMEOUT = 2.5
"""What one opening may take: ample for 2 at a time (0.3 s), far too little for the 40th of 40 at once."""


async def test_forty_clients_opening_sessions_of_a_slow_server_at_once_all_get_theirs() -> None:
    port = free_port()
    argv = [PY, "-m", "tests.peers.slow_init_server", "--http", f"127.0.0.1:{port}",
            "--initialize-seconds", str(INITIALIZE_SECONDS)]
    upstream = Process(argv, port)
    config = {"mcpServers": {"h": {"url": f"{upstream.url}/mcp", "era": "handshake", "max_opening_sessions": 2}},
              "upstream_retry": {"connect_timeout": CONNECT_TIMEOUT}}
    answers: dict[int, str] = {}

    async def client(gw_url: str, n: int, ready: anyio.Event, go: anyio.Event) -> None:
        async with Client(gw_url, mode="legacy") as session:
            ready.set()
            await go.wait()
            result = await session.call_tool("h__echo", {"text": str(n)})  # opens this client's own session
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            answers[n] = block.text

    try:
        async with inprocess_gateway(config) as gw:
            go = anyio.Event()
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    readies = []
                    for n in range(CLIENTS):
                        ready = anyio.Event()
                        readies.append(ready)
                        tg.start_soon(client, gw.mcp_url, n, ready, go)
                    for ready in readies:  # every client connected to the gateway: their calls start together
                        await ready.wait()
                    go.set()
            assert answers == {n: str(n) for n in range(CLIENTS)}
        seen = httpx2.get(f"{upstream.url}/initializes").json()
        assert seen["total"] == CLIENTS + 1  # and the gateway's own primary session
        assert seen["most"] <= 2
    finally:
        upstream.stop()
