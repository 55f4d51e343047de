"""A request's deadline that stops while a person answers (upstreams/clock.py), in one event loop: no process,
no sleep. Budgets are large where time passes (a loaded machine may stall), zero where expiry is the point."""

import math

import anyio
import pytest

from elicitgate.upstreams.clock import PausableDeadline

pytestmark = pytest.mark.anyio

BUDGET = 1000.0


async def test_the_deadline_is_the_budget_from_now() -> None:
    before = anyio.current_time()
    with PausableDeadline(BUDGET) as clock:
        deadline = clock._scope.deadline
        assert before + BUDGET <= deadline <= anyio.current_time() + BUDGET


async def test_no_timeout_is_no_deadline() -> None:
    with PausableDeadline(None) as clock:
        assert clock._scope.deadline == math.inf
        with clock.paused():
            assert clock._scope.deadline == math.inf
        assert clock._scope.deadline == math.inf


async def test_paused_time_is_not_spent() -> None:
    with PausableDeadline(BUDGET) as clock:
        with clock.paused():
            assert clock._scope.deadline == math.inf
            paused_at = anyio.current_time()
            await anyio.lowlevel.checkpoint()
        resumed_at = anyio.current_time()
        # What was left at the pause is what is left after it, counted from the resume.
        assert clock._scope.deadline - resumed_at <= BUDGET
        assert clock._scope.deadline - resumed_at >= BUDGET - (paused_at - resumed_at) - 60


async def test_nested_pauses_resume_only_at_the_last() -> None:
    """Two elicitations open for one request: the clock runs again when both have ended."""
    with PausableDeadline(BUDGET) as clock:
        clock.pause()
        clock.pause()
        clock.resume()
        assert clock._scope.deadline == math.inf
        clock.resume()
        assert clock._scope.deadline < math.inf


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
