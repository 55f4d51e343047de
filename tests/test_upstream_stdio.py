"""Stdio upstreams on the gateway's own line transport (`wire.stdio.StdioWire`) against a real
server process: what a real server's stdout can hold besides JSON-RPC. (Large messages: test_stdio_face;
a server dying mid-call: test_core.)"""

from __future__ import annotations

import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import PY, serve_http, write_config

pytestmark = pytest.mark.anyio


def _wrapped_demo(shell: str) -> dict[str, object]:
    """The demo server (the SDK's lowlevel `Server` over stdio) started by a shell line, as launchers do."""
    return {"command": "sh", "args": ["-c", f"{shell}; exec {PY} -m elicitgate.demo.server"], "era": "handshake"}


async def test_a_banner_on_an_upstreams_stdout_is_reported_and_the_server_still_serves(tmp_path) -> None:
    config = write_config(
        tmp_path, {"demo": _wrapped_demo("echo 'demo server starting'; echo; echo '[1, 2]'")}, audit={"enabled": False}
    )
    gateway = serve_http(config)

    async def answer(ctx, params):
        return types.ElicitResult(action="accept", content={"ok": True})

    try:
        async with Client(f"{gateway.url}/mcp", mode="legacy", elicitation_callback=answer) as client:
            echoed = await client.call_tool("demo__echo", {"text": "héllo ☃"})
            confirmed = await client.call_tool("demo__confirm", {"question": "sure?"})
    finally:
        log = gateway.stop()
    assert echoed.content[0].text == "héllo ☃"
    assert confirmed.content[0].text == "confirm: accepted {'ok': True}"
    assert "upstream 'demo' sent a line that is not JSON" in log and "demo server starting" in log
    assert "upstream 'demo' sent a line that is not a JSON-RPC message" in log and "[1, 2]" in log
    assert "Traceback" not in log

