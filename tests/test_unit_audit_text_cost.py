"""An audit record's times bound for SQLite (`schema.sqlite_text`, twice for every record stored): the broker's UTC
times written with `isoformat` and their offset cut, with no naive copy of each made first; the same text as
SQLAlchemy's DATETIME writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from elicitgate.audit.schema import sqlite_text
from tests.profiled import calls_of


def test_a_utc_time_is_written_without_a_naive_copy_and_as_before() -> None:
    times = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(2026, 11, 27, 16, 0, tzinfo=UTC),
        datetime(2026, 11, 27, 16, 0, 1, 5, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime.fromtimestamp(1795000000.123456, UTC),
    ]
    for when in times:
        text, called = calls_of(lambda when=when: sqlite_text(when), c_calls=True)
        assert text == when.replace(tzinfo=None).isoformat(" ", "microseconds")
        assert "replace" not in called and "astimezone" not in called
    elsewhere = datetime(2026, 11, 27, 17, 0, 0, 250, tzinfo=timezone(timedelta(hours=1)))
    assert sqlite_text(elsewhere) == "2026-11-27 16:00:00.000250"
    assert sqlite_text(datetime(2026, 11, 27, 16, 0)) == "2026-11-27 16:00:00.000000"  # naive: taken as UTC
    assert sqlite_text(None) is None
