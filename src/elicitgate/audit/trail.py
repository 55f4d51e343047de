"""The gateway's side of the audit store: `record` never waits (a bounded queue), one writer task
stores what is queued in batches, and a cleanup task applies `audit.retention_days`.

The store opens when it is first needed (the first record, a read of the admin API, or the first
retention check), unless `audit.open_at_start`: SQLAlchemy and the engine are ~19 MiB of RSS and
~0.3 s of CPU that a gateway whose users are never asked anything does not spend."""

from __future__ import annotations

import importlib
import logging
import time
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from elicitgate import heap
from elicitgate.audit.record import AuditRecord
from elicitgate.config import AuditConfig
from elicitgate.errors import AuditStoreError
from elicitgate.metrics import AUDIT_DROPPED, AUDIT_WRITTEN

if TYPE_CHECKING:
    from elicitgate.audit.store import AuditStore

logger = logging.getLogger(__name__)

BATCH = 500
WAKE = 100
"""Records queued that wake the writer before `LINGER` has passed (it then takes up to `BATCH`): a busy gateway
stores a wave of ends while the next comes, and the records waiting stay few (bench/README.md, "The audit trail's
pace": each is a few hundred bytes of arena memory a burst takes and keeps)."""
LINGER = 1.0
"""Seconds the writer waits for more records after the first of a batch: one transaction for many ends. A commit
costs the gateway more CPU than the rows in it (SQLite's pages, the driver thread's round trips): at 0.25 s a
busy stdio gateway stored ~25 records a commit and the trail cost ~250 us of CPU per elicitation, at 1 s ~70
(`bench/README.md`, "The stdio face's elicitation"). `close` stores what is queued at once."""
CLEANUP_EVERY = 3600.0
REOPEN_BACKOFF = (1.0, 60.0)
DROP_LOG_EVERY = 60.0


