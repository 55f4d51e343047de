"""Parked calls of 2026-07-28 clients (rounds) in one event loop: questions become `input_required` rounds, each
round is answered once by a retry, a lost retry is taken over by the next one. No process, no transport: the
requests are the smallest object with the request surface the rounds read (`ClientRequest`)."""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from mcp.shared.exceptions import MCPError

from elicitgate.bridging.rounds import GoesOn, ParkedCall, Rounds
from elicitgate.config import BridgingConfig
from elicitgate.contracts import DownstreamPeer

pytestmark = pytest.mark.anyio

METHOD = "tools/call"
FORM = {"mode": "form", "message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}
RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}


@dataclass(eq=False)
class Request:
    """One client request as the face would hand it over."""

    peer: DownstreamPeer
    request_id: int
    modes: frozenset[str] = frozenset({"form"})
    tool: str | None = "t"
    cancel_requested: bool = False
    notified: list[tuple[str, Any]] = field(default_factory=list)

    def raw_capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}}}

    async def notify(self, method: str, params: Any) -> None:
        self.notified.append((method, params))


def peer(name: str = "p") -> DownstreamPeer:
    return DownstreamPeer(id=name, connection=None)  # type: ignore[arg-type]  # rounds never touch it


def rounds(**config: Any) -> Rounds:
    return Rounds(BridgingConfig(**config))


@asynccontextmanager
async def running(r: Rounds) -> AsyncIterator[Rounds]:
    """The rounds while a test uses them; parked calls still running at the end are cancelled, as the gateway
    does when it stops."""
    try:
        yield r
    finally:
        await r.close()


def asks(*questions: dict[str, Any], result: dict[str, Any] = RESULT, answers: list[Any] | None = None) -> Any:
    """The upstream side of a call: asks `questions` one after the other, then returns `result`."""

    async def work(park: ParkedCall) -> dict[str, Any]:
        for params in questions:
            answer = await park.ask("elicitation/create", dict(params), None)
            if answers is not None:
                answers.append(answer)
        return result

    return work


def invalid_state(exc: pytest.ExceptionInfo[MCPError]) -> str:
    assert exc.value.error.code == -32602
    assert exc.value.error.message == "Invalid or expired requestState"
    return exc.value.error.data["reason"]


async def test_a_question_is_a_round_and_the_retry_that_answers_it_gets_the_result() -> None:
    r, p, answers = rounds(), peer(), []
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM, answers=answers))
        assert first["resultType"] == "input_required"
        assert first["inputRequests"] == {"q1": {"method": "elicitation/create", "params": FORM}}
        park = r.parked_for(first["requestState"])
        assert park is not None and park.request_id == 1  # the call is known by the request that started it
        result = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "decline"}})
    assert result == RESULT
    assert answers == [{"action": "decline"}]
    assert r.parked == {}  # claimed: nothing kept once the result went out


async def test_every_round_has_its_own_state_and_an_answered_round_cannot_be_answered_again() -> None:
    r, p, answers = rounds(), peer(), []
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM, {**FORM, "message": "Sure?"}, answers=answers))
        second = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert second["resultType"] == "input_required"
        assert second["requestState"] != first["requestState"]
        assert list(second["inputRequests"]) == ["q2"]
        with pytest.raises(MCPError) as again:
            await r.resume(Request(p, 3), METHOD, first["requestState"], {"q1": {"action": "cancel"}})
        assert invalid_state(again) == "requestState was already used; retry with the latest one"
        result = await r.resume(Request(p, 4), METHOD, second["requestState"], {"q2": {"action": "accept"}})
        assert result == RESULT
        with pytest.raises(MCPError) as late:
            await r.resume(Request(p, 5), METHOD, second["requestState"], {"q2": {"action": "accept"}})
        assert invalid_state(late) == "the call this requestState belongs to has ended or expired"
    assert answers == [{"action": "accept"}, {"action": "accept"}]  # the second answer to q1 reached nobody


