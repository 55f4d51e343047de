"""The resumption store's bounds and ids (faces/event_streams.py) and a question's grace period
(elicitation/carriers.py), in memory: the HTTP face's tests (tests/test_reliability.py) run them over real
transports with real clients."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from elicitgate.elicitation.carriers import Carriers
from elicitgate.faces.event_streams import EventLimits, SessionEvents
from elicitgate.metrics import STREAM_EVENTS_DROPPED

pytestmark = pytest.mark.anyio


def dropped(reason: str) -> float:
    return STREAM_EVENTS_DROPPED.labels(reason)._value.get()  # noqa: SLF001


def request(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": f"eg-{n}", "method": "elicitation/create", "params": {}}


def progress(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": n}}


def test_past_its_bound_a_session_drops_notifications_and_written_events_first_and_counts_them():
    session = SessionEvents(EventLimits(per_session=3, total=100))
    before = dropped("session_limit")
    stream = session.open()
    stream.put(request(1))
    for n in range(4):
        stream.put(progress(n))
    # Nothing was written yet: the request stays, the oldest progress notifications go.
    assert [seq for seq, _ in stream.events] == [1, 4, 5]
    assert dropped("session_limit") == before + 2
    stream.written = 5  # a client had them all
    stream.put({"jsonrpc": "2.0", "id": 1, "result": {}}, last=True)
    assert [seq for seq, _ in stream.events] == [4, 5, 6]
    assert session.kept == 3 and session.limits.kept == 3


def test_the_total_bound_holds_over_sessions_and_a_forgotten_stream_gives_its_room_back():
    limits = EventLimits(per_session=10, total=4)
    one, two = SessionEvents(limits), SessionEvents(limits)
    before = dropped("total_limit")
    first = one.open()
    for n in range(3):
        first.put(progress(n))
    second = two.open()
    second.put(progress(9))
    second.put(progress(10))
    assert limits.kept == 4 and dropped("total_limit") == before + 1
    one.forget(first)
    assert limits.kept == 1 and one.kept == 0


def test_a_last_event_id_names_a_stream_of_this_session_and_an_event_it_sent():
    session, other = SessionEvents(EventLimits(10, 100)), SessionEvents(EventLimits(10, 100))
    stream = session.open()
    stream.put(request(1))
    assert session.find(f"{stream.name}/1") == (stream, 1)
    assert session.find(f"{stream.name}/0") == (stream, 0)  # its priming event
    assert session.find(f"{stream.name}/2") is None  # not sent yet
    assert other.find(f"{stream.name}/1") is None  # another session's stream
    for malformed in ("", "1", "a/1", "1/x", "1/2/3", "-1/2", "1 /2"):
        assert isinstance(session.find(malformed), ValueError), malformed


async def test_the_last_carrier_leaving_starts_the_grace_period_and_one_coming_back_stops_it():
    abandoned: list[str] = []
    carriers = Carriers(0.05, abandoned.append)
    stream, resumed = object(), object()
    carriers.attach(stream)
    carriers.detach(stream, "broke")
    assert carriers.waiting
    carriers.attach(resumed)  # the client resumed in time
    assert not carriers.waiting
    await asyncio.sleep(0.1)
    assert abandoned == []
    carriers.detach(resumed, "broke again")
    await asyncio.wait_for(_until(lambda: bool(abandoned)), 5)
    assert abandoned == ["broke again"]
    carriers.attach(stream)
    carriers.detach(stream, "once more")
    carriers.stop()  # the question ended: no timer outlives it
    await asyncio.sleep(0.1)
    assert abandoned == ["broke again"]


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.01)
