"""`/mcp`'s reading of a request's `Accept` header (faces/streamable.py `_accepts`), fuzzed (hypothesis) against the
`mcp` SDK's `check_accept_headers`, which it replaced on the face's hot path (one Starlette `Request` less per
request) and must agree with on any header a client sends."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from mcp.server.streamable_http import check_accept_headers

from elicitgate.faces.streamable import _accepts  # pyright: ignore[reportPrivateUsage]

MEDIA = st.sampled_from(["application/json", "text/event-stream", "*/*", "application/*", "text/*", "text/html",
                         "APPLICATION/JSON", "Text/Event-Stream", "application/jsonx", "", "*", "json"])
PARAMS = st.sampled_from(["", ";q=0.9", "; charset=utf-8", ";q=0", " "])


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(parts=st.lists(st.tuples(st.sampled_from(["", " ", "  "]), MEDIA, PARAMS), max_size=5),
       noise=st.text(max_size=20))
def test_accept_is_read_as_the_sdk_reads_it(parts: list[tuple[str, str, str]], noise: str):
    for accept in (",".join(pad + media + params for pad, media, params in parts), noise):
        request = Request({"type": "http", "headers": [(b"accept", accept.encode("utf-8", "surrogatepass"))]})
        assert _accepts(accept) == check_accept_headers(request), accept
