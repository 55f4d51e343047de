"""The 2026-07-28 table (`faces.modern.ModernMethods`), in memory: a method joins with `add`, and a method the spec
does not define (an extension's, such as the tasks extension's `tasks/get`) is served by its handler as it is,
where the spec's schema check would have refused it as unknown."""

from __future__ import annotations

from typing import Any

import pytest

from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from elicitgate import _compat
from elicitgate.faces.modern import RELAYED_PARAMS, EnvelopeConnection, ModernMethods

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"


class Context:
    """What the table reads of a dispatch context."""

    request_id = 1
    message_metadata = None


def connection() -> EnvelopeConnection:
    return EnvelopeConnection(_compat.no_channel(), VERSION, {"name": "t", "version": "1"}, {"elicitation": {}})


async def serve(table: ModernMethods, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    return await table.serve(Context(), method, params, connection(), None)  # type: ignore[arg-type]


async def test_an_extension_method_is_served_by_its_handler_with_the_eras_stamps():
    table = ModernMethods(Server("gw", version="1"))
    seen: list[Any] = []

    async def get(ctx: Any) -> dict[str, Any]:
        seen.append((ctx.method, ctx.params, _compat.connection_of(ctx).client_params.client_info.name))
        return {"taskId": ctx.params["taskId"], "status": "working"}

    table.add("tasks/get", get)
    result = await serve(table, "tasks/get", {"taskId": "t1", "_meta": {}})
    assert result["taskId"] == "t1" and result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gw"
    assert seen == [("tasks/get", {"taskId": "t1", "_meta": {}}, "t")]
    with pytest.raises(MCPError) as unknown:
        await serve(table, "tasks/cancel", {"taskId": "t1"})
    assert unknown.value.error.code == -32601


async def test_a_relayed_method_has_what_the_gateway_reads_checked_and_its_result_passed_on():
    table = ModernMethods(Server("gw", version="1"))

    async def call(ctx: Any) -> dict[str, Any]:
        return {"content": [], "extra": {"kept": True}}

    table.add("tools/call", call, reads=RELAYED_PARAMS["tools/call"])
    result = await serve(table, "tools/call", {"name": "x", "arguments": {"a": 1}})
    assert result["extra"] == {"kept": True} and result["resultType"] == "complete"
    for bad in ({"arguments": {}}, {"name": 3}, {"name": "x", "arguments": [1]}, {"name": "x", "requestState": 1},
                None):
        with pytest.raises(MCPError) as refused:
            await serve(table, "tools/call", bad)
        assert (refused.value.error.code, refused.value.error.message) == (-32602, "Invalid request parameters"), bad


ROUND_QUESTIONS = {
    "q1": {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Name?", "extra": "dropped by the sieve",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }},
    "q2": {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://x.test/a"}},
}


@pytest.mark.parametrize("questions", [ROUND_QUESTIONS, {"q1": ROUND_QUESTIONS["q2"]}])
async def test_a_round_is_sieved_as_the_spec_shapes_it_with_its_own_state_each_time(questions: dict[str, Any]):
    from mcp_types import methods as spec_methods

    table = ModernMethods(Server("gw", version="1"))
    states = iter(("s1", "s2"))

    async def call(ctx: Any) -> dict[str, Any]:
        return {"resultType": "input_required", "inputRequests": questions, "requestState": next(states)}

    table.add("tools/call", call, reads=RELAYED_PARAMS["tools/call"])
    first = await serve(table, "tools/call", {"name": "t"})
    second = await serve(table, "tools/call", {"name": "t"})  # the same questions again: from the memo
    for result, state in ((first, "s1"), (second, "s2")):
        expected = spec_methods.serialize_server_result(
            "tools/call", VERSION, {"resultType": "input_required", "inputRequests": questions, "requestState": state}
        )
        assert {k: v for k, v in result.items() if k != "_meta"} == expected
    assert first["inputRequests"] is not second["inputRequests"]  # each result its own, nothing shared


async def test_an_invalid_round_is_an_internal_error_every_time():
    table = ModernMethods(Server("gw", version="1"))

    async def call(ctx: Any) -> dict[str, Any]:
        return {"resultType": "input_required", "inputRequests": {"q1": {"method": 7}}, "requestState": "s"}

    table.add("tools/call", call, reads=RELAYED_PARAMS["tools/call"])
    for _ in range(2):
        with pytest.raises(MCPError) as invalid:
            await serve(table, "tools/call", {"name": "t"})
        assert (invalid.value.error.code, invalid.value.error.message) == (-32603, "Handler returned an invalid result")


def test_client_params_are_made_once_per_client_and_version_and_say_what_each_request_declared():
    """`client_params` (read for the audit trail's client name) is one model for every request of a client that
    declares the same, and never another client's or another version's."""
    one, again = connection(), connection()
    params = one.client_params
    assert params is not None and params.client_info.name == "t" and params.protocol_version == VERSION
    assert again.client_params is params
    other = EnvelopeConnection(_compat.no_channel(), VERSION, {"name": "u", "version": "1"}, {"elicitation": {}})
    assert other.client_params is not None and other.client_params.client_info.name == "u"
    fewer = EnvelopeConnection(_compat.no_channel(), VERSION, {"name": "t", "version": "1"}, {})
    assert fewer.client_params is not None and fewer.client_params is not params
    assert fewer.client_params.capabilities.elicitation is None and params.capabilities.elicitation is not None
    older = EnvelopeConnection(_compat.no_channel(), "2025-11-25", {"name": "t", "version": "1"}, {"elicitation": {}})
    assert older.client_params is not None and older.client_params.protocol_version == "2025-11-25"
    assert EnvelopeConnection(_compat.no_channel(), VERSION, None, {"elicitation": {}}).client_params is None
