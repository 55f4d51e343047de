"""The broker's last ends (`elicitation.recent.RecentEnds`): what the admin API's `state=ended` lists, kept compact."""

from __future__ import annotations

import tracemalloc

from elicitgate.elicitation.model import Elicitation, State
from elicitgate.elicitation.recent import RecentEnds


def ended(n: int, state: State = State.ACCEPTED) -> Elicitation:
    el = Elicitation(server="demo", mode="form", params={"message": f"Proceed {n}?"}, deadline=0.0)
    el.state, el.reason, el.attempts = state, "user accepted", 1
    el.ended_at = el.created_at + 0.25
    return el


def test_each_end_reads_as_its_summary_oldest_first_and_the_oldest_go_past_the_bound():
    recent = RecentEnds(size=3)
    els = [ended(n) for n in range(5)]
    for el in els:
        recent.add(el)
    assert len(recent) == 3
    assert list(recent) == [el.summary() for el in els[2:]]
    assert list(reversed(recent)) == [el.summary() for el in reversed(els[2:])]
    assert recent[-1] == els[-1].summary() and list(recent[-1]) == list(els[-1].summary())  # the same keys, in order
    assert recent[-1]["state"] == "accepted" and recent[-1]["duration_s"] == 0.25


def test_an_id_is_found_among_the_kept_ends_only():
    recent = RecentEnds(size=2)
    first, second, third = ended(1), ended(2, State.DECLINED), ended(3)
    for el in (first, second, third):
        recent.add(el)
    assert recent.find(second.id) == second.summary()
    assert recent.find(first.id) is None and recent.find("nope") is None


def test_a_summary_read_and_changed_changes_nothing_kept():
    recent = RecentEnds()
    el = ended(1)
    recent.add(el)
    shown = recent[0]
    shown["state"] = "declined"
    assert recent[0]["state"] == "accepted"


def test_a_thousand_ends_take_less_than_300_kb():
    """Kept as dicts of 13 keys (as before) a thousand took ~0.6 MiB for good on a busy gateway: more than a
    quarter of what it grew by over a million questions (bench/README.md, "A million completed questions")."""
    els = [ended(n) for n in range(1000)]
    recent = RecentEnds()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for el in els:
            recent.add(el)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 300_000, f"{held:,} bytes for 1,000 ends"
