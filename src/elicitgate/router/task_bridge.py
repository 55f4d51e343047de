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
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.bridging.envelope import modern_capabilities
from elicitgate.bridging.input_requests import PASSTHROUGH_INPUT_REQUESTS, relay_input_request
from elicitgate.bridging.rounds import ParkedCall
from elicitgate.capabilities import TASKS_EXTENSION, declares_tasks
from elicitgate.contracts import Origin
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.router.forward import forward
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.tasks import RELATED_TASK, RelayedTask, TaskTable
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.link import UpstreamLink

CANCEL_TIMEOUT = 5.0
"""Seconds the upstream has to acknowledge `tasks/cancel` once the client cancelled the task."""


def bridged(call: Origin, link: UpstreamLink, tool: Mapping[str, Any] | None) -> ParkedCall | None:
    """The parked call to run as an upstream task, when its client takes tasks and the tool runs as one."""
    if not isinstance(call, ParkedCall) or call.tasks is None or not declares_tasks(call.raw_capabilities()):
        return None
    if serves_extension(link):
        return call  # a 2026-07-28 task server decides itself, per call
    primary = link.primary
    if primary is None or primary.era != "handshake" or tool is None:
        return None
    execution = tool.get("execution")
    support = execution.get("taskSupport") if is_mapping(execution) else None
    return call if support in ("optional", "required") else None


async def run_upstream_task(
    inbound: InboundRouter, link: UpstreamLink, table: TaskTable, park: ParkedCall, params: Mapping[str, Any],
    *, max_rounds: int,
) -> JsonObject:
    """The call made as an upstream task; its final result (the parked call's outcome)."""
    assert park.tasks is not None  # `bridged` said so
    park.tasks.admit(park.peer)
    if serves_extension(link):
        return await _follow_modern(inbound, link, table, park, params)
    server = link.name
    sent = table.request_params(server, park.peer, {**params, "task": {}})
    conn = await link.connection_for(park.peer)
    table.creating(conn)
    relayed: RelayedTask | None = None
    try:
        created = await forward(inbound, link, park, "tools/call", sent, max_rounds=max_rounds)
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
        inbound.call_ended(park, "the task ended")
        table.forget(relayed)
    return table.with_public_meta(relayed, result)


async def _follow_modern(
    inbound: InboundRouter, link: UpstreamLink, table: TaskTable, park: ParkedCall, params: Mapping[str, Any]
) -> JsonObject:
    """The call on a 2026-07-28 task server: the upstream's task is followed as for a handshake-era client
    (`modern_task_request`), its questions put to the parked call, which waits in the client's task."""
    created, relayed = await _create_on_modern(link, table, park, {**params, "task": {}},
                                               timeout=link.config.request_timeout)
    task = created.get("task")
    if relayed is None or not is_mapping(task):
        return created  # the server ran it at once
    park.task_seed = {"task_id": relayed.id, "ttl_ms": task.get("ttl") if isinstance(task.get("ttl"), int) else None}
    park.hand_over()
    try:
        return await modern_task_request(inbound, table, relayed, park, "tasks/result",
                                         max(relayed.expires - anyio.current_time(), 0.001))
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT):
            await relayed.connection.request("tasks/cancel", {"taskId": relayed.upstream_id}, timeout=CANCEL_TIMEOUT,
                                             client_capabilities=_with_extension(park))
        raise
    finally:
        table.forget(relayed)


async def _input_response(
    inbound: InboundRouter, conn: UpstreamConnection, call: Origin, key: str, request: Mapping[str, Any],
    related: Mapping[str, Any],
) -> JsonObject:
    """The answer to one of a 2026-07-28 upstream task's `inputRequests`, its request naming the client's task:
    an elicitation through the broker, sampling or roots relayed to the client. -32021 when the client did not
    declare sampling or roots; -32017 for a method the gateway cannot relay."""
    method = request.get("method")
    asked = request.get("params")
    params = {**(asked if is_mapping(asked) else {})}
    params["_meta"] = {**(params.get("_meta") or {}), **related}
    if method == "elicitation/create":
        try:
            return await inbound.task_question(conn.server, call, params, timeout=conn.config.elicitation_timeout)
        except MCPError:
            # Refused, or no valid answer in the attempts: the task hears "cancel" and goes on (an
            # `inputResponses` value is a result, not an error); the audit trail has why.
            return {"action": "cancel"}
    if isinstance(method, str) and (capability := PASSTHROUGH_INPUT_REQUESTS.get(method)) is not None:
        relayed = await relay_input_request(call, method, params, server=conn.server,
                                            timeout=inbound.broker.human_timeout(conn.config.elicitation_timeout))
        if relayed is not None:
            return relayed
        raise errors.gateway_error(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"the task on {conn.server!r} asked for {method}, which this client did not declare: it was cancelled",
            server=conn.server, inputRequest=key, method=method, requiredCapabilities={capability: {}},
            fix=f"declare the {capability} capability in initialize to run this tool as a task",
        )
    raise errors.gateway_error(
        errors.ELICITATION_UNDELIVERABLE,
        f"the task on {conn.server!r} asked for input the gateway cannot relay ({method!r}): it was cancelled",
        server=conn.server, inputRequest=key, method=method,
    )


# -- the reverse: a handshake-era client's 2025-11-25 task on a 2026-07-28 task server ---------------------

