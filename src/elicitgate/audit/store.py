"""The audit store: a SQLAlchemy async engine on SQLite (aiosqlite) or PostgreSQL (asyncpg), its schema
kept by the Alembic migrations shipped in `migrations/`, run whenever a store is opened."""

from __future__ import annotations

import asyncio
import contextlib
import operator
import os
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import Connection, delete, event, insert, inspect, select, text
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.schema import HEAD_REVISION, VERSION_TABLE, UtcDateTime, records, sqlite_text
from elicitgate.errors import AuditStoreError
from elicitgate.json_shapes import JsonObject

_MIGRATION_LOCK = 0x656C6963  # a PostgreSQL advisory lock: two gateways starting at once migrate in turn
_MIGRATION_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.Lock] = weakref.WeakKeyDictionary()


def async_url(url: str) -> str:
    """The configured URL with the async driver SQLAlchemy needs (`sqlite:///x` -> `sqlite+aiosqlite:///x`)."""
    parsed = make_url(url)
    driver = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}
    name = driver.get(parsed.drivername, parsed.drivername)
    return parsed.set(drivername=name).render_as_string(hide_password=False)


def describe(url: str) -> str:
    """The URL fit for a log line or an error message."""
    return make_url(url).render_as_string(hide_password=True)


class AuditStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = BatchInsert(engine.dialect)
        self._writer: AsyncConnection | None = None
        """SQLite: the connection `add` keeps, and its aiosqlite connection (`_driver`)."""
        self._driver: Any = None

    @classmethod
    async def open(cls, url: str) -> AuditStore:
        """Connect and bring the schema up to date."""
        parsed = make_url(async_url(url))
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            private_sqlite_file(Path(parsed.database).expanduser())
        engine = create_async_engine(parsed, pool_pre_ping=parsed.get_backend_name() != "sqlite")
        if parsed.get_backend_name() == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        store = cls(engine)
        try:
            with store.whole_transactions():
                async with _migration_lock(), engine.begin() as conn:
                    await conn.run_sync(_migrate)
        except Exception as exc:
            await engine.dispose()
            raise AuditStoreError(f"cannot open the audit store {describe(url)}: {exc}") from exc
        return store

    def whole_transactions(self) -> anyio.CancelScope:
        """On SQLite, a transaction runs to its end even when the gateway stops meanwhile: cancelled inside
        one, SQLAlchemy's aiosqlite connection never finishes closing, and the process never exits."""
        return anyio.CancelScope(shield=self.engine.dialect.name == "sqlite")

    async def add(self, batch: Sequence[AuditRecord]) -> None:
        """Store `batch` in one transaction, one INSERT (the driver's executemany: one round trip to its thread).
        A list is emptied once its rows are bound (the writer's batch: its records are let go while the rows are
        stored, and the next batch's take their memory)."""
        rows = self._insert.rows(batch)
        if self._insert.sql is not None and isinstance(batch, list):
            batch.clear()
        with self.whole_transactions():
            if self._insert.sql is not None and self.engine.dialect.driver == "aiosqlite":
                await self._add_sqlite(self._insert.sql, rows)
                return
            async with self.engine.begin() as conn:
                if self._insert.sql is None:
                    await conn.execute(insert(records), [record.row() for record in batch])
                else:
                    await conn.exec_driver_sql(self._insert.sql, rows)

    async def _add_sqlite(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """The rows in one transaction on a connection kept for it, by aiosqlite's own `executemany` and `commit`: two
        round trips to the driver's thread. Through SQLAlchemy a batch took five (a cursor made, the INSERT, the cursor
        closed, the commit, the pool's rollback as the connection went back), each waiting for a turn of an event
        loop serving the calls and for the GIL: ~100-250 ms a batch at 1,300 questions a second, the writer's whole
        time (bench/README.md, "A million questions: the audit writer's pace")."""
        if self._writer is None:
            self._writer = await self.engine.connect()
            self._driver = (await self._writer.get_raw_connection()).driver_connection
        try:
            await self._driver.executemany(sql, rows)
            await self._driver.commit()
        except BaseException:
            # The next batch opens a fresh connection: this one may be broken (a closed file, a driver thread gone),
            # so the pool is told to throw it away, not to keep it; that discards the failed transaction too.
            writer, self._writer, self._driver = self._writer, None, None
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await writer.invalidate()
                with contextlib.suppress(Exception):
                    await writer.close()
            raise

    async def query(
        self,
        *,
        state: str | None = None,
        server: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[JsonObject]:
        """Rows in the order they were created (the newest `limit` of them when `limit` is given)."""
        stmt = select(records)
        if state is not None:
            stmt = stmt.where(records.c.state == state)
        if server is not None:
            stmt = stmt.where(records.c.server == server)
        if since is not None:
            stmt = stmt.where(records.c.created_at >= since)
        order = (records.c.created_at.desc(), records.c.id.desc())
        if limit is not None:
            stmt = stmt.order_by(*order).limit(limit)
        else:
            stmt = stmt.order_by(records.c.created_at, records.c.id)
        async with self.engine.connect() as conn:
            rows = [dict(row) for row in (await conn.execute(stmt)).mappings()]
        if limit is not None and not newest_first:
            rows.reverse()
        return rows

    async def purge(self, ended_before: datetime) -> int:
        """Delete the records of elicitations that ended before `ended_before`; returns how many."""
        removed = 0
        with self.whole_transactions():
            async with self.engine.begin() as conn:
                result = await conn.execute(delete(records).where(records.c.ended_at < ended_before))
                removed = result.rowcount or 0
        return removed

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.close()
        await self.engine.dispose()


class BatchInsert:
    """The audit table's INSERT compiled once for a dialect, and records bound as its driver takes them: a tuple of
    values per record, each through the bind processor SQLAlchemy's own INSERT applies to its column (on SQLite, the
    times through `schema.sqlite_text`, which writes the same text).

    `conn.execute(insert(records), dicts)` took a dict per record, made another per row and ran every processor
    through its generic machinery: ~37 us of CPU per record on SQLite, on the event loop that serves the requests
    (bench/README.md, "The audit trail's pace"). With a driver that takes named parameters (the gateway's own,
    aiosqlite and asyncpg, take them by position) `sql` is None and the store takes SQLAlchemy's way."""

    def __init__(self, dialect: Dialect) -> None:
        compiled = insert(records).compile(dialect=dialect)
        names = tuple(compiled.positiontup or ())
        self.sql: str | None = None
        self._values: Callable[[AuditRecord], tuple[Any, ...]] = lambda _record: ()
        self._processors: tuple[tuple[int, Callable[[Any], Any], Any], ...] = ()
        if not compiled.positional or sorted(names) != sorted(records.c.keys()):
            return
        self.sql = compiled.string
        self._values = operator.attrgetter(*names)  # the record's fields and `duration_s`, by the columns' names
        processors: list[tuple[int, Callable[[Any], Any], Any]] = []
        for index, name in enumerate(names):
            column_type = records.c[name].type
            process = column_type.dialect_impl(dialect).bind_processor(dialect)
            if dialect.name == "sqlite" and isinstance(column_type, UtcDateTime):
                process = sqlite_text  # the same text (tests/test_unit_audit_pace.py): 2.0 against 3.4 us
            if process is not None:  # with what it makes of None, made once (the JSON column's "null")
                processors.append((index, process, process(None)))
        self._processors = tuple(processors)

    def rows(self, batch: Sequence[AuditRecord]) -> list[tuple[Any, ...]]:
        """The batch's rows as `sql`'s parameters (none when `sql` is None)."""
        if self.sql is None:
            return []
        values, processors = self._values, self._processors
        rows: list[tuple[Any, ...]] = []
        for record in batch:
            row = list(values(record))
            for index, process, null in processors:
                value = row[index]
                row[index] = null if value is None else process(value)
            rows.append(tuple(row))
        return rows


def _migration_lock() -> anyio.Lock:
    """Alembic keeps its running migration in a module global: one migration at a time in a process."""
    loop = asyncio.get_running_loop()
    lock = _MIGRATION_LOCKS.get(loop)
    if lock is None:
        lock = _MIGRATION_LOCKS[loop] = anyio.Lock()
    return lock


def _migrate(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
    if _revisions(conn) == [HEAD_REVISION]:
        return
    from alembic import command
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(resources.files("elicitgate.audit") / "migrations"))
    config.attributes["connection"] = conn
    command.upgrade(config, "head")


SQLITE_CACHE_KIB = 128
"""SQLite's page cache per connection, in KiB (its default: 2,000). The gateway appends records and reads a few of
the newest: a larger cache only fills, and its 2 MB stayed in the gateway's heap for good (bench/README.md). An
append touches the last pages of the table and of its four indexes, ~20 pages: 256 KiB filled to ~180 KiB over the
first thousand questions; at 128 a row costs the writer the same CPU and a retention delete of 30,000 rows too (at
96, twice; bench/README.md, "A million questions: what fills in")."""

SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_sqlite_file(path: Path) -> None:
    """The SQLite file, and the directories made for it, for the gateway's user only (0600, 0700), whatever
    the umask: the store keeps what people answered. SQLite gives its -wal and -shm files the database
    file's mode; a file or side file an older version left readable by others is narrowed too."""
    missing: list[Path] = []
    folder = path.parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is narrowed by the umask, never widened: a umask of 0 too
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    for file in (path, *(path.with_name(path.name + side) for side in SQLITE_SIDE_FILES)):
        try:
            os.chmod(file, 0o600)
        except FileNotFoundError:
            pass
        except PermissionError:  # another user's store that this one may only read (`elicitgate audit list`)
            pass


def _revisions(conn: Connection) -> list[str]:
    """The revisions the store's version table records (none for a new store)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return []
    return [row[0] for row in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))]


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL: `elicitgate audit list` reads while the gateway writes; busy_timeout: neither fails at once on a lock.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")  # with WAL: no fsync per commit, still never a corrupt file
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
    cursor.close()
