"""The upstream HTTP client's chunked bodies (`wire.http_client._Connection._chunks`): an SSE event's chunk that comes
whole in one read (its size line, its data, its CRLF) is taken with no frame or call per line; bodies with chunk
extensions, whitespace, upper-case or zero-padded sizes, trailers, split anywhere, read as sent; and the malformed
ones refused as before (a line without CRLF, a chunk longer than its size, a size that is not hexadecimal)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitgate.errors import ProtocolError, TransportError
from tests.profiled import python_calls
from tests.test_wire_http_client import _split, _started, fuzz  # pyright: ignore[reportPrivateUsage]

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _read(pieces: list[bytes]) -> bytes | TransportError:
    connection, response = _started()
    for piece in pieces:
        connection.data_received(piece)
    if connection.failure is not None:
        return connection.failure
    assert response.finished
    return await response.read()


size_lines = st.sampled_from(["%x", "%X", "000%x", "%x;name=value", "%x ; x", "%x\t"])
trailer_lines = st.lists(st.sampled_from([b"x-t: 1", b"Checksum: abc"]), max_size=2)


@fuzz(200)
@given(
    parts=st.lists(st.tuples(st.binary(min_size=1, max_size=40), size_lines), max_size=5),
    last=size_lines,
    trailer=trailer_lines,
    cuts=st.lists(st.integers(0, 1000), max_size=6),
)
def test_any_chunked_body_in_any_split_is_read_as_sent(
    parts: list[tuple[bytes, str]], last: str, trailer: list[bytes], cuts: list[int]
) -> None:
    body = b"".join((line % len(part)).encode() + b"\r\n" + part + b"\r\n" for part, line in parts)
    body += (last % 0).encode() + b"\r\n" + b"".join(field + b"\r\n" for field in trailer) + b"\r\n"
    stream = HEAD + body
    assert asyncio.run(_read(_split(stream, cuts))) == b"".join(part for part, _ in parts)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"3\r\nabcd\r\n0\r\n\r\n", "is longer than its size said"),
        (b"3\r\nabc\n0\r\n\r\n", "does not end with CRLF"),
        (b"3\nabc\r\n0\r\n\r\n", "does not end with CRLF"),
        (b"1234567890abcdef0\r\n", "not hexadecimal"),
        (b"x\r\n", "not hexadecimal"),
        (b"\r\n", "not hexadecimal"),
        (b"3\r\nabc\r\n0\r\nx-t: 1\n\r\n", "does not end with CRLF"),
    ],
)
def test_a_malformed_chunked_body_is_refused_as_before(body: bytes, error: str) -> None:
    for pieces in ([HEAD + body], [HEAD, *(body[at : at + 1] for at in range(len(body)))]):
        failure = asyncio.run(_read(pieces))
        assert isinstance(failure, ProtocolError) and error in str(failure), failure


def test_an_event_s_chunk_whole_in_one_read_is_taken_with_no_call_per_line() -> None:
    event = b"event: message\r\ndata: {}\r\n\r\n"

    async def main() -> list[str]:
        connection, _ = _started()
        connection.data_received(HEAD)
        chunk = b"%x\r\n%s\r\n" % (len(event), event)
        with python_calls(c_prefix="c:") as called:
            connection.data_received(chunk)
        return called

    called = asyncio.run(main())
    assert "_check_line" not in called and "_chunk_size" not in called
    assert "c:min" not in called and "c:find" not in called and "c:endswith" not in called
