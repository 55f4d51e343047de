"""A 2026-07-28 client's call run in its request's own coroutine until it asks (`Rounds.start` with `then`): a call that
never asks ends there, with no task and nothing parked; one that asks goes on parked from where it stopped (`GoesOn`),
and its rounds, retries, limits and ends are a parked call's. In one event loop, with the request stand-in of
tests/test_unit_rounds.py; through a gateway, with a 2026-07-28 upstream (tests/peers/py_server.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import httpx2
import pytest

from mcp.shared.exceptions import MCPError

from elicitgate.bridging.rounds import GoesOn, ParkedCall, Rounds
from tests.test_unit_rounds import FORM, METHOD, RESULT, Request, asks, peer, rounds, running

pytestmark = pytest.mark.anyio


async def test_a_call_that_never_asks_ends_in_its_request_with_no_task_and_nothing_parked() -> None:
    seen: list[asyncio.Task[Any] | None] = []

    async def here(park: ParkedCall) -> dict[str, Any]:
        seen.append(asyncio.current_task())
        assert park.id in r.parked  # counted against bridging.max_parked_calls while it runs
        return RESULT

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        raise AssertionError("nothing went on parked")

    r, p = rounds(), peer()
    async with running(r):
        assert await r.start(Request(p, 1), METHOD, here, then) == RESULT
        assert seen == [asyncio.current_task()]
        assert r.parked == {} and r._tasks == {} and r._expiries == {}  # pyright: ignore[reportPrivateUsage]
        assert p.calls == set()


async def test_a_call_that_asks_goes_on_parked_from_where_it_stopped() -> None:
    carried: list[object] = []

    async def here(park: ParkedCall) -> dict[str, Any]:
        raise GoesOn("where it stopped")

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        carried.append(state)
        assert asyncio.current_task() is not request_task
        return await asks(FORM)(park)

    r, p = rounds(), peer()
    async with running(r):
        request_task = asyncio.current_task()
        first = await r.start(Request(p, 1), METHOD, here, then)
        assert first["resultType"] == "input_required"
        assert carried == ["where it stopped"]
        done = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert done == RESULT
        with pytest.raises(MCPError) as again:  # one retry per round, as for any parked call
            await r.resume(Request(p, 3), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert again.value.error.code == -32602
        with anyio.fail_after(5):
            while r.parked:  # settled once the request that took the outcome has had its step
                await anyio.sleep(0)
        assert r._expiries == {}  # pyright: ignore[reportPrivateUsage]


async def test_a_failure_in_the_request_is_its_answer_and_leaves_nothing_parked() -> None:
    async def here(park: ParkedCall) -> dict[str, Any]:
        raise MCPError(code=-32603, message="the upstream broke")

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        raise AssertionError("nothing went on parked")

    r, p = rounds(), peer()
    async with running(r):
        with pytest.raises(MCPError) as caught:
            await r.start(Request(p, 1), METHOD, here, then)
        assert caught.value.error.message == "the upstream broke"
        assert r.parked == {} and p.calls == set()


async def test_a_request_cancelled_while_its_call_runs_in_it_ends_the_call() -> None:
    started, ended = anyio.Event(), anyio.Event()

    async def here(park: ParkedCall) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()
        raise AssertionError("unreachable")

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        raise AssertionError("nothing went on parked")

    r, p = rounds(), peer()
    async with running(r), anyio.create_task_group() as tasks:
        tasks.start_soon(r.start, Request(p, 1), METHOD, here, then)
        with anyio.fail_after(10):
            await started.wait()
            tasks.cancel_scope.cancel()
            await ended.wait()
    assert r.parked == {} and p.calls == set()


async def test_a_call_running_in_its_request_counts_against_max_parked_calls() -> None:
    release = anyio.Event()

    async def here(park: ParkedCall) -> dict[str, Any]:
        await release.wait()
        return RESULT

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        raise AssertionError("nothing went on parked")

    r = rounds(max_parked_calls=1)
    async with running(r), anyio.create_task_group() as tasks:
        tasks.start_soon(r.start, Request(peer(), 1), METHOD, here, then)
        with anyio.fail_after(10):
            while not r.parked:
                await anyio.sleep(0)
        with pytest.raises(MCPError) as caught:
            await r.start(Request(peer(), 2), METHOD, here, then)
        assert caught.value.error.data["limit"] == "bridging.max_parked_calls"
        release.set()
    assert r.parked == {}


# -- through a gateway: a 2026-07-28 client, a 2026-07-28 upstream ------------------------------------------------


async def test_through_the_gateway_only_a_call_that_asks_gets_a_parked_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import inprocess_gateway, stdio_server
    from tests.test_eras import RawModernClient

    tasks: list[ParkedCall] = []
    run = Rounds._run  # pyright: ignore[reportPrivateUsage]

    async def counted(self: Rounds, park: ParkedCall, work: Any) -> None:
        tasks.append(park)
        await run(self, park, work)

    monkeypatch.setattr(Rounds, "_run", counted)
    config = {"mcpServers": {"py": stdio_server("tests.peers.py_server", era="modern")}}
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient() as http:
        raw = RawModernClient(gw.mcp_url, capabilities={"elicitation": {}})
        for text in ("one", "two"):
            echoed = await raw.call(http, "py__echo", {"text": text})
            assert echoed["result"]["content"][0]["text"] == text
        assert tasks == [] and gw.gateway.rounds.parked == {}

        first = await raw.call(http, "py__elicit", {"message": "name?"})
        assert first["result"]["resultType"] == "input_required", first
        assert len(tasks) == 1
        answer = {"q1": {"action": "accept", "content": {"answer": "ada"}}}
        done = await raw.call(http, "py__elicit", {"message": "name?"}, requestState=first["result"]["requestState"],
                              inputResponses=answer)
        assert json.loads(done["result"]["content"][0]["text"]) == answer["q1"]
        again = await raw.call(http, "py__elicit", {"message": "name?"},
                               requestState=first["result"]["requestState"], inputResponses=answer)
        assert again["error"]["code"] == -32602
        missing = await raw.call(http, "py__nothing_here", {})
        assert "error" in missing or missing["result"].get("isError"), missing
        assert gw.gateway.rounds.parked == {}
