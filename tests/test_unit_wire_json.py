"""`wire.codec`: orjson where it agrees with the standard library, the standard library where it would not."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import sys
from typing import Any

import pytest

from elicitgate.errors import LoneSurrogate, NotFinite, TooDeep
from elicitgate.wire import codec
from elicitgate.wire.framing import parse_message

BEYOND_64_BITS = 123456789012345678901234567890


def test_a_message_round_trips_compact_and_in_utf8() -> None:
    message = {"jsonrpc": "2.0", "id": 7, "result": {"text": "é\u2603\n\"", "n": [1, 2.5, None, True]}}
    written = codec.dumps(message)
    assert written == json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    assert codec.loads(written) == message
    assert codec.dumps_line(message) == written + b"\n"


def test_integers_beyond_64_bits_pass_exactly_both_ways() -> None:
    """orjson alone would read this integer as a float and refuse to write it."""
    data = b'{"id":%d,"params":{"n":-%d}}' % (BEYOND_64_BITS, BEYOND_64_BITS)
    message = codec.loads(data)
    assert message == {"id": BEYOND_64_BITS, "params": {"n": -BEYOND_64_BITS}}
    assert codec.dumps(message) == data
    assert codec.dumps_line(message) == data + b"\n"
    # just digits in a string
    assert codec.loads(b'{"text":"%d"}' % BEYOND_64_BITS) == {"text": str(BEYOND_64_BITS)}


@pytest.mark.parametrize(
    ("data", "expected"), [(b'{"a":NaN}', "nan"), (b'{"a":-Infinity}', "-inf"), (b'{"a":1e400}', "inf")]
)
def test_numbers_json_does_not_have_are_refused_with_what_was_read(data: bytes, expected: str) -> None:
    """Python's `json` accepts them and orjson refuses them; RFC 8259 has none: `NotFinite`, holding the value
    read so that a reader can still name the request (tests/test_non_finite.py)."""
    with pytest.raises(NotFinite) as caught:
        codec.loads(data)
    assert str(caught.value.value["a"]) == expected


def test_nan_and_infinity_are_written_as_null() -> None:
    """JSON has neither: whatever holds one is written with null in its place."""
    assert codec.dumps([float("nan"), float("inf"), float("-inf"), 1.5]) == b"[null,null,null,1.5]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_usable_size")
def test_what_is_written_holds_memory_of_its_own_size() -> None:
    """Messages wait in a transport's buffer when the peer reads slowly: each must not keep orjson's block."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc_usable_size.restype = ctypes.c_size_t
    libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
    for written in (codec.dumps({"text": "x" * 5000}), codec.dumps_line({"text": "x" * 1000})):
        assert libc.malloc_usable_size(id(written)) < 2 * len(written)


@pytest.mark.parametrize("data", [b"not json", b'{"a":1', b"\xff\xfe", b""])
def test_what_is_not_json_raises_the_standard_librarys_error(data: bytes) -> None:
    with pytest.raises(ValueError) as raised:
        codec.loads(data)
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    assert str(raised.value) == str(expected.value)
    assert "not JSON" in str(parse_message(data))


def test_keys_that_are_not_strings_are_written_as_python_json_writes_them() -> None:
    assert codec.dumps({1: "a"}) == b'{"1":"a"}'
    with pytest.raises(TypeError):
        codec.dumps({"a": object()})


@pytest.mark.parametrize("depth", [1500, 100_000])
def test_json_nested_too_deep_to_read_is_a_value_error_that_says_so(depth: int) -> None:
    data = b'{"a":' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(TooDeep, match="nested more than 1024 deep"):
        codec.loads(data)
    assert "nested more than 1024 deep" in str(parse_message(data))  # a reader answers it, and reads on


def test_nesting_beyond_orjsons_writer_is_written_and_beyond_pythons_is_too_deep() -> None:
    def nested(depth: int) -> list[Any]:
        value: list[Any] = []
        for _ in range(depth):
            value = [value]
        return value

    assert codec.loads(codec.dumps(nested(500))) == nested(500)  # orjson writes 254 levels at most
    with pytest.raises(TooDeep):
        codec.dumps_line(nested(5000))


@pytest.mark.parametrize("data", [b'{"a":"x\\ud800y"}', b'{"\\udc00":1}', b'{"n":%d,"a":"\\ud800"}' % BEYOND_64_BITS])
def test_a_lone_surrogate_is_refused_as_the_sdk_refuses_it(data: bytes) -> None:
    with pytest.raises(LoneSurrogate, match="lone surrogate"):
        codec.loads(data)
    assert "lone surrogate" in str(parse_message(data))


def test_a_surrogate_pair_is_the_character_it_encodes() -> None:
    assert codec.loads(b'{"a":"\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    assert codec.loads(b'{"n":%d,"a":"\\ud83d\\ude00"}' % BEYOND_64_BITS)["a"] == "\U0001f600"
