"""The audit trail's cheaper ways make what the plain ways made: the store's batch INSERT stores the rows SQLAlchemy's
INSERT stored, SQLite's times are the text SQLAlchemy's DATETIME writes, the logged times are `isoformat`'s, and
an event's line written without a `LogRecord` is the line the record makes, its levels and other handlers kept."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from elicitgate import logs
from elicitgate.audit.record import _iso  # pyright: ignore[reportPrivateUsage]
from elicitgate.audit.schema import UtcDateTime, sqlite_text
from elicitgate.audit.store import AuditStore
from elicitgate.logs import configure_logging, log_event
from tests.audit_helpers import stored_both_ways, text_lines_at_a_fixed_time, varied_records

pytestmark = pytest.mark.anyio

offsets = st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23)))
aware = st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets)


@given(aware)
def test_the_logged_times_are_isoformat_in_milliseconds(when: datetime):
    assert _iso(when) == when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@given(aware | st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)))
def test_sqlite_times_are_bound_as_sqlalchemys_datetime_binds_them(when: datetime):
    dialect = create_async_engine("sqlite+aiosqlite://").dialect
    sqlalchemys = UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert sqlalchemys is not None
    assert sqlite_text(when) == sqlalchemys(when) and sqlite_text(None) is None


async def test_a_batch_is_stored_as_sqlalchemys_insert_stored_it(tmp_path):
    batch, core = await stored_both_ways(f"sqlite:///{tmp_path / 'audit.db'}")
    assert len(batch) == 3 and [row[1:] for row in batch] == [row[1:] for row in core]
    assert {row[0] for row in batch} == {"batch"}


async def test_a_batch_of_one_is_stored(tmp_path):
    store = await AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        (record,) = varied_records("one")[:1]
        await store.add([record])
        (row,) = await store.query()
        assert row["id"] == record.id and row["content"] == record.content
        assert row["duration_s"] == record.duration_s == 1.234
    finally:
        await store.close()


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The gateway's text logging on a buffer, at a time that stands still."""
    with text_lines_at_a_fixed_time(monkeypatch) as stream:
        yield stream


def _only_ours() -> logging.Handler:
    """The root's handlers without pytest's own, which it adds for each test's call: the gateway's handler alone."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if type(handler) is not logs._Lines:  # pyright: ignore[reportPrivateUsage]
            root.removeHandler(handler)
    (handler,) = root.handlers
    return handler


class _Made:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        make = logging.Logger.makeRecord

        def counted(logger: logging.Logger, *args: Any, **kwargs: Any) -> logging.LogRecord:
            self.count += 1
            return make(logger, *args, **kwargs)

        monkeypatch.setattr(logging.Logger, "makeRecord", counted)


FIELDS = {"id": "a1", "server": "dëmo", "state": "accepted", "attempts": 1, "duration_s": 0.25,
          "created_at": "2026-11-26T23:05:07.123Z", "when": datetime(2026, 11, 26, tzinfo=UTC), "tool": None}


def test_an_events_line_without_a_record_is_the_line_a_record_makes(lines: io.StringIO, monkeypatch):
    made = _Made(monkeypatch)
    audit = logging.getLogger("elicitgate.audit")
    handler = _only_ours()
    log_event(audit, "elicitation.ended", FIELDS)
    assert made.count == 0  # no LogRecord: the gateway's handler is the only one
    handler.addFilter(lambda _record: True)  # a filter sees records: the line is made from one
    log_event(audit, "elicitation.ended", FIELDS)
    assert made.count == 1
    fast, standard = lines.getvalue().splitlines()
    assert fast == standard
    assert ",876 INFO elicitgate.audit: elicitation.ended {" in fast
    assert '"server": "d\\u00ebmo"' in fast and '"when": "2026-11-26 00:00:00+00:00"' in fast


def test_an_events_name_with_control_characters_is_escaped_on_both_ways(lines: io.StringIO, monkeypatch):
    audit = logging.getLogger("elicitgate.audit")
    handler = _only_ours()
    log_event(audit, "forged\nINFO x", {})
    handler.addFilter(lambda _record: True)
    log_event(audit, "forged\nINFO x", {})
    fast, standard = lines.getvalue().splitlines()
    assert fast == standard and fast.endswith("forged\\nINFO x {}")


def test_levels_and_other_handlers_are_kept(lines: io.StringIO, monkeypatch):
    made = _Made(monkeypatch)
    audit = logging.getLogger("elicitgate.audit")
    handler = _only_ours()
    log_event(audit, "elicitation.ended", FIELDS, level=logging.DEBUG)  # below the root's level
    assert lines.getvalue() == "" and made.count == 0
    captured: list[logging.LogRecord] = []
    other = logging.Handler()
    other.emit = captured.append  # type: ignore[method-assign]
    audit.addHandler(other)
    try:
        log_event(audit, "elicitation.ended", FIELDS)
    finally:
        audit.removeHandler(other)
    (record,) = captured  # a capturing handler (pytest's caplog) gets the record with its fields
    assert made.count == 1 and record.getMessage() == "elicitation.ended"
    assert getattr(record, "eg_fields") == FIELDS  # noqa: B009 - set through `extra`
    assert lines.getvalue().count("elicitation.ended") == 1  # and the gateway's line is written once
    handler.setLevel(logging.WARNING)
    log_event(audit, "elicitation.ended", FIELDS)
    assert lines.getvalue().count("elicitation.ended") == 1


def test_json_lines_keep_their_records(monkeypatch):
    stream = io.StringIO()
    root = logging.getLogger()
    kept = (list(root.handlers), root.level)
    monkeypatch.setattr(sys, "stderr", stream)
    made = _Made(monkeypatch)
    configure_logging("info", "json")
    _only_json = [h for h in root.handlers if type(h) is logs._Lines]  # pyright: ignore[reportPrivateUsage]
    for handler in list(root.handlers):
        if handler not in _only_json:
            root.removeHandler(handler)
    try:
        log_event(logging.getLogger("elicitgate.audit"), "elicitation.ended", FIELDS)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept[0]:
            root.addHandler(handler)
        root.setLevel(kept[1])
    assert made.count == 1 and '"event": "elicitation.ended"' in stream.getvalue()
    assert logs.TEXT_FORMAT  # the text format is the one the fast line follows
