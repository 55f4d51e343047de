"""A request's POST on an idle kept-alive connection is written in its caller's step (`HttpClient.start`), and its
head and JSON or event-stream answer read in the connection's callbacks (`wire.http._PostHead`): no task, so no loop
turn between `HttpWire.send` and the write. What needs one still gets one (a connection to open, a redirect, a
connection the server closed as we wrote), and a request abandoned after its write closes its connection: it is
never reused with an answer on its way.

Against raw TCP servers (tests/test_wire_http_client.py's) and the official SDK's server (tests/peers/py_server.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from elicitgate.errors import ReadTimeout, TransportError
from elicitgate.wire.base import Inbound
from elicitgate.wire.http import HttpWire
from elicitgate.wire.http_client import HttpClient, Response, StreamedReads, Timeouts
from tests.test_upstream_http_wire import (
    HANDSHAKE,
    MODERN,
    _answer_to,  # pyright: ignore[reportPrivateUsage]
    _call,  # pyright: ignore[reportPrivateUsage]
    _session,  # pyright: ignore[reportPrivateUsage]
)
from tests.test_wire_http_client import (
    WAIT,
    _answering,  # pyright: ignore[reportPrivateUsage]
    _get,  # pyright: ignore[reportPrivateUsage]
    _request,  # pyright: ignore[reportPrivateUsage]
    _server,  # pyright: ignore[reportPrivateUsage]
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _json(request_id: int, text: str = "ok") -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"text": text}}).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


def _sse(request_id: int, text: str = "ok") -> bytes:
    event = b"event: message\r\ndata: %s\r\n\r\n" % json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": {"text": text}}).encode()
    chunk = b"%x\r\n%s\r\n" % (len(event), event)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    return head + chunk + b"0\r\n\r\n"


def _post(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "echo"}}


@contextmanager
def _tasks_made() -> Iterator[list[asyncio.Task[Any]]]:
    """The tasks the event loop makes meanwhile."""
    loop = asyncio.get_running_loop()
    made: list[asyncio.Task[Any]] = []
    before = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        made.append(task)
        return task

    loop.set_task_factory(factory)  # pyright: ignore[reportArgumentType]
    try:
        yield made
    finally:
        loop.set_task_factory(before)


async def _next(messages: Any) -> Inbound:
    async with asyncio.timeout(WAIT):  # not `wait_for`, which makes a task
        return await anext(messages)


@pytest.mark.parametrize("answer", [_json, _sse], ids=["json", "event-stream"])
async def test_a_request_on_an_idle_kept_alive_connection_is_written_at_once_and_answered_with_no_task(answer) -> None:
    async with _server(_answering(answer(1), answer(2), answer(3))) as server:
        wire = HttpWire(server.url().text)
        messages = wire.messages()
        try:
            await wire.send(_post(1))  # opens the connection (in a task)
            assert (await _next(messages)).message["result"]["text"] == "ok"  # type: ignore[index]
            await asyncio.wait_for(_idle(wire), WAIT)
            with _tasks_made() as made:
                await wire.send(_post(2))
                assert wire._client.connections == 1  # pyright: ignore[reportPrivateUsage]
                inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["id"] == 2 and not inbound.lost
            assert made == []
            assert server.connections == 1
        finally:
            await wire.aclose()


@asynccontextmanager
async def _warm(server: Any) -> AsyncIterator[tuple[HttpWire, Any]]:
    """A wire to `server` whose first request was answered and whose connection is idle again, and its messages."""
    wire = HttpWire(server.url().text)
    messages = wire.messages()
    try:
        await wire.send(_post(1))
        assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
        await asyncio.wait_for(_idle(wire), WAIT)
        yield wire, messages
    finally:
        await wire.aclose()


async def _idle(wire: HttpWire) -> None:
    """Until the wire's connection is back in its pool (its POST's body read to its end)."""
    client = wire._client  # pyright: ignore[reportPrivateUsage]
    while not any(client._idle.values()):  # pyright: ignore[reportPrivateUsage]
        await asyncio.sleep(0)


async def test_start_writes_nothing_without_an_idle_connection_or_for_a_request_too_big_for_the_buffer() -> None:
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")) as server:
        client = HttpClient()
        heard: list[Response] = []
        listener = _Listener(heard)
        try:
            assert client.start("POST", server.url(), {}, b"{}", listener) is None  # nothing open yet
            assert client.connections == 0
            assert (await _get(client, server.url()))[1] == b"ok"
            big = b"x" * (1024 * 1024)
            assert client.start("POST", server.url(), {}, big, listener) is None  # would wait for the socket
            assert (await _get(client, server.url(), big))[1] == b"ok"  # `request` sends it, on the same connection
            started = client.start("POST", server.url(), {}, b"{}", listener)
            assert started is not None
            await asyncio.wait_for(listener.done.wait(), WAIT)
            assert [r.status for r in heard] == [200]
            assert await asyncio.wait_for(heard[0].read(), WAIT) == b"ok"
            assert server.connections == 1
        finally:
            await client.aclose()


class _Listener:
    def __init__(self, heard: list[Response]) -> None:
        self.heard = heard
        self.failures: list[tuple[TransportError, bool]] = []
        self.done = asyncio.Event()

    def head(self, response: Response) -> None:
        self.heard.append(response)
        self.done.set()

    def failed(self, error: TransportError, retry: bool) -> None:
        self.failures.append((error, retry))
        self.done.set()


async def test_a_silent_server_after_a_direct_write_is_a_read_timeout_and_the_connection_closes() -> None:
    answered = asyncio.Event()

    async def answers_once_then_listens(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await _request(reader)
        answered.set()
        await reader.read()  # nothing more said, until the client closes

    async with _server(answers_once_then_listens) as server:
        client = HttpClient(timeouts=Timeouts(read=0.2))
        listener = _Listener([])
        try:
            assert (await _get(client, server.url()))[1] == b"ok"
            assert client.start("POST", server.url(), {}, b"{}", listener) is not None
            await asyncio.wait_for(listener.done.wait(), WAIT)
            assert answered.is_set()  # the request was written
            [(error, retry)] = listener.failures
            assert isinstance(error, ReadTimeout) and not retry, error
            assert client.connections == 0  # closed: its answer could still come first on it
        finally:
            await client.aclose()


async def test_a_kept_alive_connection_closed_as_the_request_is_written_sends_it_again_on_a_new_one() -> None:
    requests = 0

    async def first_answers_then_drops_the_next(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await _request(reader)
        requests += 1
        writer.write(_json(requests))
        await writer.drain()
        if server.connections == 1:
            await _request(reader)  # read the second request, then close without a byte of answer
            requests += 1

    async with _server(first_answers_then_drops_the_next) as server:
        async with _warm(server) as (wire, messages):
            await wire.send(_post(2))
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["id"] == 2 and not inbound.lost, inbound
            assert (requests, server.connections) == (3, 2)


async def test_a_modern_request_abandoned_after_its_direct_write_closes_its_connection_never_reused() -> None:
    """A 2026-07-28 request cancelled by closing its POST, right after `send` wrote it: that connection is closed (the
    answer the server may still send would come first on it), and the next request opens a new one."""
    seen: list[bytes] = []

    async def answers_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                _, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            seen.append(body)
            writer.write(_json(json.loads(body)["id"]))
            await writer.drain()

    async with _server(answers_each) as server:
        wire = HttpWire(server.url().text)
        messages = wire.messages()
        headers = {"mcp-protocol-version": MODERN}
        try:
            await wire.send(_post(1), headers)
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            await asyncio.wait_for(_idle(wire), WAIT)
            await wire.send(_post(2), headers)
            cancel = {"requestId": 2, "reason": "gone"}
            await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}, headers)
            assert wire._client.connections == 0  # pyright: ignore[reportPrivateUsage]
            await wire.send(_post(3), headers)
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["id"] == 3, inbound  # nothing for 2
            assert server.connections == 2
            assert [json.loads(body)["id"] for body in seen if json.loads(body).get("id") != 2] == [1, 3]
        finally:
            await wire.aclose()


async def test_a_redirect_or_an_error_to_a_direct_write_is_read_in_a_task_as_before() -> None:
    """What the callbacks do not read themselves: a same-origin 307 is followed with the POST's body, a 500's
    JSON-RPC error answers the request."""
    seen: list[tuple[bytes, bytes]] = []
    error = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "broken"}}).encode()
    answers = [
        _json(1),
        b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /moved\r\ncontent-length: 0\r\n\r\n",
        _json(2, "moved"),
        b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (len(error), error),
    ]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            head, body = await _request(reader)
            seen.append((head.split(b" ")[1], body))
            writer.write(answers.pop(0))
            await writer.drain()
        await reader.read()

    async with _server(serve) as server:
        async with _warm(server) as (wire, messages):
            await wire.send(_post(2))
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["result"]["text"] == "moved"
            assert seen[1][1] == seen[2][1] and seen[2][0] == b"/moved"
            await asyncio.wait_for(_idle(wire), WAIT)
            await wire.send(_post(3))
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["id"] == 3
            assert inbound.message["error"]["message"] == "broken"


async def test_calls_to_a_real_server_go_on_its_kept_alive_connection_with_no_task(http_upstream) -> None:
    """The official SDK's server: an echo and an elicitation (its question on the call's stream, our answer POSTed
    in our step) on kept-alive connections, no task made for either call."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    async with _session(f"{up.url}/mcp") as (wire, messages):
        headers = {"mcp-protocol-version": HANDSHAKE}
        await wire.send(_call("warm", "echo", text="warm"), headers)
        await _answer_to(messages, "warm")
        await asyncio.wait_for(_idle(wire), WAIT)
        with _tasks_made() as made:
            await wire.send(_call("echo-1", "echo", text="first"), headers)
            echoed = await _next(messages)
            assert isinstance(echoed.message, dict) and echoed.message["result"]["content"][0]["text"] == "first"
            async with asyncio.timeout(WAIT):
                await _idle(wire)
            await wire.send(_call("ask-1", "elicit", message="which?"), headers)
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["method"] == "elicitation/create"
            assert inbound.related_request_id == "ask-1"
            answer = {"action": "accept", "content": {"answer": "this"}}
            await wire.send({"jsonrpc": "2.0", "id": inbound.message["id"], "result": answer}, headers)
            result = await _next(messages)
            assert isinstance(result.message, dict) and "result" in result.message, result
        assert made == []


