"""What every section of the configuration shares: strict keys, fair shares, the state directory."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def default_share(total: int) -> int:
    """One principal's share of a resource of `total` when its `*_per_principal` key is unset: half, at least 1.
    A principal at its share leaves the other half to everyone else; one user alone never notices it below
    the total's own defaults (docs/security.md, "Fair shares")."""
    return max(1, total // 2)


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "elicitgate"
