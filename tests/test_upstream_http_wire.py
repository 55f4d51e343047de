"""Streamable HTTP upstreams on the gateway's own wire (`wire.http.HttpWire`), against a real
server (the official `mcp` SDK's, tests/peers/py_server.py): what the wire itself promises the endpoint.

- a server request on a POST's response stream names that POST's request (design invariant 1), and one
  on the standalone stream names none (the TypeScript SDK's peer, tests/peers/ts/elicit_server.mjs);
- a POST's stream that ends without its answer is a lost answer (`PeerLost`), not a server's error;
- a 404 to our session id (the server forgot the session) ends the wire, so the link reconnects;
- an answer to the server's question whose POST dies at the connection is sent again (a proxy resetting it);
- the standalone GET stream is opened after `notifications/initialized`;
- a 2026-07-28 request is cancelled by closing its POST, with no `notifications/cancelled` on the wire;
- a stream broken after events with ids is resumed with `Last-Event-ID` (tests/peers/resumable_server.py);
- a same-origin 307 is followed; a 202 for a request, an HTML page or a redirect to another origin is a
  clear error for that request, never a wait (tests/peers/odd_http_server.py).
And the event-stream parser on its own.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.errors import PeerLost, SseEventTooLarge
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.http import HttpWire
from elicitgate.wire.sse import SseParser
from tests.conftest import PY, Process, free_port, inprocess_gateway

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024

TS_ELICIT = Path(__file__).parent / "peers" / "ts" / "elicit_server.mjs"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"


def _initialize(request_id: str = "init") -> dict[str, Any]:
    params = {
        "protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def _call(request_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def _next(messages: Any) -> Inbound:
    with anyio.fail_after(30):
        return await messages.__anext__()


async def _handshake(wire: HttpWire, messages: Any) -> None:
    await wire.send(_initialize())
    answer = await _next(messages)
    assert isinstance(answer.message, dict) and answer.message["id"] == "init" and "result" in answer.message
    assert wire.session_id
    await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, {"mcp-protocol-version": HANDSHAKE})


@asynccontextmanager
async def _session(endpoint: str, *, standalone: bool = True) -> AsyncIterator[tuple[HttpWire, Any]]:
    """A wire with its session open (and with `standalone`, its standalone stream answered), and its
    messages."""
    wire = HttpWire(endpoint)
    messages = wire.messages()
    try:
        await _handshake(wire, messages)
        if standalone:
            with anyio.fail_after(30):
                await wire.standalone_answered.wait()
        yield wire, messages
    finally:
        await wire.aclose()


async def _answer_to(messages: Any, request_id: str) -> Inbound:
    """The next message for `request_id`, past what the server says meanwhile (notifications, the
    standalone stream)."""
    inbound = await _next(messages)
    while isinstance(inbound.message, dict) and inbound.message.get("id") != request_id:
        inbound = await _next(messages)
    return inbound


async def test_a_server_request_on_a_post_stream_names_that_post(http_upstream):
    up = http_upstream("tests.peers.py_server", "--name", "h")
    async with _session(f"{up.url}/mcp") as (wire, messages):
        headers = {"mcp-protocol-version": HANDSHAKE}
        await wire.send(_call("echo-1", "echo", text="first"), headers)
        await wire.send(_call("ask-1", "elicit", message="which?"), headers)
        seen: dict[Any, Inbound] = {}
        while "ask-1" not in seen or "echo-1" not in seen:
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict)
            if inbound.message.get("method") == "elicitation/create":
                assert inbound.related_request_id == "ask-1"  # the POST of the call that caused it
                answer = {"action": "accept", "content": {"answer": "this"}}
                await wire.send({"jsonrpc": "2.0", "id": inbound.message["id"], "result": answer}, headers)
            else:
                assert inbound.related_request_id is None and not inbound.lost
                seen[inbound.message["id"]] = inbound
        echoed = seen["echo-1"].message
        assert isinstance(echoed, dict) and echoed["result"]["content"][0]["text"] == "first"
        asked = seen["ask-1"].message
        assert isinstance(asked, dict)
        assert json.loads(asked["result"]["content"][0]["text"]) == {"action": "accept", "content": {"answer": "this"}}


@pytest.mark.parametrize("standalone", [False, True], ids=["post-stream", "standalone-stream"])
async def test_a_typescript_server_asks_on_the_call_s_post_or_on_its_standalone_stream(standalone: bool):
    """The TypeScript SDK sends `elicitation/create` on the call's POST stream when given
    `relatedRequestId` (tagged with the call), else on the standalone GET stream (tagged with nothing:
    the gateway must not guess, design invariant 1)."""
    port = free_port()
    server = Process(["node", str(TS_ELICIT), "--http", str(port), *(["--standalone-stream"] if standalone else [])],
                     port)
    try:
        async with _session(f"{server.url}/mcp") as (wire, messages):
            headers = {"mcp-protocol-version": HANDSHAKE}
            await wire.send(_call("form-1", "ask_form", message="who?"), headers)
            inbound = await _next(messages)
            assert isinstance(inbound.message, dict) and inbound.message.get("method") == "elicitation/create", inbound
            assert inbound.related_request_id == (None if standalone else "form-1")
            content = {"name": "ada"}
            answer = {"action": "accept", "content": content}
            await wire.send({"jsonrpc": "2.0", "id": inbound.message["id"], "result": answer}, headers)
            result = await _next(messages)
            assert isinstance(result.message, dict) and result.message["id"] == "form-1"
            assert json.loads(result.message["result"]["content"][0]["text"]) == answer
    finally:
        server.stop()


async def test_a_stream_that_ends_without_its_answer_is_a_lost_answer(http_upstream):
    """The server dies while its call waits on an elicitation: the caller gets `PeerLost`, never an
    error the server could have sent itself."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    wire = HttpWire(f"{up.url}/mcp")
    endpoint = Endpoint(wire, "upstream 'h'")
    asked: list[Inbound] = []

    async def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        asked.append(inbound)
        await anyio.sleep_forever()
        raise AssertionError

    async def on_notify(inbound: Inbound, method: str, params: dict[str, Any] | None) -> None:
        pass

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, on_request, on_notify)
            params = _initialize()["params"]
            await endpoint.request("init", "initialize", params)
            await endpoint.notify("notifications/initialized", None, headers={"mcp-protocol-version": HANDSHAKE})
            with anyio.fail_after(15), pytest.raises(PeerLost) as lost:
                await endpoint.request("dying", "tools/call", {"name": "die_during_elicit", "arguments": {}},
                                       headers={"mcp-protocol-version": HANDSHAKE})
            assert lost.value.error.code == CONNECTION_CLOSED
            assert [inbound.related_request_id for inbound in asked] == ["dying"]
            tg.cancel_scope.cancel()
    finally:
        await wire.aclose()


