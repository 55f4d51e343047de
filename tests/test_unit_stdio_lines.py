"""The stdio wires' reading (wire/framing.py `LineBuffer`, wire/stdio.py `LineReader`), fuzzed (hypothesis): whatever
the chunks a pipe delivers its bytes in, every line becomes the same message, in order, and a line past the limit
becomes one `LineTooLong` with none of it kept; pushed to the endpoint, a message whose handling must finish first
(`initialize`) holds back every later one, however many came in the same chunk."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elicitgate.errors import LineTooLong
from elicitgate.json_shapes import JsonObject
from elicitgate.wire.base import Inbound
from elicitgate.wire.framing import LineBuffer, parse_line
from elicitgate.wire.stdio import LineReader

LONG_RUN = "FUZZ_EXAMPLES" in os.environ
MAX_LINE = 120


def fuzz(ci_examples: int) -> Any:
    return settings(max_examples=int(os.environ["FUZZ_EXAMPLES"]) if LONG_RUN else ci_examples, deadline=None,
                    derandomize=not LONG_RUN, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


messages = st.builds(lambda i, text: b'{"jsonrpc":"2.0","id":%d,"method":"m","params":{"t":"%s"}}' % (i, text),
                     st.integers(0, 10**6), st.text("abc xyz", max_size=150).map(str.encode))
lines = st.lists(st.one_of(messages, st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
                           st.sampled_from([b"", b"   ", b" " * 200])), min_size=1, max_size=8)


def cut(data: bytes, draw: st.DataObject) -> list[bytes]:
    """`data` in chunks of any sizes, as a pipe may deliver it."""
    points = sorted(draw.draw(st.lists(st.integers(0, len(data)), max_size=12)))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def expected(line: bytes) -> object:
    if len(line) > MAX_LINE:
        return LineTooLong
    if not line.strip():
        return None
    found = parse_line(line)
    return found if isinstance(found, dict) else type(found)


def shape(found: JsonObject | Exception) -> object:
    return type(found) if isinstance(found, Exception) else found


@fuzz(300)
@given(batch=lines, ended=st.booleans(), data=st.data())
def test_every_line_is_read_the_same_whatever_the_chunks(batch: list[bytes], ended: bool, data: st.DataObject):
    stream = b"\n".join(batch) + (b"\n" if ended else b"")
    buffer = LineBuffer(MAX_LINE)
    found = [shape(m) for chunk in cut(stream, data) for m in buffer.feed(chunk)]
    last = buffer.end()
    if last is not None:
        found.append(shape(last))
    assert found == [e for e in map(expected, batch) if e is not None]


def test_a_line_past_the_limit_keeps_none_of_itself() -> None:
    buffer = LineBuffer(MAX_LINE)
    assert buffer.feed(b"x" * 100) == []
    refused = buffer.feed(b"x" * 100)
    assert len(refused) == 1 and isinstance(refused[0], LineTooLong)
    assert "longer than 120 bytes" in str(refused[0])
    assert buffer.feed(b"y" * 10_000) == []  # the rest of that line is dropped as it comes, not kept
    assert buffer.feed(b'y\n{"id":1}\n') == [{"id": 1}]


class Pipe(asyncio.ReadTransport):
    """What the reader asks of its transport: pausing and resuming."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False


@fuzz(200)
@given(ids=st.lists(st.integers(0, 9), min_size=1, max_size=10), pushed_after=st.integers(0, 10), data=st.data())
def test_pushed_messages_come_in_order_and_an_inline_one_holds_back_the_rest(
    ids: list[int], pushed_after: int, data: st.DataObject
) -> None:
    """Ids 0-2 are "inline": their handling (which yields to the loop) ends before the next message is handed."""
    stream = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"m"}\n' % i for i in ids)
    chunks = cut(stream, data)

    async def run() -> list[tuple[str, int]]:
        seen: list[tuple[str, int]] = []
        reader, pipe = LineReader(MAX_LINE), Pipe()
        reader.connection_made(pipe)

        async def inline(request_id: int) -> None:
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            seen.append(("done", request_id))

        def sink(inbound: Inbound) -> Coroutine[Any, Any, None] | None:
            assert isinstance(inbound.message, dict)
            request_id = inbound.message["id"]
            seen.append(("got", request_id))
            return inline(request_id) if request_id < 3 else None

        async def feed() -> None:
            for i, chunk in enumerate(chunks):
                if i == pushed_after:
                    await asyncio.sleep(0)
                reader.data_received(chunk)
                await asyncio.sleep(0)
            reader.connection_lost(None)

        feeding = asyncio.ensure_future(feed())
        await reader.push(sink)
        await feeding
        return seen

    seen = asyncio.run(run())
    assert [i for what, i in seen if what == "got"] == ids
    for n, (what, i) in enumerate(seen):  # an inline message is done before the next one is handed out
        if what == "got" and i < 3:
            assert seen[n + 1] == ("done", i)
