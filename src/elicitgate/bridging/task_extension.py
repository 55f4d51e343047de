"""Tasks of the 2026-07-28 extension `io.modelcontextprotocol/tasks` (SEP-2663), as the gateway serves them.

A task here is a view of a parked call (`bridging.rounds.ParkedCall`, invariant 8): the call runs in its own
task as every 2026-07-28 call does; once it becomes a task, the client's `tools/call` is answered with a
`CreateTaskResult` (`resultType: "task"`) and the call's questions, which would have gone into the next
`input_required` round, wait in the task instead: `tasks/get` shows them as `inputRequests`, `tasks/update`
answers them (checked against their schema first), `tasks/cancel` ends the call, and `notifications/tasks`
tell a `subscriptions/listen` stream of each change. A call becomes a task when its upstream made one
(`router.task_bridge`) or when the gateway hands one over itself (`tasks.hand_over_after`, docs/tasks.md).

A task belongs to the principal that created it (`http.auth`); without authentication its id, which cannot
be guessed, is all that names it. To anyone else it does not exist (-32602, as the extension says for an
unknown id). It is kept until its ttl (`tasks.max_ttl`) from its creation, a call still running then is
cancelled; a task that ended is kept `tasks.keep_finished` after its end at most. A timer drops each one
then, whether or not anyone looks again.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.capabilities import TASKS_EXTENSION
from elicitgate.config import GatewayConfig
from elicitgate.contracts import DownstreamPeer
from elicitgate.deadlines import Deadlines
from elicitgate.elicitation.meta import ERRORS_META_KEY
from elicitgate.elicitation.schema import answer_problems
from elicitgate.json_shapes import JsonObject, is_mapping

if TYPE_CHECKING:
    from elicitgate.bridging.rounds import ParkedCall

EXTENSION_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
POLL_INTERVAL_MS = 1000
"""What the gateway suggests as `pollIntervalMs`: a person's answer is what most of its tasks wait for."""
GATEWAY_TASK_PREFIX = "elicitgate/"
"""Ids of tasks the gateway made itself (a bridged upstream task keeps the id `<server>/<random>`)."""


def missing_extension(method: str) -> MCPError:
    """-32021: the extension's methods need the extension declared on the request itself."""
    return errors.gateway_error(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{method} needs the {TASKS_EXTENSION} extension declared on the request",
        requiredCapabilities={"extensions": {TASKS_EXTENSION: {}}},
        fix=f'add "{TASKS_EXTENSION}": {{}} to _meta["io.modelcontextprotocol/clientCapabilities"].extensions',
    )


def unknown_task(task_id: Any) -> MCPError:
    """What a client gets for a task id it may not use: unknown, foreign and expired alike (-32602)."""
    return errors.gateway_error(
        INVALID_PARAMS,
        f"unknown task {task_id!r}",
        taskId=task_id,
        fix="use a taskId this client received from tools/call; a task is kept for its ttlMs",
    )


