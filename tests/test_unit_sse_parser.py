"""`wire.sse.SseParser`: an event stream cut anywhere gives the events, last id and retry that the stream's rules give
(checked against a plain line-by-line reading of them, fuzzed), and an event whole in one chunk (an upstream's usual
`event: message` and `data:` lines) is read with no frame per line and no call for the size bound."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from elicitgate.wire.sse import SseParser
from tests.profiled import calls_of
from tests.test_wire_http_client import _split, fuzz  # pyright: ignore[reportPrivateUsage]


def _reference(stream: bytes) -> tuple[list[bytes], str | None, float | None]:
    """The events (`message` or no type, with data), the last id and the retry of a whole stream, line by line."""
    events: list[bytes] = []
    data: list[bytes] | None = None
    event, last_id, retry = b"", None, None
    for line in re.split(rb"\r\n|\r|\n", stream)[:-1]:  # the last piece is an unended line
        if not line:
            if data is not None:
                joined = b"\n".join(data)
                if joined and event in (b"", b"message"):
                    events.append(joined)
            data, event = None, b""
            continue
        name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if name == b"data":
            data = [*(data or []), value]
        elif name == b"event":
            event = value
        elif name == b"id" and b"\0" not in value:
            last_id = value.decode(errors="replace")
        elif name == b"retry" and value.isdigit():
            retry = int(value) / 1000
    return events, last_id, retry


lines = st.one_of(
    st.sampled_from(
        [
            b"event: message",
            b"event: ping",
            b"event:message",
            b"data: {}",
            b"data:x",
            b"data: ",
            b"data",
            b": comment",
            b"id: 7",
            b"id: a\0b",
            b"retry: 1500",
            b"retry: x",
            b"other: 1",
            b"",
        ]
    ),
    st.binary(max_size=12).filter(lambda line: b"\r" not in line and b"\n" not in line),
)
ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


@fuzz(300)
@given(
    stream=st.lists(st.tuples(lines, ends), max_size=14).map(lambda pairs: b"".join(a + b for a, b in pairs)),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_a_stream_cut_anywhere_reads_as_its_lines_say(stream: bytes, cuts: list[int]) -> None:
    parser = SseParser(1024 * 1024)
    found = [event for piece in _split(stream, cuts) for event in parser.feed(piece)]
    events, last_id, retry = _reference(stream)
    assert (found, parser.last_id, parser.retry) == (events, last_id, retry)


def test_an_event_whole_in_one_chunk_is_read_with_no_frame_per_line() -> None:
    parser = SseParser(1024 * 1024)
    found, called = calls_of(lambda: parser.feed(b'event: message\r\ndata: {"id":1}\r\n\r\n'), c_calls=True)
    assert found == [b'{"id":1}']
    assert "_field" not in called and "_check_size" not in called
    assert "isinstance" not in called and "startswith" not in called and "endswith" not in called
