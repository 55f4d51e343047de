"""2025-11-25 tasks relayed through the gateway: which client owns each task, where it runs, its id.

A task runs on the upstream session that created it (a client's own connection under `per_session`).
The client sees the gateway's id for it, `<server>/<random>`, never the upstream's: two upstreams (or two
sessions of one) cannot collide, and an id cannot be guessed. A task belongs to the principal that
created it (`http.auth`), else to the client session; to anyone else it does not exist (-32602, as the
spec says for an unknown id). An entry ends with its ttl (at most `tasks.max_ttl`) or its connection, and
`tasks.keep_finished` after the gateway saw the task end (a terminal status, or its result), by a timer.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp_types import INVALID_PARAMS, ServerTasksCapability

from elicitgate import errors
from elicitgate.config import GatewayConfig
from elicitgate.contracts import DownstreamPeer
from elicitgate.deadlines import Deadlines
from elicitgate.elicitation.limits import pending_limit
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.upstreams.connection import UpstreamConnection

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The `_meta` key naming the task a request, notification or result belongs to."""
TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list")
TERMINAL = frozenset({"completed", "failed", "cancelled"})
MAX_EARLY = 16
"""Status notifications kept per connection while its task-augmented calls are in flight (see `early`)."""


@dataclass(eq=False)
class RelayedTask:
    """One upstream task as a client of the gateway knows it."""

    id: str
    """The id the client sees."""
    server: str
    upstream_id: str
    connection: UpstreamConnection
    owner: DownstreamPeer
    expires: float
    """anyio clock: when the gateway forgets it (its ttl, at most `tasks.max_ttl`)."""
    modern: bool = False
    """A task of a 2026-07-28 upstream's extension, followed for a handshake-era client (`router.task_bridge`)."""
    on_behalf: bool = False
    """Run by the gateway for a client that made a plain call (`router.task_runner`): the client knows no task,
    so it is neither listed nor reachable by `tasks/*`; its status changes go to `on_status`."""
    on_status: Callable[[Mapping[str, Any]], Awaitable[None]] | None = None
    ended: bool = False
    """Its status was seen terminal: it no longer counts as open against the client's limit."""

    def saw(self, task: Mapping[str, Any]) -> None:
        """A `Task` (a status notification, a `tasks/get` result) of this task went by."""
        if task.get("status") in TERMINAL:
            self.ended = True

    def owned_by(self, peer: DownstreamPeer) -> bool:
        """The client that created it, or another session of the same principal."""
        return self.owner is peer or (self.owner.principal is not None and self.owner.principal == peer.principal)

    @property
    def alive(self) -> bool:
        return anyio.current_time() < self.expires and not self.connection.closed.is_set()