TERMINAL = ("completed", "failed", "cancelled")
MAX_POLL = 1.0
"""Seconds between two `tasks/get` of a 2026-07-28 upstream at most, whatever `pollIntervalMs` it suggests."""


def serves_extension(link: UpstreamLink) -> bool:
    """A 2026-07-28 upstream that declared the tasks extension in `server/discover`."""
    primary = link.primary
    negotiated = primary.negotiated if primary is not None else None
    if primary is None or primary.era != "modern" or negotiated is None:
        return False
    extensions = negotiated.capabilities.get("extensions")
    return is_mapping(extensions) and TASKS_EXTENSION in extensions


def _with_extension(call: Origin) -> JsonObject:
    return {**modern_capabilities(call), "extensions": {TASKS_EXTENSION: {}}}


def _as_core_task(task: Mapping[str, Any]) -> JsonObject:
    """An extension `Task` (or `DetailedTask`) as a 2025-11-25 `Task`: `ttl`, `pollInterval`, no payload."""
    core = {k: task[k] for k in ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt") if k in task}
    core["ttl"] = task.get("ttlMs")
    if isinstance(task.get("pollIntervalMs"), int):
        core["pollInterval"] = task["pollIntervalMs"]
    return core


async def create_on_modern(
    link: UpstreamLink, table: TaskTable, call: Origin, params: Mapping[str, Any], *, timeout: float | None
) -> JsonObject:
    """`_create_on_modern`'s result as the handshake-era client gets it."""
    return (await _create_on_modern(link, table, call, params, timeout=timeout))[0]


async def _create_on_modern(
    link: UpstreamLink, table: TaskTable, call: Origin, params: Mapping[str, Any], *, timeout: float | None
) -> tuple[JsonObject, RelayedTask | None]:
    """A task-augmented `tools/call` of a handshake-era client, to a 2026-07-28 upstream with the extension: the
    call declares the extension instead of carrying `task`, and the flat `CreateTaskResult` becomes the core one."""
    server = link.name
    sent = {k: v for k, v in table.request_params(server, call.peer, params).items() if k != "task"}
    conn = await link.connection_for(call.peer)
    result = await conn.request("tools/call", sent, origin=call, timeout=timeout,
                                client_capabilities=_with_extension(call))
    if result.get("resultType") != "task":
        return {k: v for k, v in result.items() if k != "resultType"}, None  # the server ran it at once
    created, relayed = table.created(server, conn, call.peer, {"task": _as_core_task(result)})
    if relayed is not None:
        relayed.modern = True
    return created, relayed


async def modern_task_request(
    inbound: InboundRouter, table: TaskTable, relayed: RelayedTask, call: Origin, method: str, timeout: float | None,
) -> JsonObject:
    """`tasks/get`, `tasks/cancel`, `tasks/result` of a handshake-era client for a task of a 2026-07-28 upstream.
    `tasks/result` follows the task with `tasks/get` until it ends: each of its `inputRequests` goes through the
    broker to this client (`related-task` naming the client's id) and its answer back with `tasks/update`."""
    conn = relayed.connection
    caps = _with_extension(call)
    upstream = {"taskId": relayed.upstream_id}

    async def ask(name: str, extra: Mapping[str, Any] | None = None) -> JsonObject:
        return await conn.request(name, {**upstream, **(extra or {})}, origin=call, timeout=timeout,
                                  client_capabilities=caps)

    if method == "tasks/cancel":
        await ask("tasks/cancel")
    if method != "tasks/result":
        return table.public_task(relayed, _as_core_task(await ask("tasks/get")))
    answered: set[str] = set()
    related = {RELATED_TASK: {"taskId": relayed.id}}
    told: tuple[Any, Any] | None = None
    while True:
        task = await ask("tasks/get")
        if call.era == "handshake" and (seen := (task["status"], task.get("statusMessage"))) != told:
            # The upstream's own status and statusMessage, as a 2025-11-25 server would have told them.
            told = seen
            await call.notify("notifications/tasks/status", table.public_task(relayed, _as_core_task(task)))
        if task["status"] in TERMINAL:
            break
        requests = task.get("inputRequests") if task["status"] == "input_required" else None
        for key, request in (requests.items() if is_mapping(requests) else ()):
            if key in answered or not is_mapping(request):
                continue
            try:
                answer = await _input_response(inbound, conn, call, key, request, related)
            except BaseException:
                # Nobody can answer it: the upstream's task is cancelled rather than left waiting until its ttl.
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT):
                    await conn.request("tasks/cancel", upstream, timeout=CANCEL_TIMEOUT, client_capabilities=caps)
                raise
            answered.add(key)
            await ask("tasks/update", {"inputResponses": {key: answer}})
        poll = task.get("pollIntervalMs")
        await anyio.sleep(min(poll / 1000, MAX_POLL) if isinstance(poll, int | float) and poll > 0 else MAX_POLL)
    table.ended(relayed)
    if task["status"] == "completed":
        result = task.get("result")
        return {**(result if is_mapping(result) else {}), "_meta": related}
    error = task.get("error")
    if task["status"] == "failed" and is_mapping(error) and isinstance(error.get("code"), int):
        raise MCPError(code=error["code"], message=str(error.get("message", "")), data=error.get("data"))
    raise errors.gateway_error(errors.ELICITATION_FAILED, f"the task was {task['status']}", taskId=relayed.id,
                               status=task["status"])
