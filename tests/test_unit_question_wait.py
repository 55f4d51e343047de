"""A question's wait without a cancel scope (elicitation/model.py: `wait_begins`, `interrupt`, `woken`), in memory:
its deadline and a stop wake the waiting task and leave it uncancelled; a cancellation of the task itself still
goes through. The broker's tests run the same over real clients (tests/test_broker.py)."""

from __future__ import annotations

import asyncio

import pytest

from elicitgate.elicitation.model import Elicitation, State

pytestmark = pytest.mark.anyio


async def _wait(el: Elicitation, forever: asyncio.Future[None]) -> str:
    cancelling = el.wait_begins()
    try:
        await forever
        return "answered"
    except asyncio.CancelledError:
        if not el.woken(cancelling):
            raise
        return "woken"
    finally:
        el.wait_ends()


def _question(deadline: float) -> Elicitation:
    return Elicitation(server="demo", mode="form", params={"message": "Proceed?"}, deadline=deadline)


async def test_the_deadline_wakes_the_wait_and_leaves_the_task_uncancelled() -> None:
    loop = asyncio.get_running_loop()
    el = _question(loop.time() + 0.01)
    task = asyncio.current_task()
    assert task is not None
    assert await _wait(el, loop.create_future()) == "woken"
    assert task.cancelling() == 0
    assert el.timer is None and el.waiting is None
    await asyncio.sleep(0)  # the task goes on: no cancellation is left pending for its next await


async def test_a_stop_from_another_task_wakes_the_wait() -> None:
    loop = asyncio.get_running_loop()
    el = _question(loop.time() + 3600)
    waiting = asyncio.create_task(_wait(el, loop.create_future()))
    while el.waiting is None:
        await asyncio.sleep(0)
    el.stop(State.CANCELLED, "client gone")
    assert await waiting == "woken"
    assert el.stop_state is State.CANCELLED


async def test_a_stop_from_the_waiting_task_itself_wakes_it_once_it_waits() -> None:
    loop = asyncio.get_running_loop()
    el = _question(loop.time() + 3600)
    el.stop(State.CANCELLED, "stopped before the wait")  # no task waits yet: it is woken as it starts to
    assert await _wait(el, loop.create_future()) == "woken"


async def test_a_cancellation_of_the_task_itself_goes_through() -> None:
    loop = asyncio.get_running_loop()
    el = _question(loop.time() + 3600)
    waiting = asyncio.create_task(_wait(el, loop.create_future()))
    while el.waiting is None:
        await asyncio.sleep(0)
    el.stop(State.CANCELLED, "client gone")  # both at once: the call's own cancellation wins
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert el.timer is None
