"""The stdio face's own transport (asyncio pipes, `faces/stdio_pipes.py`) against real processes.

Messages larger than the pipe buffers in both directions, lines split across writes, lines that do
not parse, a last line without its newline, and a stdin that is a regular file (the SDK's transport
serves it instead).
"""

from __future__ import annotations

import json
import subprocess

import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import PY, gateway_stdio, stdio_server, write_config

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _serve(config, stdin) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
        stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _answers(stdout: bytes) -> dict:
    return {m["id"]: m for m in map(json.loads, stdout.splitlines()) if "id" in m}


async def test_megabyte_messages_both_ways_with_an_elicitation(tmp_path):
    """1 MB arguments in (many reads per line) and 1 MB results out (the pipe fills: flow control)."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    text = "é" + "x" * 1_000_000 + "\u2603"

    async def answer(ctx, params):
        return types.ElicitResult(action="accept", content={"note": params.message})

    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=answer) as client:
        for _ in range(3):
            result = await client.call_tool("x__echo", {"text": text})
            assert result.content[0].text == text
        result = await client.call_tool(
            "x__elicit", {"message": "hello", "schema": {"type": "object", "properties": {"note": {"type": "string"}}}}
        )
        assert json.loads(result.content[0].text) == {"action": "accept", "content": {"note": "[x] hello"}}


def test_split_lines_bad_lines_and_stdin_ending_mid_line(tmp_path):
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    proc = _serve(config, subprocess.PIPE)
    ping = _line({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    proc.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + b"this is not json\n\n" + ping[:10])
    proc.stdin.flush()
    proc.stdin.write(ping[10:] + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    proc.stdin.flush()
    answers = {}
    while len(answers) < 3:  # each answer is a line; the process's exit ends the loop too
        line = proc.stdout.readline()
        if not line:
            break
        answers.update(_answers(line))
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}).encode())
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert answers[1]["result"]["serverInfo"]["name"] == "elicitgate"
    assert "x__echo" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert answers[3]["result"] == {}


def test_stdin_from_a_regular_file_is_served(tmp_path):
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_line(INITIALIZE) + _line(INITIALIZED))
    with requests.open("rb") as stdin:
        proc = _serve(config, stdin)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    # Requests still in flight when stdin ends are cancelled (the SDK's loop); the handshake is answered.
    assert _answers(out)[1]["result"]["serverInfo"]["name"] == "elicitgate"
