"""The upstream side of an elicitation with no task or loop turn it does not need: our answer to a server's request
is POSTed in its caller's step on an idle kept-alive connection and its 202 read in the connection's callbacks
(`wire.http._AnswerPost`, `HttpWire.send_now`); the server's messages are pushed to the endpoint as they are read
(`HttpWire.push`); and the endpoint writes an upstream request's answer from its handler's done callback where the
wire takes it at once (`wire.base.SendsAtOnce`: `HttpWire`, `PipeWire`). What must wait still waits (no idle
connection, a redirect, a connection closed as we wrote, a 202 past its size limit), and a 404 to our session id still
ends the wire.

Against raw TCP servers (tests/test_wire_http_client.py's) and the official SDK's server (tests/peers/py_server.py)
over streamable HTTP and over stdio.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from elicitgate.config import HttpServer, StdioServer
from elicitgate.upstreams.transports import open_transport
from elicitgate.wire.base import Inbound, SendsAtOnce
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.http import HttpWire
from tests.conftest import PY
from tests.test_unit_upwire_direct_post import (
    _idle,  # pyright: ignore[reportPrivateUsage]
    _json,  # pyright: ignore[reportPrivateUsage]
    _next,  # pyright: ignore[reportPrivateUsage]
    _tasks_made,  # pyright: ignore[reportPrivateUsage]
    _warm,  # pyright: ignore[reportPrivateUsage]
)
from tests.test_upstream_http_wire import HANDSHAKE
from tests.test_wire_http_client import (
    WAIT,
    _request,  # pyright: ignore[reportPrivateUsage]
    _server,  # pyright: ignore[reportPrivateUsage]
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
CLOSE = b"close:"
ANSWER = {"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {"ok": True}}}


def _serving(answers: dict[int, bytes], seen: list[dict[str, Any]], gate: asyncio.Event | None = None) -> Any:
    """A server that answers each POST by its JSON-RPC id: a request with `_json`, our answer (id 7) with what
    `answers` says for its n-th copy (the last one for any after; after `CLOSE` the connection ends), once `gate` is
    set; every body it read in `seen`."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                _, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            message = json.loads(body)
            seen.append(message)
            if "method" in message:
                writer.write(_json(message["id"]))
            else:
                copies = sum(1 for m in seen if "method" not in m)
                reply = answers.get(copies, answers[max(answers)])
                if gate is not None:
                    await gate.wait()
                if reply.startswith(CLOSE):  # what follows it, then the connection ends (none: not a byte of answer)
                    writer.write(reply[len(CLOSE):])
                    await writer.drain()
                    writer.close()
                    return
                writer.write(reply)
            await writer.drain()

    return serve


async def _copies(seen: list[dict[str, Any]], count: int) -> None:
    """Until the server read `count` copies of our answer."""
    async with asyncio.timeout(WAIT):
        while sum(1 for m in seen if "method" not in m) < count:
            await asyncio.sleep(0.01)


async def test_an_answer_is_posted_in_the_callers_step_and_its_202_read_in_callbacks_with_no_task() -> None:
    """`send_now` writes our answer on the idle kept-alive connection at once; the 202 is read in the connection's
    callbacks and the connection goes back to the pool; `send` of an answer does not wait for the server's 202."""
    seen: list[dict[str, Any]] = []
    gate = asyncio.Event()
    async with _server(_serving({1: ACCEPTED}, seen, gate)) as server:
        async with _warm(server) as (wire, _):
            assert isinstance(wire, SendsAtOnce)
            with _tasks_made() as made:
                assert wire.send_now(ANSWER)
                await _copies(seen, 1)  # written, and the server holds its 202 back
                assert seen[-1] == ANSWER
                gate.set()
                async with asyncio.timeout(WAIT):  # not `wait_for`, which makes a task
                    await _idle(wire)  # the 202 read: the connection is idle again
                gate.clear()
                async with asyncio.timeout(WAIT):
                    await wire.send({**ANSWER, "id": 8})  # returns with the server's 202 held back
                await _copies(seen, 2)
                gate.set()
                async with asyncio.timeout(WAIT):
                    await _idle(wire)
            assert made == []
            assert server.connections == 1


