"""What the upstream side of a call (`wire.http_client`, `upstreams.connection`, `router`) no longer calls per request
(issue #34: the handshake-era client in front of a 2026-07-28 upstream over HTTP, `bench.upstream_rounds`), with the
same results: a client's streamed reads ask asyncio for the event loop once (`get_running_loop` is a `getpid` system
call on Python 3.11), not at every request; a JSON answer whose body came in the same read as its head is streamed to
its sink with no read timeout armed and forgotten for it (its end comes in that very callback); an upstream
connection's requests hand their clocks the loop the connection asked for once; a tool's needs before a call (its
required arguments, its confirmation) are read from its catalog entry once, and a call looks only at its arguments.
On a stand-in socket, or in memory."""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any, cast

import pytest

from elicitgate.errors import TransportError
from elicitgate.router.requests import RequestRouter
from elicitgate.upstreams import clock
from elicitgate.wire import http_client
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.http_client import HttpClient, Response, Url
from tests.profiled import calls_of, python_calls
from tests.test_unit_trims_cost import _router  # pyright: ignore[reportPrivateUsage]
from tests.test_unit_upstream_stamp import modern_connection
from tests.test_wire_http_client import _Sink, _Socket  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio

URL = Url.parse("http://upstream.test/mcp")
HEADERS = {"content-type": "application/json"}
ANSWER = b'{"jsonrpc":"2.0","id":"eg-1","result":{}}'
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(ANSWER)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Answering:
    """An endpoint whose requests are answered at once with `result`, on `loop`'s futures (asking asyncio for none)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, result: dict[str, Any]) -> None:
        self.loop = loop
        self.result = result

    def asking(self, request_id: str, method: str, params: Any, **_: Any) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        future.set_result(self.result)
        return future

    def asked_over(self, request_id: str, headers: Any) -> None:
        pass


class _Streams:
    """A `HeadListener` that streams each response's body to a sink of its own, as `wire.http`'s JSON answers are."""

    def __init__(self) -> None:
        self.sinks: list[_Sink] = []

    def head(self, response: Response) -> None:
        self.sinks.append(_Sink())
        response.stream(self.sinks[-1])

    def failed(self, error: TransportError, retry: bool) -> None:
        raise AssertionError(f"no head: {error}")


class _RoomySocket(_Socket):
    """A stand-in socket whose write buffer is empty: a request is written at once (`HttpClient.start`)."""

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (16 * 1024, 64 * 1024)


def _idle_connection(client: HttpClient) -> http_client._Connection:  # pyright: ignore[reportPrivateUsage]
    connection = http_client._Connection(client, URL.origin)  # pyright: ignore[reportPrivateUsage]
    connection.connection_made(_RoomySocket())
    client.release(connection)
    return connection


def _answered(client: HttpClient, listener: _Streams, *reads: bytes) -> list[str]:
    """One request written at once on the client's idle connection, its answer fed as `reads`: what was called."""
    connection = _idle_connection(client)
    with python_calls(c_prefix="c:") as called:
        started = client.start("POST", URL, HEADERS, b"{}", listener)
        for data in reads:
            connection.data_received(data)
    assert started is not None
    return called


async def test_a_json_answer_whole_in_one_read_arms_no_read_timeout_and_the_loop_is_asked_for_once() -> None:
    client = HttpClient()
    listener = _Streams()
    first = _answered(client, listener, HEAD + ANSWER)
    second = _answered(client, listener, HEAD + ANSWER)
    assert [sink.parts for sink in listener.sinks] == [[ANSWER], [ANSWER]]
    assert [sink.ends for sink in listener.sinks] == [[None], [None]]
    assert first.count("c:get_running_loop") == 1  # the first request's head timeout
    assert second.count("c:get_running_loop") == 0
    assert second.count("came") == 1  # the head's timeout, armed as the request was written ...
    assert second.count("forget") == 1  # ... and forgotten as the head came: the body has none
    assert len(client._reads or ()) == 0  # pyright: ignore[reportPrivateUsage]
    # No call of a step of its own for the kept head's lookup, the body's framing, its last chunk or the stream's end.
    assert {"_head_lines", "_frame", "_receive", "_stop_streaming"}.isdisjoint(second)


