"""`elicitgate audit list|export`: read the audit store named by a config file, gateway running or not."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import typer

from elicitgate.audit.record import FIELDS, as_json, parse_filters
from elicitgate.config import load_config
from elicitgate.config_error import ConfigError
from elicitgate.console import err, say
from elicitgate.json_shapes import JsonObject

audit_app = typer.Typer(help="Read the audit trail (works without a running gateway).", no_args_is_help=True)

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="the gateway's config file (its audit.url)")]
StateOption = Annotated[
    str | None, typer.Option("--state", help="accepted, declined, cancelled, timed_out, failed or refused")
]
ServerOption = Annotated[str | None, typer.Option("--server", help="only this upstream server's records")]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="only records created at or after this ISO 8601 time (UTC if no zone)")
]
TABLE_COLUMNS = ("created_at", "state", "server", "tool", "client", "mode", "attempts", "duration_s", "reason")


def _rows(
    config: Path, state: str | None, server: str | None, since: str | None, limit: int | None
) -> list[JsonObject]:
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        say(exc.render(), "red")
        raise typer.Exit(2) from None
    try:
        filters = parse_filters(state, server, since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    from elicitgate.audit.store import AuditStore
    from elicitgate.errors import AuditStoreError

    async def read() -> list[JsonObject]:
        store = await AuditStore.open(cfg.audit.url)
        try:
            return await store.query(**filters, limit=limit)
        finally:
            await store.close()

    try:
        return [as_json(row) for row in anyio.run(read)]
    except AuditStoreError as exc:
        say(str(exc), "red")
        raise typer.Exit(1) from None


def _jsonl(rows: list[JsonObject], out: Any) -> None:
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


@audit_app.command("list")
def list_records(
    config: ConfigOption,
    state: StateOption = None,
    server: ServerOption = None,
    since: SinceOption = None,
    format: Annotated[
        Literal["table", "jsonl"], typer.Option("--format", help="table, or one JSON object per line")
    ] = "table",
    limit: Annotated[int, typer.Option("--limit", min=1, help="the newest N records (oldest first)")] = 100,
) -> None:
    """The latest audit records: one per elicitation that ended, one per refusal."""
    rows = _rows(config, state, server, since, limit)
    if format == "jsonl":
        _jsonl(rows, sys.stdout)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"elicitgate audit: {len(rows)} record(s)")
    for column in TABLE_COLUMNS:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if row[c] is None else str(row[c]) for c in TABLE_COLUMNS))
    Console().print(table)


@audit_app.command("export")
def export_records(
    config: ConfigOption,
    state: StateOption = None,
    server: ServerOption = None,
    since: SinceOption = None,
    format: Annotated[Literal["jsonl", "csv"], typer.Option("--format")] = "jsonl",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="file to write (default: stdout)")] = None,
) -> None:
    """Every matching record, oldest first, as JSON lines or CSV."""
    rows = _rows(config, state, server, since, None)
    with (output.open("w", encoding="utf-8", newline="") if output else _stdout()) as out:
        if format == "jsonl":
            _jsonl(rows, out)
        else:
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            for row in rows:
                writer.writerow({**row, "content": None if row["content"] is None else json.dumps(row["content"])})
    if output:
        err().print(f"elicitgate audit: {len(rows)} record(s) written to {output}")


class _stdout:
    """`sys.stdout` as a context manager that does not close it."""

    def __enter__(self) -> Any:
        return sys.stdout

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()
