"""The audit store on a real PostgreSQL (a throwaway cluster of Debian's package, tests/pg.py)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from mcp import Client

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.schema import HEAD_REVISION, VERSION_TABLE, metadata
from elicitgate.audit.store import AuditStore
from tests.audit_helpers import TYPED, ScriptedHuman, audit_jsonl, stored, stored_both_ways
from tests.conftest import ROOT, free_port, gateway_stdio, stdio_server, write_config
from tests.pg import postgres_url  # noqa: F401 - the fixture
from tests.test_unit_audit_store_growth import store_at_0001_migrated

pytestmark = pytest.mark.anyio


@pytest.mark.timeout(300)
async def test_a_gateway_records_into_postgresql_and_audit_list_reads_it(tmp_path, postgres_url):  # noqa: F811
    side = free_port()  # its /metrics says when the records are stored
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"url": postgres_url}, http={"hosted_listen": f"127.0.0.1:{side}"})
    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=ScriptedHuman()) as client:
        for word in ("accept-me", "decline-me", "reask-me"):
            await client.call_tool("x__elicit", {"message": word})
        await stored(f"http://127.0.0.1:{side}", 3)
    records = audit_jsonl(config, "--server", "x")
    assert [(r["state"], r["attempts"]) for r in records[-3:]] == [("accepted", 1), ("declined", 1), ("accepted", 2)]
    assert all(r["tool"] == "x__elicit" and r["content"] is None for r in records)
    since = records[-2]["created_at"]
    assert [r["state"] for r in audit_jsonl(config, "--since", since)] == ["declined", "accepted"]
    assert [r["state"] for r in audit_jsonl(config, "--state", "declined")] == ["declined"]
    store = await AuditStore.open(postgres_url)
    try:
        async with store.engine.connect() as conn:
            dump = str((await conn.exec_driver_sql("SELECT * FROM elicitgate_audit")).all())
    finally:
        await store.close()
    assert TYPED not in dump


async def test_postgresql_schema_is_the_migrated_one_and_retention_applies(postgres_url):  # noqa: F811
    store = await AuditStore.open(postgres_url)
    try:
        async with store.engine.connect() as conn:
            diff = await conn.run_sync(lambda c: compare_metadata(
                MigrationContext.configure(c, opts={"version_table": VERSION_TABLE}), metadata))
            version = (await conn.exec_driver_sql("SELECT version_num FROM elicitgate_audit_version")).scalar()
        assert diff == [] and version == HEAD_REVISION
        now = datetime.now(UTC)
        old = AuditRecord(server="retention", mode="form", state="accepted", reason="r",
                          created_at=now - timedelta(days=40), ended_at=now - timedelta(days=40))
        new = AuditRecord(server="retention", mode="url", state="declined", reason="r", created_at=now, ended_at=now)
        await store.add([old, new])
        assert await store.purge(now - timedelta(days=30)) == 1
        (kept,) = await store.query(server="retention")
        assert kept["id"] == new.id and kept["created_at"] == now.replace(microsecond=now.microsecond)
    finally:
        await store.close()


async def test_a_batch_is_stored_in_postgresql_as_sqlalchemys_insert_stored_it(postgres_url):  # noqa: F811
    batch, core = await stored_both_ways(postgres_url)
    assert len(batch) == 3 and [row[1:] for row in batch] == [row[1:] for row in core]
    assert {row[0] for row in batch} == {"batch"}


@pytest.mark.timeout(300)
def test_gateways_starting_together_migrate_in_turn(tmp_path, postgres_url):  # noqa: F811
    """Two processes opening a fresh database at once: the advisory lock makes one wait for the other."""
    fresh = postgres_url.rsplit("/", 1)[0] + "/together"
    create = [sys.executable, "-c", "import asyncio, asyncpg\n"
              f"async def main():\n    c = await asyncpg.connect({postgres_url!r})\n"
              "    await c.execute('CREATE DATABASE together')\n    await c.close()\nasyncio.run(main())"]
    subprocess.run(create, check=True, timeout=60)
    config = write_config(tmp_path, {}, audit={"url": fresh})
    argv = [sys.executable, "-m", "elicitgate.cli", "audit", "list", "--format", "jsonl", "--config", str(config)]
    procs = [
        subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out == ""


async def test_a_postgresql_store_at_0001_is_migrated_with_its_records(postgres_url):  # noqa: F811
    import asyncpg

    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute("CREATE DATABASE from_0001")
    finally:
        await admin.close()
    await store_at_0001_migrated(postgres_url.rsplit("/", 1)[0] + "/from_0001")
