"""The audit trail: one durable record per elicitation end and per refusal, read back with `elicitgate audit`."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.audit import trail as trail_module
from elicitgate.audit.record import AuditRecord
from elicitgate.audit.store import AuditStore
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import AuditConfig
from elicitgate.metrics import AUDIT_DROPPED
from tests.audit_helpers import TYPED, ScriptedHuman, audit_cli, audit_jsonl, stored, value
from tests.conftest import PY, free_port, gateway_stdio, inprocess_gateway, stdio_server, write_config

pytestmark = pytest.mark.anyio

NESTED = {"type": "object", "properties": {"address": {"type": "object"}}}
SECRET_FORM = {"type": "object", "properties": {"password": {"type": "string"}}}


async def error_code(client: Client, tool: str, args: dict) -> int:
    """The JSON-RPC error the elicitation ended with: a handshake-era upstream reports it in its result
    (`report_errors`); with a 2026-07-28 upstream the gateway fails the client's call with it."""
    try:
        result = await client.call_tool(tool, {**args, "report_errors": True})
    except MCPError as exc:
        return exc.error.code
    return json.loads(result.content[0].text)["error"]["code"]


def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


async def test_a_mode_the_gateway_does_not_know_is_counted_as_other(tmp_path):
    """The refusal's `mode` label is the server's word only for form and url: any string a server sends
    would otherwise be a new time series, without bound. The audit record keeps what it sent."""
    side = free_port()
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server")},
                          audit={"url": sqlite_url(tmp_path)}, http={"hosted_listen": f"127.0.0.1:{side}"})
    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=ScriptedHuman()) as client:
        for mode in ("weird-1", "weird-2"):
            assert await error_code(client, "x__elicit", {"mode": mode}) == -32602
        metrics = await stored(f"http://127.0.0.1:{side}", 2)
    assert value(metrics, "elicitgate_elicitations_total", server="x", mode="other", state="refused") == 2
    assert "weird" not in metrics
    assert [r["mode"] for r in audit_jsonl(config)] == ["weird-1", "weird-2"]

