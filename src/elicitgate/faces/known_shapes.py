"""A handshake-era client's `tools/call` in the shapes nearly every call has, checked and shaped without pydantic.

A request served past the SDK's kernel (`faces.dispatch._serve_directly`) still gets the kernel's two checks: its
params against the spec's schema for the client's version, and its result through the per-version sieve
(`_compat.shaped_result`, which validates it and writes it again with only the fields that version defines). Each
builds pydantic models for one message; for a pass-through call they were about a fifth of the instructions the
stdio face spends per `echo` (`bench.callgrind_cpu --face stdio`). Here the commonest shapes (params of a name and
arguments; a result of text blocks, `isError` and `structuredContent`) are recognised by a few dict reads, and
anything else returns None, for the SDK's own check to decide. What is recognised gets exactly what the SDK's
check gives it (tests/test_unit_known_shapes.py compares the two on generated messages, for every handshake-era
version).
"""

from __future__ import annotations

from typing import Any

from elicitgate.json_shapes import JsonObject

_TOOL_CALL_PARAMS = frozenset({"name", "arguments"})
_OPTIONAL_FIELDS = (("isError", bool), ("structuredContent", dict))
"""A result's optional fields the sieve keeps, in its order, each with its one type (`null` is dropped)."""


def tool_call_params_fit(params: Any) -> bool:
    """Whether a handshake-era `tools/call`'s params are a name and arguments the spec's schema accepts (False:
    the SDK's check decides, and says what is wrong)."""
    fields: JsonObject = params  # typed before it is checked: no `cast` (a Python call for every request)
    if type(fields) is not dict:
        return False
    if type(fields.get("name")) is not str:
        return False
    arguments = fields.get("arguments")
    return (arguments is None or type(arguments) is dict) and _TOOL_CALL_PARAMS.issuperset(fields)


def sieved_tool_result(result: JsonObject) -> JsonObject | None:
    """A handshake-era `tools/call` result as the per-version sieve writes it, when it holds only text blocks,
    `isError` and `structuredContent` (the sieve's order of keys, `null`s dropped); None for any other shape."""
    if "content" not in result:
        return None
    content: list[Any] = result["content"]  # typed before they are checked: no `cast`s (a Python call each)
    if type(content) is not list:
        return None
    blocks: list[Any] = []
    for block in content:
        fields: JsonObject = block
        if type(fields) is not dict:
            return None
        if len(fields) != 2 or fields.get("type") != "text":
            return None
        text = fields.get("text")
        if type(text) is not str:
            return None
        blocks.append({"text": text, "type": "text"})
    shaped: JsonObject = {"content": blocks}
    known = 1
    for key, kind in _OPTIONAL_FIELDS:
        if key in result:
            known += 1
            value = result[key]
            if type(value) is kind:
                shaped[key] = value
            elif value is not None:
                return None
    return shaped if len(result) == known else None
