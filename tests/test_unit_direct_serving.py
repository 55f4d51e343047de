"""A server's requests on an upstream connection (`wire.endpoint.Endpoint` as the client: `serving=False`) are served
by the handler's own coroutine as their task, with no frame of the endpoint's around it (a server's
`elicitation/create` is held for as long as a person takes to answer it); the task's end writes the answer. What
`_handle` promised for them still holds: errors answered as errors, a request the server cancels not answered, a
shielded step run to its end, the connection's end waiting for what it cancelled."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp_types import INTERNAL_ERROR

from mcp.shared.exceptions import MCPError

from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.memory import MemoryWire, memory_wires

pytestmark = pytest.mark.anyio

_SEEN: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_direct_serving_seen", default=None)


async def written(server: MemoryWire) -> dict[str, Any]:
    with anyio.fail_after(5):
        message, _ = await server.receive()
    assert isinstance(message, dict)
    return message


async def _notes(inbound: Inbound, method: str, params: dict[str, Any] | None) -> None:
    """Notifications: none of these tests needs them."""


async def test_the_task_runs_the_handlers_own_coroutine_in_the_context_its_handler_was_called_in() -> None:
    (wire, server) = memory_wires()
    made: list[Coroutine[Any, Any, dict[str, Any]]] = []
    seen: dict[str, object] = {}
    release = anyio.Event()

    async def asked(inbound: Inbound) -> dict[str, Any]:
        task = asyncio.current_task()
        assert task is not None
        seen["coroutine"] = task.get_coro()
        seen["context"] = _SEEN.get()
        await release.wait()
        return {"action": "accept", "related": inbound.related_request_id}

    def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> Coroutine[Any, Any, Any]:
        _SEEN.set(f"{method} {inbound.related_request_id}")  # e.g. the request's ids for the log lines
        made.append(asked(inbound))
        return made[-1]

    async with anyio.create_task_group() as tg:
        await tg.start(Endpoint(wire, "upstream 'u'").run, on_request, _notes)
        await server.say({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}, related="c-1")
        with anyio.fail_after(5):
            while "coroutine" not in seen:
                await anyio.lowlevel.checkpoint()
        assert seen["coroutine"] is made[0]  # no `_handle` frame around it
        assert seen["context"] == "elicitation/create c-1"
        assert _SEEN.get() is None  # set in the request's own context, not the reader's
        release.set()
        assert await written(server) == {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "related": "c-1"}}
        server.close()


async def test_a_handler_that_refuses_before_any_await_is_answered_with_its_error_and_reading_goes_on() -> None:
    (wire, server) = memory_wires()

    def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> Coroutine[Any, Any, Any]:
        if method == "elicitation/create":
            raise MCPError(code=-32017, message="no call owns it", data={"server": "u"})
        if method == "crash":
            raise RuntimeError("boom")
        return _pong()

    async with anyio.create_task_group() as tg:
        await tg.start(Endpoint(wire, "upstream 'u'").run, on_request, _notes)
        await server.say({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}})
        assert await written(server) == {
            "jsonrpc": "2.0", "id": 1, "error": {"code": -32017, "message": "no call owns it", "data": {"server": "u"}},
        }
        await server.say({"jsonrpc": "2.0", "id": 2, "method": "crash"})
        assert await written(server) == {
            "jsonrpc": "2.0", "id": 2, "error": {"code": INTERNAL_ERROR, "message": "boom"},
        }
        await server.say({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert await written(server) == {"jsonrpc": "2.0", "id": 3, "result": {}}
        server.close()


async def _pong() -> dict[str, Any]:
    return {}


async def test_a_request_the_server_cancels_in_a_shielded_step_finishes_that_step_and_is_not_answered() -> None:
    (wire, server) = memory_wires()
    entered, release, finished, cancelled = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()

    async def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if method != "wait":
            return {}
        try:
            with anyio.CancelScope(shield=True):
                entered.set()
                await release.wait()
                finished.set()
            await anyio.sleep_forever()  # the cancellation lands here, after the shielded step
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        raise AssertionError("not reached")

    async with anyio.create_task_group() as tg:
        await tg.start(Endpoint(wire, "upstream 'u'").run, on_request, _notes)
        await server.say({"jsonrpc": "2.0", "id": "s", "method": "wait"})
        await entered.wait()
        await server.say({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}})
        for _ in range(10):  # loop turns enough for a cancellation scheduled by the notification to land
            await anyio.lowlevel.checkpoint()
        assert not finished.is_set()
        release.set()
        with anyio.fail_after(5):
            await finished.wait()
            await cancelled.wait()
        await server.say({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        assert (await written(server))["id"] == "p"  # the next answer; none ever came for "s"
        server.close()


async def test_the_connections_end_cancels_what_is_served_and_waits_for_it() -> None:
    (wire, server) = memory_wires()
    waiting, cleaned = anyio.Event(), anyio.Event()

    async def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        try:
            waiting.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):  # e.g. giving back a call's connections
                for _ in range(5):
                    await anyio.lowlevel.checkpoint()
                cleaned.set()
        raise AssertionError("not reached")

    endpoint = Endpoint(wire, "upstream 'u'")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, on_request, _notes)
            await server.say({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}})
            await waiting.wait()
            server.close()  # `run` returns once the handler's cleanup is over
    assert cleaned.is_set()
