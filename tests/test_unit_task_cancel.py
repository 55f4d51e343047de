"""`wire.scopes.TaskCancel`: a task cancelled as a cancel scope around all of it would cancel it, with no scope held
while it runs (the face endpoint's requests in flight): anyio's shields stop it, it is level-triggered as a scope is,
a result on its way in is not lost, and `stop` takes back what it delivered and says whether anything else asked."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.memory import memory_wires
from elicitgate.wire.scopes import TaskCancel

pytestmark = pytest.mark.anyio


async def _turns(n: int = 10) -> None:
    """Loop turns enough for a cancellation asked for to land (it is delivered by a loop callback)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_shielded_step_runs_to_its_end_and_the_cancellation_lands_after_it() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    steps: list[str] = []

    async def handler() -> None:
        with anyio.CancelScope(shield=True):
            entered.set()
            with anyio.move_on_after(60):  # a scope of its own inside the shield: still shielded
                await release.wait()
            steps.append("shielded step done")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            steps.append("cancelled after it")
            raise

    task = asyncio.get_running_loop().create_task(handler())
    await entered.wait()
    cancel = TaskCancel(task, "test")
    await _turns()
    assert not task.done() and steps == []
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert steps == ["shielded step done", "cancelled after it"]
    assert cancel.stop() is True


async def test_it_is_level_triggered_as_a_scope_and_stop_takes_every_delivery_back() -> None:
    """A handler that catches the cancellation and waits again (outside a shield) is cancelled again, as in a cancelled
    scope; once stopped, the task runs on uncancelled."""
    caught = 0
    stopped = asyncio.Event()
    cancel: TaskCancel | None = None

    async def handler() -> str:
        nonlocal caught
        for _ in range(3):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                caught += 1
        assert cancel is not None
        assert cancel.stop() is True  # the part it covered ends: its three cancellations taken back
        current = asyncio.current_task()
        assert current is not None and current.cancelling() == 0
        stopped.set()
        await asyncio.sleep(0)  # no cancellation comes any more
        await _turns()
        return "went on"

    task = asyncio.get_running_loop().create_task(handler())
    await asyncio.sleep(0)
    cancel = TaskCancel(task, "test")
    assert await asyncio.wait_for(task, 5) == "went on"
    assert caught == 3 and stopped.is_set()


async def test_a_result_on_its_way_in_is_not_lost() -> None:
    """A task whose awaited future has its result already (it wakes with it next) is cancelled at its next wait,
    not at that one: the result is taken, as anyio's delivery leaves it."""
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    got: list[str] = []

    async def handler() -> None:
        got.append(await future)
        await asyncio.Event().wait()

    task = asyncio.get_running_loop().create_task(handler())
    await asyncio.sleep(0)
    cancel = TaskCancel(task, "test")  # its first look comes before the task's wake-up with the result below
    future.set_result("the answer")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert got == ["the answer"]
    cancel.stop()


async def test_not_before_the_first_step_and_a_cancel_from_elsewhere_is_told_apart() -> None:
    started: list[bool] = []

    async def handler() -> None:
        started.append(True)
        await asyncio.Event().wait()

    task = asyncio.get_running_loop().create_task(handler())
    cancel = TaskCancel(task, "test")  # before the task ran at all: its first step is taken, then it is cancelled
    await _turns()
    assert started == [True] and task.done() and task.cancelled()
    assert cancel.stop() is True

    async def catching() -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass
        assert ours is not None
        return ours.stop()

    ours: TaskCancel | None = None
    task = asyncio.get_running_loop().create_task(catching())
    await asyncio.sleep(0)
    ours = TaskCancel(task, "test")
    task.cancel()  # from elsewhere, in the same turn
    assert await task is False  # a cancellation is still pending after its own are taken back


async def test_the_peer_cancelling_a_request_reaches_the_tasks_its_handler_started() -> None:
    """Through the face endpoint: the peer's `notifications/cancelled` for a request whose handler runs a task group
    (and waits under a timeout scope of its own) cancels the group's task as a scope around the handler would; the
    request is not answered, the connection goes on and its serving task (the handler's own coroutine, which lets the
    cancellation through) ends."""
    wire, server = memory_wires()
    started, child_cancelled, noted = anyio.Event(), anyio.Event(), anyio.Event()

    async def child() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            child_cancelled.set()
            raise

    async def on_request(inbound: Inbound, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if method != "wait":
            return {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
            started.set()
            with anyio.move_on_after(60):
                await anyio.sleep_forever()
        return {"not": "reached"}

    async def on_notify(inbound: Inbound, method: str, params: dict[str, Any] | None) -> None:
        noted.set()

    endpoint = Endpoint(wire, "the client", serving=True)
    async with anyio.create_task_group() as tg:
        await tg.start(endpoint.run, on_request, on_notify)
        await server.say({"jsonrpc": "2.0", "id": "w", "method": "wait"})
        await started.wait()
        serving = set(endpoint._serving_tasks)  # pyright: ignore[reportPrivateUsage]
        await server.say({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}})
        with anyio.fail_after(5):
            await child_cancelled.wait()
            await asyncio.wait(serving)
        assert [task.cancelled() for task in serving] == [True]  # the handler's own coroutine: no frame catches it
        await server.say({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        with anyio.fail_after(5):
            answer, _ = await server.receive()
        assert isinstance(answer, dict) and answer["id"] == "p"  # and the cancelled request is not answered
        assert noted.is_set()
        server.close()
