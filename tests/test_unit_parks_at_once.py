"""A 2026-07-28 client's call toward a server that asks by requests of its own (a handshake-era upstream) goes on parked
from its first request's start (`Rounds.start`'s `parks_at_once`), not run in that request's coroutine only to raise
`GoesOn` before anything is sent (issue #34: the 2026-07-28-client-over-stdio elicit row); and the `requestState`
envelope is written and read with binascii's calls alone. In one event loop, with the request stand-in of
tests/test_unit_rounds.py; through a gateway, with the handshake-era demo server over stdio behind it."""

from __future__ import annotations

import asyncio
import base64
import gc
import types
from typing import Any

import mcp_types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.bridging import state_seal
from elicitgate.bridging.rounds import GoesOn, ParkedCall, Rounds
from elicitgate.bridging.sealing import RequestsOnly
from elicitgate.bridging.state_seal import AUDIENCE, StateRejected, StateSeal, binding
from tests.test_unit_rounds import FORM, METHOD, RESULT, Request, asks, peer, rounds, running

pytestmark = pytest.mark.anyio


async def test_a_call_that_parks_at_once_is_never_run_in_its_request() -> None:
    ran_here: list[ParkedCall] = []
    carried: list[object] = []

    async def here(park: ParkedCall) -> dict[str, Any]:
        ran_here.append(park)
        raise GoesOn(None)

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        carried.append(state)
        assert asyncio.current_task() is not request_task
        return await asks(FORM)(park)

    r, p = rounds(), peer()
    async with running(r):
        request_task = asyncio.current_task()
        first = await r.start(Request(p, 1), METHOD, here, then, lambda park: True)
        assert first["resultType"] == "input_required"
        assert ran_here == [] and carried == [None]
        done = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert done == RESULT
        with pytest.raises(MCPError) as again:  # one retry per round, as for any parked call
            await r.resume(Request(p, 3), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert again.value.error.code == -32602


async def test_a_call_that_does_not_park_at_once_runs_in_its_request_as_before() -> None:
    async def here(park: ParkedCall) -> dict[str, Any]:
        return RESULT

    async def then(park: ParkedCall, state: object) -> dict[str, Any]:
        raise AssertionError("nothing went on parked")

    r, p = rounds(), peer()
    async with running(r):
        assert await r.start(Request(p, 1), METHOD, here, then, lambda park: False) == RESULT
        assert r.parked == {} and r._tasks == {}  # pyright: ignore[reportPrivateUsage]


async def test_parks_at_once_raising_is_the_requests_error_and_leaves_nothing_parked() -> None:
    def unknown(park: ParkedCall) -> bool:
        assert park.id in r.parked
        raise MCPError(code=-32602, message="Unknown tool: nothing_here")

    async def never(park: ParkedCall, *state: object) -> dict[str, Any]:
        raise AssertionError("the call never runs")

    r, p = rounds(), peer()
    async with running(r):
        with pytest.raises(MCPError) as caught:
            await r.start(Request(p, 1), METHOD, never, never, unknown)
        assert caught.value.error.message == "Unknown tool: nothing_here"
        assert r.parked == {} and r._tasks == {} and p.calls == set()  # pyright: ignore[reportPrivateUsage]


async def test_through_the_gateway_a_call_toward_a_handshake_era_upstream_is_parked_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The demo server (handshake era) over stdio, a 2026-07-28 client: its elicitation comes as a round and the retry
    gets the tool's result; the first request never ran the call in its own coroutine (no `GoesOn` raised)."""
    from elicitgate.faces import server
    from tests.conftest import inprocess_gateway, stdio_server

    raised: list[GoesOn] = []
    here = server._FirstRequest.here  # pyright: ignore[reportPrivateUsage]

    async def counted(self: Any, park: ParkedCall) -> dict[str, Any]:
        try:
            return await here(self, park)
        except GoesOn as going:
            raised.append(going)
            raise

    monkeypatch.setattr(server._FirstRequest, "here", counted)  # pyright: ignore[reportPrivateUsage]
    asked: list[Any] = []

    async def human(ctx: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params)
        return mcp_types.ElicitResult(action="accept", content={"ok": True})

    config = {"mcpServers": {"demo": stdio_server("elicitgate.demo.server", era="handshake")}}
    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="2026-07-28", elicitation_callback=human) as client:
            for _ in range(2):
                result = await client.call_tool("demo__confirm", {"question": "Proceed?"})
                assert not result.is_error, result
            with pytest.raises(MCPError) as unknown:  # no upstream has it: refused as the route is looked up
                await client.call_tool("nothing_here", {})
        assert len(asked) == 2 and raised == []
        assert unknown.value.error.code == -32602, unknown.value.error
        assert gw.gateway.rounds.parked == {} and gw.gateway.broker.pending == {}
        assert [s["state"] for s in gw.gateway.broker.recent] == ["accepted", "accepted"]


