"""What a session's event stream (faces/event_streams.py) calls to find the first event after a seq (`_after`: a
stream's reader at each event, `first_now`, `park`): the events' count read once."""

from __future__ import annotations

from typing import Any

from elicitgate.faces.event_streams import EventLimits, SessionEvents
from tests.profiled import calls_of


def test_the_first_event_after_a_seq_is_found_with_one_count_of_the_events() -> None:
    stream = SessionEvents(EventLimits(per_session=10, total=100)).open()
    message: Any = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    stream.put(message)
    stream.put({"jsonrpc": "2.0", "id": 1, "result": {}}, last=True)
    for after, expected in ((0, 1), (1, 2), (2, None)):
        found, called = calls_of(lambda after=after: stream._after(after), c_calls=True)  # pyright: ignore[reportPrivateUsage]
        assert (None if found is None else found[0]) == expected
        assert called.count("len") == 1, called