class TaskTable:
    """Every relayed task, by the client's id and by (connection, upstream id)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.max_ttl = config.tasks.max_ttl
        self.elicitation = config.elicitation
        self.max_open = config.elicitation.max_pending_per_session
        self.keep_finished = config.tasks.keep_finished
        self._by_id: dict[str, RelayedTask] = {}
        self._drops: Deadlines[str] = Deadlines(self._forget_id)
        """Per task: when it is forgotten (anyio clock, the loop's) and the timer that does it."""
        self._by_upstream: dict[tuple[UpstreamConnection, str], RelayedTask] = {}
        self._creating: dict[UpstreamConnection, list[JsonObject]] = {}
        """Per connection with a task-augmented `tools/call` in flight: the status notifications of tasks not
        known yet. A server may tell of its task before it answers the call that created it."""
        self._creating_calls: dict[UpstreamConnection, int] = {}
        self.home = ""
        """With `redis_url`: `<replica>.`, which starts every task id this replica makes (`cluster.tasks`)."""

    def creating(self, connection: UpstreamConnection) -> None:
        self._creating.setdefault(connection, [])
        self._creating_calls[connection] = self._creating_calls.get(connection, 0) + 1

    def early(self, connection: UpstreamConnection, params: Mapping[str, Any]) -> bool:
        """Keep a status notification of a task not known yet, if a call on `connection` may be creating it."""
        kept = self._creating.get(connection)
        if kept is None:
            return False
        kept[:] = [*kept[-(MAX_EARLY - 1):], dict(params)]
        return True

    def created_done(self, connection: UpstreamConnection, relayed: RelayedTask | None) -> list[JsonObject]:
        """The call creating a task on `connection` ended: the notifications kept for `relayed`, with its id."""
        kept = self._creating.get(connection, [])
        mine = [p for p in kept if relayed is not None and p.get("taskId") == relayed.upstream_id]
        if (calls := self._creating_calls.pop(connection, 1) - 1) > 0:
            self._creating_calls[connection] = calls
            kept[:] = [p for p in kept if p not in mine]
        else:
            self._creating.pop(connection, None)
        return [self.public_task(relayed, p) for p in mine] if relayed is not None else []

    # -- creating --------------------------------------------------------------------------------

    def request_params(self, server: str, peer: DownstreamPeer, params: Mapping[str, Any]) -> JsonObject:
        """A task-augmented `tools/call` as it goes upstream: its `ttl` at most `tasks.max_ttl`; refused
        when the client already has as many open tasks as its pending limit allows."""
        task = params.get("task")
        if not is_mapping(task):
            raise errors.gateway_error(
                INVALID_PARAMS, "task must be an object", rule="task is {ttl?: number}", server=server
            )
        self._purge()
        if self.open_count(peer) >= self.max_open:
            raise pending_limit(self.elicitation, server, "max_pending_per_session")
        ttl = task.get("ttl")
        cap = int(self.max_ttl * 1000)
        if ttl is not None and (not isinstance(ttl, int | float) or isinstance(ttl, bool) or ttl < 0):
            raise errors.gateway_error(
                INVALID_PARAMS, "task.ttl must be a non-negative number of milliseconds", rule="task.ttl", server=server
            )
        return {**params, "task": {**task, "ttl": cap if ttl is None or ttl > cap else ttl}}

    def open_count(self, peer: DownstreamPeer) -> int:
        """The tasks `peer`'s identity (its principal, else itself) has open here: created, not seen ended."""
        return sum(1 for t in self._by_id.values() if t.owner.identity == peer.identity and not t.ended)

    def created(
        self, server: str, connection: UpstreamConnection, owner: DownstreamPeer, result: Mapping[str, Any],
        *, on_behalf: bool = False,
    ) -> tuple[JsonObject, RelayedTask | None]:
        """Record the task a `CreateTaskResult` names; the result as the client sees it, and the task."""
        task = result.get("task")
        if not is_mapping(task) or not isinstance(upstream_id := task.get("taskId"), str):
            return dict(result), None  # not a task: the upstream ran the call at once
        ttl = task.get("ttl")
        keep = self.max_ttl if not isinstance(ttl, int | float) else min(ttl / 1000, self.max_ttl)
        relayed = RelayedTask(
            id=f"{server}/{self.home}{secrets.token_urlsafe(12)}",
            server=server,
            upstream_id=upstream_id,
            connection=connection,
            owner=owner,
            expires=anyio.current_time() + keep,
            on_behalf=on_behalf,
        )
        relayed.saw(task)
        self._by_id[relayed.id] = relayed
        self._by_upstream[(connection, upstream_id)] = relayed
        connection.live_tasks[upstream_id] = relayed.expires
        self._drops.at(relayed.id, relayed.expires)
        return {**result, "task": self.public_task(relayed, task)}, relayed

    def __len__(self) -> int:
        return len(self._by_id)

    def ended(self, relayed: RelayedTask) -> None:
        """The gateway saw the task end: it is kept `tasks.keep_finished` more for its owner, then forgotten."""
        if relayed.id in self._by_id:
            self._drops.at(relayed.id, anyio.current_time() + self.keep_finished)

    def _forget_id(self, task_id: str) -> None:
        if (relayed := self._by_id.get(task_id)) is not None:
            self.forget(relayed)

    # -- finding ---------------------------------------------------------------------------------

    def find(self, peer: DownstreamPeer, task_id: Any) -> RelayedTask:
        """The task `task_id` names, if `peer` owns it; -32602 otherwise (unknown, foreign and ended alike)."""
        if not isinstance(task_id, str):
            raise errors.gateway_error(INVALID_PARAMS, "taskId must be a string", rule="taskId is required")
        relayed = self._by_id.get(task_id)
        if relayed is not None and not relayed.alive:
            self.forget(relayed)
            relayed = None
        if relayed is None or relayed.on_behalf or not relayed.owned_by(peer):
            raise errors.gateway_error(
                INVALID_PARAMS,
                f"unknown task {task_id!r}",
                taskId=task_id,
                fix="use a taskId this client received from tools/call or tasks/list; a task ends with its ttl "
                "or with the upstream session that ran it",
            )
        return relayed

    def here(self, task_id: str) -> RelayedTask | None:
        """The live task `task_id` names on this replica, whoever owns it (for another replica's request, whose
        caller `cluster.tasks` checks)."""
        relayed = self._by_id.get(task_id)
        return relayed if relayed is not None and relayed.alive and not relayed.on_behalf else None

    def of_upstream(self, connection: UpstreamConnection, upstream_id: Any) -> RelayedTask | None:
        """The task an upstream's message names (its `related-task`), if the gateway relays it."""
        if not isinstance(upstream_id, str):
            return None
        relayed = self._by_upstream.get((connection, upstream_id))
        return relayed if relayed is not None and relayed.alive else None

    def owned(self, peer: DownstreamPeer) -> list[RelayedTask]:
        self._purge()
        return [t for t in self._by_id.values() if t.owned_by(peer) and not t.on_behalf]

    def forget(self, relayed: RelayedTask) -> None:
        self._drops.cancel(relayed.id)
        self._by_id.pop(relayed.id, None)
        self._by_upstream.pop((relayed.connection, relayed.upstream_id), None)
        relayed.connection.live_tasks.pop(relayed.upstream_id, None)

    def peer_gone(self, peer: DownstreamPeer) -> None:
        """A client session ended: its tasks are nobody's any more, unless its principal's other sessions
        may still reach them (on a connection that outlives the session: `"session_policy": "shared"`)."""
        for relayed in [t for t in self._by_id.values() if t.owner is peer]:
            if peer.principal is None or relayed.connection.owner is peer:
                self.forget(relayed)

    def _purge(self) -> None:
        for relayed in [t for t in self._by_id.values() if not t.alive]:
            self.forget(relayed)

    # -- what the client sees --------------------------------------------------------------------

    def public_task(self, relayed: RelayedTask, task: Mapping[str, Any]) -> JsonObject:
        """An upstream `Task` with the client's id, and a ttl no longer than the gateway keeps it. A terminal
        status ends the task's keep (`ended`)."""
        relayed.saw(task)
        if task.get("status") in TERMINAL:
            self.ended(relayed)
        public = {**task, "taskId": relayed.id}
        ttl = task.get("ttl")
        if isinstance(ttl, int | float) and ttl > self.max_ttl * 1000:
            public["ttl"] = int(self.max_ttl * 1000)
        return public

    @staticmethod
    def with_public_meta(relayed: RelayedTask, message: Mapping[str, Any]) -> JsonObject:
        """`message` (params or a result) with its `related-task` naming the client's id (none at all for a task
        the gateway runs for a plain call: its client knows no task)."""
        meta = message.get("_meta")
        if not is_mapping(meta) or RELATED_TASK not in meta:
            return dict(message)
        if relayed.on_behalf:
            return {**message, "_meta": {k: v for k, v in meta.items() if k != RELATED_TASK}}
        return {**message, "_meta": {**meta, RELATED_TASK: {"taskId": relayed.id}}}

    @staticmethod
    def upstream_id_in(message: Mapping[str, Any] | None) -> Any:
        """The task id an upstream's message names in its `_meta` (None when it names none)."""
        meta = (message or {}).get("_meta")
        if meta is None:  # most messages: no `is_mapping` calls
            return None
        related = meta.get(RELATED_TASK) if is_mapping(meta) else None
        return related.get("taskId") if is_mapping(related) else None


def face_capability(negotiated: Iterable[Mapping[str, Any]]) -> ServerTasksCapability | None:
    """What the face declares under `tasks`: task-augmented `tools/call` when an upstream offers it (the
    gateway lists every client's own tasks itself), cancel when an upstream offers that; else nothing."""
    offered = [caps.get("tasks") for caps in negotiated]
    offered = [t for t in offered if is_mapping(t)]
    calls = [t for t in offered if is_mapping(r := t.get("requests")) and is_mapping(tools := r.get("tools"))
             and "call" in tools]
    if not calls:
        return None
    declared: JsonObject = {"list": {}, "requests": {"tools": {"call": {}}}}
    if any("cancel" in t for t in calls):
        declared["cancel"] = {}
    return ServerTasksCapability.model_validate(declared)
