"""What a 2026-07-28 client's request no longer costs the face (issue #34: the `request`, `retry` and `result`
stretches of `bench.modern_path`, and `faces/modern.py`'s part of `bench.http_callers --row 2026-07-28`), with the same
results: the envelope and the request's `_meta` read without `typing.cast` or `is_mapping`'s call; the client's
declared capabilities read once per distinct declaration, with the envelope (`EnvelopeConnection.declared`), not
again by each call made of the request; a relayed call's params checked and its tool named without a call; a relayed
call ends without a coroutine to close an exit stack it never made; a result's `resultType` read once. (A POST's own:
tests/test_unit_stateless_post_cost.py.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mcp_types import ClientCapabilities, InitializeRequestParams
from mcp_types.version import LATEST_MODERN_VERSION

from mcp.server.lowlevel.server import Server

from elicitgate import _compat
from elicitgate.capabilities import capabilities_dict, elicitation_modes
from elicitgate.contracts import DownstreamPeer
from elicitgate.faces.dispatch import fitting_envelope
from elicitgate.faces.modern import RELAYED_PARAMS, EnvelopeConnection, ModernMethods, _reads_fit  # pyright: ignore[reportPrivateUsage]
from elicitgate.faces.peer import DownstreamCall, _tool_of  # pyright: ignore[reportPrivateUsage]
from tests.profiled import calls_of, python_calls
from tests.test_unit_modern_path import CAPABILITIES, INFO, META, VERSION, serve, table

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_an_envelope_is_read_without_a_call() -> None:
    fitting, called = calls_of(lambda: fitting_envelope({"name": "t", "_meta": META}))
    assert fitting == (VERSION, INFO, CAPABILITIES)
    assert called == ["fitting_envelope"]  # and no `cast`
    assert calls_of(lambda: fitting_envelope({"name": "t", "_meta": [META]}))[1] == ["fitting_envelope"]


async def test_a_relayed_call_runs_no_cast_nor_a_coroutine_to_close_what_it_never_opened() -> None:
    modern, _ = table()
    params = {"name": "s__confirm", "arguments": {"q": "go?"}, "_meta": META}
    await serve(modern, params)  # what is made once (the sieved round, the server's stamp) made
    with python_calls() as called:
        first = await serve(modern, params)
    assert first["resultType"] == "input_required"
    assert "cast" not in called and "_closed" not in called and "is_mapping" not in called
    retry = {**params, "requestState": first["requestState"], "inputResponses": {"q1": {"action": "accept"}}}
    with python_calls() as called:
        done = await serve(modern, retry)
    assert done["resultType"] == "complete" and done["content"] == [{"type": "text", "text": "done"}]
    assert "cast" not in called and "_closed" not in called


async def test_a_connection_whose_exit_stack_was_opened_still_has_it_closed() -> None:
    modern, _ = table()
    closed: list[str] = []
    connection = EnvelopeConnection(_compat.no_channel(), VERSION, INFO, CAPABILITIES)
    connection.exit_stack.callback(closed.append, "closed")
    params = {"name": "s__confirm", "arguments": {"q": "go?"}, "_meta": META}
    await modern.serve(SimpleNamespace(request_id=1), "tools/call", params, connection, None)  # type: ignore[arg-type]
    assert closed == ["closed"]


def test_a_results_type_is_read_once_as_it_is_shaped() -> None:
    modern = ModernMethods(Server("gw", version="1"))
    modern._shaped("tools/call", VERSION, {}, sieve=False)  # pyright: ignore[reportPrivateUsage]  # the stamp made
    shaped, called = calls_of(
        lambda: modern._shaped("tools/call", VERSION, {"content": []}, sieve=False),  # pyright: ignore[reportPrivateUsage]
        c_calls=True,
    )
    assert shaped["resultType"] == "complete" and shaped["content"] == []
    assert shaped["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gw"
    assert called.count("get") == 3  # the method's cache hint, the result's `resultType`, its `_meta`


def _call(connection: EnvelopeConnection, declared: Any) -> DownstreamCall:
    session = SimpleNamespace(_request_outbound=None, _connection=connection)
    ctx: Any = SimpleNamespace(request_id=1, protocol_version=VERSION, params={"name": "t"}, session=session)
    return DownstreamCall(
        peer=DownstreamPeer(id="c1", connection=connection),
        ctx=ctx,
        method="tools/call",
        connection=connection,
        declared=declared,
    )


def test_a_calls_capabilities_are_read_with_its_envelope_once_per_declaration() -> None:
    declared = {"elicitation": {"url": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    connection = EnvelopeConnection(_compat.no_channel(), VERSION, INFO, declared)
    model = connection.client_capabilities
    assert model is not None
    assert connection.declared == (model, capabilities_dict(model), elicitation_modes(model))
    again = EnvelopeConnection(_compat.no_channel(), VERSION, INFO, dict(declared))
    assert again.declared is connection.declared  # one reading per distinct declaration
    call = _call(connection, connection.declared)
    (raw, modes), called = calls_of(lambda: (call.raw_capabilities(), call.modes))
    assert raw == declared and modes == frozenset({"url"})
    assert called == ["raw_capabilities", "modes"]  # neither dumped nor read again
    # The connection holding another model: read from it, as before.
    connection.client_params = InitializeRequestParams.model_construct(
        protocol_version=VERSION,
        capabilities=ClientCapabilities.model_validate({"elicitation": {}}),
        client_info=None,
    )
    assert call.raw_capabilities() == {"elicitation": {}} and call.modes == frozenset({"form"})


def test_an_envelope_without_capabilities_declares_nothing() -> None:
    connection = EnvelopeConnection(_compat.no_channel(), LATEST_MODERN_VERSION, None, None)
    assert connection.client_capabilities is None
    call = _call(connection, connection.declared)
    assert call.raw_capabilities() == {} and call.modes == frozenset()
    misshaped = EnvelopeConnection(_compat.no_channel(), LATEST_MODERN_VERSION, None, {"elicitation": 3})
    assert misshaped.client_capabilities is None and misshaped.declared[1:] == ({}, frozenset())


def test_a_relayed_calls_params_are_checked_without_a_call() -> None:
    reads = RELAYED_PARAMS["tools/call"]
    params = {"name": "s__echo", "arguments": {"text": "a"}, "_meta": META}
    fits, called = calls_of(lambda: _reads_fit(reads, params), c_calls=True)
    assert fits is True and called == ["_reads_fit"]
    refused: list[Any] = [
        {"arguments": {}},
        {"name": 3},
        {"name": "t", "arguments": []},
        {"name": "t", "requestState": 1},
    ]
    assert [_reads_fit(reads, p) for p in refused] == [False] * 4
    assert _reads_fit(reads, {"name": "t", "arguments": None, "requestState": None}) and not _reads_fit(reads, None)


def test_a_calls_tool_is_named_without_a_call() -> None:
    named, called = calls_of(lambda: _tool_of("tools/call", {"name": "s__echo"}), c_calls=True)
    assert named == "s__echo" and called == ["_tool_of"]
    assert _tool_of("tools/call", {"name": 3}) is None and _tool_of("tools/list", {"name": "x"}) is None
    assert _tool_of("prompts/get", {"name": "p"}) == "p" and _tool_of("tools/call", None) is None
