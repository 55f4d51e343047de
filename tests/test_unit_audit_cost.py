"""What an elicitation's audit record no longer pays for (issue #34), with the same record, line and row as before:
the broker's times are in UTC already, so neither the log line's nor SQLite's text converts them again; the line is
written under the handler's lock taken once (not `acquire`, then `flush`'s own); and the trail wakes its writer to
open the store with its first record, not with every record."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import anyio
import pytest

from elicitgate import logs
from elicitgate.audit.record import AuditRecord, _iso  # pyright: ignore[reportPrivateUsage]
from elicitgate.audit.schema import sqlite_text
from elicitgate.audit.store import AuditStore
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import AuditConfig
from elicitgate.logs import log_event
from tests.audit_helpers import text_lines_at_a_fixed_time

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Counted(datetime):
    """A datetime that counts its conversions to another zone."""

    conversions = 0

    def astimezone(self, tz: Any = None) -> datetime:
        _Counted.conversions += 1
        return super().astimezone(tz)


def test_a_utc_time_is_written_without_a_conversion_and_as_before() -> None:
    when = _Counted.fromtimestamp(1764198307.876543, UTC)  # as the broker makes its record's times
    _Counted.conversions = 0
    assert _iso(when) == "2025-11-26T23:05:07.876Z"
    assert sqlite_text(when) == "2025-11-26 23:05:07.876543"
    assert _Counted.conversions == 0


def test_a_time_in_another_zone_is_still_converted() -> None:
    east = timezone(timedelta(hours=2))
    when = _Counted(2025, 11, 27, 1, 5, 7, 876543, tzinfo=east)
    _Counted.conversions = 0
    assert _iso(when) == "2025-11-26T23:05:07.876Z"
    assert sqlite_text(when) == "2025-11-26 23:05:07.876543"
    assert _Counted.conversions == 2


async def test_the_first_record_wants_the_store_and_the_others_set_nothing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    trail = AuditTrail(AuditConfig(url=url))
    now = datetime.now(UTC)
    records = [
        AuditRecord(server="s", mode="form", state="accepted", reason="user accepted", created_at=now, ended_at=now)
        for _ in range(3)
    ]
    sets: list[object] = []
    wanted: Any = None
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail.run)
            await anyio.lowlevel.checkpoint()  # the writer waits for the store to be wanted
            wanted = trail._wanted  # pyright: ignore[reportPrivateUsage]
            assert wanted is not None and not wanted.is_set()
            event_set = type(wanted).set

            def spied_set(event: Any) -> None:
                sets.append(event)
                event_set(event)

            monkeypatch.setattr(type(wanted), "set", spied_set)
            for record in records:
                trail.record(record)
            monkeypatch.undo()
            assert wanted.is_set()
            await trail.close(60)
    assert [event for event in sets if event is wanted] == [wanted]
    store = await AuditStore.open(url)
    try:
        assert sorted(row["id"] for row in await store.query()) == sorted(record.id for record in records)
    finally:
        await store.close()


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The gateway's text logging on a buffer, at a time that stands still."""
    with text_lines_at_a_fixed_time(monkeypatch) as stream:
        yield stream


def test_an_events_line_takes_the_handlers_lock_once_and_is_flushed(
    lines: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = logging.getLogger("elicitgate.audit")
    root = logging.getLogger()
    for other in [h for h in root.handlers if type(h) is not logs._Lines]:  # pyright: ignore[reportPrivateUsage]
        root.removeHandler(other)  # pytest's own, added for each test's call: the gateway's handler alone
    assert len(root.handlers) == 1
    calls: list[str] = []
    flushed: list[str] = []
    acquire, flush = logging.Handler.acquire, logging.StreamHandler.flush

    def spied_acquire(self: logging.Handler) -> None:
        calls.append("acquire")
        acquire(self)

    def spied_flush(self: logging.StreamHandler[Any]) -> None:
        calls.append("flush")
        flush(self)

    monkeypatch.setattr(logging.Handler, "acquire", spied_acquire)
    monkeypatch.setattr(logging.StreamHandler, "flush", spied_flush)
    monkeypatch.setattr(lines, "flush", lambda: flushed.append(lines.getvalue()))
    log_event(audit, "elicitation.ended", {"id": "a1", "state": "accepted", "duration_s": 0.25})
    assert calls == []
    line = '2025-11-26 23:05:07,876 INFO elicitgate.audit: elicitation.ended {"id": "a1", "state": "accepted", '
    line += '"duration_s": 0.25}\n'
    assert lines.getvalue() == line and flushed == [line]
