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
    while len(answers) < 4:  # each answer is a line; the process's exit ends the loop too
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
    # The line that is not JSON is answered as JSON-RPC says: a parse error, with a null id.
    assert answers[None]["error"]["code"] == -32700 and "not JSON" in answers[None]["error"]["message"]


def test_a_line_nested_too_deep_is_answered_and_the_gateway_serves_on(tmp_path):
    """Python's `json` ends in RecursionError on such a line, which once ended the gateway."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    proc = _serve(config, subprocess.PIPE)
    deep = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n"
    ping = _line({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    proc.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + deep + ping)
    proc.stdin.flush()
    answers: dict = {}
    while len(answers) < 3:
        line = proc.stdout.readline()
        if not line:
            break
        answers.update(_answers(line))
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
    assert answers[None]["error"]["code"] == -32700
    assert "nested more than 1024 deep" in answers[None]["error"]["message"]
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


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _exchange(config, messages: list[dict], expect: int) -> dict:
    """Write `messages` to a stdio gateway, read until `expect` answers came, then end its stdin."""
    proc = _serve(config, subprocess.PIPE)
    proc.stdin.write(b"".join(map(_line, messages)))
    proc.stdin.flush()
    answers: dict = {}
    while len(answers) < expect:
        line = proc.stdout.readline()
        if not line:
            break
        answers.update(_answers(line))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    return answers


def test_the_first_request_decides_the_era_and_what_came_before_it_is_served_too(tmp_path):
    """The face picks the connection's era itself (`faces.dispatch.serve_connection`, the SDK's rule): a first
    request with the 2026-07-28 envelope opens a 2026-07-28 connection, where `initialize` is refused; an
    `initialize` opens a handshake one, where an enveloped request is refused."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    modern = _exchange(config, [
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},  # before any request: replayed
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}},
        INITIALIZE | {"id": 2},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": MODERN_META}},
    ], expect=3)
    assert "2026-07-28" in modern[1]["result"]["supportedVersions"]
    assert modern[2]["error"]["code"] == -32022  # UNSUPPORTED_PROTOCOL_VERSION
    assert "x__echo" in {tool["name"] for tool in modern[3]["result"]["tools"]}

    handshake = _exchange(config, [
        INITIALIZE, INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ], expect=3)
    assert handshake[1]["result"]["serverInfo"]["name"] == "elicitgate"
    assert handshake[2]["error"]["code"] == -32600  # INVALID_REQUEST: no envelope on a handshake connection
    assert "x__echo" in {tool["name"] for tool in handshake[3]["result"]["tools"]}


def test_a_2026_07_28_connection_keeps_the_kernels_rules_without_its_kernel(tmp_path):
    """2026-07-28 requests are served from the gateway's own table (`faces.modern`), not the SDK's per-request
    kernel, with the kernel's verdicts: what the gateway reads of a call checked (-32602 in the kernel's words),
    a method this era does not define -32601, and every result with its `resultType`, cache hints and the
    `serverInfo` stamp."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="modern")},
                          audit={"enabled": False})
    call = {"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "x__echo", "arguments": {"text": "hi"}, "_meta": MODERN_META}}
    answers = _exchange(config, [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
        {**call, "id": 2, "params": {"arguments": {"text": "hi"}, "_meta": MODERN_META}},  # no name
        {**call, "id": 3, "params": {**call["params"], "arguments": ["hi"]}},  # arguments not an object
        {**call, "id": 4, "params": {**call["params"], "requestState": 7}},  # a state is a string
        {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"_meta": MODERN_META}},
        {"jsonrpc": "2.0", "id": 6, "method": "logging/setLevel", "params": {"level": "info", "_meta": MODERN_META}},
        {**call, "id": 7},
    ], expect=7)
    listed = answers[1]["result"]
    assert "x__echo" in {tool["name"] for tool in listed["tools"]}
    assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == ("complete", 0, "private")
    assert listed["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "elicitgate"
    for bad in (2, 3, 4):
        assert answers[bad]["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}, bad
    for undefined in (5, 6):
        assert answers[undefined]["error"]["code"] == -32601, answers[undefined]
    echoed = answers[7]["result"]
    assert echoed["content"][0]["text"] == "hi" and echoed["resultType"] == "complete"


def test_integers_beyond_64_bits_pass_through_exactly(tmp_path):
    """A request id and an argument larger than 64 bits (JSON puts no limit on integers) come back as they
    were sent: the gateway's parser (orjson) alone would have turned them into floats (`wire.codec`)."""
    big = 123456789012345678901234567890
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    answers = _exchange(config, [
        INITIALIZE, INITIALIZED,
        {"jsonrpc": "2.0", "id": big, "method": "tools/call",
         "params": {"name": "x__echo", "arguments": {"text": big}}},
    ], expect=2)
    assert answers[big]["result"]["content"][0]["text"] == str(big)


