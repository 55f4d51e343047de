"""What a 2026-07-28 client's round costs the gateway (issue #34), with the same results: a round's `requestState`
pointer written and read with no JSON call, its call's id and its nonce taken from batches made ahead (one call each),
the request's tasks declaration read once, a question made with no default factory, the call's request id read as an
attribute; the client's principal made once per client info; the sealed state opened with no base64 written back as
text and one digest comparison; a new client's token bucket made with its first token taken. In memory, no process."""

from __future__ import annotations

import binascii
import hashlib
import hmac
import itertools
import random
import secrets
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import orjson
import pytest

from elicitgate.bridging import rounds as rounds_module
from elicitgate.bridging import sealing, state_seal
from elicitgate.bridging.rounds import STATE_KIND, GoesOn, ParkedCall, Rounds, StatePointer, read_pointer
from elicitgate.bridging.state_seal import StateRejected, StateSeal
from elicitgate.config import BridgingConfig, ElicitationConfig
from elicitgate.elicitation import model as model_module
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.limits import TokenBucket
from elicitgate.elicitation.model import Elicitation
from tests.profiled import collector_held
from tests.test_unit_rounds import FORM, METHOD, RESULT, Request, asks, peer, running

pytestmark = pytest.mark.anyio


@contextmanager
def edges() -> Iterator[list[tuple[str, str]]]:
    """(callee, caller) of every function entered in the block, Python (`name`) and C (`<name>`), across the event
    loop's steps (`sys.setprofile` is the thread's)."""
    seen: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            seen.append((frame.f_code.co_name, frame.f_back.f_code.co_name if frame.f_back is not None else ""))
        elif event == "c_call":
            seen.append((f"<{getattr(arg, '__name__', '?')}>", frame.f_code.co_name))

    with collector_held():
        sys.setprofile(profile)
        try:
            yield seen
        finally:
            sys.setprofile(None)


def called_by(seen: list[tuple[str, str]], caller: str) -> list[str]:
    return [callee for callee, by in seen if by == caller]


class TasksHere:
    """The extension's tasks, as far as a call that may become one reads them: it never has room."""

    hand_over_after = None

    def has_room(self, peer: object) -> bool:
        return False


async def goes_on(park: ParkedCall) -> dict[str, Any]:
    """A call's work in its first request's coroutine that would ask: it goes on parked (`Rounds.start`'s `then`)."""
    raise GoesOn(None)


class Declares(Request):
    def raw_capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


# -- the round's pointer ------------------------------------------------------------------------------------------


async def test_a_round_is_written_and_read_back_with_no_json_call() -> None:
    r, p = Rounds(BridgingConfig()), peer()
    async with running(r):
        first_round = await r.start(Request(p, 1), METHOD, asks(FORM))  # the batches of ids and nonces made
        with edges() as seen:
            first = await r.start(Request(p, 2), METHOD, asks(FORM))
            park = r.parked_for(first["requestState"])
            result = await r.resume(Request(p, 3), METHOD, first["requestState"], {"q1": {"action": "decline"}})
        assert result == RESULT and park is not None and first_round["requestState"] != first["requestState"]
    assert first["inputRequests"] == {"q1": {"method": "elicitation/create", "params": FORM}}
    state = orjson.loads(first["requestState"])
    assert first["requestState"] == orjson.dumps({"k": STATE_KIND, "id": park.id, "n": state["n"]}).decode()
    ours = {"ParkedCall", "__init__", "next_round", "read_pointer", "parked_for", "resume", "ask"}
    assert not [edge for edge in seen if edge[1] in ours and edge[0] in ("<dumps>", "<loads>", "<decode>")]
    assert called_by(seen, "__init__").count("<pop>") >= 1  # the call's id, taken from its batch
    assert "_random_token" not in [callee for callee, _ in seen]
    assert "<dictcomp>" not in called_by(seen, "next_round")
    assert called_by(seen, "parked_for") == ["read_pointer", "<get>"]


