"""An HTTP session's wire pushes the client's messages to its endpoint (faces/http_session.py `SessionWire.push`): each
reaches the endpoint in the step of the POST that hands it in, not one loop turn later from the session's reader task;
what is handed in while an inline request's handling (`initialize`) runs waits behind it, in order; what the endpoint
raises ends the session's reader as a read loop's failure would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from elicitgate.faces.event_streams import EventLimits
from elicitgate.faces.http_session import SessionWire
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from tests.test_unit_http_face_callbacks import face, post
from tests.test_unit_http_protocol import turns

pytestmark = pytest.mark.anyio


def _message(method: str, request_id: int | None = None) -> Inbound:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    return Inbound(message)


async def test_messages_are_pushed_in_the_caller_s_step_and_wait_behind_an_inline_handling_in_order() -> None:
    wire = SessionWire(EventLimits(10, 100))
    seen: list[str] = []
    gate = asyncio.Event()

    async def initializing() -> None:
        await gate.wait()
        seen.append("initialized")

    def sink(inbound: Inbound) -> Any:
        assert isinstance(inbound.message, dict)
        seen.append(inbound.message["method"])
        return initializing() if inbound.message["method"] == "initialize" else None

    wire.hand_in(_message("initialize", 0))  # before the reader: it hands it on
    reader = asyncio.create_task(wire.push(sink))
    await turns()
    assert seen == ["initialize"]
    wire.hand_in(_message("notifications/initialized"))
    wire.hand_in(_message("ping", 1))
    assert seen == ["initialize"], "behind the inline handling"
    gate.set()
    await turns()
    assert seen == ["initialize", "initialized", "notifications/initialized", "ping"]
    wire.hand_in(_message("tools/list", 2))
    assert seen[-1] == "tools/list", "pushed in the step that handed it in"
    wire.close()
    await asyncio.wait_for(reader, 10)


async def test_what_the_sink_raises_ends_the_reader() -> None:
    wire = SessionWire(EventLimits(10, 100))

    def sink(inbound: Inbound) -> None:
        raise RuntimeError("the endpoint failed")

    reader = asyncio.create_task(wire.push(sink))
    await turns()
    wire.hand_in(_message("ping", 1))
    with pytest.raises(RuntimeError, match="the endpoint failed"):
        await asyncio.wait_for(reader, 10)


async def test_a_client_s_request_and_answer_reach_the_endpoint_in_the_step_of_their_post(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the face's own protocol: the request's handler is called, and an answer is matched, as `data_received`
    runs (the session's reader task took a loop turn for each)."""
    dispatched: list[object] = []
    dispatch = Endpoint._dispatch  # pyright: ignore[reportPrivateUsage]

    def watched(endpoint: Endpoint, inbound: Inbound, *args: Any) -> Any:
        dispatched.append(inbound.message)
        return dispatch(endpoint, inbound, *args)

    async with face() as connection:
        monkeypatch.setattr(Endpoint, "_dispatch", watched)
        connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, connection.session))
        assert dispatched == [{"jsonrpc": "2.0", "id": 5, "method": "ping"}]
        await connection.until(lambda: connection.socket.written.endswith(b'{"jsonrpc":"2.0","id":5,"result":{}}'))
        connection.protocol.data_received(post({"jsonrpc": "2.0", "id": 77, "result": {}}, connection.session))
        assert dispatched[-1] == {"jsonrpc": "2.0", "id": 77, "result": {}}
        await connection.until(lambda: b"HTTP/1.1 202" in connection.socket.written)
