"""The broker's last ends kept in slots made once (`elicitation.recent.RecentEnds`): what a busy gateway holds does
not grow with the ends after the first, and every read is what `Elicitation.summary()` said."""

from __future__ import annotations

import tracemalloc

from elicitgate.elicitation.model import Elicitation, State
from elicitgate.elicitation.recent import SHAPES_KEPT, RecentEnds


def ended(n: int, *, server: str = "demo", reason: str = "user accepted", id_: str | None = None) -> Elicitation:
    el = Elicitation(server=server, mode="form", params={"message": f"Proceed {n}?"}, deadline=0.0)
    if id_ is not None:
        el.id = id_
    el.state, el.reason, el.attempts = State.ACCEPTED, reason, 1
    el.ended_at = el.created_at + 0.001 * n
    return el


def test_the_ends_after_the_first_take_no_memory_that_stays():
    """Before, each end kept a 13-value tuple, its id string and two floats (~176 KB traced for 1,000): memory that
    filled in over a gateway's first thousand questions, a sixth of what it grew by over a million. Now the slots
    (~40 KB for 1,000) are made at the first end, and the ends after it allocate nothing that stays."""
    els = [ended(n) for n in range(1100)]
    recent = RecentEnds()
    tracemalloc.start()
    try:
        empty = tracemalloc.get_traced_memory()[0]
        recent.add(els[0])
        slots = tracemalloc.get_traced_memory()[0]
        for el in els[1:]:
            recent.add(el)
        full = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert full - slots < 2_000, f"{full - slots:,} bytes for 1,099 ends after the first"
    assert full - empty < 60_000, f"{full - empty:,} bytes for 1,100 ends in all"
    assert list(recent) == [el.summary() for el in els[100:]]


def test_ids_of_any_shape_are_kept_and_found_newest_first():
    recent = RecentEnds(size=4)
    odd, upper = ended(1, id_="not-hex"), ended(2, id_="ABCDEF0123456789ABCDEF0123456789")
    again = ended(3, id_="not-hex", reason="again")
    zeros = "0" * 32
    made = ended(4)
    for el in (odd, upper, again, made):
        recent.add(el)
    assert recent.find("not-hex") == again.summary()
    assert recent.find(upper.id) == upper.summary() and recent.find(upper.id.lower()) is None
    assert recent.find(made.id) == made.summary()
    assert recent.find(zeros) is None  # a slot's bytes of an id of another shape are no id
    assert [s["id"] for s in recent] == ["not-hex", upper.id, "not-hex", made.id]


def test_an_end_gone_past_the_bound_is_not_found_and_its_slot_reads_as_the_new_one():
    recent = RecentEnds(size=3)
    els = [ended(n, id_="odd" if n == 1 else None) for n in range(7)]
    for el in els:
        recent.add(el)
    assert [recent.find(el.id) for el in els[:4]] == [None] * 4
    assert [recent.find(el.id) for el in els[4:]] == [el.summary() for el in els[4:]]
    assert recent[0] == els[4].summary() and recent[-1] == els[6].summary() and recent[-3] == els[4].summary()
    for index in (3, -4):
        try:
            recent[index]
        except IndexError:
            pass
        else:
            raise AssertionError(f"recent[{index}] read past the kept ends")


def test_an_empty_one_reads_as_empty():
    recent = RecentEnds()
    assert len(recent) == 0 and list(recent) == [] and list(reversed(recent)) == []
    assert recent.find(ended(1).id) is None


def test_ends_alike_share_their_values_and_the_shared_ones_stay_bounded():
    recent = RecentEnds(size=SHAPES_KEPT * 4)
    els = [ended(n, server=f"s{n}") for n in range(SHAPES_KEPT * 3)]
    for el in els:
        recent.add(el)
    assert len(recent._shapes) <= SHAPES_KEPT  # pyright: ignore[reportPrivateUsage]
    assert list(recent) == [el.summary() for el in els]
    a, b = ended(1), ended(2)
    recent.add(a)
    recent.add(b)
    last, before = recent._slot(len(recent) - 1), recent._slot(len(recent) - 2)  # pyright: ignore[reportPrivateUsage]
    assert recent._rest[last] is recent._rest[before]  # pyright: ignore[reportPrivateUsage]


def test_an_end_with_a_value_that_cannot_be_hashed_is_kept_as_it_is():
    recent = RecentEnds(size=2)
    odd = ended(1)
    odd.mode = ["form"]  # pyright: ignore[reportAttributeAccessIssue] - what an upstream's params could carry
    recent.add(odd)
    recent.add(ended(2))
    assert recent[0] == odd.summary() and recent[0]["mode"] == ["form"]