def test_a_pointer_is_read_as_orjson_reads_it() -> None:
    """The pointers of rounds (split, not parsed) and anything else (parsed): the same pointer, or None, as orjson's
    reading gives."""
    head = f'{{"k":"{STATE_KIND}","id":"'
    states = [
        f'{head}abc.DEF-_x","n":"nonce-_1"}}',
        f'{head}","n":""}}',
        f'{head}a\\"b","n":"c"}}',
        f'{head}a\\u0041","n":"c"}}',
        f'{head}a\x01","n":"c"}}',
        f'{head}a\ud800","n":"c"}}',
        f'{head}a","n":"b","id":"c"}}',
        f'{head}a","n":"b" }}',
        f'{head}a" ,"n":"b"}}',
        f'{head}a","n":7}}',
        f'{head}a"}}',
        f"{head}}}",
        f'{head}"}}',
        f'{head}a","n":"b\u00e9\u2028"}}',
        f'{head}a","n":"b"}}x',
        '{"k":"eg.other","id":"a","n":"b"}',
        '{"id":"a","k":"eg.park","n":"b"}',
        "not json",
        "",
        7,
        None,
    ]

    def by_orjson(state: Any) -> StatePointer | None:
        try:
            pointer = orjson.loads(state) if isinstance(state, str) else None
        except ValueError:
            return None
        if not isinstance(pointer, dict) or pointer.get("k") != STATE_KIND or not isinstance(pointer.get("id"), str):
            return None
        nonce = pointer.get("n")
        return StatePointer(pointer["id"], nonce if isinstance(nonce, str) else None)

    for state in states:
        assert read_pointer(state) == by_orjson(state), state


def test_ids_and_nonces_are_url_safe_tokens_of_their_size_never_twice() -> None:
    ids = [
        rounds_module._CALL_IDS.pop() if rounds_module._CALL_IDS else rounds_module._CALL_IDS.refill()  # pyright: ignore[reportPrivateUsage]
        for _ in range(1000)
    ]
    nonces = [
        rounds_module._ROUND_NONCES.pop() if rounds_module._ROUND_NONCES else rounds_module._ROUND_NONCES.refill()  # pyright: ignore[reportPrivateUsage]
        for _ in range(1000)
    ]
    for tokens, size in ((ids, 16), (nonces, 12)):
        assert len(set(tokens)) == len(tokens)
        for token in tokens:
            raw = binascii.a2b_base64(token.replace("-", "+").replace("_", "/") + "=" * (-len(token) % 4))
            assert len(raw) == size and len(token) == len(secrets.token_urlsafe(size))
            assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


# -- what a round reads of its request and call --------------------------------------------------------------------


async def test_a_first_requests_tasks_declaration_is_read_once() -> None:
    r, p = Rounds(BridgingConfig()), peer()
    r.tasks = TasksHere()  # type: ignore[assignment]  # what the rounds read of the extension's tasks
    async with running(r):
        with edges() as seen:
            first = await r.start(Declares(p, 1), METHOD, goes_on, then=lambda park, state: asks(FORM)(park))
        assert first["resultType"] == "input_required"
        declared = [by for callee, by in seen if callee == "declares_tasks"]
        assert declared == ["_declares_tasks"]  # by `start`; not again as the request waits for the round
        assert called_by(seen, "_run_here").count("end") == 1  # its scope, ended once as it went on parked
        with edges() as seen:
            result = await r.resume(Declares(p, 2), METHOD, first["requestState"], {"q1": {"action": "decline"}})
        assert [by for callee, by in seen if callee == "declares_tasks"] == ["_declares_tasks"]  # the retry's own
    assert result == RESULT


async def test_a_question_and_its_calls_request_id_cost_no_call_of_their_own() -> None:
    r, p = Rounds(BridgingConfig()), peer()
    async with running(r):
        await r.start(Request(p, 1), METHOD, asks(FORM))
        with edges() as seen:
            first = await r.start(Request(p, 2), METHOD, asks(FORM))
        park = r.parked_for(first["requestState"])
        assert park is not None and park.request_id == 2
        names = [callee for callee, _ in seen]
        assert "<lambda>" not in names and "request_id" not in names and "_for_modern_client" not in names
        assert "<max>" not in called_by(seen, "ask")
        question = next(iter(park.open.values()))
        assert (question.key, question.method, question.params, question.elicitation) == (
            "q1",
            "elicitation/create",
            FORM,
            None,
        )
        assert not question.answered.done()


