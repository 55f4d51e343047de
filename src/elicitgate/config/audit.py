"""`audit`: where the audit trail is kept and for how long (docs/operations.md)."""

from __future__ import annotations

from pydantic import Field, field_validator

from elicitgate.config.base import Strict, state_dir


class AuditConfig(Strict):
    """The durable audit trail: one record per elicitation end and per refusal (docs/operations.md)."""

    enabled: bool = True
    url: str = Field(default_factory=lambda: f"sqlite:///{state_dir() / 'audit.db'}")
    """`sqlite:///PATH` (a file), or `postgresql://USER:PASSWORD@HOST:PORT/DB` for a shared store."""
    retention_days: float = Field(default=90.0, gt=0)
    """Records whose elicitation ended longer ago than this are deleted (checked hourly)."""
    store_content: bool = False
    """Keep accepted answers' values; fields detected as secrets are never kept."""
    queue_size: int = Field(default=10_000, gt=0)
    """Records waiting for the writer; when full, new ones are dropped (counted and logged), never waited for."""
    open_at_start: bool = False
    """Open the store (and run its migrations) as the gateway starts, so that a wrong URL or an unreachable
    database is logged at once. By default it opens when first needed: the first record, a read of the admin
    API's audit trail, or the first hourly retention check (SQLAlchemy is ~19 MiB a gateway that never asks
    anything does not spend)."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite://", "postgresql://", "postgres://", "postgresql+")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return value
