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
