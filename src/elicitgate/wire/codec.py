"""JSON-RPC messages to and from bytes, for every wire the gateway reads or writes.

orjson does the work (about 2 us less per message parsed and 3 us less per message written than the standard
library, and it shares the keys of every message it parses, which pending calls keep); the standard library takes
over where orjson would change what passes through: an integer beyond 64 bits (above 2**64 - 1 or below -2**63:
orjson parses it as a float, and cannot write it), and `NaN`, `Infinity` and numbers too large for a double
(`1e400`), which orjson refuses and Python's `json` reads as non-finite floats. JSON has no such numbers (RFC
8259): `loads` raises `NotFinite` for them, holding the value read, so that a reader can still answer the message's
request id, and an answer holding one reaches the answer check (refused, asked again) instead of the server (where
it would arrive as `null`). A lone surrogate (`"\\ud800"`) is refused, as orjson and the `mcp` SDK's servers refuse
it: accepted, it would reach a server that answers the line with a parse error that names no request, and the call
would wait for its timeout.
JSON nested too deep to read or write raises `TooDeep`; every refusal is a `ValueError`, like any message
that cannot be read, so that no reader or writer ends on one.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, cast

import orjson

from elicitgate.errors import LoneSurrogate, NotFinite, TooDeep
from elicitgate.json_shapes import JsonObject

_LONG_DIGITS = re.compile(rb"\d{20}|-\d{19}")
"""Maybe an integer beyond 64 bits: twenty digits in a row (the largest unsigned one, 2**64 - 1, has twenty), or a
minus and nineteen (the smallest signed one, -2**63, has nineteen: orjson reads -9223372036854775809 as a float)."""

_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN_DIGITS = b"0" * 19
"""Where nineteen digits follow one another (read with every digit made `0`), `_LONG_DIGITS` looks closer: one
`translate` and one substring search cost a few hundred instructions for a message where the regular expression
spent about 15,000 (it tries `\\d{20}` at every byte), on every message read (`bench.callgrind_cpu --face stdio`)."""

MAX_DEPTH = 1024
"""orjson's limit of nested arrays and objects (Python's `json` stops near its recursion limit, 1,000)."""


def first_non_finite(value: Any, path: str = "") -> str | None:
    """Where the first non-finite number in `value` is (`params.arguments.n`, `items[2]`), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path or "(the value)"
    if isinstance(value, dict):
        for key, item in cast("JsonObject", value).items():
            if (found := first_non_finite(item, f"{path}.{key}" if path else key)) is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(cast("list[Any]", value)):
            if (found := first_non_finite(item, f"{path}[{i}]")) is not None:
                return found
    return None


def loads(data: bytes) -> Any:
    """The JSON value of `data`; raises `ValueError` (`json.JSONDecodeError`, `UnicodeDecodeError`,
    `TooDeep`, `LoneSurrogate`, `NotFinite`) when it is not one that can be read."""
    # `find`, not `in`: `in` first tries the bytes as an integer, and raises and catches a TypeError to learn otherwise.
    if data.translate(_DIGITS_AS_ZERO).find(_NINETEEN_DIGITS) < 0 or _LONG_DIGITS.search(data) is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard library decides, and says why
    non_finite: list[float] = []

    def number(text: str) -> float:
        read = float(text)  # also NaN, Infinity and -Infinity, for `parse_constant`
        if not math.isfinite(read):
            non_finite.append(read)
        return read

    try:
        value = json.loads(data, parse_float=number, parse_constant=number)
        json.dumps(value, ensure_ascii=False).encode()  # a lone surrogate is not UTF-8
    except RecursionError:  # a ValueError like any unreadable message: a reader must not end on it
        raise TooDeep(f"JSON nested more than {MAX_DEPTH} deep") from None
    except UnicodeEncodeError:
        raise LoneSurrogate("a string holds a lone surrogate (\\ud800-\\udfff without its pair)") from None
    if non_finite:
        raise NotFinite(value)
    return value


def dumps(message: Any) -> bytes:
    """`message` as compact UTF-8 JSON; raises `TooDeep` for one nested deeper than Python's `json` writes,
    `TypeError` for a value JSON does not have."""
    try:
        return _exact(orjson.dumps(message))
    except TypeError:  # an integer beyond 64 bits, nesting beyond orjson's 254 levels
        try:
            return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        except RecursionError:
            raise TooDeep("JSON nested too deep to write") from None


def dumps_line(message: Any) -> bytes:
    """`message` as one line of a stdio wire, its newline included."""
    try:
        return _exact(orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
    except TypeError:
        return dumps(message) + b"\n"


def _exact(written: bytes) -> bytes:
    """A copy of `written` in memory of its own size. orjson's bytes keep the block they were written in
    (measured: 4 KB for a 300-byte message, 64 KB for a 5 KB one); thousands of them waiting in a
    transport's buffer, for a client that reads slowly, grew the heap by that much each (`bench.scale`)."""
    return bytes(memoryview(written))