# -- the requestState envelope's base64url, with binascii's calls alone ---------------------------------------------


def test_tokens_are_written_and_read_without_the_base64_modules_wrappers(monkeypatch: pytest.MonkeyPatch) -> None:
    seal = StateSeal([b"k" * 32], 60.0, AUDIENCE)
    bound = binding("tools/call", {"name": "t", "arguments": {"a": 1}}, "client:x", AUDIENCE)
    state = '{"k":"eg.park","id":"abc","n":"def"}'

    def refused(*_: object, **__: object) -> bytes:
        raise AssertionError("the base64 module's wrapper was called")

    for name in ("urlsafe_b64encode", "urlsafe_b64decode", "b64encode", "b64decode"):
        monkeypatch.setattr(base64, name, refused)
    token = seal.seal(state, bound)
    assert seal.unseal(token, bound) == state


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xfb\xff", b"ab", b"abc", bytes(range(256))])
def test_base64url_is_the_modules_unpadded_urlsafe_form(data: bytes) -> None:
    text = state_seal._b64u(data)  # pyright: ignore[reportPrivateUsage]
    assert text == base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    assert state_seal._b64u_strict(text) == data  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("text", ["A", "AB=", "AB.C", "AB C", "AB+/", "QR", "é", "AAA\n"])
def test_a_non_canonical_base64url_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        state_seal._b64u_strict(text)  # pyright: ignore[reportPrivateUsage]


def test_a_token_with_a_character_outside_the_alphabet_is_malformed() -> None:
    seal = StateSeal([b"k" * 32], 60.0, AUDIENCE)
    bound = binding("tools/call", {"name": "t"}, "client:x", AUDIENCE)
    token = seal.seal("s", bound)
    for forged in (token[:10] + "." + token[10:], token + "=", token[:-1] + "é", token.replace("-", "+", 1) + "A"):
        with pytest.raises(StateRejected, match="malformed|seal"):
            seal.unseal(forged, bound)


# -- a finished call's outcome, taken by the request waiting for it ------------------------------------------------


async def test_the_call_is_dropped_as_the_waiting_retry_takes_its_outcome_with_no_callback_between() -> None:
    """The retry that waited for the outcome takes it and the call is dropped in the same step: no callback of the
    loop's (`Rounds._settle`) queued ahead of the retry's answer."""
    r, p = rounds(), peer()
    async with running(r):
        first = await r.start(Request(p, 1), METHOD, asks(FORM))
        done = await r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        assert done == RESULT
        assert r.parked == {} and r._expiries == {}  # pyright: ignore[reportPrivateUsage]