class AuditTrail:
    def __init__(self, config: AuditConfig) -> None:
        self.config = config
        self.store: AuditStore | None = None
        """Set once the writer has opened it."""
        self._queue: deque[AuditRecord] = deque()
        """Records queued for the writer (at most `audit.queue_size`), besides the one handed to it as it waited."""
        self._queue_size = config.queue_size
        self._waiting: anyio.Event | None = None
        """Set while the writer waits for a record: the next one is handed to it (`_handed`), not queued."""
        self._handed: AuditRecord | None = None
        self._stopped: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        """The writer's, shielded from the gateway's cancellation: `close` ends it."""
        self._closed = False
        self._closing: anyio.Event | None = None
        self._wanted: anyio.Event | None = None
        self._wanted_unset: anyio.Event | None = None
        """`_wanted` until a record has set it (then None): `record` sets it once, not for every record."""
        self._opened: anyio.Event | None = None
        self._queued = 0
        """Records sent and not yet taken into a batch."""
        self._batch_full: anyio.Event | None = None
        """While the writer gathers a batch: set once `WAKE` records are queued, or at `close`."""
        self._dropped_since_log = 0
        self._last_drop_log = float("-inf")

    @property
    def store_content(self) -> bool:
        return self.config.store_content

    def record(self, record: AuditRecord) -> None:
        """Queue one record; when the queue is full it is dropped (counted, logged), never waited for.

        A deque, not a memory object stream: two C calls per record here and none in the writer, which takes a
        batch at once (a stream's `send_nowait` and `receive_nowait` were Python calls for every record)."""
        if self._closed:
            self._drop("stopped")
            return
        if self._waiting is not None:  # the writer waits: the record is its own, as a stream hands it to a receiver
            self._handed = record
            self._waiting.set()
            self._waiting = None
        elif len(self._queue) < self._queue_size:
            self._queue.append(record)
        else:
            self._drop("queue_full")
            return
        self._queued += 1
        if self._wanted_unset is not None:
            self._wanted_unset.set()
            self._wanted_unset = None
        if self._queued >= WAKE and self._batch_full is not None:
            self._batch_full.set()

    def _drop(self, why: str) -> None:
        AUDIT_DROPPED.labels(reason=why).inc()
        self._dropped_since_log += 1
        now = time.monotonic()
        if now - self._last_drop_log >= DROP_LOG_EVERY:
            logger.warning("audit record dropped (%s); %d dropped since the last warning", why, self._dropped_since_log)
            self._last_drop_log, self._dropped_since_log = now, 0

    async def opened(self, timeout: float) -> AuditStore | None:
        """The store, opened now if it was not yet; None when it cannot be opened within `timeout` seconds
        (the writer logs why) or the trail is not running."""
        if self.store is None and self._wanted is not None and self._opened is not None:
            self._wanted.set()
            with anyio.move_on_after(timeout):
                await self._opened.wait()
        return self.store

    async def run(self) -> None:
        """The writer: opens the store once it is wanted (retrying while it cannot), then stores batches
        until `close`.

        Only `close` stops it: when the gateway stops by cancellation (Ctrl-C, SIGTERM on stdio) its task
        group is cancelled before `close` runs, and a writer cancelled with it would lose what is queued, the
        whole queue while the store is still opening."""
        if self._closed:
            return  # closed before it started: nothing can be queued
        closing, wanted = anyio.Event(), anyio.Event()
        self._stopped, self._closing, self._wanted, self._opened = anyio.Event(), closing, wanted, anyio.Event()
        self._wanted_unset = wanted
        if self.config.open_at_start or self._queue:
            wanted.set()
        try:
            with anyio.CancelScope(shield=True) as self._scope:
                with anyio.move_on_after(CLEANUP_EVERY):  # retention applies to a gateway nobody is asked through, too
                    await wanted.wait()
                if closing.is_set() and not self._queue:
                    return  # closed before anything needed the store
                store = self.store = await self._open(closing)
                self._opened.set()
                if store is None:
                    return
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._cleanup, store)
                    await self._write(store)
                    tg.cancel_scope.cancel()
        finally:
            if self.store is not None:
                with anyio.CancelScope(shield=True):
                    await self.store.close()
            self._stopped.set()

    async def _open(self, closing: anyio.Event) -> AuditStore | None:
        """The open `AuditStore`, or None when `close` came first."""
        # SQLAlchemy and Alembic take a while to import: not on the event loop, which is serving already.
        module = await anyio.to_thread.run_sync(importlib.import_module, "elicitgate.audit.store")
        backoff = REOPEN_BACKOFF[0]
        while True:
            try:
                store = await module.AuditStore.open(self.config.url)
            except AuditStoreError as exc:
                logger.error("%s; retrying in %.0f s (records queue up to audit.queue_size)", exc, backoff)
                with anyio.move_on_after(backoff):
                    await closing.wait()
                    return None
                backoff = min(backoff * 2, REOPEN_BACKOFF[1])
            else:
                logger.info("audit trail at %s", module.describe(self.config.url))
                heap.settle()  # SQLAlchemy's modules and the engine stay for the process
                return store

    async def _next(self) -> AuditRecord | None:
        """The next record, waited for; None once the trail is closed and everything queued was taken. One loop turn
        first, as a memory object stream's `receive` takes one."""
        await anyio.lowlevel.checkpoint()
        if self._queue:
            return self._queue.popleft()
        if self._closed:
            return None
        waiting = self._waiting = anyio.Event()
        try:
            await waiting.wait()
        finally:
            self._waiting = None
        handed, self._handed = self._handed, None
        return handed  # None: `close` woke it

    async def _write(self, store: AuditStore) -> None:
        while (first := await self._next()) is not None:
            # The writer wakes once per batch, not once per record: it waits for the batch to fill or for
            # `LINGER` to pass, then takes what is queued.
            if self._queued < WAKE and not self._closed:  # closing: what is queued is stored now, unlingered
                full = self._batch_full = anyio.Event()
                with anyio.move_on_after(LINGER):
                    await full.wait()
                self._batch_full = None
            batch = [first]
            queue = self._queue
            if len(queue) < BATCH:
                batch.extend(queue)
                queue.clear()
            else:
                batch.extend(queue.popleft() for _ in range(BATCH - 1))
            count = len(batch)
            self._queued -= count
            del first
            try:
                await store.add(batch)  # empties the list once bound: the records go before the driver's round trips
                AUDIT_WRITTEN.inc(count)
            except Exception:
                logger.exception("could not store %d audit record(s)", count)
                AUDIT_DROPPED.labels(reason="write_failed").inc(count)

    async def _cleanup(self, store: AuditStore) -> None:
        while True:
            cutoff = datetime.now(UTC) - timedelta(days=self.config.retention_days)
            try:
                removed = await store.purge(cutoff)
                if removed:
                    logger.info("audit retention: removed %d record(s) that ended before %s", removed, cutoff)
            except Exception:
                logger.exception("audit retention cleanup failed")
            await anyio.sleep(CLEANUP_EVERY)

    def _stop_taking(self) -> None:
        """Records from now on are dropped; a writer waiting for one is woken to end."""
        self._closed = True
        if self._waiting is not None:
            self._waiting.set()

    async def close(self, timeout: float = 10.0) -> None:
        """Stop taking records and wait (at most `timeout`) until the writer has stored what is queued; then
        the writer stops, done or not."""
        with anyio.CancelScope(shield=True):  # the gateway calls this as it stops, maybe cancelled already
            # Records of elicitations that ended just now are queued a turn later (`Broker._after_answer`).
            await anyio.lowlevel.checkpoint()
        self._stop_taking()
        if self._batch_full is not None:
            self._batch_full.set()  # what is queued is written now, not after `LINGER`
        if self._stopped is None or self._closing is None or self._wanted is None:
            return  # the writer never started
        self._closing.set()
        self._wanted.set()
        with anyio.move_on_after(timeout, shield=True):
            await self._stopped.wait()
        if self._scope is not None:
            self._scope.cancel()
