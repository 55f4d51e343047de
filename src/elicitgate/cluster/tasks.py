"""2025-11-25 tasks across replicas (`redis_url`): a task made through replica A is followed, answered and
cancelled through any other, the way a parked 2026-07-28 call is (`retries`).

A task lives where its upstream session does, on A. Its id names A (`<server>/<A>.<random>`, `home_of`), and
Redis keeps a record of each task a principal owns (`task:<id>`: its home, principal and times; `tasks-of:
<principal>`: the principal's task ids), for as long as the task's ttl. Another replica B that gets `tasks/get`,
`tasks/result` or `tasks/cancel` for it checks the record (the caller's principal must be the task's; a
task owned by a session only, without `http.auth`, is that session's on its own replica: unknown elsewhere) and
sends the request to A over A's channel (`TASK_OP`). A runs it as if it had arrived there. While a forwarded
`tasks/result` waits, the task's questions reach the client on B: A's broker asks them of a call whose requests
travel back to B (`QUESTION_OP`), where the client's own `tasks/result` carries them; answers are checked on A,
as every answer. `tasks/list` on B lists the principal's tasks on every replica.

A replica that stops ends its tasks: to the others, each of its tasks is `failed` with a message naming it
(`tasks/get`, `tasks/list`), `tasks/result` is -32008 with `data.replica`, and a `tasks/result` waiting on it
when it died gets that error within seconds (`Replicas.ask`), never a hang.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
from mcp_types import INVALID_PARAMS, ClientCapabilities
from redis.exceptions import RedisError

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.capabilities import elicitation_modes
from elicitgate.cluster.bus import Replicas
from elicitgate.contracts import DownstreamPeer, Era, Origin
from elicitgate.elicitation.url_routes import SessionTarget
from elicitgate.json_shapes import JsonObject, is_mapping, is_object

logger = logging.getLogger(__name__)

TASK_OP = "task"
"""Served by a task's home replica: `tasks/get`, `tasks/result` or `tasks/cancel` of a client on another one."""
QUESTION_OP = "task-question"
"""Served by the replica whose client waits in a forwarded `tasks/result`: a request of the task's server for it."""
LOST = "lost"
"""The `reason` of a task whose replica stopped."""
ENDED_WAIT = 1.0
"""How long telling Redis that a task ended may hold the request that saw it end."""


class TaskHome(Protocol):
    """What the gateway does for a forwarded task request (`router.task_requests.TaskRequests`)."""

    def task_owner(self, task_id: str) -> DownstreamPeer | None:
        """The client that owns the live task `task_id` on this replica."""
        ...

    async def task_request(self, call: Origin, method: str, params: Mapping[str, Any]) -> JsonObject:
        """Serve `tasks/*` for `call` here."""
        ...


class Caller(Protocol):
    """Who asks about a task on another replica: a client's call, whose requests the task's questions become."""

    @property
    def request_id(self) -> Any: ...

    def raw_capabilities(self) -> JsonObject: ...

    def send_request(self, method: str, params: Mapping[str, Any]) -> Awaitable[JsonObject]: ...


def home_of(task_id: Any) -> str | None:
    """The replica a task id names (`<server>/<replica>.<random>`), if it names one."""
    if not isinstance(task_id, str) or "/" not in task_id:
        return None
    tail = task_id.rsplit("/", 1)[1]
    return tail.split(".", 1)[0] if "." in tail else None


def unknown(task_id: Any) -> MCPError:
    """What a caller that does not own `task_id` gets, as on the task's own replica (`TaskTable.find`)."""
    return errors.gateway_error(
        INVALID_PARAMS,
        f"unknown task {task_id!r}",
        taskId=task_id,
        fix="use a taskId this client received from tools/call or tasks/list; a task ends with its ttl or with the "
        "upstream session that ran it",
    )


