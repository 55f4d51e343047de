"""What the HTTP face's connection protocol (web/http_protocol.py) runs per connection and per request head (issue #34):
a head whose first bytes come in one read is scanned in one frame (`HeadScanner.take`, no `_next_end`, `seen` and
`_count_line` frames), with the same stops, counts and refusals as the general scan; a read that ends a request arms
no timer and calls nothing to learn so; a response's end and the connection's loss run uvicorn's steps written out
(no frame for a keep-alive timer not set, reading not paused, writing not paused, a head timer gone); and a
connection of a started server is made with no `get_event_loop` (a `getpid` system call on Python 3.11)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from uvicorn.server import ServerState

from elicitgate.config import build_config
from elicitgate.errors import HeadTooLarge
from elicitgate.faces.http import HttpFaceServer, build_http_app
from elicitgate.gateway import Gateway
from elicitgate.web.http_protocol import HeadScanner, HttpLimits, LimitedHttpTools, limited_protocol
from tests.profiled import calls_of, python_calls
from tests.test_unit_http_protocol import Socket, fuzz

HEAD = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


def _state(scanner: HeadScanner) -> tuple[Any, ...]:
    return (scanner.size, scanner.line, scanner._line_started, scanner._line_done, scanner._tail)  # pyright: ignore[reportPrivateUsage]


def _general_take(scanner: HeadScanner, data: bytes, start: int) -> int:
    """`take` as it scans once a head has begun: `_next_end`, then `seen`."""
    end = scanner._next_end(data, start)  # pyright: ignore[reportPrivateUsage]
    scanner.seen(data, start, end)
    return end


def _outcome(take: Any, data: bytes, start: int, max_line: int, max_head: int) -> tuple[Any, ...]:
    scanner = HeadScanner(max_line=max_line, max_head=max_head)
    try:
        end = take(scanner, data, start)
    except HeadTooLarge as refusal:
        return ("refused", refusal.status, refusal.text)
    return (end, *_state(scanner))


@fuzz(500)
@given(
    data=st.binary(max_size=300)
    | st.lists(st.sampled_from([b"\r\n", b"\n", b"a", b": ", b"\r\n\r\n", b"\n\n", b"GET /"]), max_size=30).map(
        b"".join
    ),
    start=st.integers(0, 5),
    max_line=st.integers(1, 80),
    max_head=st.integers(1, 200),
)
def test_a_head_s_first_read_is_scanned_as_the_general_scan_scans_it(
    data: bytes, start: int, max_line: int, max_head: int
) -> None:
    start = min(start, len(data))
    assert _outcome(HeadScanner.take, data, start, max_line, max_head) == _outcome(
        _general_take, data, start, max_line, max_head
    )


def test_a_whole_head_is_scanned_in_one_frame() -> None:
    scanner = HeadScanner(max_line=8192, max_head=32768)
    end, called = calls_of(lambda: scanner.take(HEAD, 0), c_calls=True)
    assert HEAD[end:] == b"{}"
    assert called == ["take", "find", "find", "find"], called


def test_a_read_that_ends_a_request_arms_no_timer() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> list[str]:
        config = uvicorn.Config(app, lifespan="off", log_level="warning", http=limited_protocol(HttpLimits()))
        config.load()
        protocol = config.http_protocol_class(
            config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop()
        )
        protocol.connection_made(Socket())
        with python_calls() as called:
            protocol.data_received(HEAD)
        protocol.connection_lost(None)
        return called

    called = asyncio.run(main())
    assert "on_message_complete" in called and "_arm_timers" not in called, called


def test_a_started_server_s_connections_are_made_on_its_loop_without_asking_asyncio() -> None:
    cfg = build_config({"mcpServers": {}}, "test_unit_http_face_head_steps")
    app = build_http_app(Gateway(cfg), "http://127.0.0.1:8000")
    config = uvicorn.Config(app, lifespan="off", log_level="warning", http=limited_protocol(HttpLimits.of(cfg.http)))
    server = HttpFaceServer(config, app)
    config.load()
    protocol_class = config.http_protocol_class
    assert issubclass(protocol_class, LimitedHttpTools)

    async def main() -> tuple[list[str], Any, asyncio.AbstractEventLoop]:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        server.lifespan = config.lifespan_class(config)  # as uvicorn's `_serve` makes it before `startup`
        await server.startup([listener])
        try:
            state = server.server_state
            protocol_class(config=config, server_state=state, app_state={})  # the shared part
            with python_calls(c_prefix="c:") as called:
                protocol = protocol_class(config=config, server_state=state, app_state={})
            return called, protocol.loop, asyncio.get_running_loop()
        finally:
            await server.shutdown()
            listener.close()

    called, loop, running = asyncio.run(main())
    assert loop is running
    assert "c:get_event_loop" not in called and "c:get_running_loop" not in called, called


def test_a_connection_s_response_end_and_loss_call_uvicorn_s_steps_only_where_they_act() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def main() -> tuple[list[str], bool, bool, bytes]:
        config = uvicorn.Config(app, lifespan="off", log_level="warning", http=limited_protocol(HttpLimits()))
        config.load()
        state = ServerState()
        protocol = config.http_protocol_class(
            config=config, server_state=state, app_state={}, _loop=asyncio.get_running_loop()
        )
        transport = Socket()
        protocol.connection_made(transport)
        with python_calls(c_prefix="c:") as called:
            protocol.data_received(HEAD)
            while state.tasks:
                await asyncio.sleep(0)
            kept_alive = protocol.timeout_keep_alive_task is not None
            protocol.connection_lost(None)
        return called, kept_alive, protocol.timeout_keep_alive_task is None, bytes(transport.written)

    called, kept_alive, let_go, written = asyncio.run(main())
    assert written.startswith(b"HTTP/1.1 200 OK") and written.endswith(b"\r\n\r\nok")
    assert kept_alive and let_go, "the keep-alive timer set at the response's end, cancelled with the connection"
    assert called.count("on_response_complete") == 1 and "connection_lost" in called, called
    # Each once, where it acts: the keep-alive timer cancelled with the connection, reading resumed by the task's
    # `receive` (uvicorn's), the head timer cancelled as the head ended; writing was never paused.
    acting = {"_unset_keepalive_if_required": 1, "resume_reading": 1, "_cancel_head_timer": 1, "resume_writing": 0}
    assert {name: called.count(name) for name in acting} == acting, called


def test_a_host_s_trust_is_asked_of_the_proxy_rules_once_and_kept() -> None:
    from elicitgate.web.client_address import ClientAddress
    from elicitgate.web.http_protocol import DirectRoute

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        return None

    outer = ClientAddress(inner, "127.0.0.1")
    route = DirectRoute(b"/mcp", inner, inner, outer.inner)

    def scope(peer: str) -> dict[str, Any]:
        forwarded = [(b"x-forwarded-for", b"10.1.2.3"), (b"x-forwarded-proto", b"https")]
        return {"type": "http", "client": (peer, 5000), "scheme": "http", "headers": forwarded, "path": "/mcp"}

    first, again, other = scope("127.0.0.1"), scope("127.0.0.1"), scope("10.9.9.9")
    route.prepare(first)
    _, called = calls_of(lambda: route.prepare(again))
    route.prepare(other)
    assert "__contains__" not in called[: called.index("_forwarded")], called  # then uvicorn's, for the forwarded
    assert (again["client"], again["scheme"]) == (first["client"], first["scheme"]) == (("10.1.2.3", 0), "https")
    assert (other["client"], other["scheme"]) == (("10.9.9.9", 5000), "http"), "an untrusted peer's headers ignored"
