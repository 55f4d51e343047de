"""The audit table: one row per elicitation end or refusal.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "elicitgate_audit",
        sa.Column("id", sa.String(64), primary_key=True),
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
    )
    for column in ("created_at", "ended_at", "server", "state"):
        op.create_index(f"ix_elicitgate_audit_{column}", "elicitgate_audit", [column])


def downgrade() -> None:
    op.drop_table("elicitgate_audit")
