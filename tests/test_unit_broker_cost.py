"""An end kept among the broker's last ends (`RecentEnds.add`, on the way of every answer to its upstream) calls no
Python function but the two that make its row (no `typing.cast`, no enum property), and keeps the same summary."""

from __future__ import annotations

import sys
from types import FrameType

from elicitgate.elicitation.model import Elicitation, State
from elicitgate.elicitation.recent import RecentEnds


def _ended() -> Elicitation:
    el = Elicitation(server="demo", mode="form", params={"message": "Proceed?"}, deadline=0.0)
    el.state, el.reason, el.attempts = State.ACCEPTED, "user accepted", 1
    el.ended_at = el.created_at + 0.25
    return el


def test_an_end_is_kept_by_the_calls_that_make_its_row_only() -> None:
    recent = RecentEnds()
    recent.add(_ended())  # the slots, made at the first end
    el = _ended()
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        recent.add(el)
    finally:
        sys.setprofile(None)
    assert called == ["add", "summary_row", "_id_bytes"]
    assert recent[-1] == el.summary() and recent[-1]["state"] == "accepted"
    assert type(recent[-1]["state"]) is str and recent[-1]["state"] is State.ACCEPTED.value
