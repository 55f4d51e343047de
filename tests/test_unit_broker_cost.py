"""What the broker's part of an elicitation no longer calls, with the same results: an end kept among the last ends
(`RecentEnds.add`, on the way of every answer to its upstream) calls no Python function but the two that make its row
(no `typing.cast`, no enum property); a request's schema is looked up by orjson's text (no `codec.dumps`)."""

from __future__ import annotations

import sys
from types import FrameType

import pytest

from elicitgate.elicitation.form_schemas import FormSchemas
from elicitgate.elicitation.model import Elicitation, State
from elicitgate.elicitation.recent import RecentEnds
from elicitgate.wire import codec
from tests.profiled import collector_held


def _ended() -> Elicitation:
    el = Elicitation(server="demo", mode="form", params={"message": "Proceed?"}, deadline=0.0)
    el.state, el.reason, el.attempts = State.ACCEPTED, "user accepted", 1
    el.ended_at = el.created_at + 0.25
    return el


def test_an_end_is_kept_by_the_calls_that_make_its_row_only() -> None:
    recent = RecentEnds()
    recent.add(_ended())  # the slots, made at the first end
    recent.settle()
    el = _ended()
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)

    with collector_held():
        sys.setprofile(profile)
        try:
            recent.add(el)  # on the answer's way: noted only
            noted = list(called)
            recent.settle()  # once it is on its way (`Broker._recorded`): its row
        finally:
            sys.setprofile(None)
    assert noted == ["add"]
    assert called[len(noted) :] == ["settle", "_put", "summary_row", "_id_bytes"]
    assert recent[-1] == el.summary() and recent[-1]["state"] == "accepted"
    assert type(recent[-1]["state"]) is str and recent[-1]["state"] is State.ACCEPTED.value


def test_a_requests_schema_is_looked_up_by_orjsons_text_without_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """`codec.dumps` (a call, and a copy of the text) only for what orjson cannot write; the key kept is the same
    JSON text."""
    written: list[object] = []
    dumps = codec.dumps

    def spied_dumps(value: object) -> bytes:
        written.append(value)
        return dumps(value)

    monkeypatch.setattr(codec, "dumps", spied_dumps)
    schemas = FormSchemas(max_properties=20)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    first = schemas.check(schema, max_bytes=4096)
    again = schemas.check({"type": "object", "properties": {"ok": {"type": "boolean"}}}, max_bytes=4096)
    assert again is first and first.size == len(dumps(schema)) and not first.problems and len(schemas) == 1
    assert written == []
    huge = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 2**70}}}
    checked = schemas.check(huge, max_bytes=4096)
    assert written == [huge] and checked.size == len(dumps(huge)) and len(schemas) == 2
