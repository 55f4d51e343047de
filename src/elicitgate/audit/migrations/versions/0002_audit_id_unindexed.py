"""The audit table without its primary key on `id`: records are appended, never looked up by id.

`id` is an elicitation's random id (`uuid4().hex`): its index took every new row on a random page, so that a batch of
500 rows wrote ~500 pages of the index once the table outgrew SQLite's page cache, and the cost of a row grew with the
store (on SQLite with 3 million rows: 80-150 us a row against 11-20 us without it; bench/README.md, "A million
questions: the audit writer's pace"). On SQLite the table is copied (a primary key cannot be dropped in place), rows
in their order; on PostgreSQL the constraint is dropped.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLE = "elicitgate_audit"
COPY = "_elicitgate_audit_0002"
INDEXED = ("created_at", "ended_at", "server", "state")


def _columns(*, id_is_key: bool) -> list[sa.Column[object]]:
    """The columns of revision 0001, `id` keyed or not."""
    return [
        sa.Column("id", sa.String(64), primary_key=id_is_key, nullable=False),
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("tool", sa.Text),
        sa.Column("client", sa.Text),
        sa.Column("client_id", sa.String(64)),
        sa.Column("principal", sa.Text),
        sa.Column("request_id", sa.String(255)),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("detail", sa.Text),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("gateway_reason", sa.String(64)),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("responder", sa.String(64)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("content", sa.JSON),
    ]


def _copy_table(*, id_is_key: bool) -> None:
    """SQLite: the table made again with the columns `_columns` gives, its rows copied in their order."""
    columns = _columns(id_is_key=id_is_key)
    names = ", ".join(column.name for column in columns)
    op.execute(f"DROP TABLE IF EXISTS {COPY}")  # left by a copy that was interrupted
    op.create_table(COPY, *columns)
    op.execute(f"INSERT INTO {COPY} ({names}) SELECT {names} FROM {TABLE} ORDER BY rowid")
    op.drop_table(TABLE)  # and its indexes
    op.rename_table(COPY, TABLE)
    for column in INDEXED:
        op.create_index(f"ix_{TABLE}_{column}", TABLE, [column])


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _copy_table(id_is_key=False)
    else:
        key = sa.inspect(op.get_bind()).get_pk_constraint(TABLE)["name"] or f"{TABLE}_pkey"  # PostgreSQL's name
        op.drop_constraint(key, TABLE, type_="primary")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _copy_table(id_is_key=True)
    else:
        op.create_primary_key(f"{TABLE}_pkey", TABLE, ["id"])
