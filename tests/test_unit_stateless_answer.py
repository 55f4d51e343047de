"""A 2026-07-28 POST's answer (faces/stateless.py `_Answer`): a request answered as one JSON body makes no channel and
has nothing to close; a notification before the answer makes the channel and starts the SSE stream, with the
notification first and the answer last, as before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.types import Message

from elicitgate.faces import http_answers, stateless
from elicitgate.faces.http_answers import Channel
from elicitgate.faces.stateless import StatelessContext
from tests.test_unit_stateless_steps import REQUESTS, answer_of, face, post

pytestmark = pytest.mark.anyio


async def test_a_post_answered_as_json_makes_no_channel_and_closes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []
    closed: list[object] = []
    channel_init, close = Channel.__init__, stateless._Answer.close  # pyright: ignore[reportPrivateUsage]

    def counted_init(channel: Channel) -> None:
        made.append(channel)
        channel_init(channel)

    def counted_close(answer: Any) -> None:
        closed.append(answer)
        close(answer)

    monkeypatch.setattr(http_answers.Channel, "__init__", counted_init)
    monkeypatch.setattr(stateless._Answer, "close", counted_close)  # pyright: ignore[reportPrivateUsage]
    body, method = REQUESTS["tools/list"]
    async with face() as connection:
        answer = await answer_of(connection, post(body, method=method))
    assert answer.startswith(b"HTTP/1.1 200") and b"content-type: application/json\r\n" in answer
    assert b'"tools":' in answer
    assert made == [] and closed == []


async def test_a_notification_before_the_answer_streams_both_in_order() -> None:
    sent: list[Message] = []
    gone = asyncio.Event()

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        await gone.wait()
        return {"type": "http.disconnect"}

    open_answers: dict[Channel, Any] = {}
    answer = stateless._Answer(send, receive, 60.0, open_answers)  # pyright: ignore[reportPrivateUsage]
    context = StatelessContext(7, answer, None)
    assert answer.channel is None and answer.stream_task is None
    await context.notify("notifications/message", {"level": "info", "data": "hi"})
    assert answer.channel is not None and answer.stream_task is not None
    assert list(open_answers.values()) == [answer]
    answer.served()
    assert answer.put({"jsonrpc": "2.0", "id": 7, "result": {}}, last=True)
    await answer.streamed()
    answer.close()
    assert open_answers == {}
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    events = [m["body"] for m in sent[1:] if m.get("body")]
    data = [
        json.loads(line.removeprefix(b"data: "))
        for event in events
        for line in event.split(b"\n")
        if line.startswith(b"data: ")
    ]
    assert [m.get("method", m.get("id")) for m in data] == ["notifications/message", 7]
    assert not answer.put({"jsonrpc": "2.0", "method": "late"})  # the channel is closed: nothing after the answer


async def test_a_notification_after_the_answer_was_served_starts_no_stream() -> None:
    async def send(message: Message) -> None:
        raise AssertionError("nothing is written by the answer itself")

    async def receive() -> Message:
        raise AssertionError("not watched")

    open_answers: dict[Channel, Any] = {}
    answer = stateless._Answer(send, receive, 60.0, open_answers)  # pyright: ignore[reportPrivateUsage]
    answer.served()
    assert answer.put({"jsonrpc": "2.0", "method": "notifications/message"})
    assert answer.stream_task is None and open_answers == {}
    answer.close()
