"""A 2026-07-28 client's task on a 2025-11-25 task server: the tasks extension in front, core tasks behind.

The client declared `io.modelcontextprotocol/tasks` on its `tools/call`, and the tool's server runs it as a
2025-11-25 task (`execution.taskSupport` `optional` or `required`). The gateway sends the call with
`task: {ttl}`, answers the client with the extension's `CreateTaskResult` under the relayed task's id
(`<server>/<random>`, router.tasks), and waits for the end in `tasks/result` on the client's behalf. The
task's questions (`elicitation/create` with `related-task`) reach the broker as every task question does
(`Gateway.on_server_request`), whose origin here is the parked call: they wait in the task as its
`inputRequests` (bridging.task_extension) until a `tasks/update` answers them. `tasks/cancel` cancels the
wait, and the upstream task with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from elicitgate.bridging.rounds import ParkedCall
from elicitgate.bridging.task_extension import declares_tasks
from elicitgate.elicitation.broker import Broker
from elicitgate.json_shapes import is_mapping
from elicitgate.router.forward import forward
from elicitgate.router.tasks import RelayedTask, TaskTable
from elicitgate.seams import Origin
from elicitgate.upstreams.link import UpstreamLink

CANCEL_TIMEOUT = 5.0
"""Seconds the upstream has to acknowledge `tasks/cancel` once the client cancelled the task."""


def bridged(call: Origin, link: UpstreamLink, tool: Mapping[str, Any] | None) -> ParkedCall | None:
    """The parked call to run as an upstream task, when its client takes tasks and the tool runs as one."""
    if not isinstance(call, ParkedCall) or call.tasks is None or not declares_tasks(call.raw_capabilities()):
        return None
    primary = link.primary
    if primary is None or primary.era != "handshake" or tool is None:
        return None
    execution = tool.get("execution")
    support = execution.get("taskSupport") if is_mapping(execution) else None
    return call if support in ("optional", "required") else None


async def run_upstream_task(
    broker: Broker, link: UpstreamLink, table: TaskTable, park: ParkedCall, params: Mapping[str, Any],
    *, max_rounds: int,
) -> dict[str, Any]:
    """The call made as an upstream task; its final result (the parked call's outcome)."""
    assert park.tasks is not None  # `bridged` said so
    park.tasks.admit(park.peer)
    server = link.name
    sent = table.request_params(server, park.peer, {**params, "task": {}})
    conn = await link.connection_for(park.peer)
    table.creating(conn)
    relayed: RelayedTask | None = None
    try:
        created = await forward(broker, link, park, "tools/call", sent, max_rounds=max_rounds)
        created, relayed = table.created(server, conn, park.peer, created)
    finally:
        table.created_done(conn, relayed)  # its status notifications: the client polls or listens
    if relayed is None:
        return created  # the server ran it at once
    task = created["task"]
    park.task_seed = {"task_id": relayed.id, "ttl_ms": task.get("ttl") if isinstance(task.get("ttl"), int) else None}
    park.hand_over()
    upstream = {"taskId": relayed.upstream_id}
    try:
        result = await conn.request("tasks/result", upstream, origin=park,
                                    timeout=max(relayed.expires - anyio.current_time(), 0.001))
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT):
            await conn.request("tasks/cancel", upstream, timeout=CANCEL_TIMEOUT)
        raise
    finally:
        broker.stop_for_call(park, "the task ended")
        table.forget(relayed)
    return table.with_public_meta(relayed, result)
