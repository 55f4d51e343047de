"""Calls cut from every call's way, with the same results: a call's elicitation modes are read once per capabilities
model (read again when the connection holds another), the capabilities told a 2026-07-28 upstream are a kept dict
found without a call, and a tools/call's catalog entry is looked up once for the gateway's ask and `_runs_apart`."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, TypeVar, cast

from mcp_types import ClientCapabilities

from elicitgate.bridging.envelope import modern_capabilities
from elicitgate.capabilities import declared_capabilities
from elicitgate.config import build_config
from elicitgate.contracts import DownstreamPeer
from elicitgate.faces.peer import DownstreamCall
from elicitgate.router.asks import GatewayAsks
from elicitgate.router.catalog import Catalog
from elicitgate.router.requests import RequestRouter
from tests.profiled import calls_of

T = TypeVar("T")


def declared(*modes: str) -> ClientCapabilities:
    return ClientCapabilities.model_validate({"elicitation": {mode: {} for mode in modes}})


def downstream_call(capabilities: ClientCapabilities | None) -> tuple[DownstreamCall, Any]:
    connection = SimpleNamespace(client_capabilities=capabilities, state={})
    ctx = SimpleNamespace(
        request_id=1,
        protocol_version="2025-11-25",
        params={"name": "demo__confirm"},
        session=SimpleNamespace(_connection=connection, _request_outbound=SimpleNamespace()),
    )
    peer = DownstreamPeer(id="c1", connection=cast(Any, connection))
    return DownstreamCall(peer=peer, ctx=cast(Any, ctx), method="tools/call"), connection


def test_a_calls_modes_are_read_once_per_capabilities_model() -> None:
    call, _ = downstream_call(declared("form"))
    assert call.modes == frozenset({"form"})
    modes, called = calls_of(lambda: call.modes)
    assert called == ["modes"]
    assert modes == frozenset({"form"})


def test_a_calls_modes_follow_the_capabilities_it_holds_now() -> None:
    """A session's capabilities replaced mid-session (a model of its own): the modes are read from the new one."""
    call, connection = downstream_call(declared("form"))
    assert call.modes == frozenset({"form"})
    connection.client_capabilities = declared("form", "url")
    assert call.modes == frozenset({"form", "url"})
    assert modern_capabilities(cast(Any, call)) == {"elicitation": {"form": {}, "url": {}}}
    connection.client_capabilities = None
    assert call.modes == frozenset()
    assert modern_capabilities(cast(Any, call)) == {}
    connection.client_capabilities = declared()
    assert call.modes == frozenset({"form"})  # `{"elicitation": {}}` is form only


def test_a_calls_declared_capabilities_are_dumped_once_per_model_and_follow_a_new_one() -> None:
    call, connection = downstream_call(declared("form"))
    first = call.raw_capabilities()
    assert first == {"elicitation": {"form": {}}}
    again, called = calls_of(call.raw_capabilities)
    assert called == [] and again is first
    connection.client_capabilities = declared("url")
    assert call.raw_capabilities() == {"elicitation": {"url": {}}}
    connection.client_capabilities = None
    assert call.raw_capabilities() == {}


def test_the_capabilities_told_a_2026_upstream_are_found_without_a_call() -> None:
    call, _ = downstream_call(declared("url"))
    call.modes  # noqa: B018 (read once: kept)
    origin = cast(Any, call)
    told, called = calls_of(lambda: modern_capabilities(origin))
    assert called == ["modern_capabilities", "modes"]
    assert told is declared_capabilities(frozenset({"url"})) and told == {"elicitation": {"url": {}}}


def test_capabilities_of_modes_no_client_declares_are_still_made() -> None:
    odd = SimpleNamespace(modes=frozenset({"form", "url", "other"}))
    assert modern_capabilities(cast(Any, odd)) == {"elicitation": {"form": {}, "other": {}, "url": {}}}


def _router(tools: list[dict[str, Any]], **elicitation: Any) -> RequestRouter:
    config = build_config({"mcpServers": {"demo": {"command": "true"}}, "elicitation": elicitation}, "test", environ={})
    catalog = Catalog(["demo"], config.namespacing)
    catalog.update("demo", {"tools": tools})
    inbound = cast(Any, SimpleNamespace(broker=None))
    links = cast(Any, {"demo": SimpleNamespace(primary=None)})
    asks = GatewayAsks(config, catalog, inbound)
    nothing = cast(Any, None)
    return RequestRouter(
        config,
        catalog,
        links,
        inbound,
        asks=asks,
        tasks=nothing,
        task_requests=nothing,
        task_runner=nothing,
        peers=nothing,
        task_group=cast(Callable[[], Any], None),
    )


def _counted_finds(router: RequestRouter, name: str, arguments: dict[str, Any]) -> tuple[Any, int]:
    call, _ = downstream_call(declared("form"))
    origin = cast(Any, call)
    routed, called = calls_of(lambda: router.plain(origin, "tools/call", {"name": name, "arguments": arguments}))
    return routed, called.count("find")


def test_a_plain_tools_call_looks_its_tool_up_once() -> None:
    router = _router([{"name": "echo", "inputSchema": {"type": "object", "required": ["text"]}}])
    routed, finds = _counted_finds(router, "demo__echo", {"text": "hi"})
    assert routed is not None and routed[1] == {"name": "echo", "arguments": {"text": "hi"}}
    assert finds == 1


def test_a_tools_call_the_gateway_asks_about_first_is_not_plain() -> None:
    router = _router(
        [{"name": "echo", "inputSchema": {"type": "object", "required": ["text"]}}], ask_missing_arguments=True
    )
    assert _counted_finds(router, "demo__echo", {}) == (None, 1)
    assert _counted_finds(router, "demo__echo", {"text": "hi"})[0] is not None
    assert _counted_finds(router, "demo__unknown", {})[0] is not None  # not listed: forwarded, the upstream answers