async def test_a_lost_retry_is_taken_over_by_the_next_one_with_the_same_state() -> None:
    """The client's retry was cut off while it waited (its HTTP request dropped): the same requestState comes
    again, the waiting one gives way, and the new one gets what the call produces, the answer given once."""
    r, p, answers = rounds(), peer(), []
    go = anyio.Event()

    async def work(park: ParkedCall) -> dict[str, Any]:
        answers.append(await park.ask("elicitation/create", dict(FORM), None))
        await go.wait()  # the upstream takes its time
        return RESULT

    outcomes: dict[str, Any] = {}

    async def retry(key: str, request: Request, state: str, responses: Any) -> None:
        try:
            outcomes[key] = await r.resume(request, METHOD, state, responses)
        except MCPError as exc:
            outcomes[key] = exc

    async with running(r), anyio.create_task_group() as tg:
        first = await r.start(Request(p, 1), METHOD, work)
        state = first["requestState"]
        tg.start_soon(retry, "lost", Request(p, 2), state, {"q1": {"action": "accept", "content": {"n": 1}}})
        await anyio.wait_all_tasks_blocked()
        assert answers == [{"action": "accept", "content": {"n": 1}}]
        tg.start_soon(retry, "again", Request(p, 3), state, {"q1": {"action": "accept", "content": {"n": 2}}})
        await anyio.wait_all_tasks_blocked()
        lost = outcomes["lost"]
        assert isinstance(lost, MCPError) and "newer retry with the same requestState" in lost.error.message
        go.set()
    assert outcomes["again"] == RESULT
    assert answers == [{"action": "accept", "content": {"n": 1}}]  # the round was answered once


async def test_unanswered_questions_are_asked_again_in_the_next_round() -> None:
    r, p = rounds(), peer()
    got: dict[str, Any] = {}

    async def work(park: ParkedCall) -> dict[str, Any]:
        park.expect(2)  # two questions asked together: no round before both are in

        async def one(name: str) -> None:
            got[name] = await park.ask("elicitation/create", {**FORM, "message": name}, None)

        async with anyio.create_task_group() as questions:
            questions.start_soon(one, "a")
            questions.start_soon(one, "b")
        return RESULT

    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        assert sorted(q["params"]["message"] for q in first["inputRequests"].values()) == ["a", "b"]
        key_a = next(k for k, q in first["inputRequests"].items() if q["params"]["message"] == "a")
        key_b = next(k for k in first["inputRequests"] if k != key_a)
        second = await r.resume(Request(p, 2), METHOD, first["requestState"], {key_a: {"action": "accept"}})
        assert second["inputRequests"] == {key_b: {"method": "elicitation/create", "params": {**FORM, "message": "b"}}}
        result = await r.resume(Request(p, 3), METHOD, second["requestState"], {key_b: {"action": "decline"}})
    assert result == RESULT
    assert got == {"a": {"action": "accept"}, "b": {"action": "decline"}}


async def test_a_url_question_reaches_the_client_without_its_elicitation_id() -> None:
    """In 2026-07-28 the retry is the completion: the client gets no `elicitationId` to complete."""
    url = {"mode": "url", "message": "Sign in", "url": "https://example.com/x", "elicitationId": "e-1"}
    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(url))
        assert first["inputRequests"]["q1"]["params"] == {k: v for k, v in url.items() if k != "elicitationId"}


async def test_another_clients_retry_or_another_method_is_refused() -> None:
    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM))
        state = first["requestState"]
        with pytest.raises(MCPError) as stranger:
            await r.resume(Request(peer("q"), 2), METHOD, state, {"q1": {"action": "accept"}})
        assert invalid_state(stranger) == "requestState belongs to another client's call"
        with pytest.raises(MCPError) as other_method:
            await r.resume(Request(p, 3), "prompts/get", state, {"q1": {"action": "accept"}})
        assert invalid_state(other_method) == "requestState belongs to another client's call"
        # Refusals spend nothing: the owner still answers the round.
        assert await r.resume(Request(p, 4), METHOD, state, {"q1": {"action": "accept"}}) == RESULT


@pytest.mark.parametrize(
    "state",
    [
        "",
        "not json",
        "[]",
        json.dumps({"k": "other", "id": "x", "n": "y"}),
        json.dumps({"k": "eg.park", "id": "gone"}),
        json.dumps({"k": "eg.park", "id": ["x"], "n": "y"}),  # was a TypeError (unhashable), not a refusal
    ],
)
async def test_a_state_that_points_to_no_parked_call_is_refused(state: str) -> None:
    r = rounds()
    assert r.parked_for(state) is None
    with pytest.raises(MCPError) as caught:
        await r.resume(Request(peer(), 1), METHOD, state, {})
    assert invalid_state(caught) in (
        "requestState was not issued for a call of this gateway",
        "the call this requestState belongs to has ended or expired",
    )


