"""`/mcp`'s request headers (faces/streamable.py `RequestHeaders`: lookups in a dict made once), fuzzed (hypothesis)
against Starlette's `Headers`, which it replaced on the face's hot path and must agree with for any request: any
case, a repeated name (the first wins), a name not sent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from elicitgate.faces.streamable import RequestHeaders

NAMES = st.sampled_from(["accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id", "host",
                         "x-a"])


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(sent=st.lists(st.tuples(NAMES, st.binary(max_size=8)), max_size=8),
       asked=st.lists(st.tuples(NAMES, st.sampled_from([str.lower, str.upper, str.title])), min_size=1, max_size=8))
def test_lookups_agree_with_starlettes_headers(sent: list[tuple[str, bytes]], asked: list[tuple[str, object]]):
    scope = {"type": "http", "headers": [(name.encode(), value) for name, value in sent]}
    ours, theirs = RequestHeaders(scope=scope), Headers(scope=scope)
    for name, spelling in asked:
        key = spelling(name)  # type: ignore[operator]
        assert ours.get(key) == theirs.get(key)
        assert ours.get(key, "none") == theirs.get(key, "none")
        assert (key in ours) == (key in theirs)
        if key in theirs:
            assert ours[key] == theirs[key]
        else:
            with pytest.raises(KeyError):
                ours[key]
    assert ours.items() == theirs.items()
