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


async def test_the_http_face_turns_nagle_off_on_accepted_connections():
    """asyncio sets TCP_NODELAY only on sockets whose protocol is TCP; the face's socket is bound by the CLI
    before uvicorn serves it. With Nagle on, a response written as headers then body waited for the
    client's delayed ACK: 40 ms added to every 2026-07-28 request."""
    import asyncio
    import socket

    from elicitgate.cli_serve import claim_port

    sock = claim_port("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=sock)  # as uvicorn serves `sockets=[sock]`
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
