"""A request's deadline that stops while a person answers (upstreams/clock.py), in one event loop: no process,
no sleep. Budgets are large where time passes (a loaded machine may stall), zero where expiry is the point."""

import asyncio
import math

import anyio
import pytest

from elicitgate.upstreams.clock import PausableDeadline

pytestmark = pytest.mark.anyio

BUDGET = 1000.0


async def test_the_deadline_is_the_budget_from_now() -> None:
    before = anyio.current_time()
    with PausableDeadline(BUDGET) as clock:
        deadline = clock.deadline
        assert before + BUDGET <= deadline <= anyio.current_time() + BUDGET


async def test_no_timeout_is_no_deadline() -> None:
    with PausableDeadline(None) as clock:
        assert clock.deadline == math.inf
        with clock.paused():
            assert clock.deadline == math.inf
        assert clock.deadline == math.inf


async def test_paused_time_is_not_spent() -> None:
    with PausableDeadline(BUDGET) as clock:
        with clock.paused():
            assert clock.deadline == math.inf
            paused_at = anyio.current_time()
            await anyio.lowlevel.checkpoint()
        resumed_at = anyio.current_time()
        # What was left at the pause is what is left after it, counted from the resume.
        assert clock.deadline - resumed_at <= BUDGET
        assert clock.deadline - resumed_at >= BUDGET - (paused_at - resumed_at) - 60


async def test_nested_pauses_resume_only_at_the_last() -> None:
    """Two elicitations open for one request: the clock runs again when both have ended."""
    with PausableDeadline(BUDGET) as clock:
        clock.pause()
        clock.pause()
        clock.resume()
        assert clock.deadline == math.inf
        clock.resume()
        assert clock.deadline < math.inf


async def test_an_expired_budget_raises_timeout_error_at_the_next_checkpoint() -> None:
    reached = False
    with pytest.raises(TimeoutError):
        with PausableDeadline(0):
            await anyio.lowlevel.checkpoint()
            reached = True
    assert not reached


async def test_a_budget_that_runs_out_during_a_pause_expires_only_after_the_resume() -> None:
    """A person answering for longer than the request's own timeout: the answer is not cut off, and the call
    times out once it is back to waiting on the upstream with what was left (here: at most 50 ms)."""
    steps: list[str] = []
    with pytest.raises(TimeoutError):
        with PausableDeadline(0.05) as clock:
            with clock.paused():
                await anyio.sleep(0.2)  # the person answering: longer than the whole budget
                steps.append("answered")
            await anyio.sleep(30)  # the upstream, after the answer: the rest of the budget runs out
            steps.append("upstream answered")
    assert steps == ["answered"]


async def test_a_block_that_finishes_in_time_raises_nothing() -> None:
    with PausableDeadline(BUDGET):
        await anyio.lowlevel.checkpoint()


async def test_an_outer_cancel_is_not_turned_into_a_timeout() -> None:
    """The client cancelled its request: that is a cancellation, not the upstream's timeout."""
    with anyio.CancelScope() as outer:
        with PausableDeadline(BUDGET):
            outer.cancel()
            await anyio.lowlevel.checkpoint()
    assert outer.cancelled_caught


async def test_a_resume_after_the_block_ended_arms_nothing() -> None:
    """The broker resumes a call's clock when its question ends, which may be after the call itself ended (it was
    cancelled meanwhile): the task that ran the call goes on uncancelled."""
    with PausableDeadline(0) as clock:
        clock.pause()
    clock.resume()
    assert clock.deadline < math.inf
    await anyio.sleep(0.01)  # past the deadline: a timer armed by the resume would cancel this task here
    assert asyncio.current_task() is not None and not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_a_native_cancel_during_the_deadline_stays_a_cancel() -> None:
    """A task cancelled from outside (asyncio's own, as a caller that gives up does) is not a timeout."""
    entered = asyncio.Event()

    async def run() -> None:
        with PausableDeadline(BUDGET):
            entered.set()
            await asyncio.sleep(BUDGET)

    task = asyncio.get_running_loop().create_task(run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_expiry_during_a_shielded_step_of_another_cancellation_waits_for_it() -> None:
    """The caller's cancellation is on its way out through a shielded step (the endpoint telling the upstream the
    request is cancelled) when the budget runs out: the step finishes (a task's own `cancel()` would break into
    it, anyio's shield does not stop that), and the block ends with the caller's cancellation, not a timeout."""
    entered, release, finished = anyio.Event(), anyio.Event(), anyio.Event()
    outcome: list[str] = []
    started = anyio.Event()
    callers: list[anyio.CancelScope] = []

    async def request() -> None:
        with anyio.CancelScope() as caller:
            started.set()
            callers.append(caller)
            try:
                with PausableDeadline(0.0) as clock:
                    clock.pause()  # the budget is spent the moment it resumes
                    try:
                        await anyio.sleep_forever()
                    except anyio.get_cancelled_exc_class():
                        with anyio.CancelScope(shield=True):
                            clock.resume()  # runs out now: its expiry comes at the next turn of the loop
                            entered.set()
                            await release.wait()
                            finished.set()
                        raise
            except TimeoutError:
                outcome.append("timeout")
        outcome.append("cancelled" if caller.cancelled_caught else "ended")

    async with anyio.create_task_group() as tg:
        tg.start_soon(request)
        await started.wait()
        callers[0].cancel()
        await entered.wait()
        for _ in range(10):  # turns enough for the expiry to have come
            await anyio.lowlevel.checkpoint()
        release.set()
        with anyio.fail_after(5):
            await finished.wait()
    assert outcome == ["cancelled"]


async def test_an_expiry_put_off_by_a_cancellation_caught_within_the_block_still_comes() -> None:
    """The budget runs out while an inner scope's cancellation is on its way (the expiry waits for it); that
    cancellation is caught inside the block and the block runs on: the deadline still ends it."""
    with anyio.fail_after(5), pytest.raises(TimeoutError):
        with PausableDeadline(0.0) as clock:
            clock.pause()
            with anyio.CancelScope() as inner:
                inner.cancel()
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    with anyio.CancelScope(shield=True):
                        clock.resume()  # runs out now, while the inner cancellation is under way
                        for _ in range(10):
                            await anyio.lowlevel.checkpoint()
                    raise
            assert inner.cancelled_caught
            await anyio.sleep_forever()  # ended by the deadline
