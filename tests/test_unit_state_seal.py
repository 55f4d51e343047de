"""The gateway's own `requestState` envelope (`bridging.state_seal`) and the boundary that uses it
(`bridging.sealing.RequestsOnly`): sealed, bound to its request and principal, expiring, rotating keys."""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

import pytest
from mcp_types import INVALID_PARAMS

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import AESGCMRequestStateCodec
from mcp.shared.exceptions import MCPError

from elicitgate.bridging import state_seal
from elicitgate.bridging.sealing import RequestsOnly
from elicitgate.bridging.state_seal import AUDIENCE, StateRejected, StateSeal, binding

pytestmark = pytest.mark.anyio

STATE = json.dumps({"k": "eg.park", "id": secrets.token_urlsafe(16), "n": secrets.token_urlsafe(12)})
ARGS = {"question": "Proceed?", "n": 3}
CLIENT_INFO = {"name": "tester", "version": "1.0"}
META = {"io.modelcontextprotocol/clientInfo": CLIENT_INFO, "io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def key() -> bytes:
    return secrets.token_bytes(32)


def bound(args: Any = ARGS, *, method: str = "tools/call", name: str = "x__confirm", principal: str | None = "p",
          audience: str = AUDIENCE) -> state_seal.Binding:
    return binding(method, {"name": name, "arguments": args}, principal, audience)


def rejected(seal: StateSeal, token: str, to: state_seal.Binding) -> str:
    with pytest.raises(StateRejected) as exc:
        seal.unseal(token, to)
    return str(exc.value)


def test_a_sealed_state_opens_for_its_own_request_only_and_cannot_be_read():
    seal = StateSeal([key()], 600, AUDIENCE)
    token = seal.seal(STATE, bound())
    assert seal.unseal(token, bound()) == STATE
    assert token.startswith("g1.")
    raw = base64.urlsafe_b64decode(token[3:] + "=" * (-len(token[3:]) % 4))
    assert b"eg.park" not in raw and "eg.park" not in token  # encrypted, not merely signed
    assert seal.seal(STATE, bound()) != token  # a fresh nonce every time
    assert rejected(seal, token, bound({**ARGS, "n": 4})) == "request binding"
    assert rejected(seal, token, bound(name="x__other")) == "request binding"
    assert rejected(seal, token, bound(method="prompts/get")) == "request binding"
    assert rejected(seal, token, bound(principal="q")) == "principal"
    assert rejected(seal, token, bound(principal=None)) == "principal"
    assert rejected(seal, token, bound(audience="another service")) == "principal"


def test_every_changed_character_of_a_token_is_refused():
    seal = StateSeal([key()], 600, AUDIENCE)
    token = seal.seal(STATE, bound())
    alphabet = "AQgw_-"
    for i in range(len(token)):
        for other in alphabet:
            if other != token[i]:
                changed = token[:i] + other + token[i + 1:]
                with pytest.raises(StateRejected):
                    seal.unseal(changed, bound())
                break
    for broken in ("", "g1.", token[:-1], token + "A", token + "=", token[:40], "v1." + token[3:], token.upper()):
        with pytest.raises(StateRejected):
            seal.unseal(broken, bound())


def test_the_sdks_own_tokens_are_not_taken_even_under_the_same_key():
    secret = key()
    sdk_token = AESGCMRequestStateCodec([secret]).seal(json.dumps({"v": 1, "s": STATE}).encode())
    assert rejected(StateSeal([secret], 600, AUDIENCE), sdk_token, bound()) == "malformed"
    assert rejected(StateSeal([secret], 600, AUDIENCE), "g1." + sdk_token[3:], bound()) in {"unknown key", "seal"}


def test_expiry_and_a_state_minted_in_the_future(monkeypatch: pytest.MonkeyPatch):
    seal = StateSeal([key()], 10, AUDIENCE)
    now = 1_800_000_000.0
    monkeypatch.setattr(state_seal.time, "time", lambda: now)
    token = seal.seal(STATE, bound())
    now += 9.9
    assert seal.unseal(token, bound()) == STATE
    now += 0.1
    assert rejected(seal, token, bound()) == "expired"
    now -= 10 + state_seal.FUTURE_SKEW + 1  # this clock behind the one that sealed it by more than the skew
    assert rejected(seal, token, bound()) == "minted in the future"


def test_keys_rotate_the_first_seals_every_one_opens():
    old, new = key(), key()
    token = StateSeal([old], 600, AUDIENCE).seal(STATE, bound())
    assert StateSeal([new, old], 600, AUDIENCE).unseal(token, bound()) == STATE
    assert rejected(StateSeal([new], 600, AUDIENCE), token, bound()) == "unknown key"
    newer = StateSeal([new, old], 600, AUDIENCE).seal(STATE, bound())
    assert rejected(StateSeal([old], 600, AUDIENCE), newer, bound()) == "unknown key"
    with pytest.raises(ValueError, match="at least 32 bytes"):
        StateSeal([b"short"], 600, AUDIENCE)


@pytest.mark.parametrize(("one", "other"), [
    ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}),  # the order of keys is not the client's to keep
    (None, {}),  # no arguments are empty arguments (as the SDK's boundary had it)
])
def test_the_same_arguments_bind_alike(one: Any, other: Any):
    assert bound(one) == bound(other)