class SharedTasks:
    """This replica's principal-owned tasks in Redis, and the others' tasks followed from here."""

    def __init__(self, replicas: Replicas, home: TaskHome, *, max_ttl: float) -> None:
        self.replicas = replicas
        self.home = home
        self.max_ttl = max_ttl
        self._waiting: dict[str, Caller] = {}
        """Calls of this replica's clients waiting in a forwarded `tasks/result`, by the id the home replica's
        questions name."""
        self._asking: dict[str, set[anyio.CancelScope]] = {}
        """The questions being asked of each of those calls: they end with the call."""
        replicas.handlers[TASK_OP] = self._serve
        replicas.handlers[QUESTION_OP] = self._question

    def _record_key(self, task_id: str) -> str:
        return self.replicas.key("task", task_id)

    def _owned_key(self, principal: str) -> str:
        return self.replicas.key("tasks-of", principal)

    def _ended_key(self, task_id: str) -> str:
        return self.replicas.key("task-ended", task_id)

    def elsewhere(self, task_id: Any) -> bool:
        """A task id that names another replica."""
        home = home_of(task_id)
        return home is not None and home != self.replicas.id

    # -- the task's home -----------------------------------------------------------------------------

    async def created(self, task_id: str, principal: str | None, task: Mapping[str, Any], keep: float) -> None:
        """A task made here: recorded for the principal's other sessions on any replica (a task a session owns
        alone is reachable only here). Redis away: the task still works here."""
        if principal is None:
            return
        ttl = max(int(keep), 1)
        record = {"home": self.replicas.id, "principal": principal, "task": dict(task)}
        try:
            async with self.replicas.redis.pipeline(transaction=False) as pipe:
                pipe.set(self._record_key(task_id), json.dumps(record), ex=ttl)
                pipe.sadd(self._owned_key(principal), task_id)
                pipe.expire(self._owned_key(principal), int(self.max_ttl) + 1)
                await pipe.execute()
        except RedisError as exc:
            logger.warning("task %s not shared with the other replicas (%s): it is reachable on this one only",
                           task_id, exc)

    async def ended(self, task_id: str, *, keep: float) -> None:
        """A task of this replica was seen ended: it no longer counts against its principal's limit anywhere."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(ENDED_WAIT):
            try:
                async with self.replicas.redis.pipeline(transaction=False) as pipe:
                    pipe.set(self._ended_key(task_id), "1", ex=max(int(keep), 1))
                    await pipe.execute()
            except RedisError as exc:
                logger.debug("end of task %s not shared: %s", task_id, exc)

    async def _serve(self, args: JsonObject) -> JsonObject:
        """Another replica's client asks about one of this replica's tasks."""
        method, params = str(args.get("method")), args.get("params")
        task_id = params.get("taskId") if is_mapping(params) else None
        principal = args.get("principal")
        owner = self.home.task_owner(task_id) if isinstance(task_id, str) else None
        if owner is None or principal is None or owner.principal != principal or not is_mapping(params):
            raise unknown(task_id)
        call = ForwardedTaskCall(owner, args, self._ask_back(str(args.get("asker")), str(args.get("cid"))))
        return await self.home.task_request(call, method, params)

    def _ask_back(self, asker: str, cid: str) -> Callable[[str, Mapping[str, Any]], Awaitable[JsonObject]]:
        async def send(method: str, params: Mapping[str, Any]) -> JsonObject:
            result = await self.replicas.ask(asker, QUESTION_OP, {"cid": cid, "method": method, "params": dict(params)},
                                             what="the client's call", timeout=self.max_ttl)
            return dict(result) if is_mapping(result) else {}

        return send

    # -- another replica ------------------------------------------------------------------------------

    async def _record(self, task_id: Any) -> JsonObject | None:
        if not isinstance(task_id, str):
            return None
        try:
            raw = await self.replicas.redis.get(self._record_key(task_id))
        except RedisError as exc:
            raise self.replicas.failure(exc) from None
        record = json.loads(raw) if raw else None
        return record if is_object(record) else None

    async def request(
        self, call: Caller, principal: str | None, method: str, params: Mapping[str, Any]
    ) -> JsonObject:
        """`tasks/get`, `tasks/result` or `tasks/cancel` of a task another replica holds, sent there."""
        task_id = params.get("taskId")
        record = await self._record(task_id)
        if record is None or principal is None or record.get("principal") != principal:
            raise unknown(task_id)
        home = str(record.get("home"))
        if not await self.replicas.alive(home):
            return self._lost(record, task_id, method)
        cid = f"{self.replicas.id}-{id(call)}"
        self._waiting[cid] = call
        args = {"method": method, "params": dict(params), "principal": principal, "asker": self.replicas.id,
                "cid": cid, "capabilities": call.raw_capabilities(), "request_id": call.request_id}
        try:
            result = await self.replicas.ask(home, TASK_OP, args, what="this task", timeout=self.max_ttl)
        except MCPError as exc:
            if exc.error.code != errors.REPLICA_GONE:
                raise
            return self._lost(record, task_id, method)
        finally:
            del self._waiting[cid]
            for scope in self._asking.pop(cid, set()):
                scope.cancel()
        return dict(result) if is_mapping(result) else {}

    async def open_elsewhere(self, principal: str) -> int:
        """The principal's tasks open on the other live replicas (recorded, not seen ended); 0 while Redis is out of
        reach (each replica then counts its own, as the pending limits do)."""
        redis = self.replicas.redis
        try:
            ids = [i for i in await redis.smembers(self._owned_key(principal)) if self.elsewhere(i)]
            if not ids:
                return 0
            records = await redis.mget([self._record_key(i) for i in ids])
            ended = await redis.mget([self._ended_key(i) for i in ids])
            homes = {str(home_of(i)) for i, r, e in zip(ids, records, ended, strict=True) if r and not e}
            alive = {h for h in homes if await redis.exists(self.replicas.lease_key(h))}
        except RedisError as exc:
            logger.debug("other replicas' tasks not counted: %s", exc)
            return 0
        return sum(1 for i, r, e in zip(ids, records, ended, strict=True) if r and not e and home_of(i) in alive)

    async def listed(self, principal: str | None) -> list[JsonObject]:
        """The principal's tasks on the other replicas, each as its home says (failed where it stopped)."""
        if principal is None:
            return []
        try:
            ids = sorted(await self.replicas.redis.smembers(self._owned_key(principal)))
        except RedisError as exc:
            raise self.replicas.failure(exc) from None
        listed: list[JsonObject] = []
        for task_id in ids:
            if not self.elsewhere(task_id):
                continue
            try:
                listed.append(await self.request(_Lister(principal), principal, "tasks/get", {"taskId": task_id}))
            except MCPError as exc:  # expired (its record is gone) or ended there
                if exc.error.code != INVALID_PARAMS:
                    raise
                with anyio.CancelScope(shield=True):
                    try:
                        await self.replicas.redis.srem(self._owned_key(principal), task_id)
                    except RedisError:
                        pass
        return listed

    def _lost(self, record: Mapping[str, Any], task_id: Any, method: str) -> JsonObject:
        """The replica that ran the task stopped: the task failed, saying so."""
        replica = str(record.get("home"))
        message = f"the gateway replica {replica} that ran this task stopped; the task is lost"
        if method == "tasks/result":
            raise errors.gateway_error(errors.REPLICA_GONE, message, replica=replica, taskId=task_id, reason=LOST)
        if method == "tasks/cancel":
            raise errors.gateway_error(INVALID_PARAMS, f"cannot cancel task {task_id!r}: it failed ({message})",
                                       taskId=task_id, status="failed", replica=replica, reason=LOST)
        task = record.get("task")
        return {**(dict(task) if is_mapping(task) else {}), "taskId": task_id, "status": "failed",
                "statusMessage": message, "lastUpdatedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z")}

    async def _question(self, args: JsonObject) -> JsonObject:
        """The home replica's broker asks the client waiting here in a forwarded `tasks/result`."""
        cid = str(args.get("cid"))
        call = self._waiting.get(cid)
        params = args.get("params")
        gone = errors.gateway_error(errors.ELICITATION_UNDELIVERABLE, "the client's tasks/result on this replica has "
                                    "ended", reason="the call that caused it ended")
        if call is None or not is_mapping(params):
            raise gone
        with anyio.CancelScope() as scope:
            self._asking.setdefault(cid, set()).add(scope)
            try:
                return await call.send_request(str(args.get("method")), params)
            finally:
                if (scopes := self._asking.get(cid)) is not None:
                    scopes.discard(scope)
        raise gone