async def test_a_stream_held_open_past_its_answer_is_closed_after_the_drain_wait_on_the_shared_timer() -> None:
    """The answer is delivered at once; the stream that stays open after it is closed (its connection with it) once
    `DRAIN_WAIT` (here 0.2 s) ran out on the wire's one drain timer, and the next request opens a new connection."""
    event = b"event: message\r\ndata: %s\r\n\r\n" % json.dumps({"jsonrpc": "2.0", "id": 2, "result": {}}).encode()
    held = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + (
        b"%x\r\n%s\r\n" % (len(event), event))  # no last chunk: the stream stays open

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers = [_json(1), held]
        while True:
            try:
                _, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(answers.pop(0) if answers else _json(json.loads(body)["id"]))
            await writer.drain()

    async with _server(serve) as server:
        wire = HttpWire(server.url().text)
        wire.drains = StreamedReads(0.2)
        messages = wire.messages()
        try:
            await wire.send(_post(1))
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            await asyncio.wait_for(_idle(wire), WAIT)
            await wire.send(_post(2))
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["id"] == 2 and not inbound.lost
            client = wire._client  # pyright: ignore[reportPrivateUsage]
            async with asyncio.timeout(WAIT):
                while client.connections:  # until the drain wait ran out and closed it
                    await asyncio.sleep(0.05)
            assert not wire._posts  # pyright: ignore[reportPrivateUsage]
            await wire.send(_post(3))
            assert (await _next(messages)).message["id"] == 3  # type: ignore[index]
            assert server.connections == 2
        finally:
            await wire.aclose()


async def test_a_failure_of_ours_reading_a_direct_write_s_head_loses_that_answer_saying_why(monkeypatch) -> None:
    """A bug in what reads the head (in the connection's callbacks, where no task would catch it) gives the caller a
    lost answer at once, never a wait."""
    async with _server(_answering(_json(1), _json(2))) as server:
        async with _warm(server) as (wire, messages):

            def broken(self: HttpWire, post: Any, response: Response) -> None:
                raise RuntimeError("a bug")

            monkeypatch.setattr(HttpWire, "head_came", broken)
            await wire.send(_post(2))
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message["id"] == 2 and inbound.lost
            assert "the gateway failed to read the answer: RuntimeError: a bug" in inbound.message["error"]["message"]
            assert not wire._posts  # pyright: ignore[reportPrivateUsage]
