"""Shared by the audit and metrics tests: a scripted human, the audit CLI, and /metrics as numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from prometheus_client.parser import text_string_to_metric_families

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
