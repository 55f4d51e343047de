"""What the bridge's pieces on the way of every call to a 2026-07-28 upstream call, with the same results (issue #34):
the params sent upstream and a result without the upstream's `serverInfo` are copies made without a comprehension's
frame (and the keys keep their order: the same bytes go upstream and to the client), a missing `_meta` is not
checked against the `Mapping` ABC, and a round's one question is taken from its dict without `iter` and `next`."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import TypeVar, cast

from mcp_types import LOG_LEVEL_META_KEY, PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY

from elicitgate.bridging.envelope import upstream_params, without_upstream_identity
from elicitgate.bridging.input_requests import only_input_request
from elicitgate.contracts import Origin
from tests.profiled import calls_of

T = TypeVar("T")


def _calls(run: Callable[[], T]) -> tuple[T, list[str]]:
    """What `run` returns, and the Python functions and built-ins it calls, by name, in order."""
    return calls_of(run, c_calls=True)


def _call(log_level: str | None = None, asks_in_rounds: bool = False) -> Origin:
    return cast(Origin, SimpleNamespace(peer=SimpleNamespace(log_level=log_level), asks_in_rounds=asks_in_rounds))


def test_a_calls_params_without_meta_are_copied_without_a_comprehension_or_an_abc_check() -> None:
    params = {"name": "confirm", "arguments": {"question": "Proceed?"}, "requestState": "s", "inputResponses": {}}
    call = _call()
    (sent, token), called = _calls(lambda: upstream_params(params, call, "modern"))
    assert sent == {"name": "confirm", "arguments": {"question": "Proceed?"}} and token is None
    assert list(sent) == ["name", "arguments"]
    assert params["requestState"] == "s"  # the caller's are left as they were
    assert called == ["upstream_params", "get", "pop"]
    (sent, _), _ = _calls(lambda: upstream_params({"name": "t", "arguments": {}}, _call("debug"), "modern"))
    assert sent == {"name": "t", "arguments": {}, "_meta": {LOG_LEVEL_META_KEY: "debug"}}


def test_a_calls_meta_keeps_its_order_without_the_clients_envelope() -> None:
    params = {"name": "t", "_meta": {"a": 1, PROTOCOL_VERSION_META_KEY: "x", "progressToken": 7, "b": 2}, "z": 0}
    (sent, token), _ = _calls(lambda: upstream_params(params, _call("info"), "modern"))
    assert token == 7
    assert list(sent) == ["name", "_meta", "z"]
    assert list(sent["_meta"].items()) == [("a", 1), ("b", 2), (LOG_LEVEL_META_KEY, "info")]
    (sent, _), _ = _calls(lambda: upstream_params({"_meta": {"progressToken": 1}, "name": "t"}, _call(), "handshake"))
    assert sent == {"name": "t"}


def test_a_result_loses_the_upstreams_server_info_without_a_comprehension_and_keeps_its_order() -> None:
    result = {"content": [], "_meta": {"a": 1, SERVER_INFO_META_KEY: {"name": "demo"}, "b": 2}, "isError": False}
    kept, called = _calls(lambda: without_upstream_identity(result))
    assert called == ["without_upstream_identity", "get", "is_mapping"]
    assert list(kept.items()) == [("content", []), ("isError", False), ("_meta", {"a": 1, "b": 2})]
    assert list(kept["_meta"]) == ["a", "b"]
    assert SERVER_INFO_META_KEY in result["_meta"]  # the upstream's result is left as it was
    only_info = {"content": [], "_meta": {SERVER_INFO_META_KEY: {}}}
    assert without_upstream_identity(only_info) == {"content": []}
    plain = {"content": []}
    assert without_upstream_identity(plain) is plain


def test_a_rounds_one_question_is_taken_without_iter_and_next() -> None:
    requests = {"q1": {"method": "elicitation/create", "params": {"message": "?"}}}
    call = _call()
    one, called = _calls(lambda: only_input_request(call, requests))
    assert one == ("q1", {"method": "elicitation/create", "params": {"message": "?"}})
    assert requests == {}  # taken out of the decoded result
    assert called == ["only_input_request", "is_mapping", "len", "isinstance", "pop"]
    assert only_input_request(_call(), {"a": {}, "b": {}}) is None
    assert only_input_request(_call(), []) is None
