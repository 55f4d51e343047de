"""Shared by the audit and metrics tests: a scripted human, the audit CLI, /metrics as numbers, and the gateway's text
log lines at a time that stands still."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.schema import records
from elicitgate.audit.store import AuditStore
from elicitgate.logs import configure_logging
from tests.conftest import ROOT

TYPED = "typed-by-ada-7f3k"
"""A value a person types: it must never reach a log line or the audit store (unless store_content)."""


class ScriptedHuman:
    """Answers by the word in the message: accept-me, decline-me, cancel-me, reask-me (a wrong answer first),
    slow (never answers); ts-form (the TypeScript server's form), ts-reask."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        message = params.message
        self.asked.append(message)
        if "decline-me" in message:
            return types.ElicitResult(action="decline")
        if "cancel-me" in message:
            return types.ElicitResult(action="cancel")
        if "reask-me" in message:
            wrong = sum("reask-me" in m for m in self.asked) == 1
            return types.ElicitResult(action="accept", content={"answer": 5 if wrong else TYPED})
        if "ts-reask" in message:
            wrong = sum("ts-reask" in m for m in self.asked) == 1
            return types.ElicitResult(action="accept", content={"name": "" if wrong else TYPED})
        if "ts-form" in message:
            return types.ElicitResult(action="accept", content={"name": TYPED, "age": 36})
        if "slow" in message:
            await anyio.sleep(60)  # the gateway's deadline comes first and cancels this request
        return types.ElicitResult(action="accept", content={"answer": TYPED})


def audit_cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elicitgate.cli", "audit", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
    )


def audit_jsonl(config: Path, *args: str) -> list[dict[str, Any]]:
    done = audit_cli(config, "list", "--format", "jsonl", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """`/metrics` as {(sample name, labels): value}."""
    response = httpx2.get(f"{url}/metrics")
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


WRITTEN = "elicitgate_audit_records_written_total"


async def stored(url: str, count: int, timeout: float = 120) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """`/metrics` once the gateway at `url` says it has stored `count` audit records. Its writer stores them in
    the background, the first ones once the store has opened (at first use: SQLAlchemy, the migration), seconds
    on a busy machine: a test that reads the store waits for this before the client stops the gateway."""
    with anyio.fail_after(timeout):
        while value(metrics := await anyio.to_thread.run_sync(scrape, url), WRITTEN) < count:
            await anyio.sleep(0.05)
    return metrics


def value(metrics: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return metrics.get((name, frozenset(labels.items())), 0.0)


def varied_records(server: str) -> list[AuditRecord]:
    now = datetime(2026, 11, 26, 23, 5, 7, 123456, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    return [
        AuditRecord(server=server, mode="form", state="accepted", reason="user accepted", created_at=now,
                    ended_at=now + timedelta(seconds=1.2345), tool="demo__confirm", client="mcp", client_id="c1",
                    principal="ada", request_id="7", attempts=2, responder="client",
                    content={"name": "Zoë \u2028", "n": 3, "nested": [1.5, None, True]}),
        AuditRecord(server=server, mode="url", state="refused", reason="rate_limited", detail="too many",
                    created_at=now.astimezone(plus_two), ended_at=now.astimezone(plus_two), source="gateway",
                    gateway_reason="confirmation"),
        AuditRecord(server=server, mode="form", state="timed_out", reason="deadline",
                    created_at=now - timedelta(days=400), ended_at=now, content={}),
    ]


async def _raw_rows(store: AuditStore, server: str) -> list[tuple[Any, ...]]:
    """The rows as the driver gives them back (no SQLAlchemy type on the way), without their ids, oldest first."""
    async with store.engine.connect() as conn:
        found = await conn.exec_driver_sql(f"SELECT * FROM elicitgate_audit WHERE server = '{server}'")
        rows = [tuple(row) for row in found]
    return sorted((row[1:] for row in rows), key=repr)


async def stored_both_ways(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The same records stored by `AuditStore.add` and by SQLAlchemy's INSERT of their rows, as stored."""
    store = await AuditStore.open(url)
    try:
        await store.add(varied_records("batch"))
        async with store.engine.begin() as conn:
            await conn.execute(insert(records), [record.row() for record in varied_records("core")])
        batch, core = await _raw_rows(store, "batch"), await _raw_rows(store, "core")
    finally:
        await store.close()
    return batch, core


@contextmanager
def text_lines_at_a_fixed_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The gateway's text logging on a buffer, at a time that stands still; the root logger as it was after."""
    stream = io.StringIO()
    root = logging.getLogger()
    kept = (list(root.handlers), root.level)
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(time, "time", lambda: 1764198307.8765)
    monkeypatch.setattr(time, "time_ns", lambda: 1764198307876543210)
    configure_logging("info")
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept[0]:
            root.addHandler(handler)
        root.setLevel(kept[1])