async def test_an_answer_past_the_event_bound_fails_that_call_saying_why_and_the_session_goes_on(http_upstream):
    """The SDK's server answers a handshake-era call on an SSE stream. An event past a server's
    `max_event_bytes` fails that call with the reason, not "went away", and the session goes on; under the
    default bound (16 MiB) the same event passes. The text stays under the SDK client's own 1 MiB event
    limit: on a busy machine the gateway's answer may come after its JSON window, as an SSE event too."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    servers = {"h": {"url": f"{up.url}/mcp"}, "small": {"url": f"{up.url}/mcp", "max_event_bytes": 1_000_000}}
    text = "x" * 1_020_000
    async with inprocess_gateway({"mcpServers": servers}) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client:
            assert (await client.call_tool("h__echo", {"text": text})).content[0].text == text
            with pytest.raises(MCPError) as failed:
                await client.call_tool("small__echo", {"text": text})
            assert failed.value.error.code == -32012  # UPSTREAM_GONE
            assert failed.value.error.message.startswith("upstream 'small' did not answer tools/call: SSE stream")
            assert "exceeded the 1000000 byte limit (max_event_bytes)" in failed.value.error.data["reason"]
            assert (await client.call_tool("small__echo", {"text": "still here"})).content[0].text == "still here"


async def test_a_404_to_our_session_ends_the_wire(http_upstream):
    """The server forgot the session (here: it was deleted behind the wire's back, as a restart does): the
    request in flight is lost and `messages` ends, so the link opens a new session."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    wire = HttpWire(f"{up.url}/mcp")
    messages = wire.messages()
    try:
        await _handshake(wire, messages)
        async with httpx2.AsyncClient() as other:
            gone = await other.delete(f"{up.url}/mcp", headers={"mcp-session-id": wire.session_id or ""})
            assert gone.status_code in (200, 204)
        await wire.send(_call("after", "echo", text="x"), {"mcp-protocol-version": HANDSHAKE})
        inbound = await _next(messages)
        while isinstance(inbound.message, dict) and inbound.message.get("id") != "after":
            inbound = await _next(messages)  # anything the standalone stream said before it closed
        assert inbound.lost and isinstance(inbound.message, dict)
        assert "no longer knows this session" in inbound.message["error"]["message"]
        with anyio.fail_after(30), pytest.raises(StopAsyncIteration):
            await messages.__anext__()
        # Nothing more goes on the forgotten session: a request is refused unread as its 404 would refuse it
        # (the link sends it again on the new session), not taken for lost in the middle.
        with pytest.raises(PeerLost) as refused:
            await wire.send(_call("later", "echo", text="y"))
        assert "no longer knows this session" in refused.value.error.message
    finally:
        await wire.aclose()


async def test_a_modern_request_is_cancelled_by_closing_its_post(http_upstream):
    """2026-07-28 defines no client notifications over HTTP: the wire swallows `notifications/cancelled`
    and closes the request's response stream, which the server takes as the cancellation."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    wire = HttpWire(f"{up.url}/mcp")
    messages = wire.messages()
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "sleep"}
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}

    def call(request_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
        message = _call(request_id, tool, **arguments)
        message["params"]["_meta"] = meta
        return message

    asked = itertools.count()

    async def ask(tool: str) -> Any:
        """The text of `tool`'s answer; the next message must be that answer (nothing comes for "slow")."""
        request_id = f"{tool}-{next(asked)}"
        await wire.send(call(request_id, tool), {**headers, "mcp-name": tool})
        inbound = await _next(messages)
        assert isinstance(inbound.message, dict) and inbound.message["id"] == request_id, inbound.message
        return json.loads(inbound.message["result"]["content"][0]["text"])

    try:
        await wire.send(call("slow", "sleep", seconds=60), headers)
        with anyio.fail_after(60):
            while (await ask("stats"))["calls"] < 1:  # until the server has the call
                await anyio.sleep(0.05)
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": "slow", "reason": "caller cancelled"}}, headers)
        with anyio.fail_after(60):
            while await ask("last_cancelled") is not True:  # until the server's sleep was cancelled
                await anyio.sleep(0.05)
        assert wire.session_id is None  # stateless
    finally:
        await wire.aclose()


async def test_a_broken_stream_with_event_ids_is_resumed_with_last_event_id(http_upstream):
    """The server closes the call's stream before answering (SEP-1699 polling): the wire reconnects
    with `Last-Event-ID` after the server's `retry` and gets the answer there, as the SDK client does."""
    up = http_upstream("tests.peers.resumable_server")
    wire = HttpWire(f"{up.url}/mcp")
    messages = wire.messages()
    try:
        await _handshake(wire, messages)
        await wire.send(_call("polled", "interrupted", text="made it"), {"mcp-protocol-version": HANDSHAKE})
        inbound = await _next(messages)
        while isinstance(inbound.message, dict) and "method" in inbound.message:
            inbound = await _next(messages)  # notifications the server sends along (logging, progress)
        assert not inbound.lost and isinstance(inbound.message, dict), inbound
        assert inbound.message["id"] == "polled"
        assert inbound.message["result"]["content"][0]["text"] == "made it"
    finally:
        await wire.aclose()


# -- the event-stream parser ----------------------------------------------------------------------


def test_events_split_anywhere_and_crlf_split_between_chunks_parse_alike():
    stream = b"id: 7\r\nretry: 1500\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: comment\r\ndata: {}\r\n\r\n"
    whole = SseParser(MIB)
    assert whole.feed(stream) == [b'{"a":\n1}', b"{}"]
    assert (whole.last_id, whole.retry) == ("7", 1.5)
    for cut in range(1, len(stream)):
        parts = SseParser(MIB)
        assert parts.feed(stream[:cut]) + parts.feed(stream[cut:]) == [b'{"a":\n1}', b"{}"], cut


def test_a_priming_event_and_other_event_types_carry_no_message():
    events = SseParser(MIB)
    assert events.feed(b"id: prime-1\ndata:\n\nevent: ping\ndata: {}\n\ndata: {\"x\":1}\n\n") == [b'{"x":1}']
    assert events.last_id == "prime-1"


def test_an_event_past_the_size_bound_is_refused():
    events = SseParser(MIB)
    with pytest.raises(SseEventTooLarge):
        events.feed(b"data: " + b"x" * (1024 * 1024 + 1))
    events = SseParser(MIB)  # the same line in chunks, none of which ends it
    with pytest.raises(SseEventTooLarge):
        for _ in range(17):
            events.feed(b"x" * 65536)
    events = SseParser(MIB)  # a whole event, ended in the same chunk that carries it
    with pytest.raises(SseEventTooLarge):
        events.feed(b"data: " + b"x" * (1024 * 1024 + 1) + b"\n\n")
    events = SseParser(MIB)  # or split over several data lines, each under the bound
    with pytest.raises(SseEventTooLarge):
        events.feed(b"data: " + b"x" * 600_000 + b"\ndata: " + b"x" * 600_000 + b"\n\n")


def test_a_long_line_in_many_chunks_and_one_byte_at_a_time_parse_as_one():
    stream = b"id: 9\r\ndata: " + b"y" * 300_000 + b"\r\n\r\ndata: {}\r\n\r\n"
    chunked, bytewise = SseParser(MIB), SseParser(MIB)
    found = [event for i in range(0, len(stream), 1000) for event in chunked.feed(stream[i : i + 1000])]
    assert found == [b"y" * 300_000, b"{}"] and chunked.last_id == "9"
    small = b"id: 3\rdata: a\r\rdata: b\ndata: c\n\n"
    assert [event for i in range(len(small)) for event in bytewise.feed(small[i : i + 1])] == [b"a", b"b\nc"]


def test_an_id_holding_a_null_is_ignored_as_the_event_stream_format_says():
    events = SseParser(MIB)
    assert events.feed(b"id: 5\n\ndata: a\nid: 6\x007\n\n") == [b"a"]
    assert events.last_id == "5"


def test_an_event_ended_by_a_bare_cr_at_a_chunk_end_is_delivered_at_once():
    # A CR is a whole line end in an event stream; when it ends a chunk, the next chunk may begin with the LF
    # of a CRLF, which ends no second line. The event must not wait for that next chunk: at the end of a
    # POST's stream there is none, and the answer would be lost.
    events = SseParser(MIB)
    assert events.feed(b"data: {\"a\":1}\r\r") == [b'{"a":1}']
    assert events.feed(b"data: 2\r\n\r") == [b"2"]
    assert events.feed(b"\ndata: 3\r") == []  # that LF ended the CRLF: no empty line, no event, of its own
    assert events.feed(b"\ndata: 4\r\n\r\n") == [b"3\n4"]


@pytest.fixture
def odd_server():
    """The demo server behind endpoints that answer oddly (tests/peers/odd_http_server.py)."""
    port = free_port()
    server = Process([PY, "-m", "tests.peers.odd_http_server", "--http", f"127.0.0.1:{port}"], port)
    yield server
    server.stop()


async def test_a_same_origin_redirect_is_followed_with_its_method_and_body(odd_server):
    """307 from `/moved` to `/mcp`: every POST (and the session's GET) is sent again there, as it was."""
    async with _session(f"{odd_server.url}/moved", standalone=False) as (wire, messages):
        await wire.send(_call("echo-1", "echo", text="moved"), {"mcp-protocol-version": HANDSHAKE})
        answer = await _answer_to(messages, "echo-1")
        assert isinstance(answer.message, dict) and answer.message["result"]["content"][0]["text"] == "moved"


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/accepted", "server answered a request with 202 Accepted"),
        ("/html", "Unexpected content type: text/html"),
        ("/elsewhere", "not followed"),
    ],
    ids=["202-for-a-request", "html-page", "redirect-to-another-origin"],
)
async def test_a_request_answered_oddly_gets_an_error_not_a_hang(odd_server, path: str, said: str):
    wire = HttpWire(f"{odd_server.url}{path}")
    messages = wire.messages()
    try:
        await wire.send(_initialize())
        answer = await _next(messages)
        assert isinstance(answer.message, dict) and answer.message["id"] == "init", answer
        assert not answer.lost
        assert answer.message["error"]["code"] == INVALID_REQUEST
        assert said in answer.message["error"]["message"]
    finally:
        await wire.aclose()


