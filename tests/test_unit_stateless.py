"""The 2026-07-28 HTTP face's header reading (`faces.stateless`), in memory: the routing headers and the
`Mcp-Param-*` check read what the SDK's own handler reads, in one pass over the raw header lines."""

from __future__ import annotations

from typing import Any

from mcp.shared.inbound import find_duplicated_routing_header

from elicitgate.faces.stateless import HeaderAnnotations, _routing_headers  # pyright: ignore[reportPrivateUsage]

ANNOTATED = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}


def lines(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in pairs]


def test_the_routing_headers_are_read_and_the_rest_left_alone():
    raw = lines(("host", "x"), ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"),
                ("mcp-name", "=?base64?w6k=?="), ("content-type", "application/json"), ("mcp-param-region", "eu"))
    routing, duplicated, params = _routing_headers(raw)
    assert routing == {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "=?base64?w6k=?="}
    assert duplicated is None and params
    assert _routing_headers(lines(("mcp-method", "tools/list")))[2] is False


def test_a_routing_header_given_twice_is_named_as_the_sdk_names_it():
    cases = [
        lines(("mcp-method", "a"), ("mcp-name", "n"), ("mcp-method", "b")),
        lines(("mcp-name", "n"), ("mcp-method", "a"), ("mcp-name", "m"), ("mcp-method", "b")),
        lines(("Mcp-Protocol-Version", "x"), ("mcp-protocol-version", "y")),
        lines(("mcp-param-a", "1"), ("mcp-param-a", "2")),  # the Mcp-Param check's to refuse, not this one's
    ]
    for raw in cases:
        decoded = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
        assert _routing_headers(raw)[1] == find_duplicated_routing_header(decoded)
    assert _routing_headers(cases[0])[0]["mcp-method"] == "a"  # the first copy, as a folded mapping reads it


def test_a_schema_is_walked_once_and_again_when_the_catalog_hands_out_another():
    annotations = HeaderAnnotations()
    plain: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
    invalid: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "object", "x-mcp-header": "N"}}}
    assert annotations.declares(ANNOTATED) and not annotations.declares(plain) and not annotations.declares(invalid)
    plain["properties"]["text"]["x-mcp-header"] = "Text"  # kept by its object: the same object, the same verdict
    assert not annotations.declares(plain)
    assert annotations.declares({**plain})  # the catalog's next listing is another object: walked again
