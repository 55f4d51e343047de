"""`faces.known_shapes`: what it recognises gets exactly what the SDK's own checks give it (params accepted, the
result written as the per-version sieve writes it, keys in the same order), for every handshake-era version;
everything else is left to the SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from elicitgate.faces.known_shapes import sieved_tool_result, tool_call_params_fit

JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON = st.recursive(
    JSON_LEAVES,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=10,
)
"""Any JSON value: what a peer's message can hold in any place."""


def _maybe(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), value.map(lambda v: {key: v}))


TEXT_BLOCK = st.fixed_dictionaries({"type": st.just("text"), "text": st.text()})
BLOCK = TEXT_BLOCK | st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "audio"]), "text": JSON_LEAVES},
    optional={"annotations": JSON, "_meta": JSON, "data": st.text(), "mimeType": st.text()},
) | JSON
RESULT = st.builds(
    lambda content, is_error, structured, other: {**content, **is_error, **structured, **other},
    _maybe("content", st.lists(TEXT_BLOCK, max_size=3) | st.lists(BLOCK, max_size=3) | JSON),
    _maybe("isError", st.booleans() | JSON_LEAVES),
    _maybe("structuredContent", st.dictionaries(st.text(max_size=6), JSON, max_size=3) | JSON),
    st.dictionaries(st.sampled_from(["_meta", "resultType", "extra", "toolResult"]), JSON, max_size=2),
)
PARAMS = st.fixed_dictionaries(
    {"name": st.text(max_size=8)}, optional={"arguments": st.none() | st.dictionaries(st.text(max_size=6), JSON)}
) | st.builds(
    lambda name, arguments, other: {**name, **arguments, **other},
    _maybe("name", st.text(max_size=8) | JSON_LEAVES),
    _maybe("arguments", st.dictionaries(st.text(max_size=6), JSON, max_size=3) | JSON),
    st.dictionaries(st.sampled_from(["_meta", "task", "extra"]), JSON, max_size=2),
) | JSON


def _sieved(version: str, result: Any) -> str | None:
    """The SDK's sieve, as the bytes the client would read (the order of keys included); None if it refuses."""
    try:
        return json.dumps(spec_methods.serialize_server_result("tools/call", version, result))
    except ValidationError:
        return None


def _accepted(version: str, params: Any) -> bool:
    try:
        spec_methods.validate_client_request("tools/call", version, params)
    except ValidationError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(RESULT)
def test_a_recognised_result_is_written_as_the_sieve_writes_it(result: dict[str, Any]) -> None:
    shaped = sieved_tool_result(result)
    if shaped is None:
        return
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        assert json.dumps(shaped) == _sieved(version, result)


@settings(max_examples=400, deadline=None)
@given(PARAMS)
def test_recognised_params_are_params_the_schema_accepts(params: Any) -> None:
    if tool_call_params_fit(params):
        for version in HANDSHAKE_PROTOCOL_VERSIONS:
            assert _accepted(version, params)


@pytest.mark.parametrize("result", [
    {"content": [{"type": "text", "text": "hello"}], "structuredContent": {"result": "hello"}, "isError": False},
    {"isError": None, "content": [], "structuredContent": None},
    {"content": [{"text": "a", "type": "text"}, {"type": "text", "text": ""}], "isError": True},
    {"structuredContent": {"n": [1, 2.5, None, {"deep": "x"}]}, "content": [{"type": "text", "text": "{}"}]},
])
def test_the_results_of_text_tools_are_recognised(result: dict[str, Any]) -> None:
    """The shapes nearly every pass-through call has: these must not fall back to pydantic."""
    shaped = sieved_tool_result(result)
    assert shaped is not None
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        assert json.dumps(shaped) == _sieved(version, result)


@pytest.mark.parametrize("result", [
    {"content": [{"type": "text", "text": "a", "annotations": {"priority": 1}}]},
    {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": 5}]},
    {"content": "text"},
    {"content": [], "isError": "yes"},
    {"content": [], "structuredContent": [1]},
    {"content": [], "_meta": {"a": 1}},
    {"content": [], "resultType": "complete"},
    {"isError": False},
])
def test_other_results_are_left_to_the_sieve(result: dict[str, Any]) -> None:
    assert sieved_tool_result(result) is None


@pytest.mark.parametrize(("params", "fits"), [
    ({"name": "server__echo", "arguments": {"text": "hi"}}, True),
    ({"name": "server__echo"}, True),
    ({"name": "server__echo", "arguments": None}, True),
    ({"name": "server__echo", "arguments": []}, False),
    ({"name": 3}, False),
    ({"arguments": {}}, False),
    ({"name": "x", "_meta": {"progressToken": 1}}, False),
    ({"name": "x", "task": {}}, False),
    (None, False),
    ([], False),
])
def test_params_of_a_name_and_arguments_are_recognised(params: Any, fits: bool) -> None:
    assert tool_call_params_fit(params) is fits
    if fits:
        assert all(_accepted(version, params) for version in HANDSHAKE_PROTOCOL_VERSIONS)
