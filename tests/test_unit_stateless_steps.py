"""2026-07-28 POSTs on `/mcp` served from the connection's own step (faces/stateless.py `StatelessRequests.at_body`,
reached from faces/streamable.py `at_body`): the HTTP face as `serve` builds it over a gateway with no upstream, its
own protocol on a stand-in socket. A POST whose body came whole is vetted there: a refusal or a notification's 202 is
written with no task; a request is served in one task of its own, not in uvicorn's `run_asgi`. The bytes written are
the task path's (the body sent after `Expect: 100-continue`, which the endpoint reads in uvicorn's task, as before)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.server import ServerState

from elicitgate.config import build_config
from elicitgate.faces.http import HttpFaceServer, build_http_app
from elicitgate.gateway import Gateway
from elicitgate.web.client_address import ClientAddress
from elicitgate.web.http_protocol import HttpLimits, LimitedHttpTools, limited_protocol
from tests.test_unit_http_face_callbacks import Face
from tests.test_unit_http_protocol import Socket, turns

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}


def modern(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": ENVELOPE}}


def post(body: bytes, *, method: str | None = None, version: bytes = MODERN.encode(), expect: bool = False) -> bytes:
    """A 2026-07-28 POST of `body`, its routing headers as the SDK's client sends them; with `expect`, after
    `Expect: 100-continue` (the endpoint then reads the body in uvicorn's task: the path before `at_body`)."""
    head = (
        b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: application/json, text/event-stream\r\n"
        b"content-type: application/json\r\nmcp-protocol-version: " + version + b"\r\n"
    )
    if method is not None:
        head += b"mcp-method: " + method.encode() + b"\r\n"
    if expect:
        head += b"expect: 100-continue\r\n"
    return head + b"content-length: %d\r\n\r\n%s" % (len(body), body)


def request(message: dict[str, Any]) -> tuple[bytes, str | None]:
    return json.dumps(message).encode(), message.get("method")


def without_date(answer: bytes) -> bytes:
    """An answer with its interim `100 Continue` and its `date` header left out (the clock's, not the face's)."""
    answer = answer.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n")
    return b"\r\n".join(line for line in answer.split(b"\r\n") if not line.lower().startswith(b"date: "))


class RunAsgi:
    """uvicorn's `run_asgi`, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = RequestResponseCycle.run_asgi

        async def counted(cycle: RequestResponseCycle, app: Any) -> None:
            self.calls += 1
            await original(cycle, app)

        monkeypatch.setattr(RequestResponseCycle, "run_asgi", counted)


@asynccontextmanager
async def face() -> AsyncIterator[Face]:
    """The HTTP face as `serve` builds it, one connection to it (no session: this era has none)."""
    loop = asyncio.get_running_loop()
    cfg = build_config({"mcpServers": {}}, "test_unit_stateless_steps")
    app = build_http_app(Gateway(cfg), "http://127.0.0.1:8000")
    config = uvicorn.Config(
        ClientAddress(app),
        log_level="warning",
        lifespan="off",
        access_log=False,
        http=limited_protocol(HttpLimits.of(cfg.http)),
        proxy_headers=False,
    )
    HttpFaceServer(config, app)
    config.load()
    async with app.router.lifespan_context(app):
        state = ServerState()
        protocol: LimitedHttpTools = config.http_protocol_class(
            config=config, server_state=state, app_state={}, _loop=loop
        )
        socket = Socket()
        protocol.connection_made(socket)
        try:
            yield Face(protocol, socket, state, app.state.mcp)
        finally:
            protocol.connection_lost(None)
            await turns()


async def answer_of(connection: Face, raw: bytes) -> bytes:
    """What the connection writes for `raw` (one answer, written whole)."""
    before = len(connection.socket.written)
    connection.protocol.data_received(raw)
    await connection.until(
        lambda: (
            b"HTTP/1.1 2" in connection.socket.written[before:] or b"HTTP/1.1 4" in connection.socket.written[before:]
        )
    )
    await turns(5)
    return bytes(connection.socket.written[before:])


REQUESTS = {
    "tools/list": request(modern(1, "tools/list")),
    "server/discover": request(modern(2, "server/discover")),
    "an unknown method": request(modern(3, "no/such/method")),
}
REFUSALS = {
    "a notification": (b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}', None),
    "not JSON": (b"{", None),
    "a batch": (json.dumps([modern(4, "tools/list")]).encode(), None),
    "no mcp-method header": (json.dumps(modern(5, "tools/list")).encode(), None),
    "no envelope": (b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}', "tools/list"),
    "a non-finite number": (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":NaN}}', "tools/call"),
}


@pytest.mark.parametrize("case", list(REQUESTS), ids=list(REQUESTS))
async def test_a_2026_post_is_served_in_one_task_of_its_own_with_no_run_asgi(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, method = REQUESTS[case]
    run_asgi = RunAsgi(monkeypatch)
    async with face() as connection:
        tasks = asyncio.all_tasks()
        connection.protocol.data_received(post(body, method=method))
        assert not connection.state.tasks, "no task of uvicorn's for the request"
        assert len(asyncio.all_tasks() - tasks) == 1, "one task: the request's own"
        answer = await answer_of(connection, b"")
        assert run_asgi.calls == 0
        assert answer.startswith((b"HTTP/1.1 200", b"HTTP/1.1 404")) and answer.endswith(b"}")
        assert b"content-type: application/json\r\n" in answer
        task_path = await answer_of(connection, post(body, method=method, expect=True))
        assert run_asgi.calls == 1, "the body read in uvicorn's task"
        assert without_date(answer) == without_date(task_path)


@pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
async def test_a_2026_post_refused_or_acknowledged_is_answered_with_no_task(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, method = REFUSALS[case]
    run_asgi = RunAsgi(monkeypatch)
    async with face() as connection:
        tasks = asyncio.all_tasks()
        connection.protocol.data_received(post(body, method=method))
        assert asyncio.all_tasks() == tasks, "no task at all"
        assert connection.held().startswith((b"HTTP/1.1 202", b"HTTP/1.1 400")), "written in the connection's step"
        await turns(5)  # held until the turn's end, or written at once (`CoalescedWrites.write_held`): all out now
        answer = bytes(connection.socket.written)
        assert run_asgi.calls == 0
        task_path = await answer_of(connection, post(body, method=method, expect=True))
        assert without_date(answer) == without_date(task_path)


async def test_a_refusal_that_must_wait_for_writing_is_written_by_a_task_once_it_resumes() -> None:
    async with face() as connection:
        connection.protocol.pause_writing()
        connection.protocol.data_received(post(b"{"))
        await turns()
        assert not connection.held(), "writing is paused"
        connection.protocol.resume_writing()
        await connection.until(lambda: b"HTTP/1.1 400" in connection.socket.written)
        await turns(5)
        written = bytes(connection.socket.written)
        assert written.startswith(b"HTTP/1.1 400") and b'"code":-32700,"message":"Parse error"' in written


async def test_an_answer_that_must_wait_for_writing_is_written_once_it_resumes() -> None:
    body, method = REQUESTS["tools/list"]
    async with face() as connection:
        connection.protocol.pause_writing()
        connection.protocol.data_received(post(body, method=method))
        await turns()
        assert not connection.held(), "writing is paused"
        connection.protocol.resume_writing()
        await connection.until(lambda: bytes(connection.socket.written).endswith(b"}"))
        assert bytes(connection.socket.written).startswith(b"HTTP/1.1 200")


async def test_a_handshake_era_version_header_is_not_taken_for_this_era(monkeypatch: pytest.MonkeyPatch) -> None:
    """A POST with no session and a handshake-era version (an `initialize`) stays the endpoint's, in its task."""
    run_asgi = RunAsgi(monkeypatch)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with face() as connection:
        answer = await answer_of(connection, post(json.dumps(initialize).encode(), version=b"2025-06-18"))
        assert answer.startswith(b"HTTP/1.1 200") and b"mcp-session-id: " in answer.lower()
        assert run_asgi.calls == 1
