"""What the upstream HTTP client (`wire.http_client`) calls for a response's head: its headers' names and values
decoded all at once, not a lookup and a decode per header; the headers a response has (names in lower case, values
as sent, a repeated name's values joined with ", ", informational heads' dropped) as before, in any split."""

from __future__ import annotations

import asyncio

from hypothesis import example, given
from hypothesis import strategies as st

from tests.profiled import python_calls
from tests.test_wire_http_client import _split, _started, fuzz  # pyright: ignore[reportPrivateUsage]

name_chars = "abcXYZ-_!#$%&'*+.^`|~09"
header_names = st.one_of(
    st.sampled_from(["Content-Type", "content-type", "MCP-Session-Id", "X-A", "x-a"]),
    st.text(name_chars, min_size=1, max_size=10),
)
header_values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF).filter(lambda c: c != "\x7f"), max_size=20
).map(lambda value: value.strip(" "))


def _expected(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The headers as each was put before: its name decoded and lowered, a repeated one's values joined."""
    expected: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        expected[key] = f"{expected[key]}, {value}" if key in expected else value
    return expected


@fuzz(200)
@given(
    headers=st.lists(st.tuples(header_names, header_values), max_size=8).filter(
        lambda headers: all(name.lower() not in ("content-length", "transfer-encoding") for name, _ in headers)
    ),
    informational=st.booleans(),
    cuts=st.lists(st.integers(0, 1000), max_size=6),
)
@example(headers=[("X-A", "1"), ("x-a", ""), ("X-a", "3\t")], informational=True, cuts=[])
def test_a_response_s_headers_are_as_sent_whatever_their_case_and_split(
    headers: list[tuple[str, str]], informational: bool, cuts: list[int]
) -> None:
    lines = [f"{name}: {value}" for name, value in headers]
    head = ("HTTP/1.1 200 OK\r\n" + "".join(f"{line}\r\n" for line in lines) + "content-length: 0\r\n\r\n").encode(
        "latin-1"
    )
    if informational:
        head = b"HTTP/1.1 100 Continue\r\nX-Early: 1\r\n\r\n" + head

    async def main() -> dict[str, str]:
        connection, response = _started()
        for piece in _split(head, cuts):
            connection.data_received(piece)
        assert response.status == 200 and response.finished
        return response.headers

    seen = asyncio.run(main())
    assert seen == {**_expected([(name, value.lstrip(" \t")) for name, value in headers]), "content-length": "0"}


def _calls_of_a_head(count: int) -> list[str]:
    lines = "".join(f"X-Header-{index}: value {index}\r\n" for index in range(count))
    head = f"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n{lines}\r\n".encode()

    async def main() -> list[str]:
        connection, _ = _started()
        with python_calls(c_prefix="c:") as called:
            connection.data_received(head)
        return called

    return asyncio.run(main())


def test_a_response_head_s_calls_grow_by_one_callback_per_header_and_nothing_more() -> None:
    few, many = _calls_of_a_head(1), _calls_of_a_head(12)
    assert many.count("on_header") == few.count("on_header") + 11
    assert [name for name in many if name != "on_header"] == [name for name in few if name != "on_header"]
