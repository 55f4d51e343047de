"""The audit trail's queue (audit/trail.py): a record is queued with no Python call, and the writer takes a batch
with as many calls whatever its size; what is queued is stored, in order, and closing drops what comes after."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import anyio
import pytest

from elicitgate.audit import trail as trail_module
from elicitgate.audit.record import AuditRecord
from elicitgate.audit.store import AuditStore
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import AuditConfig
from elicitgate.metrics import AUDIT_DROPPED
from tests.profiled import calls_of, collector_held

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _record(server: str) -> AuditRecord:
    now = datetime.now(UTC)
    return AuditRecord(
        server=server, mode="form", state="accepted", reason="user accepted", created_at=now, ended_at=now
    )


def test_a_record_is_queued_with_no_python_call() -> None:
    trail = AuditTrail(AuditConfig(url="sqlite:///unused.db"))  # no writer
    record = _record("s")
    _, called = calls_of(lambda: trail.record(record))
    assert called == ["record"]


def test_past_the_queue_size_records_are_dropped_and_counted() -> None:
    trail = AuditTrail(AuditConfig(url="sqlite:///unused.db", queue_size=3))
    before = AUDIT_DROPPED.labels(reason="queue_full")._value.get()  # pyright: ignore[reportPrivateUsage]
    for n in range(5):
        trail.record(_record(f"s{n}"))
    assert AUDIT_DROPPED.labels(reason="queue_full")._value.get() == before + 2  # pyright: ignore[reportPrivateUsage]


async def _stored_with_calls(tmp_path: Any, count: int) -> tuple[list[str], int, float]:
    """`count` records queued while the writer waits for one, then the trail closed: the servers stored, the calls
    made from audit/trail.py meanwhile but from `record`, and the records dropped as "stopped" after the close."""
    url = f"sqlite:///{tmp_path / f'audit{count}.db'}"
    trail = AuditTrail(AuditConfig(url=url, open_at_start=True))
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        caller = frame.f_back if event == "call" else frame
        if event not in ("call", "c_call") or caller is None or caller.f_code.co_name == "record":
            return  # what `record` calls is the test above's
        if caller.f_code.co_filename == trail_module.__file__:
            calls += 1

    stopped = AUDIT_DROPPED.labels(reason="stopped")._value.get()  # pyright: ignore[reportPrivateUsage]
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail.run)
            try:
                await anyio.lowlevel.checkpoint()  # the writer starts
                assert await trail.opened(60) is not None
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()  # the writer waits for its first record
                with collector_held():
                    sys.setprofile(profile)
                    try:
                        for n in range(count):
                            trail.record(_record(f"s{n:03}"))
                        await trail.close(60)
                    finally:
                        sys.setprofile(None)
                trail.record(_record("late"))
            finally:
                await trail.close(1)  # the writer outlives a failure above otherwise
    dropped = AUDIT_DROPPED.labels(reason="stopped")._value.get() - stopped  # pyright: ignore[reportPrivateUsage]
    store = await AuditStore.open(url)
    try:
        rows = await store.query(limit=1000)
    finally:
        await store.close()
    return sorted(row["server"] for row in rows), calls, dropped


async def test_a_batch_is_taken_with_as_many_calls_whatever_its_size(tmp_path: Any, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(trail_module, "LINGER", 3600.0)  # only `close` ends the batch's wait
    few, few_calls, few_dropped = await _stored_with_calls(tmp_path, 5)
    many, many_calls, many_dropped = await _stored_with_calls(tmp_path, 60)
    assert few == [f"s{n:03}" for n in range(5)] and many == [f"s{n:03}" for n in range(60)]
    assert few_dropped == many_dropped == 1
    # 55 records more, not a call more per record: a loop turn may fall on either side of the batch's wait (+-1)
    assert abs(many_calls - few_calls) <= 5
