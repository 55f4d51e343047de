"""A 2026-07-28 `mcp` SDK client through the HTTP face as `serve` builds it (`HttpFaceServer`, the face's own
protocol, `/mcp` past the outer middleware), in front of the demo server over streamable HTTP in the same era: its
calls answered as before (an echo, and an elicitation across two POSTs, recorded as accepted), none of its POSTs
through uvicorn's `run_asgi` (faces/stateless.py `StatelessRequests.at_body` serves each in a task of its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.config import build_config
from elicitgate.faces.http import HttpFaceServer, build_http_app
from elicitgate.gateway import Gateway
from elicitgate.web.client_address import ClientAddress
from elicitgate.web.http_protocol import HttpLimits, limited_protocol
from tests.conftest import free_port

pytestmark = pytest.mark.anyio

MODERN = b"2026-07-28"


class RunAsgi:
    """uvicorn's `run_asgi`, with the `MCP-Protocol-Version` of each request it ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.versions: list[bytes | None] = []
        original = RequestResponseCycle.run_asgi

        async def counted(cycle: RequestResponseCycle, app: Any) -> None:
            self.versions.append(dict(cycle.scope["headers"]).get(b"mcp-protocol-version"))
            await original(cycle, app)

        monkeypatch.setattr(RequestResponseCycle, "run_asgi", counted)


@asynccontextmanager
async def face_as_served(servers: dict[str, Any]) -> AsyncIterator[tuple[Gateway, str]]:
    """The gateway's HTTP face in this process, built as `elicitgate serve --http` builds it: its URL."""
    cfg = build_config({"mcpServers": servers}, "test_stateless_face_sdk")
    gateway = Gateway(cfg)
    port = free_port()
    app = build_http_app(gateway, f"http://127.0.0.1:{port}")
    config = uvicorn.Config(
        ClientAddress(app),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        http=limited_protocol(HttpLimits.of(cfg.http)),
        proxy_headers=False,
    )
    server = HttpFaceServer(config, app)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.02)
        try:
            yield gateway, f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True


async def accept(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"ok": True})


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_2026_07_28_client_echoes_and_answers_an_elicitation_with_no_post_through_run_asgi(
    http_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = http_upstream("elicitgate.demo.server")
    run_asgi = RunAsgi(monkeypatch)
    async with face_as_served({"demo": {"url": f"{demo.url}/mcp", "era": "modern"}}) as (gateway, url):
        async with Client(url, mode="2026-07-28", elicitation_callback=accept) as client:
            assert "demo__echo" in {tool.name for tool in (await client.list_tools()).tools}
            assert text(await client.call_tool("demo__echo", {"text": "hello"})) == "hello"
            confirmed = await client.call_tool("demo__confirm", {"question": "Proceed?"})
            assert text(confirmed) == "confirm: accepted {'ok': True}"
            with pytest.raises(MCPError) as refused:  # the upstream's error, passed on
                await client.call_tool("demo__no_such_tool", {})
            assert (refused.value.error.code, refused.value.error.message) == (-32603, "Internal server error")
        assert [record["state"] for record in gateway.broker.recent] == ["accepted"]
        assert gateway.rounds.parked == {}
    assert MODERN not in run_asgi.versions, run_asgi.versions
