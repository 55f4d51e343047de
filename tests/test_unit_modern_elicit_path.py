"""A 2026-07-28 client's elicitation on a shorter path (issue #34): the retry waiting for the call's outcome is woken
when there is something for it, not when the broker is done with each answered question; the retry's
`requestState` is read once for the face's look-up and the resume; a principal's digest is made once; a relayed
request is one coroutine of `ModernMethods`. In memory, as tests/test_unit_rounds.py and tests/test_unit_modern.py
have the rounds and the table; what a request of a real client sees is tests/test_bridging_*'s."""

from __future__ import annotations

import inspect
import os
from typing import Any

import anyio
import pytest

from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from elicitgate.bridging import rounds as rounds_module
from elicitgate.bridging import state_seal
from elicitgate.bridging.rounds import ParkedCall
from elicitgate.bridging.sealing import RequestsOnly
from elicitgate.bridging.state_seal import AUDIENCE, StateRejected, StateSeal, binding
from elicitgate.faces.modern import RELAYED_PARAMS, ModernMethods
from elicitgate.faces.observe import RequestObserver
from tests.test_unit_modern import Context, connection
from tests.test_unit_rounds import FORM, METHOD, RESULT, Request, invalid_state, peer, rounds, running

pytestmark = pytest.mark.anyio


class Question:
    """What the broker hands a parked call as the elicitation a question is (`contracts.Question`): only its
    identity matters to the call."""


def counting_waits(monkeypatch: pytest.MonkeyPatch) -> list[ParkedCall]:
    """Every time a request waiting on a parked call waits again (`ParkedCall._change`), the call it waits on."""
    waits: list[ParkedCall] = []
    change = ParkedCall._change  # pyright: ignore[reportPrivateUsage]

    def counted(park: ParkedCall) -> Any:
        waits.append(park)
        return change(park)

    monkeypatch.setattr(ParkedCall, "_change", counted)
    return waits


