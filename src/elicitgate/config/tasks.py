"""`tasks`: the tasks the gateway relays (docs/tasks.md)."""

from __future__ import annotations

from pydantic import Field

from elicitgate.config.base import Strict


class TasksConfig(Strict):
    """Tasks relayed between clients and the upstreams that run them, and the gateway's own (docs/tasks.md)."""

    max_ttl: float = Field(default=3600.0, gt=0)
    """Seconds a task may be kept: a `task.ttl` asked for above it is lowered to it (the spec lets the
    receiver choose), and the gateway forgets a task this long after it was created at the latest."""
    keep_finished: float = Field(default=300.0, gt=0)
    """Seconds a task that ended (completed, failed, cancelled) is kept after its end, for its owner to fetch
    its result or status, before the gateway forgets it (never past its ttl): a finished task's result does
    not stay in memory for the whole of `max_ttl`."""
    hand_over_after: float | None = Field(default=10.0, gt=0)
    """Seconds a 2026-07-28 `tools/call` that declared the `io.modelcontextprotocol/tasks` extension may wait
    with nothing to return (its upstream still working, its question on a hosted page) before the gateway
    answers it with a task instead; a question sent to a hosted page hands one over at once. `null`: the
    gateway makes no tasks itself (upstream tasks are still bridged)."""
