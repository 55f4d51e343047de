"""The per-client token bucket (elicitation/limits.py) on a clock the test moves: no process, no sleep."""

import pytest

from elicitgate.elicitation.limits import TokenBucket


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def bucket(per_minute: float, burst: int, now: float = 1000.0) -> tuple[TokenBucket, Clock]:
    clock = Clock(now)
    return TokenBucket(per_minute / 60.0, burst, clock=clock), clock


def test_a_new_bucket_gives_its_burst_at_once_then_says_how_long_to_wait() -> None:
    b, _ = bucket(per_minute=60, burst=3)
    assert [b.take(), b.take(), b.take()] == [0.0, 0.0, 0.0]
    assert b.take() == pytest.approx(1.0)  # one token a second


def test_the_token_comes_back_exactly_at_the_advertised_time_and_not_before() -> None:
    b, clock = bucket(per_minute=30, burst=1)
    assert b.take() == 0.0
    wait = b.take()
    assert wait == pytest.approx(2.0)
    clock.now += wait - 0.01
    assert 0 < b.take() <= 0.011
    clock.now += 0.01
    assert b.take() == 0.0


@pytest.mark.parametrize("start", [1000.0, 238726.66246479948, 773738.7623557177])
@pytest.mark.parametrize("per_minute", [0.7, 7, 13, 120])
@pytest.mark.parametrize("pause", [0.1, 0.3])
def test_waiting_the_advertised_time_always_earns_the_token(start: float, per_minute: float, pause: float) -> None:
    """A client told `retryAfterSeconds` that waits exactly that long is not refused again by a rounding error
    (it was: 1.6e-14 s short at 7/minute, rounded to `retryAfterSeconds: 0.0` by the broker)."""
    b, clock = bucket(per_minute, burst=1, now=start)
    assert b.take() == 0.0
    clock.now += pause
    wait = b.take()
    assert wait > 0
    assert wait == round(wait, 3)  # whole milliseconds: what the broker advertises is what the bucket means
    clock.now += wait
    assert b.take() == 0.0


def test_the_refill_stops_at_the_burst() -> None:
    b, clock = bucket(per_minute=60, burst=2)
    clock.now += 3600  # an hour idle earns 2 tokens, not 3600
    assert [b.take(), b.take()] == [0.0, 0.0]
    assert b.take() == pytest.approx(1.0)


def test_a_refused_take_costs_nothing() -> None:
    b, clock = bucket(per_minute=60, burst=1)
    b.take()
    for _ in range(5):
        assert b.take() == pytest.approx(1.0)  # asking again does not push the token further away
    clock.now += 1.0
    assert b.take() == 0.0


def test_partial_refill_is_kept_between_takes() -> None:
    b, clock = bucket(per_minute=60, burst=1)
    b.take()
    clock.now += 0.4
    assert b.take() == pytest.approx(0.6)
    clock.now += 0.6
    assert b.take() == 0.0


def test_full_means_refilled_to_the_burst() -> None:
    b, clock = bucket(per_minute=60, burst=2)
    assert b.full()
    b.take()
    assert not b.full()
    clock.now += 0.999
    assert not b.full()
    clock.now += 0.001
    assert b.full()


def test_a_refusal_never_advertises_zero_seconds() -> None:
    """0 means "taken" to the broker: a refusal at a very high rate still says at least a millisecond."""
    b, clock = bucket(per_minute=6_000_000, burst=1)  # 100,000 tokens a second
    b.take()
    clock.now += 0.99999e-5  # all but 1e-5 of the next token
    assert b.take() == 0.001