async def test_a_retry_cancelled_as_the_outcome_came_leaves_it_kept_for_the_retry_that_comes_for_it() -> None:
    """The upstream's answer comes and the waiting retry is cancelled before its next step (its HTTP request lost):
    the outcome is kept, with its expiry, and the same `requestState` gets it."""
    r, p = rounds(), peer()
    upstream: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def work(park: ParkedCall) -> dict[str, Any]:
        await asks(FORM, result={})(park)
        await upstream
        return RESULT

    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        state = first["requestState"]
        retry = asyncio.ensure_future(r.resume(Request(p, 2), METHOD, state, {"q1": {"action": "accept"}}))
        (park,) = r.parked.values()
        while park.current is None or park.open:  # the retry waits for the outcome
            await asyncio.sleep(0)
        upstream.set_result(None)
        await asyncio.sleep(0)  # the parked call ends and wakes the retry, queued behind this task
        assert park.outcome == RESULT and not park.claimed
        retry.cancel()
        with pytest.raises(asyncio.CancelledError):
            await retry
        assert list(r.parked) == [park.id]
        assert list(r._expiries) == [park.id]  # pyright: ignore[reportPrivateUsage]
        assert await r.resume(Request(p, 3), METHOD, state, {"q1": {"action": "accept"}}) == RESULT
        assert r.parked == {} and r._expiries == {}  # pyright: ignore[reportPrivateUsage]


async def test_what_the_waiting_retry_is_left_does_not_hold_the_call() -> None:
    """What the request that was woken runs as it takes the outcome or leaves without it holds no reference to the call
    (a call that held itself would be freed by the cycle collector only, not as its last reference goes)."""
    r, p = rounds(), peer()
    upstream: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def work(park: ParkedCall) -> dict[str, Any]:
        await asks(FORM, result={})(park)
        await upstream
        return RESULT

    def holds(hook: object, park: ParkedCall) -> bool:
        seen, todo = set[int](), [hook]
        while todo:
            item = todo.pop()
            if item is park:
                return True
            if id(item) in seen or isinstance(item, Rounds | types.FunctionType | types.ModuleType | type):
                continue  # the gateway's rounds, and code with its globals: not what the hook itself holds
            seen.add(id(item))
            todo.extend(gc.get_referents(item))
        return False

    async with running(r):
        first = await r.start(Request(p, 1), METHOD, work)
        retry = asyncio.ensure_future(
            r.resume(Request(p, 2), METHOD, first["requestState"], {"q1": {"action": "accept"}})
        )
        (park,) = r.parked.values()
        while park.current is None or park.open:
            await asyncio.sleep(0)
        upstream.set_result(None)
        await asyncio.sleep(0)
        assert park.outcome == RESULT and not park.claimed
        assert park.on_claimed is not None and park.on_left is not None
        assert not holds(park.on_claimed, park) and not holds(park.on_left, park)
        assert await retry == RESULT
        assert r.parked == {}


# -- a relayed call's round sealed without the generic checks of `RequestsOnly.close` -------------------------------


async def test_a_relayed_calls_round_is_sealed_as_close_seals_it_without_its_generic_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_types import methods as spec_methods

    from tests.test_unit_modern_path import META, ROUND, serve, table

    def generic(result: object) -> bool:
        raise AssertionError("a relayed call's round went through close's generic checks")

    monkeypatch.setattr(spec_methods, "is_input_required", generic)
    modern, seen = table()
    params = {"name": "s__confirm", "arguments": {"q": "go?"}, "_meta": META}
    first = await serve(modern, params)
    assert set(first) == {"resultType", "inputRequests", "requestState", "_meta"}
    assert first["inputRequests"] == ROUND and first["requestState"] != "plain state"
    done = await serve(modern, {**params, "requestState": first["requestState"], "inputResponses": {"q1": {}}})
    assert done["resultType"] == "complete"
    assert [state for state, _ in seen] == [None, "plain state"]
    with pytest.raises(MCPError) as replayed_elsewhere:  # bound to its request: another tool's call refuses it
        await serve(modern, {**params, "name": "s__other", "requestState": first["requestState"], "inputResponses": {}})
    assert replayed_elsewhere.value.error.message == "Invalid or expired requestState"


def test_a_round_whose_state_is_no_string_is_left_as_it_is() -> None:
    boundary = RequestsOnly([b"k" * 32], 60.0)
    result = {"resultType": "input_required", "inputRequests": {}, "requestState": None}
    assert boundary.close_round(None, result, None) is result  # type: ignore[arg-type]  # nothing read of the context