def test_a_stdio_gateway_stopped_with_sigterm_stores_its_queued_records_first(tmp_path):
    """A client stops a stdio server by closing its stdin, then SIGTERM when it has not exited (2 s in the mcp
    SDKs): the records the gateway holds while its audit store still opens are stored before it exits. The
    SIGTERM here comes as soon as the refusal is answered, before the store (opened at first use) can be."""
    config = write_config(tmp_path, {"x": stdio_server("tests.peers.py_server", era="handshake")},
                          audit={"url": sqlite_url(tmp_path)})
    proc = subprocess.Popen([PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        initialize = {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                      "clientInfo": {"name": "raw", "version": "1"}}
        call = {"name": "x__elicit", "arguments": {"mode": "weird", "report_errors": True}}
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        while json.loads(line := proc.stdout.readline() or b"{}").get("id") != 2:  # the refusal, answered
            assert line, proc.stderr.read().decode()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
    assert [(r["mode"], r["state"]) for r in audit_jsonl(config)] == [("weird", "refused")]


@pytest.mark.timeout(300)  # two upstreams, a 1 s deadline, a CLI process: slow on a loaded machine
async def test_every_end_and_refusal_is_recorded_and_counted_stdio(tmp_path):
    """A scripted run through `serve --stdio`: the audit store and the side server's /metrics tell what happened."""
    side = free_port()
    config = write_config(
        tmp_path,
        {"x": stdio_server("tests.peers.py_server"),
         "slow": stdio_server("tests.peers.py_server", elicitation_timeout=1)},
        elicitation={"sensitive_fields": "block"},
        audit={"url": sqlite_url(tmp_path)},
        http={"hosted_listen": f"127.0.0.1:{side}"},
    )
    human = ScriptedHuman()
    async with Client(gateway_stdio(config), mode="legacy", elicitation_callback=human) as client:
        for word in ("accept-me", "decline-me", "cancel-me", "reask-me"):
            await client.call_tool("x__elicit", {"message": word})
        assert await error_code(client, "slow__elicit", {"message": "slow"}) == -32016
        assert await error_code(client, "x__elicit", {"schema": NESTED}) == -32602
        assert await error_code(client, "x__elicit", {"schema": SECRET_FORM}) == -32018
        metrics = await stored(f"http://127.0.0.1:{side}", 7)
    records = audit_jsonl(config)
    assert [(r["server"], r["state"]) for r in records] == [
        ("x", "accepted"), ("x", "declined"), ("x", "cancelled"), ("x", "accepted"), ("slow", "timed_out"),
        ("x", "refused"), ("x", "refused"),
    ]
    accepted, declined, cancelled, reasked, timed, bad_schema, secret = records
    assert accepted["reason"] == "user accepted" and accepted["attempts"] == 1 and reasked["attempts"] == 2
    assert declined["reason"] == "user chose decline" and cancelled["reason"] == "user chose cancel"
    assert timed["reason"] == "no answer before the deadline" and timed["attempts"] == 0
    assert 0.9 <= timed["duration_s"] < 30
    assert (bad_schema["reason"], secret["reason"]) == ("invalid_schema", "sensitive_blocked")
    assert "asks for secrets" in secret["detail"]
    for record in records:
        assert record["tool"] == f"{record['server']}__elicit"
        assert record["client"] == "mcp" and record["client_id"].startswith("c") and record["request_id"]
        assert record["mode"] == "form" and record["source"] == "upstream" and record["content"] is None
        assert record["ended_at"] >= record["created_at"]
    assert {r["responder"] for r in records[:5]} == {"client"}
    # Never a value a person typed, with `audit.store_content` off.
    assert TYPED.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("audit.db*"))

    def count(state: str, server: str = "x") -> float:
        return value(metrics, "elicitgate_elicitations_total", server=server, mode="form", state=state)

    assert (count("accepted"), count("declined"), count("cancelled"), count("refused")) == (2, 1, 1, 2)
    assert count("timed_out", "slow") == 1
    assert value(metrics, "elicitgate_refusals_total", server="x", reason="invalid_schema") == 1
    assert value(metrics, "elicitgate_refusals_total", server="x", reason="sensitive_blocked") == 1
    assert value(metrics, "elicitgate_elicitation_reasks_total", server="x") == 1
    assert value(metrics, "elicitgate_elicitation_duration_seconds_count", server="x", mode="form",
                 state="accepted") == 2
    assert value(metrics, "elicitgate_elicitation_duration_seconds_count", server="slow", mode="form",
                 state="timed_out") == 1
    assert value(metrics, "elicitgate_elicitation_duration_seconds_sum", server="slow", mode="form",
                 state="timed_out") >= 0.9
    assert value(metrics, "elicitgate_elicitations_pending", server="x") == 0
    assert value(metrics, "elicitgate_upstream_up", server="x") == 1
    assert value(metrics, "elicitgate_upstream_up", server="slow") == 1
    assert value(metrics, "elicitgate_request_duration_seconds_count", method="tools/call", face="stdio") == 7
    assert value(metrics, "elicitgate_request_duration_seconds_sum", method="tools/call", face="stdio") >= 0.9


async def test_store_content_keeps_answers_but_never_secret_fields(tmp_path):
    form = {"type": "object", "properties": {"answer": {"type": "string"}, "api_token": {"type": "string"}}}
    config = {
        "mcpServers": {"x": {"command": PY, "args": ["-m", "tests.peers.py_server"]}},
        "audit": {"url": sqlite_url(tmp_path), "store_content": True},
    }

    async def human(ctx, params):
        from mcp_types import ElicitResult

        return ElicitResult(action="accept", content={"answer": TYPED, "api_token": "tok-never-kept"})

    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            await client.call_tool("x__elicit", {"schema": form})
    store = await AuditStore.open(config["audit"]["url"])
    try:
        (row,) = await store.query()
    finally:
        await store.close()
    assert row["state"] == "accepted" and row["content"] == {"answer": TYPED}
    assert b"tok-never-kept" not in b"".join(p.read_bytes() for p in tmp_path.glob("audit.db*"))


def _record(server: str, state: str, ended: datetime, **extra) -> AuditRecord:
    return AuditRecord(server=server, mode="form", state=state, reason="r", created_at=ended - timedelta(seconds=2),
                       ended_at=ended, **extra)


async def _old_and_new_records(url: str) -> None:
    now = datetime.now(UTC)
    store = await AuditStore.open(url)
    await store.add([_record("old", "accepted", now - timedelta(days=3)), _record("new", "accepted", now)])
    await store.close()


async def _wait_until_only_new_remains(url: str) -> None:
    store = await AuditStore.open(url)
    try:
        with anyio.fail_after(60):
            while [r["server"] for r in await store.query()] != ["new"]:
                await anyio.sleep(0.05)
    finally:
        await store.close()


async def test_retention_removes_records_older_than_retention_days_when_the_store_opens(tmp_path):
    url = sqlite_url(tmp_path)
    await _old_and_new_records(url)
    config = {"mcpServers": {}, "audit": {"url": url, "retention_days": 2, "open_at_start": True}}
    async with inprocess_gateway(config):
        await _wait_until_only_new_remains(url)


async def test_retention_applies_to_a_gateway_nobody_uses_at_its_first_hourly_check(tmp_path, monkeypatch):
    monkeypatch.setattr(trail_module, "CLEANUP_EVERY", 0.2)  # the hour, shortened
    url = sqlite_url(tmp_path)
    await _old_and_new_records(url)
    async with inprocess_gateway({"mcpServers": {}, "audit": {"url": url, "retention_days": 2}}):
        await _wait_until_only_new_remains(url)


async def test_the_audit_store_and_its_directory_are_private_whatever_the_umask(tmp_path, monkeypatch):
    """With `bridging.state_keys` configured no key file is written first, so the store makes the state
    directory itself; the usual 022 umask, or 0, must not leave it or the answers readable by others."""
    config = {"mcpServers": {}, "bridging": {"state_keys": ["k" * 32]}, "audit": {"open_at_start": True}}
    for umask, state in ((0o022, tmp_path / "a"), (0o000, tmp_path / "b"), (0o022, tmp_path / "b")):
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        folder = state / "elicitgate"
        files = [folder / "audit.db", folder / "audit.db-wal", folder / "audit.db-shm"]
        old = os.umask(umask)
        try:
            async with inprocess_gateway(config):  # opens (makes) the store at start
                store = await AuditStore.open(f"sqlite:///{files[0]}")
                await store.add([_record("x", "accepted", datetime.now(UTC))])  # SQLite's -wal and -shm exist now
                assert [oct(stat.S_IMODE(f.stat().st_mode)) for f in files] == ["0o600"] * 3
                await store.close()
        finally:
            os.umask(old)
        assert oct(stat.S_IMODE(folder.stat().st_mode)) == oct(stat.S_IMODE(state.stat().st_mode)) == "0o700"
        for f in files:  # as an older version left them: the next start narrows them
            if f.exists():
                f.chmod(0o644)


def test_a_full_queue_drops_and_counts_instead_of_waiting(caplog):
    trail = AuditTrail(AuditConfig(url="sqlite:///unused.db", queue_size=2))  # no writer: nothing drains it
    before = AUDIT_DROPPED.labels(reason="queue_full")._value.get()
    now = datetime.now(UTC)
    with caplog.at_level(logging.WARNING, logger="elicitgate.audit.trail"):
        for _ in range(3):
            trail.record(_record("x", "accepted", now))
    assert AUDIT_DROPPED.labels(reason="queue_full")._value.get() == before + 1
    assert "audit record dropped (queue_full)" in caplog.text


async def test_a_cancelled_gateway_with_a_store_that_never_opens_still_stops_within_the_close_timeout(monkeypatch):
    """The writer outlives the gateway's cancellation (what is queued is stored first), but not `close`'s
    timeout: a store that hangs while opening (a database that accepts and never answers) holds no stop."""
    from elicitgate.audit import store as store_module

    async def hangs(cls, url: str) -> AuditStore:
        await anyio.sleep_forever()
        raise AssertionError

    monkeypatch.setattr(store_module.AuditStore, "open", classmethod(hangs))
    trail = AuditTrail(AuditConfig(url="sqlite:///unused.db"))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail.run)
            trail.record(_record("x", "accepted", datetime.now(UTC)))
            tg.cancel_scope.cancel()  # the gateway stops by cancellation (Ctrl-C), then closes its trail
            await trail.close(timeout=0.5)
    assert trail.store is None


