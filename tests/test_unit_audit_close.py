"""An elicitation that ended just before the gateway stops still has its audit record: `Broker._after_answer` queues
the record an event-loop turn later (the answer, and a 2026-07-28 upstream's retry, which an HTTP wire writes in its
caller's step, go first), and `AuditTrail.close` lets that turn pass before it stops taking records."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.store import AuditStore
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import AuditConfig

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_record_queued_as_the_broker_queues_an_end_is_stored_when_the_trail_closes_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    trail = AuditTrail(AuditConfig(url=url, open_at_start=True))
    now = datetime.now(UTC)
    record = AuditRecord(server="s", mode="form", state="accepted", reason="user accepted",
                         created_at=now - timedelta(seconds=1), ended_at=now)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail.run)
            await trail.opened(60)
            loop = asyncio.get_running_loop()
            loop.call_soon(trail.record, record)  # as `Broker._after_answer` defers `_record_end`
            await trail.close(60)
    store = await AuditStore.open(url)
    try:
        assert [row["id"] for row in await store.query()] == [record.id]
    finally:
        await store.close()