async def test_the_retry_waits_once_for_the_outcome_not_again_when_the_broker_ends_the_answered_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The broker ends an answered question (`elicitation_ended`) before the call goes on upstream: the retry, which
    waits for the call's outcome, is not woken for it (a loop turn, and every coroutine of the request resumed,
    for nothing)."""
    r, p = rounds(), peer()
    el, upstream = Question(), anyio.Event()
    checked: list[bool] = []

    async def work(park: ParkedCall) -> dict[str, Any]:
        answer = await park.ask("elicitation/create", dict(FORM), el)  # type: ignore[arg-type]
        checked.append(answer == {"action": "accept", "content": {}})
        park.elicitation_ended(el)  # type: ignore[arg-type]  # the broker checked it: the call goes on upstream
        await upstream.wait()
        return RESULT

    waits = counting_waits(monkeypatch)
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        waits.clear()
        result: list[dict[str, Any]] = []

        async def retry() -> None:
            result.append(await r.resume(Request(p, 2), METHOD, first["requestState"],
                                         {"q1": {"action": "accept", "content": {}}}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(retry)
            while not checked:
                await anyio.sleep(0)
            for _ in range(5):  # every step the woken retry would take, if it were woken
                await anyio.sleep(0)
            assert len(waits) == 1  # the one wait for the outcome
            upstream.set()
    assert checked == [True]
    assert result == [RESULT]
    assert len(waits) == 1


async def test_the_broker_ending_the_last_checked_answer_of_a_round_still_hands_out_the_next_round() -> None:
    """Two questions in a round, one answered: once the broker is done with it, the retry is answered with the next
    round (the other question, asked again) at once."""
    r, p = rounds(), peer()
    one, two = Question(), Question()
    proceed = anyio.Event()

    async def work(park: ParkedCall) -> dict[str, Any]:
        park.expect(2)
        async with anyio.create_task_group() as tg:
            async def ask(el: Question, message: str) -> None:
                answer = await park.ask("elicitation/create", {**FORM, "message": message}, el)  # type: ignore[arg-type]
                if el is one:
                    assert answer == {"action": "decline"}
                    park.elicitation_ended(el)  # type: ignore[arg-type]
                    await proceed.wait()

            tg.start_soon(ask, one, "first")
            tg.start_soon(ask, two, "second")
        return RESULT

    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        assert sorted(first["inputRequests"]) == ["q1", "q2"]
        with anyio.fail_after(30):
            second = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "decline"}})
        assert second["resultType"] == "input_required"
        assert list(second["inputRequests"]) == ["q2"]
        assert second["inputRequests"]["q2"]["params"]["message"] == "second"
        proceed.set()
        with anyio.fail_after(30):
            final = await r.resume(Request(p, 3), METHOD, second["requestState"], {"q2": {"action": "decline"}})
    assert final == RESULT


async def test_a_retrys_state_is_read_once_for_the_look_up_and_the_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    r, p = rounds(), peer()
    reads: list[Any] = []
    read_pointer = rounds_module.read_pointer

    def counted(state: Any) -> Any:
        reads.append(state)
        return read_pointer(state)

    monkeypatch.setattr(rounds_module, "read_pointer", counted)

    async def work(park: ParkedCall) -> dict[str, Any]:
        await park.ask("elicitation/create", dict(FORM), None)
        await park.ask("elicitation/create", dict(FORM), None)
        return RESULT

    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        state = first["requestState"]
        assert r.parked_for(state) is not None
        second = await r.resume(Request(p, 2), METHOD, state, {"q1": {"action": "decline"}})
        assert reads == [state]
        # A state equal to the one read but not that string is read again, and an answered round stays answered.
        again = "".join(list(state))
        assert again is not state and r.parked_for(second["requestState"]) is not None
        with pytest.raises(MCPError) as replayed:
            await r.resume(Request(p, 3), METHOD, again, {"q1": {"action": "decline"}})
        assert "already used" in invalid_state(replayed)
        assert reads == [state, second["requestState"], again]
        assert await r.resume(Request(p, 4), METHOD, second["requestState"], {"q2": {"action": "decline"}}) == RESULT


def test_a_principals_digest_is_made_once_and_binds_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    seal = StateSeal([os.urandom(32)], 60.0, AUDIENCE)
    params = {"name": "t", "arguments": {"a": 1}}
    expected = binding(METHOD, params, "client:alice", AUDIENCE)
    made: list[str | None] = []
    digest = state_seal.principal_digest

    def counted(principal: str | None, audience: str) -> bytes:
        made.append(principal)
        return digest(principal, audience)

    monkeypatch.setattr(state_seal, "principal_digest", counted)
    alice = seal.binding(METHOD, params, "client:alice")
    assert alice == expected
    assert seal.binding(METHOD, {"name": "u"}, "client:alice")[1] == alice[1]
    assert seal.binding(METHOD, params, "client:bob") != alice
    assert made == ["client:alice", "client:bob"]
    token = seal.seal("s", alice)
    assert seal.unseal(token, seal.binding(METHOD, params, "client:alice")) == "s"
    with pytest.raises(StateRejected, match="principal"):
        seal.unseal(token, seal.binding(METHOD, params, "client:bob"))
    huge = "client:" + "x" * 10_000  # a client's own words, of any length: digested each time, not kept
    seal.binding(METHOD, params, huge)
    seal.binding(METHOD, params, huge)
    assert made[2:] == [huge, huge]


def test_the_principals_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_seal, "_PRINCIPALS_MAX", 3)
    seal = StateSeal([os.urandom(32)], 60.0, AUDIENCE)
    for i in range(10):
        assert seal.binding(METHOD, None, f"client:{i}") == binding(METHOD, None, f"client:{i}", AUDIENCE)
        assert len(seal._principals) <= 3  # pyright: ignore[reportPrivateUsage]


async def test_a_relayed_request_is_one_coroutine_and_refused_params_are_refused_before_it() -> None:
    observer = RequestObserver("stdio", {METHOD})
    boundary = RequestsOnly([os.urandom(32)], 60.0)
    table = ModernMethods(Server("gw", version="1"), (observer, boundary), relay=(observer, boundary))

    async def call(ctx: Any) -> dict[str, Any]:
        return {"content": [], "isError": False}

    table.add(METHOD, call, reads=RELAYED_PARAMS[METHOD])
    pending = table.serve(Context(), METHOD, {"name": "t"}, connection(), None)  # type: ignore[arg-type]
    assert inspect.iscoroutine(pending) and pending.cr_code.co_name == "_relayed"
    result = await pending
    assert result["resultType"] == "complete" and result["content"] == []
    with pytest.raises(MCPError) as refused:
        table.serve(Context(), METHOD, {"name": 1}, connection(), None)  # type: ignore[arg-type]
    assert refused.value.error.code == -32602
