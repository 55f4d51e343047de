"""What the HTTP face's handshake elicit call runs per message and per event (issue #34, `bench.http_callers --row
handshake`), pinned by what it calls, with the same outcomes: a parsed message (a plain dict) and its id (a string or
an integer) are told apart by their type, with no `isinstance` or `is_object` call; a refused message is still
refused as before."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from elicitgate.errors import NonFiniteParams
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint, is_request_id
from elicitgate.wire.framing import parse_message
from elicitgate.wire.memory import memory_wires
from tests.profiled import calls_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _nothing(inbound: Inbound, method: str, params: dict[str, Any] | None) -> Any:
    return {}


def test_a_request_id_of_the_usual_types_is_told_with_no_call() -> None:
    for value, expected in ((7, True), ("a", True), (True, False), (None, False), (1.5, False), ([1], False)):
        found, called = calls_of(lambda value=value: is_request_id(value), c_calls=True)
        assert found is expected
        if expected:
            assert called == ["is_request_id"], called


class _IntId(int):
    pass


def test_a_request_id_of_a_subclass_is_still_one() -> None:
    assert is_request_id(_IntId(3))
    assert not is_request_id(False)


def test_a_parsed_message_is_checked_as_an_object_with_no_call() -> None:
    message, called = calls_of(lambda: parse_message(b'{"jsonrpc":"2.0","id":1,"result":{}}'), c_calls=True)
    assert message == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert "is_object" not in called and "isinstance" not in called, called
    assert type(parse_message(b"[1]")).__name__ == "NotAMessage"


async def test_an_answer_is_routed_to_its_waiter_with_no_type_checks_called() -> None:
    wire, _ = memory_wires()
    endpoint = Endpoint(wire, "the client", serving=True)
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    endpoint._waiters[7] = future  # pyright: ignore[reportPrivateUsage]
    inbound = Inbound({"jsonrpc": "2.0", "id": 7, "result": {"action": "accept"}})
    _, called = calls_of(lambda: endpoint._dispatch(inbound, _nothing, _nothing), c_calls=True)  # pyright: ignore[reportPrivateUsage]
    assert future.result() == {"action": "accept"}
    assert "isinstance" not in called and "is_object" not in called and "is_request_id" not in called, called


async def test_an_unreadable_message_is_still_refused(caplog: pytest.LogCaptureFixture) -> None:
    wire, _ = memory_wires()
    endpoint = Endpoint(wire, "upstream 'u'")
    refused = NonFiniteParams({"jsonrpc": "2.0", "method": "notifications/progress"}, "params.progress")
    with caplog.at_level(logging.WARNING, logger="elicitgate.wire.endpoint"):
        assert endpoint._dispatch(Inbound(refused), _nothing, _nothing) is None  # pyright: ignore[reportPrivateUsage]
        assert endpoint._dispatch(Inbound(ValueError("not JSON")), _nothing, _nothing) is None  # pyright: ignore[reportPrivateUsage]
    assert [record.getMessage() for record in caplog.records] == [
        f"upstream 'u' sent {refused}: refused",
        "upstream 'u' sent not JSON",
    ]


def test_a_post_s_message_and_its_requestor_without_auth_are_read_with_no_isinstance() -> None:
    from elicitgate.faces.streamable import _parsed, _requestor  # pyright: ignore[reportPrivateUsage]

    message, called = calls_of(lambda: _parsed(b'{"jsonrpc":"2.0","id":1,"method":"ping"}'), c_calls=True)
    assert message == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert "isinstance" not in called, called
    owner, called = calls_of(lambda: _requestor({"type": "http", "headers": []}), c_calls=True)
    assert owner is None and "isinstance" not in called, called
    assert type(_parsed(b"[")).__name__ == "_Refusal"


async def test_a_served_request_s_end_is_answered_with_no_type_check_called() -> None:
    from elicitgate.wire.endpoint import _while_served  # pyright: ignore[reportPrivateUsage]

    wire, _ = memory_wires()
    written: list[dict[str, Any]] = []

    def send_now(response: dict[str, Any]) -> bool:
        written.append(response)
        return True

    async def served() -> dict[str, Any]:
        return {"content": []}

    loop = asyncio.get_running_loop()
    serving = Endpoint(wire, "the client", serving=True)
    serving._send_now = send_now  # pyright: ignore[reportPrivateUsage]
    task = loop.create_task(served())
    await task
    inbound = Inbound({"jsonrpc": "2.0", "id": 7, "method": "tools/call"})
    inbound.served_id = 7
    serving._serving_tasks[task] = inbound  # pyright: ignore[reportPrivateUsage]
    serving._handling[7] = (task, inbound)  # pyright: ignore[reportPrivateUsage]
    _, called = calls_of(lambda: serving._answer_served(task), c_calls=True)  # pyright: ignore[reportPrivateUsage]
    assert written == [{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}]
    assert "isinstance" not in called, called

    client = Endpoint(wire, "upstream 'u'")
    client._send_now = send_now  # pyright: ignore[reportPrivateUsage]
    other = loop.create_task(served())
    await other
    client._serving_tasks[other] = 8  # pyright: ignore[reportPrivateUsage]
    client._direct[8] = other  # pyright: ignore[reportPrivateUsage]
    _, called = calls_of(lambda: client._answer_direct(other), c_calls=True)  # pyright: ignore[reportPrivateUsage]
    assert written[-1] == {"jsonrpc": "2.0", "id": 8, "result": {"content": []}}
    assert "isinstance" not in called, called

    kept, called = calls_of(lambda: _while_served({"name": "t", "arguments": {}}))
    assert kept == {} and called == ["_while_served"], called
    assert _while_served({"_meta": {"progressToken": 3}}) == {"params": {"_meta": {"progressToken": 3}}}


async def test_an_upstream_s_event_and_json_answer_are_read_with_no_isinstance() -> None:
    from elicitgate.wire.http import HttpWire

    wire = HttpWire("http://127.0.0.1:9/mcp")  # nothing is sent: what it reads is handed in, queued
    question = b'{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}}'
    answered, called = calls_of(lambda: wire.relay(7, question), c_calls=True)
    assert answered is False and "isinstance" not in called, called
    _, called = calls_of(lambda: wire.json_answer(8, b'{"jsonrpc":"2.0","id":1,"result":{}}'), c_calls=True)
    assert "isinstance" not in called, called
    queued = [inbound.message for inbound in wire._inbox]  # pyright: ignore[reportPrivateUsage]
    assert queued == [
        {"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": {}},
        {"jsonrpc": "2.0", "id": 8, "result": {}},
    ]
