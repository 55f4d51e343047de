"""What an elicitation's bookkeeping no longer pays for (issue #34, the broker's part of the elicit rows), with the
same metrics and log lines as before: the pending gauge's value is a count kept in a dict and read when `/metrics` is
scraped (no `Gauge.inc`/`dec` and their lock per question), the question's deadline is read off the event loop's
clock (not through anyio's `current_time`, four calls), and its end is logged with its ids named in the context the
broker's callbacks run in (no context copied for each end). A real client and server through an in-process
gateway."""

from __future__ import annotations

import contextvars
import logging
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics import Gauge

from mcp import Client

from elicitgate.elicitation import broker as broker_module
from elicitgate.logs import current_request
from tests.conftest import PY, inprocess_gateway

pytestmark = pytest.mark.anyio

SERVER = "cost"
"""The upstream's name here: the metrics' label, which no other test uses (the registry is the process's)."""
PENDING = "elicitgate_elicitations_pending"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pending() -> float | None:
    return REGISTRY.get_sample_value(PENDING, {"server": SERVER})


class _Ends(logging.Handler):
    """The audit logger's `elicitation.ended` events, with the request ids in force as each is handled."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[tuple[Any, ...]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "eg_event", None) == "elicitation.ended":
            fields = getattr(record, "eg_fields", {})
            self.ends.append((fields["id"], fields["client_id"], fields["request_id"], current_request()))


async def test_the_pending_gauge_counts_without_the_gauges_lock_and_the_deadline_reads_the_loops_clock(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gauge_calls: list[str] = []
    clock_callers: list[str] = []
    copy_callers: list[str] = []
    inc, dec, current_time, copy_context = Gauge.inc, Gauge.dec, anyio.current_time, contextvars.copy_context

    def spied_inc(self: Gauge, amount: float = 1) -> None:
        if self._name == PENDING:  # pyright: ignore[reportPrivateUsage]
            gauge_calls.append("inc")
        inc(self, amount)

    def spied_dec(self: Gauge, amount: float = 1) -> None:
        if self._name == PENDING:  # pyright: ignore[reportPrivateUsage]
            gauge_calls.append("dec")
        dec(self, amount)

    def spied_current_time() -> float:
        clock_callers.append(sys._getframe(1).f_code.co_filename)  # pyright: ignore[reportPrivateUsage]
        return current_time()

    def spied_copy_context() -> contextvars.Context:
        copy_callers.append(sys._getframe(1).f_code.co_filename)  # pyright: ignore[reportPrivateUsage]
        return copy_context()

    monkeypatch.setattr(Gauge, "inc", spied_inc)
    monkeypatch.setattr(Gauge, "dec", spied_dec)
    monkeypatch.setattr(anyio, "current_time", spied_current_time)
    monkeypatch.setattr(contextvars, "copy_context", spied_copy_context)
    ends = _Ends()
    audit_log = logging.getLogger("elicitgate.audit")
    monkeypatch.setattr(audit_log, "level", logging.INFO)
    # With its own cache of isEnabledFor answers, put back with the level: an earlier test may have left "INFO off"
    # cached for this logger, which the level set alone would not clear.
    monkeypatch.setattr(audit_log, "_cache", {})
    audit_log.addHandler(ends)
    seen_pending: list[float | None] = []

    async def answer(ctx: Any, params: Any) -> types.ElicitResult:
        seen_pending.append(pending())
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    upstream = {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", SERVER], "era": "handshake"}
    config = {"mcpServers": {SERVER: upstream}, "audit": {"url": f"sqlite:///{tmp_path / 'audit.db'}"}}
    try:
        async with inprocess_gateway(config) as gw:
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=answer) as client:
                for _ in range(2):
                    with anyio.fail_after(60):
                        result = await client.call_tool(f"{SERVER}__elicit", {})
                    assert not result.is_error, result
                    # Down once the end is recorded, right after the answer left: before the server's result came.
                    assert pending() == 0.0
            assert gw.gateway.broker.pending == {}
    finally:
        audit_log.removeHandler(ends)
    assert len(ends.ends) == 2 and ends.ends[0][0] != ends.ends[1][0]
    for elicitation, client_id, request_id, ids in ends.ends:
        assert ids == {"request_id": int(request_id), "client": client_id, "elicitation": elicitation}
    assert seen_pending == [1.0, 1.0]
    assert gauge_calls == []
    assert broker_module.__file__ not in clock_callers
    assert broker_module.__file__ not in copy_callers