# -- the principal and the seal --------------------------------------------------------------------------------


class Context:
    """What `principal_of` reads of a request's context without authentication: its `_meta`."""

    def __init__(self, info: Any) -> None:
        self.meta = {"io.modelcontextprotocol/clientInfo": info}


def test_a_clients_principal_is_made_once_for_its_name_and_version(monkeypatch: pytest.MonkeyPatch) -> None:
    dumped: list[Any] = []
    canonical = state_seal.canonical

    def counted(value: Any) -> bytes:
        dumped.append(value)
        return canonical(value)

    monkeypatch.setattr(sealing, "canonical", counted)
    name = f"client-{secrets.token_hex(8)}"
    info = {"name": name, "version": "1.0", "title": "ignored"}
    expected = "client:" + canonical({"name": name, "version": "1.0"}).decode()
    assert [sealing.principal_of(Context(dict(info))) for _ in range(3)] == [expected] * 3  # type: ignore[arg-type]
    assert dumped == [{"name": name, "version": "1.0"}]
    assert (
        sealing.principal_of(Context({"name": name}))
        == "client:"
        + canonical(  # type: ignore[arg-type]
            {"name": name, "version": None}
        ).decode()
    )
    # What is not text is dumped every time (1 and True are equal keys, not equal principals).
    for odd in ({"name": 1, "version": "1"}, {"name": True, "version": "1"}, {"name": {"a": 1}}, ["x"], "x"):
        dumped.clear()
        want = (
            "client:"
            + canonical(
                {"name": odd.get("name"), "version": odd.get("version")} if isinstance(odd, dict) else odd
            ).decode()
        )
        assert sealing.principal_of(Context(odd)) == want  # type: ignore[arg-type]
        assert len(dumped) == 1
    long = {"name": "n" * 600, "version": "1"}
    dumped.clear()
    assert sealing.principal_of(Context(long)) == sealing.principal_of(Context(long))  # type: ignore[arg-type]
    assert len(dumped) == 2  # a client's own words of any size are not kept


