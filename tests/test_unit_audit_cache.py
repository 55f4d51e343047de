"""SQLite's page cache on the audit store's connections stays small as the store grows: the gateway appends records
(the last pages of the table and of its indexes) and reads a few of the newest, so what a larger cache holds is kept
in the gateway's heap for good without making a row cheaper (bench/README.md, "A million questions: what fills
in")."""

from __future__ import annotations

import ctypes
from datetime import UTC, datetime, timedelta

import pytest

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.store import AuditStore

pytestmark = pytest.mark.anyio


def _sqlite_memory_kib() -> int:
    """SQLite's own heap in this process (every connection's page cache among it), from the library Python's sqlite3
    module uses."""
    lib = ctypes.CDLL("libsqlite3.so.0")
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return int(lib.sqlite3_memory_used()) // 1024


def _batch(start: int, size: int = 200) -> list[AuditRecord]:
    when = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
    states = ("accepted", "declined", "cancelled", "timed_out")
    return [
        AuditRecord(server=f"s{n % 8}", mode="form", state=states[n % len(states)], reason="user accepted",
                    created_at=when + timedelta(milliseconds=n), ended_at=when + timedelta(milliseconds=n + 3),
                    tool="demo__confirm", client="lean", client_id="c1", request_id=str(n), attempts=1,
                    responder="client")
        for n in range(start, start + size)
    ]


async def test_the_writers_cache_takes_less_than_100_kib_more_as_the_store_grows(tmp_path):
    """At 256 KiB it took ~180 KiB more between the store's first batch and its 20,000th row, +0.2% of a gateway's RSS
    over its first thousand questions."""
    store = await AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        await store.add(_batch(0))
        first = _sqlite_memory_kib()
        assert first > 0, "libsqlite3.so.0 is not the SQLite this process's sqlite3 module uses"
        stored = 200
        while stored < 20_000:
            await store.add(_batch(stored))
            stored += 200
        grown = _sqlite_memory_kib() - first
        assert len(await store.query(limit=3)) == 3
        removed = await store.purge(datetime(2026, 11, 27, 1, 0, 10, tzinfo=UTC))  # the first 10,000 ended by then
    finally:
        await store.close()
    assert grown < 100, f"SQLite's heap grew by {grown} KiB"
    assert removed == 9_997
