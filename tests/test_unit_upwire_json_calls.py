"""A request's JSON answer on a kept-alive connection, read in the connection's callbacks (`wire.http._PostHead`), is
read with no work that changes nothing (issue #34): its body's only chunk, which ends it, does not start its read
timeout over (`StreamedReads.came`: the head's wait and, for a body that comes after its head, the stream's start
only), and giving the connection back
to the pool wakes nobody when nobody waits for one (`HttpClient._wake_one`). A body that comes in parts still starts
its timeout over with each part but its last. Against a raw TCP server (tests/test_wire_http_client.py's)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from elicitgate.wire.http import HttpWire
from elicitgate.wire.http_client import HttpClient, StreamedReads
from tests.test_unit_upwire_direct_post import (
    _idle,  # pyright: ignore[reportPrivateUsage]
    _json,  # pyright: ignore[reportPrivateUsage]
    _next,  # pyright: ignore[reportPrivateUsage]
    _post,  # pyright: ignore[reportPrivateUsage]
)
from tests.test_wire_http_client import (
    _answering,  # pyright: ignore[reportPrivateUsage]
    _request,  # pyright: ignore[reportPrivateUsage]
    _server,  # pyright: ignore[reportPrivateUsage]
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[object]]:
    """Who `StreamedReads.came` was told of (by type), and each `HttpClient._wake_one`'s origin."""
    came: list[str] = []
    woken: list[object] = []
    real_came = StreamedReads.came
    real_wake = HttpClient._wake_one  # pyright: ignore[reportPrivateUsage]

    def counted_came(self: StreamedReads, response: Any) -> None:
        came.append(type(response).__name__)
        real_came(self, response)

    def counted_wake(self: HttpClient, origin: Any) -> None:
        woken.append(origin)
        real_wake(self, origin)

    monkeypatch.setattr(StreamedReads, "came", counted_came)
    monkeypatch.setattr(HttpClient, "_wake_one", counted_wake)
    return came, woken


async def test_a_json_answer_that_comes_whole_starts_no_read_timeout_for_its_end_and_wakes_nobody(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with _server(_answering(_json(1), _json(2, "second"))) as server:
        wire = HttpWire(server.url().text)
        messages = wire.messages()
        try:
            await wire.send(_post(1))  # opens the connection (in a task)
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            await asyncio.wait_for(_idle(wire), 5)
            came, woken = _counting(monkeypatch)
            await wire.send(_post(2))
            inbound = await _next(messages)
            await asyncio.wait_for(_idle(wire), 5)
            monkeypatch.undo()
            assert inbound.message == {"jsonrpc": "2.0", "id": 2, "result": {"text": "second"}}
            # The head's wait alone: the answer is written whole, its body comes in the head's read, and its stream
            # ends in that callback (`tests/test_unit_upstream_round_cost.py` has the body that comes later).
            assert came == ["Started"]
            assert woken == []
            assert server.connections == 1
        finally:
            await wire.aclose()


async def test_a_json_answer_in_parts_starts_its_read_timeout_over_with_each_but_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"text": "parts"}}).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    sent = [asyncio.Event()]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(_json(1))
        await _request(reader)
        for part in (head, body[:10], body[10:20]):
            writer.write(part)
            await writer.drain()
            await sent[0].wait()  # the client read it before the next part goes: one part for each read
            sent[0] = asyncio.Event()
        writer.write(body[20:])
        await writer.drain()
        await reader.read()

    async with _server(serve) as server:
        wire = HttpWire(server.url().text)
        messages = wire.messages()
        try:
            await wire.send(_post(1))
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            await asyncio.wait_for(_idle(wire), 5)
            came, _ = _counting(monkeypatch)
            read: list[int] = []
            real_data_received = type(_only_connection(wire)).data_received

            def told(connection: Any, data: bytes) -> None:
                real_data_received(connection, data)
                read.append(len(data))
                sent[0].set()

            monkeypatch.setattr(type(_only_connection(wire)), "data_received", told)
            await wire.send(_post(2))
            inbound = await _next(messages)
            monkeypatch.undo()
            assert inbound.message == {"jsonrpc": "2.0", "id": 2, "result": {"text": "parts"}}
            assert read == [len(head), 10, 10, len(body) - 20]
            assert came == ["Started", "Response", "Response", "Response"]  # the stream's start, each part but the last
        finally:
            await wire.aclose()


def _only_connection(wire: HttpWire) -> Any:
    client = wire._client  # pyright: ignore[reportPrivateUsage]
    (idle,) = client._idle.values()  # pyright: ignore[reportPrivateUsage]
    return idle[0]