@pytest.mark.parametrize(("one", "other"), [
    ({"ok": True}, {"ok": 1}),
    ({"n": 1}, {"n": 1.0}),
    ({"n": 2**70}, {"n": 2**70 + 1}),  # beyond orjson's integers: the standard library's form
    ({"s": "\ud800"}, {"s": "\\ud800"}),  # a lone surrogate (orjson refuses it) against its escape as text
    ({"s": "\ud800"}, {"s": "\udc00"}),
    ({"a": [1, 2]}, {"a": [2, 1]}),
])
def test_different_arguments_bind_differently(one: Any, other: Any):
    assert bound(one) != bound(other)
    seal = StateSeal([key()], 600, AUDIENCE)
    token = seal.seal(STATE, bound(one))
    assert seal.unseal(token, bound(one)) == STATE
    assert rejected(seal, token, bound(other)) == "request binding"


def test_resources_are_bound_by_their_uri():
    one = binding("resources/read", {"uri": "file:///a"}, "p", AUDIENCE)
    assert one == binding("resources/read", {"uri": "file:///a", "other": 1}, "p", AUDIENCE)
    assert one != binding("resources/read", {"uri": "file:///b"}, "p", AUDIENCE)


# -- the boundary (faces' middleware) ---------------------------------------------------------------------------


def context(params: dict[str, Any] | None, *, request_id: int | None = 1, version: str = "2026-07-28",
            method: str = "tools/call") -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(session=None, lifespan_context=None, protocol_version=version,  # type: ignore[arg-type]
                                method=method, params=params, request_id=request_id, meta=META)  # type: ignore[arg-type]


async def test_the_boundary_seals_a_round_and_hands_its_retry_the_plain_state():
    boundary = RequestsOnly([key()], 600)
    seen: list[Any] = []

    async def handler(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        seen.append((ctx.params or {}).get("requestState"))
        return {"resultType": "input_required", "inputRequests": {"q1": {}}, "requestState": STATE}

    first = await boundary(context({"name": "x__confirm", "arguments": ARGS, "_meta": META}), handler)
    assert isinstance(first, dict) and first["inputRequests"] == {"q1": {}}
    token = first["requestState"]
    assert token != STATE and seen == [None]
    retry = {"name": "x__confirm", "arguments": ARGS, "_meta": META, "requestState": token, "inputResponses": {}}
    again = await boundary(context(retry), handler)
    assert seen == [None, STATE]
    assert isinstance(again, dict) and again["requestState"] not in (token, STATE)

    for bad in ({**retry, "requestState": token[:-2] + "AA"}, {**retry, "arguments": {"question": "other"}},
                {**retry, "requestState": 7}):
        with pytest.raises(MCPError) as exc:
            await boundary(context(bad), handler)
        assert exc.value.error.code == INVALID_PARAMS
        assert exc.value.error.message == "Invalid or expired requestState"
        assert exc.value.error.data == {"reason": "invalid_request_state"}
    assert seen == [None, STATE]  # no refused state reached the handler


async def test_what_needs_no_seal_passes_by_without_loading_it():
    boundary = RequestsOnly([key()], 600)

    async def complete(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return {"resultType": "complete", "content": []}

    params = {"name": "x__echo", "arguments": {}}
    assert await boundary(context(params), complete) == {"resultType": "complete", "content": []}
    assert await boundary(context(params, version="2025-11-25"), complete) == {"resultType": "complete", "content": []}
    # a notification named like a retryable request, carrying junk: nothing to seal or unseal
    assert await boundary(context({**params, "requestState": "junk"}, request_id=None), complete) is not None
    assert await boundary(context({"requestState": "junk"}, method="tools/list"), complete) is not None
    assert boundary._seal is None  # pyright: ignore[reportPrivateUsage]
