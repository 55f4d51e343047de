"""What a 2026-07-28 upstream's requests carry (`UpstreamConnection._stamp`), in memory: the era's `_meta` on a copy
of the params, and the routing headers the server checks against the body (the `mcp` SDK's server refuses an
`Mcp-Name` that does not match), made once per method and name and shared by every request alike."""

from __future__ import annotations

from typing import Any, cast

from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from mcp.shared.inbound import decode_header_value

from elicitgate.config import HttpServer
from elicitgate.upstreams import connection as connection_module
from elicitgate.upstreams.connection import Negotiated, UpstreamConnection
from elicitgate.wire.endpoint import Endpoint

VERSION = "2026-07-28"


def modern_connection() -> UpstreamConnection:
    conn = UpstreamConnection(server="s", config=HttpServer(url="http://127.0.0.1:1/mcp"),
                              endpoint=cast(Endpoint, None))
    conn.negotiated = Negotiated(era="modern", protocol_version=VERSION, capabilities={}, server_info=None,
                                 instructions=None)
    return conn


def stamp(conn: UpstreamConnection, method: str, params: dict[str, Any] | None,
          capabilities: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    sent, headers = conn._stamp(method, params, capabilities)  # pyright: ignore[reportPrivateUsage]
    assert sent is not None and headers is not None
    return dict(sent), cast(dict[str, str], headers)


def test_each_tool_gets_its_own_name_header_and_each_request_the_same_dict_for_the_same_tool():
    conn = modern_connection()
    given = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"k": 1}}
    sent, echo = stamp(conn, "tools/call", given, {"elicitation": {}})
    assert given == {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"k": 1}}  # the caller's left as it was
    assert sent["_meta"]["k"] == 1 and sent["_meta"][PROTOCOL_VERSION_META_KEY] == VERSION
    assert sent["_meta"][CLIENT_CAPABILITIES_META_KEY] == {"elicitation": {}}
    assert echo == {"mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": "echo"}
    _, confirm = stamp(conn, "tools/call", {"name": "confirm"})
    assert confirm["mcp-name"] == "confirm"
    assert stamp(conn, "tools/call", {"name": "echo"})[1] is echo
    # A name that would not survive an HTTP field goes base64-wrapped, and decodes to the name again.
    _, odd = stamp(conn, "prompts/get", {"name": " café "})
    assert odd["mcp-name"].startswith("=?base64?") and decode_header_value(odd["mcp-name"]) == " café "
    _, listing = stamp(conn, "tools/list", None)
    assert listing == {"mcp-protocol-version": VERSION, "mcp-method": "tools/list"}
    # A name that is not a string names nothing.
    assert "mcp-name" not in stamp(conn, "tools/call", {"name": 3})[1]


def test_the_kept_headers_are_bounded_and_follow_a_new_version(monkeypatch: Any):
    monkeypatch.setattr(connection_module, "MAX_KEPT_HEADERS", 4)
    conn = modern_connection()
    for n in range(10):
        assert stamp(conn, "resources/read", {"uri": f"file:///{n}"})[1]["mcp-name"] == f"file:///{n}"
        assert len(conn._modern_headers) <= 4  # pyright: ignore[reportPrivateUsage]
    first = stamp(conn, "tools/call", {"name": "echo"})[1]
    assert conn.negotiated is not None
    conn.negotiated.protocol_version = "2026-12-01"
    again = stamp(conn, "tools/call", {"name": "echo"})[1]
    assert again is not first and again["mcp-protocol-version"] == "2026-12-01"