async def test_send_now_writes_nothing_without_an_idle_connection_or_for_a_message_that_is_not_an_answer() -> None:
    seen: list[dict[str, Any]] = []
    async with _server(_serving({1: ACCEPTED}, seen)) as server:
        wire = HttpWire(server.url().text)
        try:
            assert not wire.send_now(ANSWER)  # nothing open yet: `send` opens a connection
            await wire.send(ANSWER)
            assert [m for m in seen if "method" not in m] == [ANSWER]
            await asyncio.wait_for(_idle(wire), WAIT)
            assert not wire.send_now({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
            assert not wire.send_now({"jsonrpc": "2.0", "id": 9, "method": "ping"})
            deep: Any = {}
            for _ in range(5000):
                deep = {"d": deep}
            assert not wire.send_now({**ANSWER, "result": deep})  # too deep to write: `send` says why (`TooDeep`)
        finally:
            await wire.aclose()


async def test_an_answer_whose_kept_alive_connection_was_closed_as_written_is_sent_again_on_a_new_one() -> None:
    seen: list[dict[str, Any]] = []
    async with _server(_serving({1: CLOSE, 2: ACCEPTED}, seen)) as server:
        async with _warm(server) as (wire, _):
            assert wire.send_now(ANSWER)
            await _copies(seen, 2)
            await asyncio.wait_for(_idle(wire), WAIT)
            assert server.connections == 2


@pytest.mark.parametrize("first", [
    b"HTTP/1.1 202 Accepted\r\ncontent-length: 64\r\n\r\n" + b"x" * 64,
    CLOSE + b"HTTP/1.1 202 Accepted\r\ncontent-length: 64\r\n\r\nshort",
], ids=["past-max_event_bytes", "cut-short"])
async def test_an_answer_whose_202_cannot_be_read_whole_is_sent_again_after_the_first_retry_delay(first) -> None:
    """As `_post_unanswered` did for an answer read in a task: the server may not have it, so it goes again."""
    seen: list[dict[str, Any]] = []

    async with _server(_serving({1: first, 2: ACCEPTED}, seen)) as server:
        wire = HttpWire(server.url().text, max_event_bytes=32)
        messages = wire.messages()
        try:
            await wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}})
            assert (await _next(messages)).message["id"] == 1  # type: ignore[index]
            await asyncio.wait_for(_idle(wire), WAIT)
            assert wire.send_now(ANSWER)
            await _copies(seen, 2)
            assert [m for m in seen if "method" not in m] == [ANSWER, ANSWER]
            await asyncio.wait_for(_idle(wire), WAIT)
            assert server.connections == 2
        finally:
            await wire.aclose()


