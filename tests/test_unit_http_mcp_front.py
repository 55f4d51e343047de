"""What stands in front of `/mcp` when the connection's protocol checks it as the head is parsed (faces/http.py
`McpFront`, web/http_protocol.py `DirectRoute.admit`, web/guard.py `HostGuard.refusal`, web/request_headers.py):
fuzzed (hypothesis) against the Host / Origin check as it was (Starlette's `Headers` and the SDK's allow-list rules)
for any headers; a refused request never reaches the endpoint nor teaches the gateway its base URL, and the
connection goes on serving the requests after it, in order."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers
from uvicorn.config import Config
from uvicorn.server import ServerState

from mcp.server.transport_security import TransportSecuritySettings

from elicitgate._compat import HostRules
from elicitgate.config import build_config
from elicitgate.elicitation.hosting import Hosting
from elicitgate.faces.http import McpFront
from elicitgate.web.app import LearnBaseUrl
from elicitgate.web.client_address import ClientAddress
from elicitgate.web.guard import HostGuard
from elicitgate.web.http_protocol import DirectRoute, HttpLimits, limited_protocol
from elicitgate.web.request_headers import HEADERS, RequestHeaders
from tests.test_unit_http_protocol import MAX_HEAD, MAX_LINE, Socket, fuzz, turns

SETTINGS = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=["127.0.0.1:*", "localhost:*", "gw.example"],
                                     allowed_origins=["http://127.0.0.1:*", "https://app.example"])

VALUES = st.one_of(
    st.sampled_from([b"127.0.0.1:8000", b"127.0.0.1", b"localhost:1", b"gw.example", b"gw.example:80", b"evil.example",
                     b"", b"http://127.0.0.1:9", b"https://app.example", b"http://app.example", b"null",
                     b"127.0.0.1:", b"GW.EXAMPLE", b"\xe9vil"]),
    st.binary(max_size=12))
NAMES = st.sampled_from([b"host", b"origin", b"Host", b"ORIGIN", b"x-a"])
HEADER_LISTS = st.lists(st.tuples(NAMES, VALUES), max_size=5)


def old_check(scope: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The guard as it was before the check moved: Starlette's `Headers`, the SDK's rules."""
    rules = HostRules(SETTINGS)
    headers = Headers(scope=scope)
    host, origin = headers.get("host"), headers.get("origin")
    problem = None
    if not rules.host_allowed(host):
        problem = ("host", host)
    elif origin is not None and not rules.origin_allowed(origin):
        problem = ("origin", origin)
    if problem is None:
        return None
    header, value = problem
    return 403, {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": f"{header.capitalize()} header not allowed",
        "data": {"source": "elicitgate", header: value, "setting": f"http.allowed_{header}s"}}}


async def call(app: Any, scope: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


@fuzz(400)
@given(headers=HEADER_LISTS)
def test_the_guard_refuses_exactly_what_it_refused_with_starlettes_headers(headers: list[tuple[bytes, bytes]]):
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": list(headers)}
    expected = old_check({**scope, "headers": list(headers)})
    refusal = HostGuard(None, SETTINGS).refusal(scope)  # pyright: ignore[reportArgumentType]
    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert asyncio.run(call(refusal, scope)) == expected


def test_a_requests_headers_are_made_once_per_scope_and_again_for_other_headers():
    scope: dict[str, Any] = {"type": "http", "headers": ((b"host", b"a"), (b"host", b"b"))}
    headers = RequestHeaders.of(scope)
    assert scope["headers"] == [(b"host", b"a"), (b"host", b"b")] and type(scope["headers"]) is list  # as Starlette's
    assert RequestHeaders.of(scope) is headers and scope[HEADERS] is headers
    assert headers.first(b"host") == "a" and headers["Host"] == "a" and headers.first(b"origin") is None
    copy = {**scope, "headers": [(b"host", b"c")]}  # a middleware's copy of the scope with other headers
    assert RequestHeaders.of(copy).first(b"host") == "c" and RequestHeaders.of(scope) is headers


def hosting() -> Hosting:
    return Hosting(build_config({"mcpServers": {}}, "test"), {})


def test_a_refused_request_teaches_the_gateway_no_base_url_and_an_admitted_one_does():
    where = hosting()
    endpoint = object()
    front = McpFront(HostGuard(LearnBaseUrl(endpoint, hosting=where), SETTINGS))  # pyright: ignore[reportArgumentType]
    assert front.endpoint is endpoint
    scope = {"type": "http", "server": ("203.0.113.9", 8000), "scheme": "http", "headers": [(b"host", b"evil.example")]}
    assert front.admit(scope) is not None and where.base_url is None
    scope["headers"] = [(b"host", b"gw.example")]
    assert front.admit(scope) is None and where.base_url == "http://203.0.113.9:8000"


def test_the_protocol_answers_a_refused_mcp_request_itself_and_serves_the_next_in_order():
    async def main() -> tuple[list[str], bytes]:
        reached: list[str] = []

        async def endpoint(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            reached.append(dict(scope["headers"])[b"x-n"].decode())
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})

        async def outer(scope: Any, receive: Any, send: Any) -> None:
            raise AssertionError("/mcp goes past the outer app")

        front = McpFront(HostGuard(LearnBaseUrl(endpoint, hosting=hosting()), SETTINGS))
        protocol_class = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))
        protocol_class.direct = DirectRoute(b"/mcp", front.endpoint, outer, ClientAddress(outer).inner,
                                            admit=front.admit)
        protocol = protocol_class(config=Config(outer, lifespan="off", log_level="critical"),
                                  server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop())
        socket = Socket()
        protocol.connection_made(socket)
        requests = [("1", "gw.example", None), ("2", "evil.example", None), ("3", "gw.example", "http://evil.example"),
                    ("4", "127.0.0.1:9", "http://127.0.0.1:7")]
        protocol.data_received(b"".join(  # pipelined: answered in order
            b"POST /mcp HTTP/1.1\r\nhost: %s\r\n%sx-n: %s\r\ncontent-length: 0\r\n\r\n"
            % (host.encode(), b"origin: %s\r\n" % origin.encode() if origin else b"", n.encode())
            for n, host, origin in requests))
        await turns(300)
        protocol.connection_lost(None)
        return reached, bytes(socket.written)

    reached, written = asyncio.run(main())
    assert reached == ["1", "4"]
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", written)
    assert statuses == [b"200", b"403", b"403", b"200"]
    assert b'"message":"Host header not allowed"' in written and b'"message":"Origin header not allowed"' in written