class _DropsFirstAnswer:
    """A TCP proxy in front of a server that resets each connection carrying a JSON-RPC answer, unsent, until it
    has so reset a new connection (the client's pool sends a request again by itself once when a reused
    connection ends before any answer: the wire's own resending is what the new connection's loss leaves), and
    passes every other byte as it comes."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.dropped = 0
        self.dropped_on_a_new_connection = False

    async def serve(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", self.target_port) as server, \
                anyio.create_task_group() as tg:
            async def back() -> None:
                async for chunk in server:
                    await client.send(chunk)
                await client.aclose()

            tg.start_soon(back)
            pending, forwarded = b"", 0
            async for chunk in client:
                pending += chunk
                while b"\r\n\r\n" in pending:  # whole requests only (the wire frames its bodies by Content-Length)
                    head, _, rest = pending.partition(b"\r\n\r\n")
                    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), 0)
                    if len(rest) < length:
                        break
                    body, pending = rest[:length], rest[length:]
                    if not self.dropped_on_a_new_connection and body and _is_answer(json.loads(body)):
                        self.dropped += 1
                        self.dropped_on_a_new_connection = not forwarded
                        tg.cancel_scope.cancel()
                        raw = client.extra(anyio.abc.SocketAttribute.raw_socket)
                        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
                        return
                    await server.send(head + b"\r\n\r\n" + body)
                    forwarded += 1


def _is_answer(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)


async def test_an_answer_whose_post_is_lost_on_the_way_is_sent_again_and_the_call_ends(http_upstream):
    """The server's question is answered, the POST carrying the answer dies at the connection: the answer is
    sent again on a new one (it used to be dropped with a warning, and the call waited for its deadline)."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    proxy = _DropsFirstAnswer(up.port)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, proxy.serve)
        async with _session(f"http://127.0.0.1:{port}/mcp", standalone=False) as (wire, messages):
            headers = {"mcp-protocol-version": HANDSHAKE}
            await wire.send(_call("ask-1", "elicit", message="which?"), headers)
            asked = await _next(messages)
            assert isinstance(asked.message, dict) and asked.message.get("method") == "elicitation/create"
            answer = {"action": "accept", "content": {"answer": "this"}}
            await wire.send({"jsonrpc": "2.0", "id": asked.message["id"], "result": answer}, headers)
            result = await _answer_to(messages, "ask-1")
            assert isinstance(result.message, dict) and not result.lost
            assert json.loads(result.message["result"]["content"][0]["text"]) == answer
        assert proxy.dropped_on_a_new_connection
        tg.cancel_scope.cancel()
