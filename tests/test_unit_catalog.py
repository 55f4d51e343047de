"""Catalog naming (router/catalog.py) in memory: namespaced tool and prompt names, resource URIs."""

from typing import Any

import pytest

from mcp.shared.exceptions import MCPError

from elicitgate.config import NamespacingConfig
from elicitgate.router.catalog import Catalog


def catalog(lists: dict[str, dict[str, list[dict[str, Any]]]], **namespacing: Any) -> Catalog:
    c = Catalog(list(lists), NamespacingConfig(**namespacing))
    for server, by_kind in lists.items():
        c.update(server, by_kind)
    return c


def refused(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(MCPError) as caught:
        call(*args)
    assert caught.value.error.code == -32602
    data = caught.value.error.data
    assert isinstance(data, dict) and data["source"] == "elicitgate"
    return {"message": caught.value.error.message, **data}


def test_names_are_prefixed_with_the_server_and_resolve_back() -> None:
    c = catalog({"a": {"tools": [{"name": "echo"}]}, "b": {"tools": [{"name": "echo"}]}})
    assert [t["name"] for t in c.merged("tools")] == ["a__echo", "b__echo"]
    assert c.resolve_name("tool", "a__echo") == ("a", "echo")
    assert c.resolve_name("tool", "b__echo") == ("b", "echo")


def test_a_tool_name_holding_the_separator_keeps_it() -> None:
    c = catalog({"a": {"tools": [{"name": "x__y"}, {"name": "__init"}, {"name": "end__"}]}, "b": {}})
    published = [t["name"] for t in c.merged("tools")]
    assert published == ["a__x__y", "a____init", "a__end__"]
    assert [c.resolve_name("tool", p) for p in published] == [("a", "x__y"), ("a", "__init"), ("a", "end__")]


def test_a_server_name_ending_as_the_separator_begins_resolves() -> None:
    """`a_` + `__` + `x` is `a___x`, whose first `__` is not the one after the server (was: unknown tool)."""
    c = catalog({"a_": {"tools": [{"name": "x"}]}, "b": {"tools": [{"name": "y"}]}})
    assert [t["name"] for t in c.merged("tools")] == ["a___x", "b__y"]
    assert c.resolve_name("tool", "a___x") == ("a_", "x")


def test_two_servers_whose_published_names_collide_resolve_to_the_one_listing_it() -> None:
    c = catalog({"a": {"tools": [{"name": "_x"}]}, "a_": {"tools": [{"name": "y"}]}})
    assert c.resolve_name("tool", "a___x") == ("a", "_x")
    c = catalog({"a": {"tools": [{"name": "z"}]}, "a_": {"tools": [{"name": "x"}]}})
    assert c.resolve_name("tool", "a___x") == ("a_", "x")


def test_a_name_both_colliding_servers_list_is_refused_as_ambiguous() -> None:
    c = catalog({"a": {"tools": [{"name": "_x"}]}, "a_": {"tools": [{"name": "x"}]}})
    error = refused(c.resolve_name, "tool", "a___x")
    assert "ambiguous" in error["message"]
    assert sorted(error["candidates"]) == ["a", "a_"]


@pytest.mark.parametrize("public", ["echo", "c__echo", "a__", "__echo", "a_echo", ""])
def test_unknown_names_are_refused_naming_the_rule_and_the_servers(public: str) -> None:
    c = catalog({"a": {"tools": [{"name": "echo"}]}, "b": {}})
    error = refused(c.resolve_name, "tool", public)
    assert error["message"] == f"unknown tool {public!r}"
    assert error["rule"] == "tool names look like <server>__<name>"
    assert error["servers"] == ["a", "b"]


@pytest.mark.parametrize("public", [None, 3, ["a__echo"]])
def test_a_name_that_is_not_a_string_is_refused(public: Any) -> None:
    c = catalog({"a": {}, "b": {}})
    assert refused(c.resolve_name, "prompt", public)["message"] == "prompt name must be a string"


def test_a_custom_separator() -> None:
    c = catalog({"a": {"prompts": [{"name": "p.q"}]}, "b": {}}, separator=".")
    assert [p["name"] for p in c.merged("prompts")] == ["a.p.q"]
    assert c.resolve_name("prompt", "a.p.q") == ("a", "p.q")
    assert refused(c.resolve_name, "prompt", "a__p")["rule"] == "prompt names look like <server>.<name>"


def test_one_server_unprefixed_when_asked() -> None:
    c = catalog({"only": {"tools": [{"name": "x__y"}]}}, prefix_single_server=False)
    assert [t["name"] for t in c.merged("tools")] == ["x__y"]
    assert c.resolve_name("tool", "x__y") == ("only", "x__y")
    assert c.resolve_name("tool", "only__x__y") == ("only", "only__x__y")  # passed through as it is


def test_one_server_is_prefixed_by_default() -> None:
    c = catalog({"only": {"tools": [{"name": "t"}]}})
    assert [t["name"] for t in c.merged("tools")] == ["only__t"]
    assert c.resolve_name("tool", "only__t") == ("only", "t")


def test_find_returns_the_item_as_the_server_listed_it() -> None:
    tool = {"name": "echo", "inputSchema": {"type": "object"}}
    c = catalog({"a": {"tools": [tool, {"title": "no name"}]}, "b": {}})
    assert c.find("tools", "a", "echo") == tool
    assert c.find("tools", "b", "echo") is None
    assert c.merged("tools")[0] == {**tool, "name": "a__echo"} and tool["name"] == "echo"  # a copy


def test_unique_resource_uris_pass_through_and_shared_ones_take_the_server() -> None:
    c = catalog(
        {
            "a": {"resources": [{"uri": "file:///a.txt"}, {"uri": "file:///shared"}]},
            "b": {"resources": [{"uri": "file:///shared"}]},
        }
    )
    assert [r["uri"] for r in c.merged("resources")] == ["file:///a.txt", "a+file:///shared", "b+file:///shared"]
    assert c.resolve_uri("file:///a.txt") == ("a", "file:///a.txt")
    assert c.resolve_uri("a+file:///shared") == ("a", "file:///shared")
    assert c.resolve_uri("b+file:///shared") == ("b", "file:///shared")


def test_an_unlisted_uri_goes_to_the_one_server_whose_template_matches() -> None:
    c = catalog(
        {
            "a": {"resourceTemplates": [{"uriTemplate": "weather://{city}"}]},
            "b": {"resourceTemplates": [{"uriTemplate": "{anything}"}, {"uriTemplate": 7}]},
        }
    )
    assert c.resolve_uri("weather://paris") == ("a", "weather://paris")
    error = refused(c.resolve_uri, "news://today")
    assert error["message"] == "no upstream serves resource 'news://today'" and error["candidates"] == []


def test_an_unlisted_uri_two_templates_match_is_ambiguous() -> None:
    c = catalog({s: {"resourceTemplates": [{"uriTemplate": "weather://{city}"}]} for s in ("a", "b")})
    error = refused(c.resolve_uri, "weather://oslo")
    assert error["message"] == "resource 'weather://oslo' is ambiguous" and error["candidates"] == ["a", "b"]


def test_a_uri_that_is_not_a_string_is_refused() -> None:
    assert refused(catalog({"a": {}, "b": {}}).resolve_uri, None)["message"] == "uri must be a string"


def test_update_replaces_only_the_kinds_given_and_clear_forgets_the_server() -> None:
    c = catalog({"a": {"tools": [{"name": "t"}], "prompts": [{"name": "p"}]}, "b": {}})
    c.update("a", {"tools": [{"name": "u"}]})
    assert [t["name"] for t in c.merged("tools")] == ["a__u"]
    assert [p["name"] for p in c.merged("prompts")] == ["a__p"]
    assert c.find("tools", "a", "t") is None and c.find("tools", "a", "u") is not None
    c.clear("a")
    assert c.merged("tools") == [] and c.merged("prompts") == []
    assert c.find("prompts", "a", "p") is None


def test_a_tools_input_schema_is_found_by_its_public_name() -> None:
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    c = catalog({"a": {"tools": [{"name": "route", "inputSchema": schema}, {"name": "odd", "inputSchema": "?"}]},
                 "b": {"tools": [{"name": "route"}]}})
    assert c.tool_input_schema("a__route") == schema
    assert c.tool_input_schema("b__route") is None  # listed without a schema
    assert c.tool_input_schema("a__odd") is None  # not an object
    assert c.tool_input_schema("c__route") is None and c.tool_input_schema("a__missing") is None


def test_with_many_servers_a_name_resolves_to_the_server_before_its_first_separator() -> None:
    servers = [f"s{i}" for i in range(50)]
    c = Catalog(servers, NamespacingConfig())
    assert [c.resolve_name("tool", f"{s}__do__it") for s in servers] == [(s, "do__it") for s in servers]
    assert "unknown tool" in refused(c.resolve_name, "tool", "s50__do")["message"]
    assert "unknown tool" in refused(c.resolve_name, "tool", "s1__")["message"]