async def test_input_responses_that_are_not_an_object_are_refused_and_spend_nothing() -> None:
    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM))
        with pytest.raises(MCPError) as caught:
            await r.resume(Request(p, 2), METHOD, first["requestState"], ["accept"])
        assert caught.value.error.code == -32602 and caught.value.error.data["rule"] == "inputResponses"
        assert await r.resume(Request(p, 3), METHOD, first["requestState"], {"q1": {"action": "accept"}}) == RESULT


async def test_a_call_that_keeps_asking_ends_after_max_rounds() -> None:
    r, p = rounds(max_rounds=2), peer()
    async with running(r):
        state = (await r.start(Request(p, 1), METHOD, asks(FORM, FORM, FORM)))["requestState"]
        state = (await r.resume(Request(p, 2), METHOD, state, {"q1": {"action": "accept"}}))["requestState"]
        with pytest.raises(MCPError) as caught:
            await r.resume(Request(p, 3), METHOD, state, {"q2": {"action": "accept"}})
    assert caught.value.error.code == -32019
    assert caught.value.error.data["rule"] == "bridging.max_rounds"
    assert r.parked == {}


async def test_parked_calls_are_bounded() -> None:
    r = rounds(max_parked_calls=1)
    async with running(r):
        await r.start(Request(peer(), 1), METHOD, asks(FORM))
        with pytest.raises(MCPError) as caught:
            await r.start(Request(peer(), 2), METHOD, asks(FORM))
    assert caught.value.error.code == -32014
    assert caught.value.error.data["limit"] == "bridging.max_parked_calls"


async def test_an_upstream_failure_is_the_answer_to_the_retry() -> None:
    async def work(park: ParkedCall) -> dict[str, Any]:
        await park.ask("elicitation/create", dict(FORM), None)
        raise MCPError(code=-32603, message="the upstream broke")

    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        with pytest.raises(MCPError) as caught:
            await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
    assert caught.value.error.message == "the upstream broke"
    assert r.parked == {}


async def _lose_the_retry(r: Rounds, p: DownstreamPeer, go: anyio.Event) -> str:
    """A call whose one question is answered by a retry that is then lost (its request cancelled) before the
    upstream's result comes: returns the state the client may come back with."""

    async def work(park: ParkedCall) -> dict[str, Any]:
        await park.ask("elicitation/create", dict(FORM), None)
        await go.wait()
        return RESULT

    state = (await r.start(Request(p, 1), METHOD, work))["requestState"]
    with anyio.CancelScope() as lost:
        lost.cancel()
        await r.resume(Request(p, 2), METHOD, state, {"q1": {"action": "accept"}})
    go.set()
    park = r.parked_for(state)
    assert park is not None
    with anyio.fail_after(5):
        while park.outcome is None:
            await anyio.sleep(0)
    return state


async def test_an_outcome_no_request_took_is_kept_for_the_retry_that_comes_for_it() -> None:
    r, p = rounds(), peer()
    async with running(r):
        state = await _lose_the_retry(r, p, anyio.Event())
        assert r.parked_for(state) is not None  # the call's task has ended; its outcome waits
        assert await r.resume(Request(p, 3), METHOD, state, {"q1": {"action": "accept"}}) == RESULT
        assert r.parked == {}


async def test_an_outcome_nobody_comes_for_is_forgotten_after_state_ttl() -> None:
    r, p = rounds(state_ttl=0.05), peer()
    async with running(r):
        state = await _lose_the_retry(r, p, anyio.Event())
        with anyio.fail_after(5):
            while r.parked_for(state) is not None:
                await anyio.sleep(0.01)
        with pytest.raises(MCPError) as late:
            await r.resume(Request(p, 3), METHOD, state, {"q1": {"action": "accept"}})
        assert invalid_state(late) == "the call this requestState belongs to has ended or expired"