def test_a_handshake_era_call_carrying_request_state_is_still_checked_by_the_seal(tmp_path):
    """The requestState boundary (`bridging.sealing.RequestsOnly`) is loaded only for 2026-07-28 rounds, but a
    request that carries a `requestState` goes through it whatever era its connection is."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "x__echo", "arguments": {"text": "hi"}}}
    forged = {**call, "id": 2, "params": {**call["params"], "requestState": "forged"}}
    answers = _exchange(config, [INITIALIZE, INITIALIZED, forged, {**call, "id": 3}], expect=3)
    assert answers[2]["error"]["code"] == -32602
    assert answers[2]["error"]["message"] == "Invalid or expired requestState"
    assert answers[3]["result"]["content"][0]["text"] == "hi"


def test_routed_requests_past_the_sdk_kernel_keep_its_checks(tmp_path):
    """Once `initialize` is accepted, a handshake-era client's routed requests skip the SDK's kernel
    (`faces.dispatch._serve_directly`) but not its rules: params that do not fit the spec's schema for the
    client's version get -32602 as from the kernel, and a good call is relayed with its result sieved
    to the fields that version defines."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "x__echo", "arguments": {"text": "hi"}}}
    answers = _exchange(config, [
        INITIALIZE | {"id": 2}, INITIALIZED,
        {**call, "id": 3, "params": {"arguments": {"text": "hi"}}},  # no name
        {**call, "id": 4, "params": {"name": "x__echo", "arguments": ["hi"]}},  # arguments not an object
        {**call, "id": 5, "params": {**call["params"], "_meta": {"progressToken": {"not": "a token"}}}},
        {**call, "id": 6, "params": {**call["params"], "_meta": {"progressToken": "p1", "note": 1}}},
    ], expect=5)
    for bad in (3, 4, 5):
        assert answers[bad]["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}, bad
    assert answers[6]["result"]["content"][0]["text"] == "hi"
    assert set(answers[6]["result"]) <= {"content", "structuredContent", "isError", "_meta"}


def test_what_is_not_a_request_is_answered_with_invalid_request(tmp_path):
    """The face's own endpoint (`wire.endpoint.Endpoint`, serving): JSON that is not a JSON-RPC message, or a
    request whose id is neither a string nor a number, gets -32600 with a null id; the connection goes on."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    proc = _serve(config, subprocess.PIPE)
    proc.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + b"[1, 2]\n"
                     + _line({"jsonrpc": "2.0", "id": {"no": 1}, "method": "ping"})
                     + _line({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    proc.stdin.close()
    lines = [json.loads(line) for line in proc.stdout.read().splitlines()]
    proc.wait(timeout=120)
    invalid = [m["error"] for m in lines if m.get("id") is None and "error" in m]
    assert [e["code"] for e in invalid] == [-32600, -32600], lines
    assert "not a JSON-RPC message" in invalid[0]["message"]
    assert "string or a number" in invalid[1]["message"]
    assert {"jsonrpc": "2.0", "id": 2, "result": {}} in lines


def _read_until(proc: subprocess.Popen, wanted) -> dict:
    while line := proc.stdout.readline():
        message = json.loads(line)
        if wanted(message):
            return message
    raise AssertionError(f"the gateway ended first: {proc.stderr.read().decode()[-2000:]}")


ELICIT = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
          "params": {"name": "x__elicit", "arguments": {"message": "wait"}}}
INITIALIZE_ELICITING = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {"elicitation": {}}}}


def _asked(tmp_path) -> tuple[subprocess.Popen, dict]:
    """A stdio gateway serving `ELICIT`, and the question it put to us."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    proc = _serve(config, subprocess.PIPE)
    proc.stdin.write(_line(INITIALIZE_ELICITING) + _line(INITIALIZED) + _line(ELICIT))
    proc.stdin.flush()
    return proc, _read_until(proc, lambda m: m.get("method") == "elicitation/create")


def test_a_cancelled_call_is_not_answered_and_its_question_is_withdrawn(tmp_path):
    proc, asked = _asked(tmp_path)
    proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}))
    proc.stdin.flush()
    withdrawn = _read_until(proc, lambda m: m.get("method") == "notifications/cancelled")
    assert withdrawn["params"]["requestId"] == asked["id"]
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
    proc.stdin.flush()
    between = []
    later = _read_until(proc, lambda m: between.append(m) or ("id" in m and "method" not in m))
    assert later == {"jsonrpc": "2.0", "id": 8, "result": {}}  # nothing for 7 came before it
    proc.stdin.close()
    rest = between + [json.loads(line) for line in proc.stdout.read().splitlines()]
    proc.wait(timeout=120)
    assert not [m for m in rest if m.get("id") == 7]
    assert not [m for m in rest if m.get("method") == "notifications/cancelled"]  # withdrawn once, not twice


def test_a_call_in_flight_when_stdin_ends_is_answered_connection_closed(tmp_path):
    proc, _ = _asked(tmp_path)
    proc.stdin.close()
    answer = _read_until(proc, lambda m: m.get("id") == 7)
    proc.wait(timeout=120)
    assert answer["error"]["code"] == -32000 and answer["error"]["message"] == "Connection closed"


def test_the_replay_limit_is_the_sdks():
    from mcp.server import runner

    from elicitgate import _compat
    assert _compat.PRE_REQUEST_REPLAY_LIMIT == runner._PRE_REQUEST_REPLAY_LIMIT
