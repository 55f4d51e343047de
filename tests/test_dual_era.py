"""Servers that serve both eras, with tools written in all three styles (issue #31; docs/routing.md).

The peer is one `mcp` SDK low-level `Server` (tests/peers/dual_style_server.py): a tool that returns a
hand-written `InputRequiredResult` (2026-07-28 only), a push-style tool (handshake only) and a tool with
the SDK's `Resolve` / `Elicit` markers (both). With default settings every one works through the
gateway, over stdio and streamable HTTP, for clients of both eras; a push-style tool is never run twice.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, ROOT, Process, free_port, inprocess_gateway, write_config

pytestmark = pytest.mark.anyio

CLIENT_MODES = {"handshake": "legacy", "modern": "2026-07-28"}
PEER = "tests.peers.dual_style_server"
DATE = "2026-08-01"


class Human:
    """Answers each form with the next number of seats, and remembers what it was asked."""

    def __init__(self) -> None:
        self.seats = 0
        self.seen: list[str] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params.message)
        return types.ElicitResult(action="accept", content={"seats": self.seats})


@pytest.fixture
def dual_server() -> Any:
    """The dual-style server as an `mcpServers` entry with no settings but where it runs."""
    started: list[Process] = []

    def entry(transport: str) -> dict[str, Any]:
        if transport == "http":
            port = free_port()
            started.append(Process([PY, "-m", PEER, "--http", f"127.0.0.1:{port}"], port))
            return {"url": f"{started[-1].url}/mcp"}
        return {"command": PY, "args": ["-m", PEER], "cwd": str(ROOT)}

    yield entry
    for proc in started:
        proc.stop()


async def ran(client: Client, server: str = "dual") -> dict[str, int]:
    """How often each tool ran in the server process the client's calls reach on its handshake-era connection."""
    stats = await client.call_tool(f"{server}__stats", {})
    return json.loads(stats.content[0].text)


@pytest.mark.parametrize("client_era", ["handshake", "modern"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_mixing_all_three_styles_works_for_both_client_eras_with_default_config(
    dual_server, transport, client_era
):
    human = Human()
    async with inprocess_gateway({"mcpServers": {"dual": dual_server(transport)}}) as gw:
        link = gw.gateway.links["dual"]
        assert link.status()["era"] == "handshake"
        async with Client(gw.mcp_url, mode=CLIENT_MODES[client_era], elicitation_callback=human) as client:
            # mrtr_book twice: the first call learns (made again in 2026-07-28), the second goes there at once
            for seats, tool in enumerate(["mrtr_book", "push_book", "resolve_book", "mrtr_book"], start=2):
                human.seats = seats
                result = await client.call_tool(f"dual__{tool}", {"date": DATE})
                assert not result.is_error, (tool, result)
                assert result.content[0].text == f"{tool} booked {seats} seats on {DATE}"
            handshake_side = await ran(client)
        styles = ("mrtr", "push", "resolve", "mrtr")
        assert human.seen == [f"[dual] How many seats on {DATE}? ({style})" for style in styles]
        status = link.status()
        assert status["modernCalls"] == ["tools/call mrtr_book"]
        assert "also serves 2026-07-28" in status["eraReason"]
        assert gw.gateway.broker.pending == {}
        assert gw.gateway.rounds.parked == {}
    # Push-style and Resolve tools ran once per call, on the handshake-era connection. Over stdio its process
    # saw mrtr_book once (the first call's attempt); over HTTP one process also served 2026-07-28: the
    # attempt, then two rounds per call.
    assert handshake_side == {"push_book": 1, "resolve_book": 1, "mrtr_book": 1 if transport == "stdio" else 5}


async def test_a_call_is_made_again_only_when_it_is_safe(dual_server):
    """Never a push-style tool's (it asked during the call), never with `era: handshake`, and a tool whose
    result no era takes is tried in 2026-07-28 once, then no more."""
    entry = dual_server("http")
    config = {"mcpServers": {"dual": entry, "forced": {**entry, "era": "handshake"}}}
    human = Human()
    human.seats = 1
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:

            async def fails(tool: str) -> None:
                with pytest.raises(MCPError) as caught:
                    await client.call_tool(tool, {"date": DATE})
                error = caught.value.error
                assert (error.code, error.message) == (-32603, "Handler returned an invalid result")

            await fails("dual__push_then_return_input_required")
            assert (await ran(client))["push_then_return_input_required"] == 1
            assert human.seen == [f"[dual] How many seats on {DATE}? (push)"]

            await fails("dual__invalid_result")
            assert (await ran(client))["invalid_result"] == 2  # the attempt, and once in 2026-07-28
            await fails("dual__invalid_result")
            assert (await ran(client))["invalid_result"] == 3  # learned: not made again

            await fails("forced__mrtr_book")
            assert (await ran(client, "forced"))["mrtr_book"] == 1

            prompt = await client.get_prompt("dual__mrtr_greeting")  # prompts learn as tools do
            assert prompt.messages[0].content.text == "a table for 1"
        link = gw.gateway.links["dual"]
        assert link.status()["modernCalls"] == ["prompts/get mrtr_greeting"]
        assert link.dual.learned == {
            ("tools/call", "invalid_result"): "handshake",
            ("prompts/get", "mrtr_greeting"): "modern",
        }
        assert gw.gateway.links["forced"].status()["eraReason"] == (
            "handshake (era: handshake in the config: every call, none in 2026-07-28)"
        )

        # A link that connects anew forgets: the server behind it may have changed.
        before = link.primary
        assert before is not None
        await before.close()
        with anyio.fail_after(30):
            while link.primary is None or link.primary is before:
                await anyio.sleep(0.05)
        assert link.dual.learned == {}
        assert "whether it also serves 2026-07-28 is asked when a call first needs it" in link.status()["eraReason"]


def test_doctor_says_which_era_each_server_gets_and_why(tmp_path):
    server = {"command": PY, "args": ["-m", PEER], "cwd": str(ROOT)}
    config = write_config(tmp_path, {"dual": server, "forced": {**server, "era": "handshake"}})
    proc = subprocess.run([PY, "-m", "elicitgate.cli", "doctor", "--config", str(config)],
                          capture_output=True, text=True, timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (ROOT / "docs" / "routing.md").read_text()
    documented = page.split("shows which era each server gets and why, for instance:\n\n```\n")[1].split("```")[0]
    assert "also serves 2026-07-28" in documented
    assert documented in proc.stdout  # docs/routing.md shows the dual server's lines as they are
    out = " ".join(proc.stdout.split())  # wrapped at 100 columns
    assert ("forced (stdio): up, handshake 2025-11-25 6 tools, 1 prompts, 0 resources "
            "era: handshake (era: handshake in the config: every call, none in 2026-07-28)") in out
