"""What a 2026-07-28 POST no longer costs the HTTP face (issue #34: `faces/stateless.py`'s part of `bench.http_callers
--row 2026-07-28`), with the same verdicts: the request told, its envelope routed (the SDK's ladder's verdict for the
commonest well-formed request, read by hand; anything else goes to the ladder), its `Mcp-Param-*` check skipped and a
progress token looked for without a call each, its header lines read without a call per line when their names are
lowercase (as ASGI servers give them), and its answer made asking for the loop once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from starlette.datastructures import Headers

from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request, find_duplicated_routing_header
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params

from elicitgate.faces.stateless import (  # pyright: ignore[reportPrivateUsage]
    StatelessRequests,
    _Answer,
    _fitting_route,
    _progress_token,
    _Reply,
    _request_of,
    _routing_headers,
    _status_of,
)
from elicitgate.json_shapes import is_mapping
from elicitgate.wire.endpoint import is_request_id
from tests.profiled import calls_of, python_calls
from tests.test_unit_modern_path import CAPABILITIES, INFO, META, VERSION

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _lines(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in pairs]


HEADERS = (
    ("host", "x"),
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
    ("mcp-protocol-version", "2026-07-28"),
    ("mcp-method", "tools/call"),
    ("mcp-name", "s__echo"),
    ("content-length", "99"),
    ("mcp-param-region", "eu"),
    ("user-agent", "t"),
    ("mcp-method", "again"),
)


def test_lowercase_header_lines_are_read_without_a_call_per_line() -> None:
    raw = _lines(*HEADERS)
    (routing, duplicated, params), called = calls_of(lambda: _routing_headers(raw), c_calls=True)
    assert routing == {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "s__echo"}
    assert duplicated == "mcp-method" and params is True
    assert called.count("lower") == 1 and "startswith" not in called and "get" not in called
    assert called.count("decode") == 3  # the routing values alone


def test_header_lines_in_any_case_are_read_as_the_sdk_reads_them() -> None:
    for pairs in (
        HEADERS,
        tuple((name.title(), value) for name, value in HEADERS),
        (("Mcp-Method", "a"), ("mcp-method", "b"), ("MCP-PARAM-X", "1")),
        (),
    ):
        raw = _lines(*pairs)
        routing, duplicated, params = _routing_headers(iter(raw))
        decoded = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
        assert duplicated == find_duplicated_routing_header(decoded)
        firsts: dict[str, str] = {}
        for name, value in decoded:
            firsts.setdefault(name.lower(), value)
        assert routing == {k: v for k, v in firsts.items() if k in ("mcp-protocol-version", "mcp-method", "mcp-name")}
        assert params == any(name.lower().startswith("mcp-param-") for name, _ in decoded)


# -- a 2026-07-28 POST on the HTTP face -------------------------------------------------------------------------------


def _stateless(schema: Any = None) -> StatelessRequests:
    server: Any = SimpleNamespace(get_tool_input_schema=lambda name: schema)
    return StatelessRequests(server, TransportSecuritySettings(), json_wait=15)


def _post(params: Any, **headers: str) -> tuple[dict[str, Any], bytes]:
    routing = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "s__echo", **headers}
    lines = [("host", "x"), ("content-type", "application/json"), *((k, v) for k, v in routing.items() if v)]
    scope = {"headers": [(k.encode(), v.encode()) for k, v in lines]}
    return scope, orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})


POST_PARAMS = {"name": "s__echo", "arguments": {"text": "a"}, "_meta": META}


def test_a_posts_request_is_vetted_without_the_ladders_calls_nor_checks_by_call() -> None:
    stateless = _stateless()
    scope, body = _post(POST_PARAMS)
    vetted, called = calls_of(lambda: stateless._vetted(scope, Headers(scope=scope), body), c_calls=True)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    assert not isinstance(vetted, _Reply)
    request, envelope = vetted
    assert request["params"] == POST_PARAMS and envelope == (VERSION, INFO, CAPABILITIES)
    for name in ("classify_inbound_request", "cast", "is_mapping", "is_object", "is_request_id", "isinstance"):
        assert name not in called, name
    assert "startswith" not in called and called.count("lower") == 1 and called.count("get") == 3  # the envelope's


def test_a_posts_answer_is_started_without_reading_a_progress_token_it_has_not() -> None:
    assert calls_of(lambda: _progress_token(POST_PARAMS))[1] == ["_progress_token"]
    token = {**POST_PARAMS, "_meta": {**META, "progressToken": 5}}
    assert _progress_token(token) == 5 and _progress_token(None) is None and _progress_token({"name": "x"}) is None
    for meta in ({"progressToken": True}, {"progressToken": "t"}, [1], None):
        assert _progress_token({"_meta": meta}) == progress_token_from_params({"_meta": meta})
    assert _status_of({"jsonrpc": "2.0", "id": 1, "result": {}}) == 200
    assert _status_of({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "m"}}) == 400
    assert _status_of({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "m"}}) == 200


ROUTES: list[tuple[Any, dict[str, str]]] = [
    (POST_PARAMS, {}),
    (POST_PARAMS, {"mcp-name": ""}),
    (POST_PARAMS, {"mcp-name": "other"}),
    (POST_PARAMS, {"mcp-method": "tools/list"}),
    (POST_PARAMS, {"mcp-method": ""}),
    (POST_PARAMS, {"mcp-protocol-version": ""}),
    (POST_PARAMS, {"mcp-protocol-version": "2025-11-25"}),
    ({**POST_PARAMS, "name": "=?base64?w6k=?="}, {"mcp-name": "=?base64?w6k=?="}),
    ({**POST_PARAMS, "name": "é"}, {"mcp-name": "=?base64?w6k=?="}),
    ({**POST_PARAMS, "name": 5}, {"mcp-name": "5"}),
    ({"arguments": {}, "_meta": META}, {}),
    ({**POST_PARAMS, "_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}}, {}),
    ({**POST_PARAMS, "_meta": {k: v for k, v in META.items() if "Capabilities" not in k}}, {}),
    ({**POST_PARAMS, "_meta": [META]}, {}),
    ({"name": "s__echo"}, {}),
]


@pytest.mark.parametrize(("params", "headers"), ROUTES)
def test_a_route_read_by_hand_is_the_ladders_and_anything_else_goes_to_the_ladder(
    params: Any, headers: dict[str, str]
) -> None:
    routing = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "s__echo", **headers}
    routing = {k: v for k, v in routing.items() if v}
    request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    route = classify_inbound_request(request, headers=routing)
    fitting = _fitting_route(request, routing)
    if isinstance(route, InboundLadderRejection):
        assert fitting is None
    elif fitting is not None:
        assert fitting == (route.protocol_version, route.client_info, route.client_capabilities)
    if params is POST_PARAMS and not headers:
        assert fitting == (VERSION, INFO, CAPABILITIES)


def _request_of_before(message: object) -> Any:
    """`_request_of` as it was written at fc832cc, the oracle."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return None
    params = message.get("params")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return message if is_request_id(message.get("id")) and (params is None or is_mapping(params)) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "m"},
        {"jsonrpc": "2.0", "id": "a", "method": "m", "params": {}},
        {"jsonrpc": "2.0", "id": True, "method": "m"},
        {"jsonrpc": "2.0", "id": 1.0, "method": "m"},
        {"jsonrpc": "2.0", "id": None, "method": "m"},
        {"jsonrpc": "2.0", "method": "m"},
        {"jsonrpc": "2.0", "id": 1, "method": 3},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "1.0", "id": 1, "method": "m"},
        {"id": 1, "method": "m"},
        {"jsonrpc": "2.0", "id": 1, "method": "m", "params": []},
        {"jsonrpc": "2.0", "id": 1, "method": "m", "params": None},
        [{"jsonrpc": "2.0", "id": 1, "method": "m"}],
        "m",
    ],
)
def test_a_request_is_told_as_before(message: Any) -> None:
    assert _request_of(message) is _request_of_before(message)


def test_a_request_of_the_commonest_shape_is_told_without_a_call() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": POST_PARAMS}
    assert calls_of(lambda: _request_of(message), c_calls=True) == (message, ["_request_of"])


def test_a_tool_calls_param_headers_are_not_looked_for_without_arguments_or_headers_and_read_without_calls() -> None:
    stateless = _stateless(schema={"type": "object"})
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "s__echo", "_meta": META}}
    headers = Headers()
    rejection, called = calls_of(
        lambda: stateless._param_headers_rejection(request, headers, False),  # pyright: ignore[reportPrivateUsage]
        c_calls=True,
    )
    assert rejection is None and called == ["_param_headers_rejection"]


async def test_a_posts_answer_is_made_asking_for_the_loop_once_and_without_min() -> None:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    with python_calls(c_prefix="c:") as called:
        answer = _Answer(send, receive, 15, {})
    answer.served()
    assert called.count("c:get_running_loop") == 1 and "c:min" not in called
    assert answer.stream_task is None and sent == []
