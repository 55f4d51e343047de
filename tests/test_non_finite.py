"""NaN and Infinity are not JSON numbers (RFC 8259), though Python's `json` writes them.

An answer holding one is refused like any invalid answer (asked again with the error while time remains) and
never reaches the server, whichever way it comes: a handshake client's response on stdio, a 2026-07-28 retry's
`inputResponses`, the admin API. A request holding one anywhere else is refused with -32602 naming where; a
response holding one becomes an error for its caller. (NaN satisfies every `minimum` and `maximum`, and
written on it would arrive as `null`.)
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import httpx2
import pytest

from mcp import Client

from elicitgate.elicitation.meta import ERRORS_META_KEY
from elicitgate.elicitation.schema import NON_FINITE_TEXT, answer_problems, check_requested_schema
from elicitgate.errors import NonFiniteParams, NotFinite
from elicitgate.wire import codec
from elicitgate.wire.framing import parse_message
from tests.conftest import stdio_server, write_config
from tests.hosted_helpers import AUTH, next_pending
from tests.test_broker import gateway, stdio_upstream, text
from tests.test_eras import MODERN, RawModernClient
from tests.test_hosted import Call, hosted_config
from tests.test_stdio_face import INITIALIZE_ELICITING, INITIALIZED, _line, _read_until, _serve

pytestmark = pytest.mark.anyio

NUMBER_FORM = {"type": "object", "properties": {"n": {"type": "number", "minimum": 0, "maximum": 10}},
               "required": ["n"]}


def _raw_line(message: dict[str, Any]) -> bytes:
    """What Python's `json` writes for a message holding NaN: `NaN`, a literal JSON does not have."""
    line = json.dumps(message).encode() + b"\n"
    assert b"NaN" in line or b"Infinity" in line
    return line


# -- units -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), [1.0, float("nan")]])
def test_answer_check_refuses_non_finite_numbers(value):
    (problem,) = answer_problems(NUMBER_FORM, {"n": value})
    assert problem == {"property": "n", "message": NON_FINITE_TEXT}
    assert answer_problems(NUMBER_FORM, {"n": 10}) == []


def test_a_schema_with_a_non_finite_bound_is_not_a_form_mode_schema():
    schema = {"type": "object", "properties": {"n": {"type": "number", "maximum": float("inf")}}}
    (problem,) = check_requested_schema(schema, max_properties=10)
    assert (problem.property, problem.rule) == (
        "n", "maximum must be a finite number (NaN and Infinity are not JSON numbers)"
    )


@pytest.mark.parametrize("text", [b'{"n": NaN}', b'{"n": Infinity}', b'{"n": -Infinity}', b'{"n": [1e400]}'])
def test_the_codec_says_when_json_holds_a_number_json_does_not_have(text):
    with pytest.raises(NotFinite) as caught:
        codec.loads(text)
    assert codec.first_non_finite(caught.value.value) in ("n", "n[0]")
    assert codec.loads(b'{"n": 1e300, "big": 123456789012345678901234}') == {
        "n": 1e300, "big": 123456789012345678901234
    }


def test_messages_with_non_finite_numbers():
    request = parse_message(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": {"n": NaN}}}')
    assert isinstance(request, NonFiniteParams) and request.request_id == 3
    assert "params.arguments.n" in str(request)
    retry = parse_message(b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", '
                          b'"params": {"inputResponses": {"q": {"action": "accept", "content": {"n": NaN}}}}}')
    assert isinstance(retry, dict)  # the answer goes on to the answer check
    answer = parse_message(b'{"jsonrpc": "2.0", "id": 5, "result": {"action": "accept", "content": {"n": NaN}}}')
    assert isinstance(answer, dict)
    result = parse_message(b'{"jsonrpc": "2.0", "id": 6, "result": {"structuredContent": {"n": Infinity}}}')
    assert isinstance(result, dict) and result["id"] == 6
    assert "result.structuredContent.n" in result["error"]["message"]
    tool = parse_message(b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "n": NaN}]}}')
    assert isinstance(tool, dict) and tool["id"] == 7  # a tool result's content is no answer: refused, not null
    assert "result.content[0].n" in tool["error"]["message"]


# -- real clients over real transports --------------------------------------------------------------------


