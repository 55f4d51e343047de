"""The requests an upstream's HTTP wire POSTs alike (a 2026-07-28 round's call and its retry, every call of one tool)
share one headers dict, made once for the message's own headers, session and version (`HttpWire._message_headers`),
and the client renders that dict's request head once (`HttpClient.start`): what goes on the wire is as before, a
new session id or protocol version gets headers of its own, and a header that cannot be sent is refused each time.

Against a raw TCP server (tests/test_wire_http_client.py's), as tests/test_unit_upwire_direct_post.py has the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, cast

import pytest

from elicitgate.errors import HttpError
from elicitgate.wire import http_client
from elicitgate.wire.http import HttpWire
from elicitgate.wire.http_client import HttpClient, Url
from tests.test_unit_upstream_round_cost import _RoomySocket  # pyright: ignore[reportPrivateUsage]
from tests.test_unit_upwire_direct_post import (
    _idle,  # pyright: ignore[reportPrivateUsage]
    _json,  # pyright: ignore[reportPrivateUsage]
    _next,  # pyright: ignore[reportPrivateUsage]
)
from tests.test_wire_http_client import (
    _request,  # pyright: ignore[reportPrivateUsage]
    _server,  # pyright: ignore[reportPrivateUsage]
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _recording(heads: list[bytes]) -> Any:
    """Answer every request on a connection with a JSON result for its id, keeping each POST's head and body."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            if not body:  # the session's DELETE as the wire closes
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            heads.append(head + body)
            writer.write(_json(json.loads(body)["id"]))
            await writer.drain()

    return serve


def _call(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "confirm"}}


def _started_with(wire: HttpWire) -> list[Mapping[str, str]]:
    """The headers each request of `wire` written at once was started with (`HttpClient.start`)."""
    client = wire._client  # pyright: ignore[reportPrivateUsage]
    start = client.start
    given: list[Mapping[str, str]] = []

    def recorded(method: str, url: Url, headers: Mapping[str, str], body: bytes | None, listener: Any) -> Any:
        given.append(headers)
        return start(method, url, headers, body, listener)

    client.start = recorded  # type: ignore[method-assign]
    return given


async def _sent(wire: HttpWire, messages: Any, request_id: int, headers: Mapping[str, str] | None) -> None:
    """POST one request on the wire's idle connection and read its answer."""
    await asyncio.wait_for(_idle(wire), 5)
    await wire.send(_call(request_id), headers)
    assert (await _next(messages)).message["id"] == request_id  # type: ignore[index]


async def test_requests_alike_share_one_headers_dict_and_go_on_the_wire_as_before() -> None:
    heads: list[bytes] = []
    stamped = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "confirm"}
    async with _server(_recording(heads)) as server:
        wire = HttpWire(server.url().text, {"X-Team": "a"})
        messages = wire.messages()
        try:
            await wire.send(_call(1), stamped)  # opens the connection (in a task)
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            given = _started_with(wire)
            await _sent(wire, messages, 2, stamped)
            await _sent(wire, messages, 3, stamped)
        finally:
            await wire.aclose()
    assert len(given) == 2 and given[0] is given[1]
    body = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"confirm"}}'
    assert heads[2] == (
        b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:%d\r\nuser-agent: " % server.port
        + dict(given[0])["user-agent"].encode()
        + b"\r\nx-team: a\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        b"mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: confirm\r\n"
        b"content-length: %d\r\n\r\n" % len(body) + body
    )
    assert [head.replace(b'"id":1', b'"id":3') for head in heads[:1]] == [heads[2]]


async def test_a_new_session_or_version_or_other_headers_get_headers_of_their_own() -> None:
    heads: list[bytes] = []
    first = {"mcp-protocol-version": "2025-11-25"}
    async with _server(_recording(heads)) as server:
        wire = HttpWire(server.url().text)
        messages = wire.messages()
        try:
            await wire.send(_call(1), first)
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            given = _started_with(wire)
            await _sent(wire, messages, 2, first)
            wire.session_id = "s-2"
            await _sent(wire, messages, 3, first)
            await _sent(wire, messages, 4, {"mcp-protocol-version": "2025-06-18"})
            await _sent(wire, messages, 5, None)  # no headers of its own: the version the last one said
        finally:
            await wire.aclose()
    assert len({id(headers) for headers in given}) == 4
    assert b"mcp-session-id" not in heads[1] and b"mcp-session-id: s-2\r\n" in heads[2]
    assert b"mcp-protocol-version: 2025-11-25\r\n" in heads[2]
    assert b"mcp-protocol-version: 2025-06-18\r\n" in heads[3] and b"mcp-protocol-version: 2025-06-18\r\n" in heads[4]


async def test_a_head_is_rendered_once_per_headers_dict_and_a_bad_header_is_refused_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendered: list[Mapping[str, str]] = []
    lines = http_client._head_lines  # pyright: ignore[reportPrivateUsage]

    def counted(method: str, url: Url, headers: Mapping[str, str]) -> bytes:
        rendered.append(headers)
        return lines(method, url, headers)

    monkeypatch.setattr(http_client, "_head_lines", counted)
    client = HttpClient()
    url = Url.parse("http://127.0.0.1:1/mcp")
    headers = {"accept": "*/*"}

    def render(method: str, headers: Mapping[str, str]) -> bytes:
        """The head `HttpClient.start` writes on an idle connection of a stand-in socket."""
        connection = http_client._Connection(client, url.origin)  # pyright: ignore[reportPrivateUsage]
        socket = _RoomySocket()
        connection.connection_made(socket)
        client.release(connection)
        assert client.start(method, url, headers, None, cast(http_client.HeadListener, None)) is not None
        return bytes(socket.written)

    assert render("POST", headers) == render("POST", headers)
    assert render("GET", headers).startswith(b"GET /mcp HTTP/1.1\r\n")
    assert len(rendered) == 2
    bad = {"x-bad": "a\r\nb"}
    for _ in range(2):
        with pytest.raises(HttpError):
            render("POST", bad)
    assert len(rendered) == 4


def test_a_value_made_for_a_given_object_is_kept_by_its_identity_and_inputs_and_bounded():
    """`http_client.MadeFor`, which both the wire's headers and the client's heads are kept in: an equal dict that is
    another object, or other inputs, get nothing kept; past its limit all kept values are let go."""
    made: http_client.MadeFor[str] = http_client.MadeFor(2)
    given = {"a": "1"}
    assert made.keep(given, ("POST", 1), "made") == "made"
    assert made.get(given, ("POST", 1)) == "made"
    assert made.get({"a": "1"}, ("POST", 1)) is None  # equal, not the same dict
    assert made.get(given, ("POST", 2)) is None
    other, third = {"b": "2"}, {"c": "3"}
    made.keep(other, (), "other")
    made.keep(third, (), "third")  # the limit reached: the two before are let go
    assert made.get(given, ("POST", 1)) is None and made.get(other, ()) is None
    assert made.get(third, ()) == "third"
