"""The Python calls the broker's part of an elicitation makes, with the same results (issue #34): its end tallies
the elicitation counter and duration histogram (`metrics.elicitation_ended`: no prometheus_client call, no lock; the
tally is added when scraped, to the same values), its end's callback names the request without `name_request`'s
`**ids` or an enum property, its log line's fields are written by C's JSON encoder directly (the same text), its
answer is checked without `Elicitation.requested_schema` and `AuditTrail.store_content` properties or a generator,
and a gateway with nothing hosted picks the client's responder without the hosting checks."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import FrameType
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics import Histogram

from elicitgate import logs, metrics
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import AuditConfig, ElicitationConfig
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.limits import TokenBucket
from elicitgate.elicitation.model import Elicitation, State
from elicitgate.elicitation.responders import PUSH_TO_CLIENT
from elicitgate.elicitation.schema import answer_problems
from elicitgate.logs import current_request
from tests.profiled import collector_held, python_calls

SERVER = "unit-endcost"
"""The metrics' label here, which no other test uses (the registry is the process's)."""
BUCKETS = (0.05, 0.25, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def samples(collect: Callable[[], Any], server: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    names = (
        "elicitgate_elicitations_total",
        *(f"elicitgate_elicitation_duration_seconds_{p}" for p in ("bucket", "count", "sum")),
    )
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in collect()
        for sample in family.samples
        if sample.name in names and sample.labels.get("server") == server
    }


def test_an_end_is_tallied_without_prometheus_calls_and_scraped_as_observed() -> None:
    server = f"{SERVER}-tally"
    reference = CollectorRegistry()
    counter = metrics.Counter("elicitgate_elicitations", "", ["server", "mode", "state"], registry=reference)
    histogram = Histogram(
        "elicitgate_elicitation_duration_seconds",
        "",
        ["server", "mode", "state"],
        buckets=BUCKETS,
        registry=reference,
    )
    # Bounds themselves, either side of them, past the last, below zero, and sums whose order of adding matters.
    durations = [0.05, 0.0500001, 0.1, 0.3, 1.0, 0.7, 2.5, 3600.0, 3600.5, 1e9, -0.001, 0.0, 0.1, 0.2, 0.3, 1e-17]
    metrics.elicitation_ended(server, "form", "accepted", 0.01)  # the children, made at the first end
    counter.labels(server, "form", "accepted").inc()
    histogram.labels(server, "form", "accepted").observe(0.01)
    for i, seconds in enumerate(durations):
        state = ("accepted", "declined", "cancelled")[i % 3]
        with python_calls() as called:
            metrics.elicitation_ended(server, "form", state, seconds)
        if i >= 3:  # each state's children made by then
            assert called == ["elicitation_ended"]
        counter.labels(server, "form", state).inc()
        histogram.labels(server, "form", state).observe(seconds)
        if i % 5 == 4:  # scraped now and then: each scrape adds what was tallied since the last
            assert samples(REGISTRY.collect, server) == samples(reference.collect, server)
    assert samples(REGISTRY.collect, server) == samples(reference.collect, server)
    assert samples(REGISTRY.collect, server) == samples(reference.collect, server)  # nothing added twice
    assert len(samples(reference.collect, server)) == 3 * (1 + 14 + 2)


@dataclass(eq=False)
class _Peer:
    id: str = "c1"
    client_name: str | None = "unit"
    principal: str | None = None
    identity: str = "c1"
    closed: bool = False


@dataclass
class _Origin:
    peer: _Peer = field(default_factory=_Peer)
    request_id: int | None = 7
    tool: str | None = "demo__confirm"
    era: str = "handshake"
    modes: frozenset[str] = frozenset({"form"})
    ended: list[str] = field(default_factory=list)

    requests: list[dict[str, Any]] = field(default_factory=list)
    answer: asyncio.Future[object] | None = None

    def elicitation_ended(self, el: Elicitation) -> None:
        self.ended.append(el.id)

    def carry(self, el: Elicitation) -> None:
        """Nothing to attach (as on stdio)."""

    def send_request(self, method: str, params: dict[str, Any]) -> asyncio.Future[object]:
        assert method == "elicitation/create" and self.answer is not None
        self.requests.append(params)
        return self.answer


class _Ends(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.ends: list[tuple[dict[str, Any], Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "eg_event", None) == "elicitation.ended":
            self.ends.append((dict(getattr(record, "eg_fields", {})), current_request()))


def _broker(store_content: bool = False) -> Broker:
    return Broker(
        ElicitationConfig(), audit=AuditTrail(AuditConfig(url="sqlite:///unused.db", store_content=store_content))
    )


def _asked(broker: Broker, server: str) -> Elicitation:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    el = Elicitation(
        server=server,
        mode="form",
        params={"message": "m", "requestedSchema": schema},
        deadline=0.0,
        origin=_Origin(),  # pyright: ignore[reportArgumentType]
        responder=PUSH_TO_CLIENT,
    )
    el.state, el.attempts = State.PRESENTED, 1
    metrics.pending_opened(server)
    return el


def test_an_answer_is_checked_and_its_end_recorded_without_properties_generators_or_ids_spread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = f"{SERVER}-end"
    broker = _broker()
    handler = _Ends()
    audit_log = logging.getLogger("elicitgate.audit")
    monkeypatch.setattr(audit_log, "level", logging.INFO)
    # With its own cache of isEnabledFor answers, put back with the level: an earlier test may have left "INFO off"
    # cached for this logger, which the level set alone would not clear.
    monkeypatch.setattr(audit_log, "_cache", {})
    audit_log.addHandler(handler)
    try:
        for answer in ("first", "second"):  # the first builds what forms and ends keep
            el = _asked(broker, server)
            with python_calls() as checked:
                result, done = broker._answered(el, {"action": "accept", "content": {"answer": answer}})  # pyright: ignore[reportPrivateUsage]
            assert done and result == {"action": "accept", "content": {"answer": answer}}
            assert el.state is State.ACCEPTED and el.answer is None
            with python_calls() as recorded:
                # In a context of its own, as the broker's callbacks run: the ids it names stay there.
                contextvars.Context().run(broker._recorded, el, None)  # pyright: ignore[reportPrivateUsage]
    finally:
        audit_log.removeHandler(handler)
    for unwanted in ("requested_schema", "store_content", "<genexpr>", "terminal", "any"):
        assert unwanted not in checked
    for unwanted in ("terminal", "asked", "_request_ids", "name_request", "_kept_content", "inc", "observe"):
        assert unwanted not in recorded
    fields, ids = handler.ends[-1]
    assert ids == {"request_id": 7, "client": "c1", "elicitation": el.id} and current_request() is None
    assert (fields["id"], fields["state"], fields["attempts"], fields["responder"]) == (el.id, "accepted", 1, "client")
    assert broker.audit is not None and broker.audit._queued == 2  # pyright: ignore[reportPrivateUsage]


def test_an_accepted_answer_is_kept_for_the_audit_store_as_before() -> None:
    server = f"{SERVER}-kept"
    broker = _broker(store_content=True)
    el = _asked(broker, server)
    el.params["requestedSchema"] = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "password": {"type": "string"}},
    }
    broker._answered(el, {"action": "accept", "content": {"answer": "a", "password": "p"}})  # pyright: ignore[reportPrivateUsage]
    assert el.answer == {"answer": "a", "password": "p"}
    contextvars.Context().run(broker._recorded, el, None)  # pyright: ignore[reportPrivateUsage]
    assert broker.audit is not None
    kept = broker.audit._queue.popleft()  # pyright: ignore[reportPrivateUsage]
    assert kept.content == {"answer": "a"} and kept.state == "accepted"


def test_with_nothing_hosted_the_clients_responder_is_picked_without_the_hosting_checks() -> None:
    broker = _broker()
    origin = _Origin()
    with python_calls() as called:
        responder = broker._responder("s", origin, "form", ())  # pyright: ignore[reportPrivateUsage,reportArgumentType]
    assert responder is PUSH_TO_CLIENT
    assert "_hosted_responder" not in called and "_beside" not in called


def test_an_events_line_is_written_by_cs_encoder_with_the_same_text() -> None:
    formatter = logs._TextFormatter(logs.TEXT_FORMAT)  # pyright: ignore[reportPrivateUsage]
    fields: dict[Any, Any] = {
        "id": "x",
        "text": "Zoë \n\u2028\x1b",
        "none": None,
        "floats": [1.5, float("nan"), float("inf"), -0.0],
        "nested": {"ok": True},
        "when": datetime(2026, 11, 27, 13, 0),
        3: "an int key",
        "big": 2**70,
    }
    formatter.event_line("elicitgate.audit", logging.INFO, "elicitation.ended", fields)
    with python_calls() as called:
        line = formatter.event_line("elicitgate.audit", logging.INFO, "elicitation.ended", fields)
    assert line is not None
    assert line.split(" INFO elicitgate.audit: elicitation.ended ", 1)[1] == json.dumps(fields, default=str)
    for unwanted in ("encode", "iterencode", "escape_controls"):
        assert unwanted not in called
    odd = formatter.event_line("x", logging.INFO, "odd\nevent", {})
    assert odd is not None and odd.endswith(" INFO x: odd\\nevent {}")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_pushed_question_asks_and_ends_without_context_managers_or_a_second_task_lookup(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's push (`own_task`) through `Broker.elicit` in memory: asked, answered, recorded once its task is
    done; the Python calls from its start to the answer it returns, and of its end."""
    server = f"{SERVER}-push"
    broker = _broker()
    origin = _Origin(answer=asyncio.get_running_loop().create_future())
    handler = _Ends()
    audit_log = logging.getLogger("elicitgate.audit")
    monkeypatch.setattr(audit_log, "level", logging.INFO)
    # With its own cache of isEnabledFor answers, put back with the level: an earlier test may have left "INFO off"
    # cached for this logger, which the level set alone would not clear.
    monkeypatch.setattr(audit_log, "_cache", {})
    audit_log.addHandler(handler)
    params = {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}
    assert answer_problems(params["requestedSchema"], {"ok": True}) == []  # its check, built once for the form

    async def pushed() -> object:
        return await broker.elicit(server=server, origin=origin, params=params, own_task=True)  # pyright: ignore[reportArgumentType]

    try:
        with python_calls() as asking:
            task = asyncio.get_running_loop().create_task(pushed())
            while not origin.requests and not task.done():
                await asyncio.sleep(0)
        assert origin.requests[0]["message"] == f"[{server}] Proceed?" and broker.pending
        with python_calls() as answering:
            assert origin.answer is not None
            origin.answer.set_result({"action": "accept", "content": {"ok": True}})
            result = await task
        assert result == {"action": "accept", "content": {"ok": True}}
        for _ in range(3):  # its done callbacks: the end is recorded by the broker's, after the task's own
            if handler.ends:
                break
            await asyncio.sleep(0)
    finally:
        audit_log.removeHandler(handler)
    for unwanted in ("_hosted_responder", "_beside", "_responder_for", "_request_ids", "name_request", "__enter__"):
        assert unwanted not in asking
    assert asking.count("current_task") == 1
    for unwanted in ("current_task", "__exit__", "terminal", "requested_schema", "store_content", "<genexpr>"):
        assert unwanted not in answering
    fields, ids = handler.ends[0]
    assert ids == {"request_id": 7, "client": "c1", "elicitation": fields["id"]}
    assert (fields["state"], fields["attempts"], fields["responder"], fields["server"]) == (
        "accepted",
        1,
        "client",
        server,
    )
    assert broker.pending == {} and origin.ended == [fields["id"]] and len(handler.ends) == 1
    assert current_request() is None  # named in the question's task and the broker's callbacks, not in this one


def test_a_token_is_taken_without_min_or_max_and_the_same_waits() -> None:
    now = [100.0]
    bucket = TokenBucket(rate_per_second=0.5, burst=2, clock=lambda: now[0])
    c_calls: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_call":
            c_calls.append(getattr(arg, "__name__", ""))

    with collector_held():
        sys.setprofile(profile)
        try:
            waits = [bucket.take(), bucket.take()]  # taken (a refusal's wait is worked out as before: `max`, `ceil`)
        finally:
            sys.setprofile(None)
    assert "min" not in c_calls and "max" not in c_calls
    waits.append(bucket.take())
    assert waits == [0.0, 0.0, 2.0] and bucket.tokens == 0.0
    now[0] += 1.0
    assert bucket.take() == 1.0 and bucket.tokens == 0.5
    now[0] += 10.0
    assert bucket.take() == 0.0 and bucket.tokens == 1 and bucket.full() is False