async def test_a_json_answer_whose_body_comes_after_its_head_is_still_timed_until_it_ends() -> None:
    client = HttpClient()
    listener = _Streams()
    reads = client._reads  # pyright: ignore[reportPrivateUsage]
    assert reads is not None
    connection = _idle_connection(client)
    assert client.start("POST", URL, HEADERS, b"{}", listener) is not None
    connection.data_received(HEAD + ANSWER[:5])
    assert len(reads) == 1  # the body's read timeout
    connection.data_received(ANSWER[5:])
    assert len(reads) == 0
    assert listener.sinks[0].parts == [ANSWER[:5], ANSWER[5:]] and listener.sinks[0].ends == [None]


async def test_a_response_read_later_whole_is_as_before() -> None:
    client = HttpClient()
    connection = _idle_connection(client)
    head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    response = Response(URL, 30.0, client._reads)  # pyright: ignore[reportPrivateUsage]
    connection.write(b"GET /mcp HTTP/1.1\r\n\r\n", response, head)
    connection.data_received(HEAD + ANSWER)
    assert head.done() and response.complete
    assert await response.read() == ANSWER


async def test_a_connection_s_requests_ask_for_the_event_loop_once_for_all_their_clocks() -> None:
    conn = modern_connection()
    conn.endpoint = cast(Endpoint, _Answering(asyncio.get_running_loop(), {"content": []}))
    called: list[list[str]] = []
    for _ in range(3):
        with python_calls(c_prefix="c:") as calls:
            result = await conn.request("tools/call", {"name": "echo"}, timeout=30)
        assert result == {"content": []}
        called.append(calls)
    assert [calls.count("c:get_running_loop") for calls in called] == [1, 0, 0]
    assert conn.in_flight_origins() == []


def _confirming_router() -> RequestRouter:
    return _router(
        [
            {"name": "echo", "inputSchema": {"type": "object", "required": ["text", "n"]}},
            {"name": "wipe", "annotations": {"destructiveHint": True}},
        ],
        ask_missing_arguments=True,
        confirm_tools=["destructive"],
    )


def _ask_of(router: RequestRouter, name: str, arguments: object) -> tuple[Any, list[str]]:
    item = router.catalog.find("tools", "demo", name)
    params = {"name": name, "arguments": arguments}
    return calls_of(lambda: router.asks.needed("tools", "demo", name, item, params))


def test_a_tool_s_needs_are_read_from_its_entry_once_and_each_call_only_looks_at_its_arguments() -> None:
    router = _confirming_router()
    first, _ = _ask_of(router, "echo", {"text": "hi", "n": 1})
    again, called = _ask_of(router, "echo", {"text": "hi", "n": 1})
    assert first is None and again is None
    assert called == ["needed", "is_mapping"]


def test_the_kept_needs_ask_as_before() -> None:
    router = _confirming_router()
    for _ in range(2):  # read from the entry, then kept
        missing, _ = _ask_of(router, "echo", {"n": 1})
        assert (missing.missing, missing.confirm) == (("text",), False)
        assert _ask_of(router, "echo", None)[0].missing == ("text", "n")
        assert _ask_of(router, "echo", {"text": "hi", "n": 2, "more": 3})[0] is None
        wipe, _ = _ask_of(router, "wipe", {})
        assert (wipe.missing, wipe.confirm, wipe.item) == ((), True, router.catalog.find("tools", "demo", "wipe"))
    router.catalog.update("demo", {"tools": [{"name": "echo", "inputSchema": {"required": ["other"]}}]})
    assert _ask_of(router, "echo", {"text": "hi", "n": 1})[0].missing == ("other",)  # a new entry: read again


def test_needs_are_not_asked_for_where_the_gateway_does_not_ask() -> None:
    router = _router(
        [{"name": "echo", "inputSchema": {"type": "object", "required": ["text"]}}], ask_missing_arguments=False
    )
    assert _ask_of(router, "echo", {})[0] is None
    assert _ask_of(router, "echo", {})[1] == ["needed"]


async def test_a_request_in_flight_is_noted_with_no_object_of_its_own_made_by_python_code() -> None:
    conn = modern_connection()
    conn.endpoint = cast(Endpoint, _Answering(asyncio.get_running_loop(), {"content": []}))
    await conn.request("tools/call", {"name": "echo"}, timeout=30)  # the connection's loop, asked for once
    made: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name == "__init__":
            made.append(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        await conn.request("tools/call", {"name": "echo"}, timeout=30)
    finally:
        sys.setprofile(None)
    assert [where for where in made if "asyncio" not in where] == [clock.__file__]  # the clock's alone