def test_a_state_is_opened_with_one_digest_comparison_and_refused_for_the_same_reasons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def counted(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(state_seal.hmac, "compare_digest", counted)
    seal = StateSeal([secrets.token_bytes(32)], 600, "elicitgate")
    bound = seal.binding(METHOD, {"name": "t", "arguments": {"a": 1}}, "client:x")
    token = seal.seal("state", bound)
    assert seal.unseal(token, bound) == "state" and len(compared) == 1
    other_request = seal.binding(METHOD, {"name": "t", "arguments": {"a": 2}}, "client:x")
    other_principal = seal.binding(METHOD, {"name": "t", "arguments": {"a": 1}}, "client:y")
    both = seal.binding(METHOD, {"name": "u"}, "client:y")
    for wrong, reason in (
        (other_request, "request binding"),
        (other_principal, "principal"),
        (both, "request binding"),
    ):
        with pytest.raises(StateRejected, match=f"^{reason}$"):
            seal.unseal(token, wrong)


def test_base64url_is_read_strictly_as_before_with_nothing_written_back_as_text() -> None:
    def before(text: str) -> bytes:
        encoded = text.encode("ascii")
        raw = binascii.a2b_base64(encoded.translate(bytes.maketrans(b"-_", b"+/")) + b"=" * (-len(encoded) % 4))
        if state_seal._b64u(raw) != text:  # pyright: ignore[reportPrivateUsage]
            raise ValueError("non-canonical base64url")
        return raw

    def outcome(read: Any, text: str) -> object:
        try:
            return read(text)
        except ValueError:
            return ValueError

    rng = random.Random(34)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/= \n.é"
    texts = [state_seal._b64u(rng.randbytes(n)) for n in range(40)]  # pyright: ignore[reportPrivateUsage]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(3000)]
    texts += [t[:i] + c + t[i + 1 :] for t in texts[:40] for i, c in itertools.product(range(0, len(t), 7), "+/=-_ A")]
    for text in texts:
        assert outcome(state_seal._b64u_strict, text) == outcome(before, text), text  # pyright: ignore[reportPrivateUsage]
    with edges() as seen:
        state_seal._b64u_strict(texts[30])  # pyright: ignore[reportPrivateUsage]
    assert "_b64u" not in [callee for callee, _ in seen]


# -- the broker's limits -----------------------------------------------------------------------------------------


def test_a_new_clients_bucket_is_made_with_its_first_token_taken() -> None:
    broker = Broker(ElicitationConfig(rate_limit_per_minute=60, rate_limit_burst=2))
    who = peer("first")
    with edges() as seen:
        assert broker.admit_here("s", who, "first") == "first"
    names = [callee for callee, _ in seen]
    assert "take" not in names and "__post_init__" not in names and names.count("<monotonic>") == 1
    bucket = broker._buckets["first"]  # pyright: ignore[reportPrivateUsage]
    now = [bucket.updated]
    fresh = TokenBucket(1.0, 2, clock=lambda: now[0])
    assert fresh.take() == 0.0 and (fresh.tokens, fresh.updated) == (bucket.tokens, bucket.updated)
    bucket.clock = lambda: now[0]
    assert bucket.take() == 0.0 and bucket.take() == 1.0  # the burst of 2: the second token, then a wait
    one = TokenBucket(1.0, 1, clock=lambda: now[0], taken=True)
    assert one.tokens == 0.0 and one.take() == 1.0


def test_an_elicitations_id_is_made_with_no_system_call_of_its_own() -> None:
    model_module._IDS.clear()  # pyright: ignore[reportPrivateUsage]  # what earlier tests left of a batch
    Elicitation(server="s", mode="form", params={}, deadline=0)  # a batch made: 255 ids left
    with edges() as seen:
        ids = [Elicitation(server="s", mode="form", params={}, deadline=0).id for _ in range(20)]
    assert "<urandom>" not in [callee for callee, _ in seen] and len(set(ids)) == 20
    for id_ in ids:
        assert uuid.UUID(hex=id_).version == 4 and uuid.UUID(hex=id_).hex == id_


def test_a_requests_digest_is_canonicals_with_no_call_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def digest(text: bytes) -> bytes:
        return hashlib.blake2b(text, digest_size=16).digest()

    usual = {"name": "t", "arguments": {"b": [1, "x"], "a": {"z": None, "y": 1.5}}}
    odd = {"name": "t", "arguments": {"big": 2**70, "text": "\ud800"}}
    assert state_seal.request_digest(METHOD, usual) == digest(state_seal.canonical([METHOD, "t", usual["arguments"]]))
    assert state_seal.request_digest(METHOD, odd) == digest(state_seal.canonical([METHOD, "t", odd["arguments"]]))
    assert state_seal.request_digest("resources/read", {"uri": "u"}) == digest(
        state_seal.canonical(["resources/read", "u", {}])
    )
    with edges() as seen:
        state_seal.request_digest(METHOD, usual)
    assert "canonical" not in [callee for callee, _ in seen]


def test_the_seal_is_loaded_once_with_no_call_for_it_on_later_requests() -> None:
    boundary = sealing.RequestsOnly([secrets.token_bytes(32)], 600)

    class Ctx:
        method, meta = METHOD, {"io.modelcontextprotocol/clientInfo": {"name": "n", "version": "1"}}
        params: dict[str, Any] = {"name": "t", "arguments": {}}

    ctx = Ctx()
    round_ = {"resultType": "input_required", "inputRequests": {}, "requestState": "plain"}
    sealed = boundary.close_round(ctx, round_, None)  # type: ignore[arg-type]  # the seal loaded
    with edges() as seen:
        again = boundary.close_round(ctx, round_, None)  # type: ignore[arg-type]
        ctx.params = {**ctx.params, "requestState": again["requestState"]}
        bound = boundary.open(ctx)  # type: ignore[arg-type]
    assert "_loaded" not in [callee for callee, _ in seen] and bound is not None
    assert ctx.params["requestState"] == "plain" and sealed["requestState"] != again["requestState"]
