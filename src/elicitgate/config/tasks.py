"""`tasks`: the tasks the gateway relays (docs/tasks.md)."""

from __future__ import annotations

from pydantic import Field

from elicitgate.config.base import Strict


class TasksConfig(Strict):
    """2025-11-25 tasks relayed between clients and the upstreams that run them (docs/tasks.md)."""

    max_ttl: float = Field(default=3600.0, gt=0)
    """Seconds a task may be kept: a `task.ttl` asked for above it is lowered to it (the spec lets the
    receiver choose), and the gateway forgets a task this long after it was created at the latest."""
