"""What an elicitation's end no longer pays for (issue #34, the broker's part of the elicit rows), with the same
metrics, audit records and log lines: the elicitation counter and the duration histogram are not touched at the end
(`Counter.inc` and `Histogram.observe` were 9 Python calls and 3 locks for each): the ends are tallied and added when
`/metrics` is scraped, which shows the values the two would have had. A real client and server through an
in-process gateway, scraped over HTTP between questions and after; the audit store and the `elicitation.ended` log
events are checked against the ends as the broker recorded them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import Counter, Histogram

from mcp import Client

from elicitgate.audit.record import as_json
from elicitgate.audit.store import AuditStore
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.model import Elicitation
from tests.audit_helpers import ScriptedHuman, scrape, stored
from tests.conftest import PY, inprocess_gateway

pytestmark = pytest.mark.anyio

SERVER = "endcost"
"""The upstream's name: the metrics' label, which no other test uses (the registry is the process's)."""
COUNTED = ("elicitgate_elicitations", "elicitgate_elicitation_duration_seconds")
BUCKETS = (0.05, 0.25, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
SAMPLES = ("elicitgate_elicitations_total", *(f"{COUNTED[1]}_{part}" for part in ("bucket", "count", "sum")))
FIRST = ("accept-me", "decline-me")
THEN = ("reask-me", "cancel-me", "accept-me")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def expected(ends: list[tuple[str, str, str, float]]) -> Samples:
    """The samples a counter and a histogram observed at each end would show, for `SERVER`, without `_created`."""
    registry = CollectorRegistry()
    counter = Counter(COUNTED[0], "", ["server", "mode", "state"], registry=registry)
    histogram = Histogram(COUNTED[1], "", ["server", "mode", "state"], buckets=BUCKETS, registry=registry)
    for server, mode, state, seconds in ends:
        counter.labels(server, mode, state).inc()
        histogram.labels(server, mode, state).observe(seconds)
    return ours(
        {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in registry.collect()
            for sample in family.samples
        }
    )


def ours(samples: Samples) -> Samples:
    return {key: value for key, value in samples.items() if key[0] in SAMPLES and ("server", SERVER) in key[1]}


class _Ended(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.fields: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "eg_event", None) == "elicitation.ended":
            self.fields.append(dict(getattr(record, "eg_fields", {})))


async def test_an_ends_counter_and_histogram_are_tallied_then_scraped_with_the_same_values(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended: list[Elicitation] = []
    touched: list[str] = []
    record_end, inc, observe = Broker._record_end, Counter.inc, Histogram.observe  # pyright: ignore[reportPrivateUsage]

    def spied_record_end(self: Broker, el: Elicitation) -> None:
        ended.append(el)
        record_end(self, el)

    def spied_inc(self: Counter, amount: float = 1, exemplar: Any = None) -> None:
        if self._name in COUNTED:  # pyright: ignore[reportPrivateUsage]
            touched.append("inc")
        inc(self, amount, exemplar)

    def spied_observe(self: Histogram, amount: float, exemplar: Any = None) -> None:
        if self._name in COUNTED:  # pyright: ignore[reportPrivateUsage]
            touched.append("observe")
        observe(self, amount, exemplar)

    monkeypatch.setattr(Broker, "_record_end", spied_record_end)
    monkeypatch.setattr(Counter, "inc", spied_inc)
    monkeypatch.setattr(Histogram, "observe", spied_observe)
    events = _Ended()
    audit_log = logging.getLogger("elicitgate.audit")
    monkeypatch.setattr(audit_log, "level", logging.INFO)
    # With its own cache of isEnabledFor answers, put back with the level: an earlier test may have left "INFO off"
    # cached for this logger, which the level set alone would not clear.
    monkeypatch.setattr(audit_log, "_cache", {})
    audit_log.addHandler(events)
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upstream = {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", SERVER], "era": "handshake"}
    config = {"mcpServers": {SERVER: upstream}, "audit": {"url": url}}

    def ends() -> list[tuple[str, str, str, float]]:
        assert all(el.ended_at is not None for el in ended)
        return [(el.server, el.mode, str(el.state), (el.ended_at or 0.0) - el.created_at) for el in ended]

    try:
        async with inprocess_gateway(config) as gw:
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=ScriptedHuman()) as client:
                for word in FIRST:
                    with anyio.fail_after(60):
                        result = await client.call_tool(f"{SERVER}__elicit", {"message": word})
                    assert not result.is_error, result
                assert touched == []  # nothing at the ends
                first = ours(await anyio.to_thread.run_sync(scrape, gw.url))
                assert first == expected(ends()) and len(ended) == 2
                accepted = frozenset({("server", SERVER), ("mode", "form"), ("state", "accepted")})
                assert first[SAMPLES[0], accepted] == 1.0 and first[SAMPLES[2], accepted] == 1.0
                for word in THEN:
                    with anyio.fail_after(60):
                        result = await client.call_tool(f"{SERVER}__elicit", {"message": word})
                    assert not result.is_error, result
                last = ours(await stored(gw.url, len(FIRST) + len(THEN)))
                assert last == expected(ends()) and len(ended) == 5
                again = ours(await anyio.to_thread.run_sync(scrape, gw.url))
                assert again == last  # a scrape adds what was tallied once
    finally:
        audit_log.removeHandler(events)
    assert [state for _, _, state, _ in ends()] == ["accepted", "declined", "accepted", "cancelled", "accepted"]
    store = await AuditStore.open(url)
    try:
        rows = await store.query(server=SERVER)
    finally:
        await store.close()
    by_id = {row["id"]: row for row in rows}
    assert sorted(by_id) == sorted(el.id for el in ended) and len(rows) == 5
    for el, fields in zip(ended, events.fields, strict=True):
        row = by_id[el.id]
        assert (row["state"], row["reason"], row["attempts"], row["responder"]) == (
            str(el.state),
            el.reason,
            el.answers,
            "client",
        )
        assert row["created_at"] == datetime.fromtimestamp(el.created_at, UTC)
        assert row["ended_at"] == datetime.fromtimestamp(el.ended_at or 0.0, UTC)
        logged = as_json(row)
        del logged["content"]
        assert fields == logged
