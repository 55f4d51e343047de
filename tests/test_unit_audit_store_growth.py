"""The audit store's cost of a row does not grow with the store (no index on the random `id`, revision 0002), and a
store made by revision 0001 is migrated with its records kept, in their order."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config as AlembicConfig
from alembic.migration import MigrationContext
from sqlalchemy import Connection, inspect
from sqlalchemy.ext.asyncio import create_async_engine

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.schema import HEAD_REVISION, TABLE, VERSION_TABLE, metadata
from elicitgate.audit.store import AuditStore, async_url
from tests.audit_helpers import varied_records

pytestmark = pytest.mark.anyio

BATCH = 500


def _batch(start: int) -> list[AuditRecord]:
    when = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
    return [
        AuditRecord(server="demo", mode="form", state="accepted", reason="user accepted",
                    created_at=when + timedelta(milliseconds=n), ended_at=when + timedelta(milliseconds=n + 3),
                    tool="demo__confirm", client="lean", client_id="c1", request_id=str(n), attempts=1,
                    responder="client")
        for n in range(start, start + BATCH)
    ]


def _wal_pages_of(path: Path) -> int:
    """The pages in the store's WAL since the last checkpoint: what the commits since wrote."""
    with sqlite3.connect(path) as conn:
        _busy, pages, _done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(pages)


def _checkpoint(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # not busy: the WAL is empty now


async def test_a_batch_writes_as_many_pages_into_a_large_store_as_into_a_small_one(tmp_path):
    """With `id` indexed, each of a batch's rows went to a random page of that index: a batch wrote ~20 pages into a
    store of 1,000 rows and ~200 into one of 20,000 (and a page read and a page written per row once the index
    outgrows SQLite's cache): the writer fell behind as the store grew (bench/README.md)."""
    path = tmp_path / "audit.db"
    store = await AuditStore.open(f"sqlite:///{path}")
    try:
        pages: dict[int, int] = {}
        stored = 0
        for size in (1_000, 20_000):
            while stored < size:
                await store.add(_batch(stored))
                stored += BATCH
            _checkpoint(path)
            await store.add(_batch(stored))
            stored += BATCH
            pages[size] = _wal_pages_of(path)
        assert pages[20_000] <= pages[1_000] + 5, pages
        assert len(await store.query(limit=5)) == 5
    finally:
        await store.close()


def _to_revision(conn: Connection, revision: str) -> None:
    config = AlembicConfig()
    config.set_main_option("script_location", str(resources.files("elicitgate.audit") / "migrations"))
    config.attributes["connection"] = conn
    command.upgrade(config, revision)


async def store_at_0001_migrated(url: str) -> None:
    """A store made by revision 0001 and holding records, opened by `AuditStore.open`: migrated to the head with its
    records, in their order, and the migrated schema is the one the queries expect, `id` in no index."""
    engine = create_async_engine(async_url(url))
    records = [record for n in range(3) for record in varied_records(f"old-{n}")]
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_to_revision, "0001")
            await conn.exec_driver_sql(  # rows as 0001's store held them, in an order their ids do not have
                f"INSERT INTO {TABLE} (id, server, mode, state, source, attempts, created_at, ended_at, duration_s) "
                "VALUES " + ", ".join(
                    f"('{record.id}', '{record.server}', '{record.mode}', '{record.state}', '{record.source}', "
                    f"{n}, '2026-11-2{n % 10} 12:00:00', '2026-11-27 12:00:00', 0.5)"
                    for n, record in enumerate(records)))
    finally:
        await engine.dispose()
    store = await AuditStore.open(url)
    try:
        kept = await store.query()
        async with store.engine.connect() as conn:
            version = (await conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
            diff = await conn.run_sync(lambda c: compare_metadata(
                MigrationContext.configure(c, opts={"version_table": VERSION_TABLE}), metadata))
            key = await conn.run_sync(lambda c: inspect(c).get_pk_constraint(TABLE)["constrained_columns"])
            indexed = await conn.run_sync(lambda c: [i["column_names"] for i in inspect(c).get_indexes(TABLE)])
        await store.add(varied_records("new"))
        assert [row["server"] for row in await store.query(server="new")] == ["new"] * len(varied_records("new"))
    finally:
        await store.close()
    assert version == HEAD_REVISION and diff == []
    assert key == [] and sorted(indexed) == [["created_at"], ["ended_at"], ["server"], ["state"]]
    by_attempts = sorted(kept, key=lambda row: row["attempts"])
    assert [(row["id"], row["server"]) for row in by_attempts] == [(record.id, record.server) for record in records]


async def test_a_sqlite_store_at_0001_is_migrated_with_its_records(tmp_path):
    await store_at_0001_migrated(f"sqlite:///{tmp_path / 'audit.db'}")


async def test_a_sqlite_batch_takes_two_trips_to_the_drivers_thread(tmp_path, monkeypatch):
    """Each trip waits for a turn of the event loop (busy serving the calls) and for the GIL: through SQLAlchemy's
    connection a batch took five (cursor, INSERT, cursor closed, commit, the pool's rollback), 100-250 ms a batch of
    100 at 1,300 questions a second, and the writer fell behind in bursts (bench/README.md)."""
    import aiosqlite

    trips: list[str] = []
    execute = aiosqlite.Connection._execute  # pyright: ignore[reportPrivateUsage]

    async def counted(self: aiosqlite.Connection, fn: object, *args: object, **kwargs: object) -> object:
        trips.append(getattr(fn, "__name__", repr(fn)))
        return await execute(self, fn, *args, **kwargs)

    store = await AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        await store.add(_batch(0))  # opens the writer's connection
        monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
        await store.add(_batch(BATCH))
        monkeypatch.undo()
        assert trips == ["executemany", "commit"]
        assert len(await store.query()) == 2 * BATCH
    finally:
        await store.close()


async def test_a_batch_whose_connection_broke_fails_and_the_next_is_stored_on_a_fresh_one(tmp_path):
    """The writer keeps one SQLite connection: a batch that fails on it (here the driver's connection closed under it,
    as a driver thread gone would) gives it up, so the records after it are stored, not dropped with every batch."""
    store = await AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        await store.add(_batch(0))
        await store._driver.close()  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(Exception):  # noqa: B017, PT011 - whatever the driver raises for a closed connection
            await store.add(_batch(BATCH))
        await store.add(_batch(2 * BATCH))
        assert len(await store.query(limit=3 * BATCH)) == 2 * BATCH
    finally:
        await store.close()
