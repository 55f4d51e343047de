"""json_memo.JsonMemo: made once per distinct JSON value, bounded, and never reordering what it hands out."""

from __future__ import annotations

from typing import Any

from elicitgate.json_memo import JsonMemo

SCHEMA = {"type": "object", "properties": {"priority": {"type": "string"}, "points": {"type": "integer"}}}
REORDERED = {"type": "object", "properties": {"points": {"type": "integer"}, "priority": {"type": "string"}}}


def test_what_is_made_keeps_the_order_of_an_objects_members():
    """A memo of what a client is shown (a round's questions) hands out a form's fields as the server wrote
    them (the 2026-07-28 docs example listed them sorted when the memo made from its sorted key)."""
    memo: JsonMemo[list[str]] = JsonMemo(lambda schema: list(schema["properties"]), ordered=True)
    assert memo(SCHEMA) == memo(SCHEMA) == ["priority", "points"]
    assert memo(REORDERED) == ["points", "priority"]


def test_by_default_members_in_another_order_are_the_same_value_made_in_the_first_ones_order():
    made: list[list[str]] = []
    memo = JsonMemo(lambda schema: made.append(list(schema["properties"])) or len(made))
    assert memo(SCHEMA) == memo(REORDERED) == 1
    assert made == [["priority", "points"]]


def test_a_value_is_made_once_and_the_oldest_goes_first():
    made: list[Any] = []

    def make(value: Any) -> int:
        made.append(value)
        return len(made)

    memo = JsonMemo(make, size=2)
    assert memo({"a": 1}) == memo({"a": 1}) == 1
    memo({"b": 2})
    memo({"c": 3})  # {"a": 1} is dropped
    assert memo({"a": 1}) == 4
    assert memo({"c": 3}) == 3


def test_make_gets_a_copy_that_the_caller_cannot_change_later():
    memo: JsonMemo[dict[str, Any]] = JsonMemo(lambda value: value)
    value = {"enum": ["a"]}
    kept = memo(value)
    value["enum"].append("b")
    assert kept == {"enum": ["a"]}
    assert kept is not value


def test_what_orjson_cannot_write_or_too_long_a_key_is_made_each_time():
    calls: list[Any] = []
    memo = JsonMemo(lambda value: calls.append(value), max_key=16)
    memo({"n": 2**70})
    memo({"n": 2**70})
    memo({"long": "x" * 32})
    memo({"long": "x" * 32})
    assert len(calls) == 4