async def test_records_queued_while_a_batch_is_being_stored_are_stored_at_close_without_lingering(
    tmp_path, monkeypatch
):
    """`close` while the writer is storing a batch: what was queued meanwhile is stored at once, not after the
    writer's `LINGER` (which `close` would not wait out: the records would be lost)."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    add = AuditStore.add
    writing, release = anyio.Event(), anyio.Event()

    async def gated(self: AuditStore, batch: list[AuditRecord]) -> None:
        if not writing.is_set():
            monkeypatch.setattr(trail_module, "LINGER", 3600.0)  # from the second batch on, only close ends a wait
            writing.set()
            await release.wait()
        await add(self, batch)

    monkeypatch.setattr(trail_module, "LINGER", 0.01)
    monkeypatch.setattr(AuditStore, "add", gated)
    trail = AuditTrail(AuditConfig(url=url))
    now = datetime.now(UTC)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail.run)
            trail.record(_record("first", "accepted", now))
            await writing.wait()
            trail.record(_record("second", "accepted", now))
            closed = anyio.Event()  # `close` has stopped taking records
            stop_taking = trail._stop_taking  # pyright: ignore[reportPrivateUsage]

            def stop_and_tell() -> None:
                stop_taking()
                closed.set()

            monkeypatch.setattr(trail, "_stop_taking", stop_and_tell)
            tg.start_soon(trail.close, 30.0)
            await closed.wait()
            release.set()
    store = await AuditStore.open(url)
    try:
        assert sorted(r["server"] for r in await store.query()) == ["first", "second"]
    finally:
        await store.close()


@pytest.mark.timeout(300)  # seven CLI processes, each importing SQLAlchemy and Alembic
async def test_audit_list_and_export_filter_without_a_running_gateway(tmp_path):
    url = sqlite_url(tmp_path)
    config = write_config(tmp_path, {}, audit={"url": url})
    t0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    store = await AuditStore.open(url)
    await store.add([
        _record("a", "accepted", t0, tool="a__book", attempts=1),
        _record("b", "refused", t0 + timedelta(hours=1)),
        _record("a", "declined", t0 + timedelta(hours=2)),
    ])
    await store.close()
    every = audit_jsonl(config)
    assert [r["state"] for r in every] == ["accepted", "refused", "declined"]
    assert list(every[0]) == ["id", "server", "tool", "client", "client_id", "principal", "request_id", "mode", "state",
                              "reason", "detail", "source", "gateway_reason", "attempts", "responder", "created_at",
                              "ended_at", "duration_s", "content"]
    assert (every[0]["created_at"], every[0]["ended_at"], every[0]["duration_s"]) == (
        "2026-11-20T11:59:58.000Z", "2026-11-20T12:00:00.000Z", 2.0)
    # Filters combine; a time without zone is UTC, one with a zone is converted.
    assert [r["state"] for r in audit_jsonl(config, "--server", "a", "--since", "2026-11-20T12:59:00")] == ["declined"]
    refused = audit_jsonl(config, "--state", "refused", "--since", "2026-11-20T13:58:00+01:00")
    assert [r["server"] for r in refused] == ["b"]
    assert [r["state"] for r in audit_jsonl(config, "--limit", "1")] == ["declined"]
    table = audit_cli(config, "list")
    assert table.returncode == 0 and "a__book" in table.stdout and "refused" in table.stdout
    out = tmp_path / "declined.csv"
    assert audit_cli(config, "export", "--format", "csv", "--state", "declined", "--output", str(out)).returncode == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("id,server,tool") and len(lines) == 2 and ",declined," in lines[1]
    done = audit_cli(config, "list", "--since", "yesterday")
    assert done.returncode == 2 and "ISO 8601" in done.stderr

async def test_sqlite_schema_is_the_migrated_one(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from elicitgate.audit.schema import VERSION_TABLE, metadata

    store = await AuditStore.open(sqlite_url(tmp_path))
    try:
        async with store.engine.connect() as conn:
            diff = await conn.run_sync(lambda c: compare_metadata(
                MigrationContext.configure(c, opts={"version_table": VERSION_TABLE}), metadata))
    finally:
        await store.close()
    assert diff == []


def test_head_revision_is_alembics_head():
    from importlib import resources

    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from elicitgate.audit.schema import HEAD_REVISION

    config = Config()
    config.set_main_option("script_location", str(resources.files("elicitgate.audit") / "migrations"))
    assert ScriptDirectory.from_config(config).get_heads() == [HEAD_REVISION]


def test_a_store_at_head_opens_without_importing_alembic(tmp_path):
    """Alembic runs when the store needs a migration (a new store), not at every start of the gateway."""
    script = (
        "import asyncio, sys\n"
        "from elicitgate.audit.store import AuditStore\n"
        "async def main():\n"
        f"    store = await AuditStore.open({sqlite_url(tmp_path)!r})\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print('alembic' in sys.modules)\n"
    )
    runs = [subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [run.stdout.strip() for run in runs] == ["True", "False"], [run.stderr for run in runs]


async def test_the_gateways_own_question_is_recorded_as_source_gateway(tmp_path):
    """`demo__confirm` without its required `question`: the gateway asks for it, then the server asks."""
    url = sqlite_url(tmp_path)
    config = {"mcpServers": {"demo": {"command": PY, "args": ["-m", "elicitgate.demo.server"], "era": "handshake"}},
              "audit": {"url": url}}

    async def human(ctx, params):
        from mcp_types import ElicitResult

        schema = params.requested_schema
        wanted = schema.get("properties", {}) if isinstance(schema, dict) else schema.properties
        return ElicitResult(action="accept", content={"question": "Ship it?"} if "question" in wanted else {"ok": True})

    async with inprocess_gateway(config) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("demo__confirm", {})
            assert "accepted" in result.content[0].text
    store = await AuditStore.open(url)
    try:
        rows = await store.query()
    finally:
        await store.close()
    assert [(r["source"], r["gateway_reason"], r["state"], r["tool"]) for r in rows] == [
        ("gateway", "missing_arguments", "accepted", "demo__confirm"),
        ("upstream", None, "accepted", "demo__confirm"),
    ]


def test_audit_cli_shows_a_config_error_literally(tmp_path):
    """Config values reach the error text: one that looks like rich markup is shown as it is, not a traceback."""
    config = write_config(tmp_path, {"a": {"command": "x", "era": "[/]"}})
    done = audit_cli(config, "list")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "mcpServers.a.era" in done.stderr and "'[/]'" in done.stderr


async def test_the_sqlite_page_cache_is_bounded_below_sqlites_default(tmp_path):
    """The gateway only appends records and reads a few of the newest: SQLite's default page cache (2,000 KiB per
    connection) filled as the store grew and stayed in the gateway's heap, +1.8 MiB of RSS over the first ~6,000
    questions (bench/README.md); every connection of the store gets the smaller bound."""
    from elicitgate.audit.store import SQLITE_CACHE_KIB

    store = await AuditStore.open(sqlite_url(tmp_path))
    try:
        async with store.engine.connect() as conn:
            cache_size = (await conn.exec_driver_sql("PRAGMA cache_size")).scalar_one()
    finally:
        await store.close()
    assert cache_size == -SQLITE_CACHE_KIB and SQLITE_CACHE_KIB <= 256


async def test_wake_records_queued_are_stored_before_the_linger_passes(tmp_path, monkeypatch):
    """The writer takes a batch once `WAKE` records wait, not after `LINGER` (an hour here): records sent one at a
    time, the writer waiting for more after the first, are stored as the hundredth comes."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    add = AuditStore.add
    stored_batches: list[int] = []
    stored_once = anyio.Event()

    async def counted(self: AuditStore, batch: list[AuditRecord]) -> None:
        stored_batches.append(len(batch))
        await add(self, batch)
        stored_once.set()

    monkeypatch.setattr(trail_module, "LINGER", 3600.0)
    monkeypatch.setattr(AuditStore, "add", counted)
    trail = AuditTrail(AuditConfig(url=url))
    now = datetime.now(UTC)
    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail.run)
            try:  # the writer outlives a failure here until `close` (it is shielded): close it whatever happens
                await anyio.lowlevel.checkpoint()  # the writer runs
                trail.record(_record("s0", "accepted", now))
                assert await trail.opened(30.0) is not None
                for i in range(1, trail_module.WAKE):
                    await anyio.lowlevel.checkpoint()  # the writer is waiting for more (or the hour) meanwhile
                    trail.record(_record(f"s{i}", "accepted", now))
                await stored_once.wait()
            finally:
                await trail.close(10.0)
    assert stored_batches == [trail_module.WAKE]