@dataclass(eq=False)
class NeverEnding:
    """A call whose upstream never answers, started by a first request that keeps what it heard."""

    rounds: Rounds
    ended: anyio.Event = field(default_factory=anyio.Event)
    heard: list[MCPError] = field(default_factory=list)

    async def work(self, park: ParkedCall) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            self.ended.set()
        return RESULT

    async def first(self) -> None:
        try:
            await self.rounds.start(Request(peer(), 1), METHOD, self.work)
        except MCPError as exc:
            self.heard.append(exc)

    @asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """The first request waiting on the call, until the block ends and the request hears how it ended."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.first)
            await anyio.wait_all_tasks_blocked()
            yield


async def test_closing_cancels_the_calls_still_parked_and_their_waiting_request_hears_it() -> None:
    r = rounds()
    call = NeverEnding(r)
    async with call.waiting():
        await r.close()
    assert call.ended.is_set() and r.parked == {}
    (error,) = call.heard
    assert error.error.code == -32019 and error.error.message == "the call was cancelled"


async def test_closing_in_a_cancelled_scope_still_ends_the_parked_calls() -> None:
    """The gateway closes its rounds as it stops, often from a scope that was cancelled already."""
    r = rounds()
    call = NeverEnding(r)
    closed: list[bool] = []
    async with call.waiting():
        with anyio.CancelScope() as stopping:
            stopping.cancel()
            await r.close()
            closed.append(call.ended.is_set())  # close waited for the call to end, cancelled scope or not
    assert closed == [True] and r.parked == {}
    assert [e.error.message for e in call.heard] == ["the call was cancelled"]


async def test_an_outcome_a_waiting_request_took_leaves_nothing_parked_and_no_timer() -> None:
    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM))
        assert await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}}) == RESULT
        assert await r.start(Request(p, 3), METHOD, asks()) == RESULT  # a call that never asks
        with anyio.fail_after(5):
            while r.parked:  # settled once the request that took the outcome has had its step
                await anyio.sleep(0)
        assert r._expiries == {}  # pyright: ignore[reportPrivateUsage]


async def test_a_parked_call_leaves_the_running_ones_as_it_ends_not_a_loop_turn_later() -> None:
    """The call's task takes itself out of the running calls as its last step (no done callback of the task's,
    one more callback through the loop for every parked call): the retry that gets the outcome finds it gone."""
    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM))
        assert len(r._tasks) == 1  # pyright: ignore[reportPrivateUsage]
        result = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert result == RESULT
        assert r._tasks == {}  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("went_on", [False, True], ids=["parked-from-the-start", "went-on-parked"])
async def test_closing_before_a_parked_calls_task_took_a_step_cancels_its_work_and_tells_its_request(
    went_on: bool,
) -> None:
    """The gateway stops in the same turn as a first request's call went on parked (from the start, or from its
    request's coroutine: `GoesOn`): the call's work is cancelled as it starts (its cleanup runs), the request gets
    the call's end, and `close` does not wait out its timeout for a call nothing cancelled."""
    r, p = rounds(), peer()
    started, cancelled = anyio.Event(), anyio.Event()
    outcome: list[Any] = []

    async def upstream_takes_its_time(park: ParkedCall, _state: object = None) -> dict[str, Any]:
        try:
            await anyio.Event().wait()
        finally:
            cancelled.set()
        return RESULT

    async def here(park: ParkedCall) -> dict[str, Any]:
        raise GoesOn("where it stopped")

    async def first_request() -> None:
        started.set()
        try:
            if went_on:
                outcome.append(await r.start(Request(p, 1), METHOD, here, upstream_takes_its_time))
            else:
                outcome.append(await r.start(Request(p, 1), METHOD, upstream_takes_its_time))
        except MCPError as exc:
            outcome.append(exc.error.message)

    with anyio.fail_after(30):  # a guard against a hang, not a measure
        async with anyio.create_task_group() as tg:
            tg.start_soon(first_request)
            await started.wait()  # woken as the request made the call's task, which has not taken a step yet
            assert len(r._tasks) == 1  # pyright: ignore[reportPrivateUsage]
            await r.close()
    assert cancelled.is_set()
    assert outcome == ["the call was cancelled"]
    assert r._tasks == {} and r.parked == {}  # pyright: ignore[reportPrivateUsage]