def task_time() -> str:
    """Now, as a task's `createdAt` / `lastUpdatedAt` say it (ISO 8601, milliseconds, UTC)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(eq=False)
class ModernTask:
    """One task of a 2026-07-28 client: a parked call it may follow, answer and cancel."""

    id: str
    park: ParkedCall
    owner: DownstreamPeer
    ttl_ms: int
    expires: float
    """anyio clock: when the gateway forgets it."""
    created_at: str = field(default_factory=task_time)
    updated_at: str = field(default_factory=task_time)
    cancelled: bool = False
    rejected: dict[str, int] = field(default_factory=dict[str, int])
    """Per open question: how many answers `tasks/update` refused (counted as the broker counts attempts)."""
    _seen: tuple[str, tuple[str, ...]] = ("working", ())

    def owned_by(self, peer: DownstreamPeer) -> bool:
        """Its creator, another session of its principal, or (without authentication) whoever holds its id."""
        if self.owner is peer:
            return True
        return self.owner.principal == peer.principal

    @property
    def status(self) -> str:
        outcome = self.park.outcome
        if outcome is None:
            return "input_required" if self.park.open else "working"
        if self.cancelled:
            return "cancelled"
        return "failed" if isinstance(outcome, BaseException) else "completed"

    def touch(self) -> bool:
        """Note a change of what a client sees (status, open questions); whether there was one."""
        seen = (self.status, tuple(self.park.open))
        if seen == self._seen:
            return False
        self._seen, self.updated_at = seen, task_time()
        return True

    def handle(self) -> JsonObject:
        """The `Task` fields every view of it carries."""
        self.touch()
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

    def detailed(self) -> JsonObject:
        """The `DetailedTask`: with its open `inputRequests`, its `result` or its `error`."""
        task = self.handle()
        outcome = self.park.outcome
        if task["status"] == "input_required":
            task["inputRequests"] = {
                key: {"method": q.method, "params": q.params} for key, q in self.park.open.items()
            }
            task["statusMessage"] = "waiting for a person's answer (tasks/update)"
        elif task["status"] == "completed" and isinstance(outcome, dict):
            task["result"] = {k: v for k, v in outcome.items() if k != "resultType"}
        elif task["status"] == "failed" and isinstance(outcome, BaseException):
            task["error"] = _error_of(outcome)
            task["statusMessage"] = task["error"]["message"]
        elif task["status"] == "cancelled":
            task["statusMessage"] = "cancelled by tasks/cancel"
        return task


def _error_of(exc: BaseException) -> JsonObject:
    if isinstance(exc, MCPError):
        return exc.error.model_dump(mode="json", exclude_none=True)
    return {"code": -32603, "message": f"internal error: {type(exc).__name__}"}


class ModernTasks:
    """Every task of the extension the gateway serves, by the id the client holds."""

    def __init__(self, config: GatewayConfig) -> None:
        self.max_ttl = config.tasks.max_ttl
        self.hand_over_after = config.tasks.hand_over_after
        self.max_open = config.elicitation.max_pending_per_session
        self.max_attempts = config.elicitation.max_answer_attempts
        self.keep_finished = config.tasks.keep_finished
        self._by_id: dict[str, ModernTask] = {}
        self._drops: Deadlines[str] = Deadlines(self._drop)
        """Per task: when it is dropped (anyio clock) and the timer that does it."""
        self._changed = asyncio.Event()
        """Set when any task changed, then replaced: what `subscriptions/listen` streams wait on."""
        self.home = ""
        """Prefix of the ids of tasks the gateway makes: with `redis_url`, `<replica id>.` (cluster.modern_tasks)."""
        self.on_created: Callable[[ModernTask], None] | None = None
        """Told of each new task (with `redis_url`: its record for the other replicas)."""

    # -- making ----------------------------------------------------------------------------------

    def has_room(self, peer: DownstreamPeer) -> bool:
        """Whether the client has fewer running tasks than its pending limit (`max_pending_per_session`)."""
        self._purge()
        running = sum(1 for t in self._by_id.values() if t.owner.identity == peer.identity and t.park.outcome is None)
        return running < self.max_open

    def admit(self, peer: DownstreamPeer) -> None:
        """Refuse a new task when the client already has as many running as its pending limit allows (-32014)."""
        if not self.has_room(peer):
            raise errors.gateway_error(
                errors.ELICITATION_LIMIT,
                "too many open tasks for this client",
                limit="max_pending_per_session",
                value=self.max_open,
                fix="wait for (or cancel) open tasks first, or raise elicitation.max_pending_per_session",
            )

    def create(self, park: ParkedCall, *, task_id: str | None = None, ttl_ms: float | None = None) -> ModernTask:
        """`park` becomes a task (its id: `task_id`, else a new gateway id); kept at most `tasks.max_ttl`."""
        cap = int(self.max_ttl * 1000)
        ttl = cap if ttl_ms is None else min(int(ttl_ms), cap)
        task = ModernTask(
            id=task_id or f"{GATEWAY_TASK_PREFIX}{self.home}{secrets.token_urlsafe(16)}",
            park=park,
            owner=park.peer,
            ttl_ms=ttl,
            expires=anyio.current_time() + ttl / 1000,
        )
        self._by_id[task.id] = task
        park.on_change = lambda: self._changed_task(task)
        self._drops.at(task.id, task.expires)
        if park.outcome is not None:
            self._changed_task(task)
        if self.on_created is not None:
            self.on_created(task)
        return task

    def __len__(self) -> int:
        return len(self._by_id)

    def _changed_task(self, task: ModernTask) -> None:
        if task.park.outcome is not None and task.id in self._by_id:
            self._drops.at(task.id, anyio.current_time() + self.keep_finished)
        self._signal()

    def _drop(self, task_id: str) -> None:
        """Its ttl, or its keep after its end, is over: nobody may follow it any more."""
        task = self._by_id.pop(task_id, None)
        if task is not None and task.park.outcome is None and task.park.scope is not None:
            task.park.scope.cancel()

    # -- finding ---------------------------------------------------------------------------------

    def find(self, peer: DownstreamPeer, task_id: Any) -> ModernTask:
        """The task `task_id` names, if `peer` may see it; -32602 otherwise (unknown, foreign, expired alike)."""
        if not isinstance(task_id, str):
            raise errors.gateway_error(INVALID_PARAMS, "taskId must be a string", rule="taskId is required")
        self._purge()
        task = self._by_id.get(task_id)
        if task is None or not task.owned_by(peer):
            raise unknown_task(task_id)
        return task

    def here(self, task_id: str) -> ModernTask | None:
        """The live task `task_id` on this gateway, whoever owns it (a forwarded request checks its principal)."""
        self._purge()
        return self._by_id.get(task_id)

    def _purge(self) -> None:
        """Drop now what is due (a timer may not have run yet when a request comes at the same moment)."""
        self._drops.run_due(anyio.current_time())

    # -- what a client does with one ------------------------------------------------------------

    def serve(self, task: ModernTask, method: str, params: Mapping[str, Any]) -> JsonObject:
        """`tasks/get`, `tasks/update` or `tasks/cancel` of `task` (its owner checked already): the result."""
        if method == "tasks/get":
            return {**task.detailed(), "resultType": "complete"}
        if method == "tasks/update":
            self.update(task, params.get("inputResponses"))
        else:
            self.cancel(task)
        return {"resultType": "complete"}

    def update(self, task: ModernTask, responses: Any) -> None:
        """`tasks/update`: answers to the task's open questions. All of them are checked before any is given:
        a key never issued, a task with nothing to answer, or an answer that breaks its schema refuse the whole
        update (-32602, the question stays open). A key already answered is ignored, as the extension says."""
        if not is_mapping(responses):
            raise errors.gateway_error(
                INVALID_PARAMS, "inputResponses must be an object", rule="inputResponses", taskId=task.id
            )
        park = task.park
        unknown = sorted(k for k in responses if not park.issued(k))
        if unknown:
            raise errors.gateway_error(
                INVALID_PARAMS,
                f"task {task.id!r} never asked {', '.join(map(repr, unknown))}",
                taskId=task.id,
                unknownKeys=unknown,
                outstanding=sorted(park.open),
                fix="answer only the keys of the task's inputRequests (tasks/get)",
            )
        if task.status != "input_required":
            raise errors.gateway_error(
                INVALID_PARAMS,
                f"task {task.id!r} is {task.status}, not input_required: nothing to answer",
                taskId=task.id,
                status=task.status,
                fix="send tasks/update only while tasks/get shows the task input_required",
            )
        given = {k: v for k, v in responses.items() if k in park.open}
        refused: dict[str, list[JsonObject]] = {}
        for key, answer in given.items():
            problems = self._problems(park.open[key].elicitation, answer)
            if problems:
                refused[key] = problems
        final = {k for k in refused if self._last_attempt(task, k)}
        if refused and not final:
            for key, problems in refused.items():
                task.rejected[key] = task.rejected.get(key, 0) + 1
                question = park.open[key]
                question.params = {**question.params,
                                   "_meta": {**(question.params.get("_meta") or {}), ERRORS_META_KEY: problems}}
            self._signal()
            raise errors.gateway_error(
                INVALID_PARAMS,
                "an answer does not match the requested schema: nothing was delivered, the question stays open",
                taskId=task.id,
                errors={key: problems for key, problems in refused.items()},
                fix="answer again with tasks/update (tasks/get shows the question with the errors)",
            )
        park.answer(given)  # a last invalid attempt goes to the broker, which ends the question failed
        if final:
            raise errors.gateway_error(
                INVALID_PARAMS,
                "an answer does not match the requested schema and no attempt is left: the question failed",
                taskId=task.id,
                errors={key: refused[key] for key in final},
                rule="elicitation.max_answer_attempts",
            )

    def _problems(self, elicitation: Any, answer: Any) -> list[JsonObject]:
        if elicitation is None:
            return []  # not an elicitation (sampling, roots): its receiver checks it
        if not is_mapping(answer) or answer.get("action") not in ("accept", "decline", "cancel"):
            return [{"property": None, "message": "an ElicitResult has action accept, decline or cancel"}]
        if answer["action"] != "accept" or elicitation.mode == "url":
            return []
        return answer_problems(elicitation.requested_schema, answer.get("content") or {})

    def _last_attempt(self, task: ModernTask, key: str) -> bool:
        return task.rejected.get(key, 0) + 1 >= self.max_attempts

    def cancel(self, task: ModernTask) -> None:
        """`tasks/cancel`: the call ends (cooperative: an outcome already there stays)."""
        if task.park.outcome is None:
            task.cancelled = True
            if task.park.scope is not None:
                task.park.scope.cancel()
        self._signal()

    # -- notifications/tasks ---------------------------------------------------------------------

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changes(self, peer: DownstreamPeer, task_ids: list[str]) -> AsyncIterator[JsonObject]:
        """For `subscriptions/listen`: each `DetailedTask` of `task_ids` (those `peer` owns) when it changes,
        the first time at once; ends when all of them are over."""
        last: dict[str, tuple[str, tuple[str, ...]]] = {}
        while True:
            changed = self._changed
            live = [t for i in task_ids if (t := self._by_id.get(i)) is not None and t.owned_by(peer)]
            for task in live:
                seen = (task.status, tuple(task.park.open))
                if last.get(task.id) != seen:
                    last[task.id] = seen
                    yield task.detailed()
            if all(t.park.outcome is not None for t in live):
                return
            await changed.wait()

    def honored(self, peer: DownstreamPeer, task_ids: Any) -> list[str]:
        """The ids of a `subscriptions/listen` the gateway will notify of: the caller's own tasks."""
        self._purge()
        wanted = [i for i in cast("list[Any]", task_ids) if isinstance(i, str)] if isinstance(task_ids, list) else []
        return [i for i in wanted if (t := self._by_id.get(i)) is not None and t.owned_by(peer)]
