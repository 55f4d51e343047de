"""What a handshake-era call through the stdio face no longer calls (issue #34), on a real gateway with the demo
server over stdio behind it and the face on memory wires (written at once, as the gateway's pipe does with room): a
result without `resultType` is not handed to `_handshake_result`, and a server of one era is not asked whether a call
learned to go 2026-07-28 (`DualEra.goes_modern`); answers as before, an elicitation's included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from elicitgate.config import build_config
from elicitgate.faces.dispatch import serve_connection
from elicitgate.faces.server import build_server
from elicitgate.gateway import Gateway
from elicitgate.wire.memory import MemoryWire
from tests.conftest import stdio_server
from tests.profiled import python_calls
from tests.test_pushed_pending import _next  # pyright: ignore[reportPrivateUsage]
from tests.test_unit_frameless_requests import at_once_wires

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def demo_face(tmp_path: Path, era: str) -> AsyncIterator[MemoryWire]:
    """A gateway in front of the demo server over stdio as an `era` upstream, its stdio face served on memory wires
    written at once; yields the client's end."""
    config = {
        "mcpServers": {"demo": stdio_server("elicitgate.demo.server", era=era)},
        "audit": {"url": f"sqlite:///{tmp_path / 'audit.db'}"},
    }
    gateway = Gateway(build_config(config, "test config"))
    face, client = at_once_wires()
    async with gateway.running(), anyio.create_task_group() as tg:
        server = build_server(gateway, face="stdio")
        tg.start_soon(
            serve_connection, server, face, server.create_initialization_options(), server.routes, server.modern
        )
        yield client
        client.close()
        tg.cancel_scope.cancel()


async def test_a_handshake_call_skips_the_era_checks_it_does_not_need(tmp_path: Path) -> None:
    async with demo_face(tmp_path, "handshake") as client:
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "raw", "version": "1"}}})  # fmt: skip
        await _next(client, lambda m: m.get("id") == 1)
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        echo = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "demo__echo", "arguments": {"text": "a"}}}
        await client.send({**echo, "id": 2})
        first = await _next(client, lambda m: m.get("id") == 2)
        with python_calls() as called:
            await client.send({**echo, "id": 3})
            again = await _next(client, lambda m: m.get("id") == 3)
        assert again["result"] == first["result"] and "content" in again["result"]
        assert "forward" in called and "_first_connection" in called
        assert "goes_modern" not in called and "_handshake_result" not in called
        # an elicitation's call, answered
        with python_calls() as called:
            await client.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                               "params": {"name": "demo__confirm", "arguments": {"question": "Proceed?"}}})  # fmt: skip
            push = await _next(client, lambda m: m.get("method") == "elicitation/create")
            await client.send({"jsonrpc": "2.0", "id": push["id"], "result": {"action": "decline"}})
            done = await _next(client, lambda m: m.get("id") == 4)
        assert "goes_modern" not in called and "_handshake_result" not in called
        assert "content" in done["result"]
