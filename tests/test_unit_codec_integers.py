"""`wire.codec.loads`: every integer passes exactly, whatever orjson would make of it, and every JSON value reads as
the standard library reads it (the quick look for long digit runs decides only who parses, never what)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elicitgate.wire import codec

EDGES = [
    2**64 - 1, 2**64, 2**64 + 1, -(2**63), -(2**63) - 1, -(2**63) - 2, -(10**19) + 1, -(10**19), 10**19 - 1, 10**19,
    10**20, -(10**20), 2**63, 2**63 - 1, 0, -1,
]


@pytest.mark.parametrize("number", EDGES)
def test_an_integer_at_the_edges_of_64_bits_passes_exactly(number: int) -> None:
    """-2**63 - 1 has nineteen digits: orjson alone reads it as -9.223372036854776e+18."""
    data = b'{"jsonrpc":"2.0","id":%d,"params":{"n":%d,"list":[%d]}}' % (number, number, number)
    message = codec.loads(data)
    assert message == {"jsonrpc": "2.0", "id": number, "params": {"n": number, "list": [number]}}
    assert type(message["params"]["n"]) is int
    assert codec.dumps(message) == data


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_any_json_value_reads_as_the_standard_library_reads_it(value: Any) -> None:
    data = json.dumps(value, ensure_ascii=False).encode()
    read = codec.loads(data)
    assert read == json.loads(data)
    assert _types(read) == _types(json.loads(data))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(10**30), max_value=10**30), st.text(alphabet="0123456789-, ", max_size=40))
def test_an_integer_beside_digit_runs_in_strings_passes_exactly(number: int, text: str) -> None:
    data = b'{"n":%d,"s":%s}' % (number, json.dumps(text).encode())
    read = codec.loads(data)
    assert read == {"n": number, "s": text}
    assert type(read["n"]) is int


def _types(value: Any) -> Any:
    """The value's shape with each leaf's type: 1 and 1.0 are equal, but only one of them is what was sent."""
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_types(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return type(value)