async def test_an_answer_redirected_within_its_origin_is_followed_with_its_body() -> None:
    paths: list[bytes] = []
    bodies: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            paths.append(head.split(b" ")[1])
            bodies.append(body)
            message = json.loads(body)
            if "method" in message:
                writer.write(_json(message["id"]))
            elif paths[-1] == b"/mcp":
                writer.write(b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /moved\r\ncontent-length: 0\r\n\r\n")
            else:
                writer.write(ACCEPTED)
            await writer.drain()

    async with _server(serve) as server:
        async with _warm(server) as (wire, _):
            assert wire.send_now(ANSWER)
            async with asyncio.timeout(WAIT):
                while len(paths) < 3:
                    await asyncio.sleep(0.01)
            assert paths[1:] == [b"/mcp", b"/moved"] and bodies[1] == bodies[2]
            assert json.loads(bodies[2]) == ANSWER


async def test_a_404_to_an_answer_with_our_session_id_ends_the_wire() -> None:
    """The server forgot the session: the wire ends (the link opens a new one), as a 404 read in a task ends it."""
    seen: list[dict[str, Any]] = []
    async with _server(_serving({1: b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"}, seen)) as server:
        async with _warm(server) as (wire, messages):
            wire.session_id = "s-1"
            assert wire.send_now(ANSWER)
            async with asyncio.timeout(WAIT):
                async for _ in messages:  # ends
                    pass
            assert wire.session_id is None


async def test_messages_pushed_are_handed_over_in_order_even_those_delivered_while_the_sink_handles_one() -> None:
    """`push` hands each message to the sink from the delivering callback; one delivered while the sink handles another
    (the sink's own doing) waits its turn, and a sink's failure ends `push` with it."""
    wire = HttpWire("http://127.0.0.1:9/mcp")
    handed: list[Any] = []
    ready = anyio.Event()

    def sink(inbound: Inbound) -> None:
        handed.append(inbound.message)
        if inbound.message == {"n": 1}:
            wire._deliver(Inbound({"n": 2}))  # pyright: ignore[reportPrivateUsage]
            assert handed == [{"n": 1}]  # not handed inside the sink's own call
        if inbound.message == {"n": 3}:
            raise RuntimeError("a sink's bug")

    async def pushing() -> None:
        ready.set()
        await wire.push(sink)

    try:
        with pytest.raises(ExceptionGroup) as raised:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pushing)
                await ready.wait()
                await asyncio.sleep(0)
                wire._deliver(Inbound({"n": 1}))  # pyright: ignore[reportPrivateUsage]
                assert handed == [{"n": 1}]  # at once, from the delivering call
                async with asyncio.timeout(WAIT):
                    while len(handed) < 2:
                        await asyncio.sleep(0)
                assert handed == [{"n": 1}, {"n": 2}]
                wire._deliver(Inbound({"n": 3}))  # pyright: ignore[reportPrivateUsage]
                await asyncio.sleep(WAIT)  # cancelled: `push` raised the sink's failure
        assert raised.group_contains(RuntimeError, match="a sink's bug")
        assert handed == [{"n": 1}, {"n": 2}, {"n": 3}]
    finally:
        await wire.aclose()


@asynccontextmanager
async def _endpoint(config: HttpServer | StdioServer) -> AsyncIterator[tuple[Endpoint, dict[str, str]]]:
    """An endpoint on the wire to `config`'s server, its session initialised; elicitations answered at once."""

    async def on_request(inbound: Inbound, method: str, params: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"answer": "this"}}

    async def on_notify(inbound: Inbound, method: str, params: Any) -> None:
        pass

    async with open_transport(config) as wire:
        endpoint = Endpoint(wire.messages, "upstream")
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, on_request, on_notify)
            info = {"protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {"form": {}}},
                    "clientInfo": {"name": "t", "version": "1"}}
            with anyio.fail_after(WAIT):
                result = await endpoint.request("init", "initialize", info)
            headers = {"mcp-protocol-version": result["protocolVersion"]}
            await endpoint.notify("notifications/initialized", None, headers=headers)
            await wire.standalone_settled()
            yield endpoint, headers
            tg.cancel_scope.cancel()


async def _elicit_tasks(endpoint: Endpoint, headers: dict[str, str]) -> list[asyncio.Task[Any]]:
    """The tasks made for one elicitation of the server's (after two warm-up calls)."""
    elicit = {"name": "elicit", "arguments": {"message": "which?"}}
    for i in range(2):
        with anyio.fail_after(WAIT):
            await endpoint.request(f"warm-{i}", "tools/call", elicit, headers=headers)
    await asyncio.sleep(0.05)  # the last warm-up's stream and 202 ended
    with _tasks_made() as made:
        with anyio.fail_after(WAIT):
            result = await endpoint.request("ask-1", "tools/call", elicit, headers=headers)
    assert "this" in result["content"][0]["text"], result
    return made


async def test_an_upstream_elicitation_over_http_makes_one_task_its_handler_s(http_upstream) -> None:
    """The SDK's server over streamable HTTP: the question read from the call's stream and dispatched in callbacks, its
    handler's task (the one a person's answer is awaited in), and our answer POSTed from that task's done callback:
    no reader task woken, no task to write the answer."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    async with _endpoint(HttpServer(url=f"{up.url}/mcp", era="handshake")) as (endpoint, headers):
        made = await _elicit_tasks(endpoint, headers)
    assert len(made) == 1, made


async def test_an_upstream_elicitation_over_stdio_makes_one_task_its_handler_s() -> None:
    """The SDK's server over stdio (asyncio pipes): the answer's line written from the handler task's done callback."""
    config = StdioServer(command=PY, args=["-m", "tests.peers.py_server", "--name", "s"], era="handshake")
    async with _endpoint(config) as (endpoint, headers):
        made = await _elicit_tasks(endpoint, headers)
    assert len(made) == 1, made