class ForwardedTaskCall:
    """A client's `tasks/*` that reached another replica, as the task's home sees it (the `Origin` surface):
    its owner's peer (the principal the request was checked for), the client's declared capabilities, and
    requests that travel back to the client's replica."""

    era: Era = "handshake"
    asks_in_rounds = False
    cancel_requested = False
    tool: str | None = None

    def __init__(
        self, peer: DownstreamPeer, args: Mapping[str, Any],
        send: Callable[[str, Mapping[str, Any]], Awaitable[JsonObject]],
    ) -> None:
        self.peer = peer
        self.request_id = args.get("request_id")
        capabilities = args.get("capabilities")
        self._capabilities = dict(capabilities) if is_mapping(capabilities) else {}
        self._send = send

    @property
    def modes(self) -> frozenset[str]:
        return elicitation_modes(ClientCapabilities.model_validate(self._capabilities))

    def raw_capabilities(self) -> JsonObject:
        return dict(self._capabilities)

    async def send_request(self, method: str, params: Mapping[str, Any]) -> JsonObject:
        return await self._send(method, params)

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Notifications of a forwarded request are not relayed back (its result is)."""

    async def ask(self, method: str, params: JsonObject, elicitation: Any) -> Any:
        raise errors.gateway_error(errors.ELICITATION_UNDELIVERABLE, "a forwarded tasks/result asks by push")

    def expect(self, count: int) -> None:
        """Questions are pushed one after another."""

    def require(self, capabilities: JsonObject) -> None:
        """No rounds: nothing to end with."""

    def elicitation_ended(self, elicitation: Any) -> None:
        """Nothing kept per elicitation."""

    def carry(self, elicitation: Any) -> None:
        """The channel back is Redis and the other replica's call: nothing to attach here."""

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """URL-mode completions reach the owner's session as any other."""
        await SessionTarget(self.peer).url_completed(params)


class _Lister:
    """The caller of the `tasks/get` that `tasks/list` sends for each task elsewhere: it asks nothing."""

    request_id = None

    def __init__(self, principal: str) -> None:
        self.principal = principal

    def raw_capabilities(self) -> JsonObject:
        return {}

    async def send_request(self, method: str, params: Mapping[str, Any]) -> JsonObject:
        raise errors.gateway_error(errors.ELICITATION_UNDELIVERABLE, "tasks/list asks nothing")