def test_a_nan_answer_on_stdio_is_asked_again_and_never_reaches_the_server(tmp_path):
    """A raw JSON-RPC client on the stdio face answers with the line Python's `json` writes for NaN."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"enabled": False})
    proc = _serve(config, subprocess.PIPE)
    try:
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "x__elicit", "arguments": {"message": "how many?", "schema": NUMBER_FORM}}}
        proc.stdin.write(_line(INITIALIZE_ELICITING) + _line(INITIALIZED) + _line(call))
        proc.stdin.flush()
        first = _read_until(proc, lambda m: m.get("method") == "elicitation/create")
        proc.stdin.write(_raw_line({"jsonrpc": "2.0", "id": first["id"],
                                    "result": {"action": "accept", "content": {"n": float("nan")}}}))
        proc.stdin.flush()
        again = _read_until(proc, lambda m: m.get("method") == "elicitation/create")
        assert again["params"]["_meta"][ERRORS_META_KEY] == [{"property": "n", "message": NON_FINITE_TEXT}]
        assert "Your previous answer was not accepted (n: must be a finite number" in again["params"]["message"]
        accepted = {"action": "accept", "content": {"n": 4}}
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": again["id"], "result": accepted}))
        proc.stdin.flush()
        done = _read_until(proc, lambda m: m.get("id") == 7)
        assert json.loads(done["result"]["content"][0]["text"]) == {"action": "accept", "content": {"n": 4}}

        # A request with NaN outside any answer: refused, naming where, and the server never hears of it.
        echo = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                "params": {"name": "x__echo", "arguments": {"text": float("inf")}}}
        proc.stdin.write(_raw_line(echo))
        proc.stdin.flush()
        refused = _read_until(proc, lambda m: m.get("id") == 8)
        assert refused["error"]["code"] == -32602, refused
        assert "NaN or Infinity" in refused["error"]["message"]
        assert "params.arguments.text" in refused["error"]["message"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)


async def test_a_nan_in_a_2026_retrys_input_responses_is_asked_again():
    async with gateway({"mcpServers": {"x": stdio_upstream()}}) as gw, httpx2.AsyncClient() as http:
        raw = RawModernClient(gw.mcp_url)
        first = (await raw.call(http, "x__elicit", {"message": "how many?", "schema": NUMBER_FORM}))["result"]
        (key, request), = first["inputRequests"].items()
        answer = {key: {"action": "accept", "content": {"n": float("nan")}}}
        retried = await _post_raw(http, raw, "x__elicit", {"message": "how many?", "schema": NUMBER_FORM},
                                  inputResponses=answer, requestState=first["requestState"])
        second = retried["result"]
        assert second["resultType"] == "input_required", retried
        (key, request), = second["inputRequests"].items()
        assert request["params"]["message"].startswith(
            f"[x] Your previous answer was not accepted (n: {NON_FINITE_TEXT})"
        )
        done = await raw.call(http, "x__elicit", {"message": "how many?", "schema": NUMBER_FORM},
                              inputResponses={key: {"action": "accept", "content": {"n": 3}}},
                              requestState=second["requestState"])
        assert json.loads(done["result"]["content"][0]["text"]) == {"action": "accept", "content": {"n": 3}}

        refused = await _post_raw(http, raw, "x__echo", {"text": float("-inf")})
        assert refused["error"]["code"] == -32602 and "params.arguments.text" in refused["error"]["message"]


async def _post_raw(http: httpx2.AsyncClient, raw: RawModernClient, tool: str, arguments: dict[str, Any],
                    **extra: Any) -> dict[str, Any]:
    """`RawModernClient.call`, with the body written by Python's `json` (NaN as `NaN`)."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": raw.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": raw.name, "version": "1.0"}}
    body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta, **extra}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
    response = await http.post(raw.url, content=_raw_line(body), headers=headers, timeout=30)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")][-1]
    return response.json()


async def test_a_nan_answer_through_the_admin_api_is_refused_naming_the_field():
    async with gateway(hosted_config()) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": NUMBER_FORM})
            (item,) = await next_pending(gw.url)
            headers = {**AUTH, "content-type": "application/json"}
            async with httpx2.AsyncClient(base_url=gw.url, headers=headers) as http:
                bad = await http.post(f"/api/elicitations/{item['id']}/answer",
                                      content=_raw_line({"action": "accept", "content": {"n": float("nan")}}))
                assert bad.status_code == 422, bad.text
                assert bad.json()["errors"] == [{"property": "n", "message": NON_FINITE_TEXT}]
                ok = await http.post(f"/api/elicitations/{item['id']}/answer",
                                     json={"action": "accept", "content": {"n": 5}})
                assert ok.status_code == 200, ok.text
            assert text(await call.wait()) == {"action": "accept", "content": {"n": 5}}


def test_the_sdks_sse_transport_gets_the_same_rule():
    """The SDK's parser (pydantic) reads NaN where our own wires refuse it: the legacy SSE upstream wire applies
    the rule after it. (The SDK's servers write NaN as null, so no SDK peer can send one to test with.)"""
    from elicitgate.wire.sdk_streams import _finite  # noqa: PLC2701 - the SSE wire's own step

    request = _finite({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
                       "params": {"message": "m", "requestedSchema": {"maximum": float("nan")}}})
    assert isinstance(request, NonFiniteParams) and request.request_id == 1
    result = _finite({"jsonrpc": "2.0", "id": 2, "result": {"structuredContent": {"n": float("inf")}}})
    assert isinstance(result, dict) and result["error"]["code"] == -32603
    plain = {"jsonrpc": "2.0", "id": 3, "result": {"n": 1.5}}
    assert _finite(plain) is plain
