"""Calls of 2026-07-28 clients: input requests become `input_required` rounds, answered by retries.

Every such call runs as a `ParkedCall`: the gateway forwards it upstream in a task of its own, in
whichever era the upstream speaks, and the client's requests only look at it. When the call needs
a human (a handshake-era upstream pushes `elicitation/create`, or a 2026-07-28 upstream returns
`input_required`), the broker's `InputRequired` responder turns the question into an `inputRequests`
entry of the client's current request; the client's retry carries the answers back, and the call
goes on, round after round, until its result is the answer to the latest retry.

So upstream `requestState` never leaves the gateway, and the `requestState` the client holds is
only a sealed pointer (`bridging.sealing`) to the parked call and the round it may answer, once.
"""

from __future__ import annotations

import asyncio
import binascii
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import orjson
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RequestId

from mcp.shared.exceptions import MCPError

from elicitgate import contracts, errors
from elicitgate.capabilities import declares_tasks
from elicitgate.config import BridgingConfig
from elicitgate.contracts import ClientRequest, DownstreamPeer, Era
from elicitgate.json_shapes import JsonObject, is_mapping, is_object
from elicitgate.random_batches import RandomBatch
from elicitgate.wire.scopes import TaskCancel

logger = logging.getLogger(__name__)

STATE_KIND = "eg.park"
CLOSE_TIMEOUT = 10.0
"""Seconds the gateway waits, as it stops, for its parked calls to end once cancelled."""


class Question:
    """One question of a parked call, open until a retry answers it."""

    __slots__ = ("key", "method", "params", "elicitation", "answered")

    def __init__(self, key: str, method: str, params: JsonObject, elicitation: contracts.Question | None) -> None:
        self.key = key
        self.method = method
        self.params = params
        """As the 2026-07-28 client sees them."""
        self.elicitation = elicitation
        self.answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        """Its answer, once a retry brought it (a bare future: an event would hold a deque per open question)."""


class GoesOn(Exception):  # noqa: N818  (not an error: the way a call run in its request's coroutine hands over)
    """Raised, instead of asking, by a call run in its request's own coroutine (`Rounds.start` with `then`): the call
    goes on parked, in a task of its own, from `state` (what the work needs to go on from where it stopped)."""

    def __init__(self, state: object) -> None:
        super().__init__("the call asks its client: it goes on parked")
        self.state = state


class ParkedCall:
    """One client call of a 2026-07-28 client, alive across its retries.

    It is the `Origin` of everything the upstream asks during the call: the broker and the router treat
    it as the call, and it hands questions to whichever client request is currently looking at it.
    """

    asks_in_rounds = True
    __slots__ = (
        "id", "peer", "method", "era", "config", "current", "request_id", "_latest", "_seen", "rounds",
        "round_nonce", "spent_nonce", "_superseded", "open", "outcome", "scope", "claimed", "on_claimed", "on_left",
        "_keys", "_registering", "_processing", "_url_waits", "_changed", "_failure", "tasks", "task", "_hand_over",
        "on_change", "task_seed",
    )
    """Slotted: one is alive per parked call, for as long as its questions wait."""

    def __init__(self, peer: DownstreamPeer, method: str, first: ClientRequest, config: BridgingConfig) -> None:
        self.id = _CALL_IDS.pop() if _CALL_IDS else _CALL_IDS.refill()
        self.peer = peer
        self.method = method
        self.era: Era = "modern"
        self.config = config
        self.current: ClientRequest | None = first
        self.request_id: RequestId | None = first.request_id
        """The id of the client request that started the call (each retry has its own): an attribute, read for every
        question asked and ended."""
        self._latest: ClientRequest | None = first
        """The request that looked last, while it may still be asked about; once a round is handed out only
        `_seen` is kept, not the request (its SDK state: context, connection, models) for as long as the round
        waits for a retry."""
        self._seen: tuple[frozenset[str], JsonObject, str | None] | None = None
        """What the calls' questions need of the request that looked last: its modes, capabilities and tool."""
        self.rounds = 0
        self.round_nonce: str | None = None
        """The nonce of the round a retry may answer now (None until a round is handed out)."""
        self.spent_nonce: str | None = None
        """The nonce of the retry that answered the current round: while its request waits it may be lost
        (the client's HTTP request cancelled), and the client may come back with the same state."""
        self._superseded: ClientRequest | None = None
        """The request that was waiting when a retry with its state came (`supersede`): it steps aside."""
        self.open: dict[str, Question] = {}
        self.outcome: JsonObject | BaseException | None = None
        self.scope: CallScope | None = None
        """What cancels the call's work: made with its task (`Rounds.start`), or as `run` starts without one."""
        self.claimed = False
        """A request of the client's took the outcome: no retry needs it any more."""
        self.on_claimed: Callable[[], None] | None = None
        self.on_left: Callable[[ParkedCall], None] | None = None
        """The call ended while a request waited: what the request does when it leaves without taking the outcome
        (cancelled as it was woken), the outcome kept for the retry that comes for it (`Rounds._run`). Given the call,
        not holding it: a call that held itself would wait for the cycle collector to be freed."""
        self._keys = 0
        self._registering = 0
        self._processing: dict[contracts.Question | None, None] = {}
        """Questions answered whose answer the broker is still checking (a dict as a set: 64 bytes empty, not 216)."""
        self._url_waits: dict[str, anyio.Event] = {}
        self._changed: asyncio.Future[None] | None = None
        """Done when anything a waiting request looks at changed, then dropped; made only while a request waits
        (a bare future: an event, asyncio's or anyio's, makes one per wait besides itself and its deque)."""
        self._failure: MCPError | None = None
        self.tasks: contracts.CallTasks[ParkedCall] | None = None
        """Where the call may become a task of the extension (a `tools/call` whose request declared it)."""
        self.task: contracts.CallTask | None = None
        """The task it became: its questions wait there, not in rounds."""
        self._hand_over = False
        """Become a task at once (the upstream made one, or a question went to a hosted page)."""
        self.on_change: Callable[[], None] | None = None
        self.task_seed: JsonObject = {}
        """The id and ttl of the task an upstream made (`router.task_bridge`); empty: a task of the gateway's."""

    # -- what the broker and router see (the `Origin` surface) ------------------------------------

    @property
    def modes(self) -> frozenset[str]:
        if self._latest is not None:
            return self._latest.modes
        assert self._seen is not None, "set whenever _latest is dropped"
        return self._seen[0]

    def raw_capabilities(self) -> JsonObject:
        if self._latest is not None:
            return self._latest.raw_capabilities()
        assert self._seen is not None, "set whenever _latest is dropped"
        return self._seen[1]

    @property
    def tool(self) -> str | None:
        if self._latest is not None:
            return self._latest.tool
        assert self._seen is not None, "set whenever _latest is dropped"
        return self._seen[2]

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Request-scoped notifications (progress) ride the request that is currently waiting, if any."""
        if self.current is not None:
            await self.current.notify(method, params)

    async def send_request(self, method: str, params: Mapping[str, Any]) -> JsonObject:
        """A server-to-client request (sampling, roots) becomes an input request too."""
        return await self.ask(method, dict(params), None)

    async def ask(self, method: str, params: JsonObject, elicitation: contracts.Question | None) -> Any:
        """Put one question to the client in the next `input_required` result; wait for its answer."""
        self._keys += 1
        url = method == "elicitation/create" and params.get("mode") == "url"  # read once: here and once answered
        question = Question(f"q{self._keys}", method, _without_elicitation_id(params) if url else params, elicitation)
        self._processing.pop(elicitation, None)
        self._registering = self._registering - 1 if self._registering > 0 else 0
        self.open[question.key] = question
        self._signal()
        try:
            answer = await question.answered
        finally:
            self.open.pop(question.key, None)
        if url:
            if is_mapping(answer) and answer.get("action") == "accept":
                if isinstance(url_id := params.get("elicitationId"), str):
                    self._url_waits[url_id] = anyio.Event()
        return answer

    def require(self, capabilities: JsonObject) -> None:
        """The upstream needs something this client did not declare: the call fails with -32021."""
        self._failure = errors.gateway_error(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "the server needs a client capability this request did not declare",
            requiredCapabilities=capabilities,
        )
        if self.scope is not None:
            self.scope.cancel()

    def expect(self, count: int) -> None:
        """`count` questions are about to be asked together: answer none before all are in."""
        self._registering += count

    def elicitation_ended(self, elicitation: contracts.Question) -> None:
        """The broker is done with an answered question. Its checking only held a round back (`_ready`): the waiting
        request is woken when that makes the round ready, not for every question that ends (an answered call's
        retry waits for the call's outcome, which the upstream's answer brings)."""
        self._processing.pop(elicitation, None)
        if self._ready():
            self._signal()
        elif self.on_change is not None:
            self.on_change()

    def carry(self, elicitation: contracts.Question) -> None:
        """A parked call's questions travel in its rounds, which its own deadline bounds: nothing to attach.
        One a hosted page shows is answered elsewhere: a client that takes tasks gets one instead of waiting."""
        if elicitation.hosted:
            self.hand_over()

    def hand_over(self) -> None:
        """Answer the waiting request with a task (when its client declared the extension)."""
        self._hand_over = True
        self._signal()

    def issued(self, key: str) -> bool:
        """Whether `key` names a question this call asked (open or answered)."""
        return key.startswith("q") and key[1:].isdigit() and 1 <= int(key[1:]) <= self._keys

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """The upstream finished a URL-mode interaction of this call: the waiting retry may return."""
        url_id = params.get("elicitationId")
        event = self._url_waits.get(url_id) if isinstance(url_id, str) else None
        if event is not None:
            event.set()
            self._signal()

    # -- the parked task --------------------------------------------------------------------------

    async def run(self, work: Callable[[ParkedCall], Awaitable[JsonObject]], scope: CallScope | None = None) -> bool:
        """Run the call to its outcome, in the task it was started in, under `scope` (made for that task when it was
        created: None, made now); whether a retry may still come for that outcome (not when the client cancelled the
        call)."""
        scope = self.scope = scope or CallScope(asyncio.current_task())
        try:
            self.outcome = await work(self)
        except asyncio.CancelledError:
            self.outcome = self._failure or errors.gateway_error(errors.ELICITATION_FAILED, "the call was cancelled")
            if not scope.end():
                raise  # the task itself was cancelled (the loop stopping), not the call: as a scope lets it through
        except Exception as exc:  # the client's next request gets it
            self.outcome = self._failure or exc
        finally:
            scope.end()
            self._signal()
        return not (scope.cancel_called and self._failure is None)

    def _signal(self) -> None:
        _wake(self._changed)
        self._changed = None
        if self.on_change is not None:
            self.on_change()

    def _change(self) -> asyncio.Future[None]:
        """What to await until `_signal`: the future itself, not a coroutine around it (one frame less resumed for
        every wake of a waiting request)."""
        changed = self._changed
        if changed is None or changed.done():  # done: cancelled with a request that waited on it
            changed = self._changed = asyncio.get_running_loop().create_future()
        return changed

    def _ready(self) -> bool:
        if self.outcome is not None:
            return True
        if self.task is not None:
            return False  # its questions wait in the task
        return bool(self.open) and not self._processing and self._registering == 0

    def _may_become_task(self, call: ClientRequest, declared: bool | None = None) -> bool:
        """Whether `call` may be answered with a task now. `declared`: `_declares_tasks(call)`, when that was read
        already (it does not change while the request lives)."""
        if declared is None:
            declared = self._declares_tasks(call)
        return declared and self.task is None and self.tasks is not None and self.tasks.has_room(self.peer)

    def _declares_tasks(self, call: ClientRequest) -> bool:
        """Whether `call` is a `tools/call` that declared the extension, where the call has tasks to become."""
        return self.tasks is not None and self.method == "tools/call" and declares_tasks(call.raw_capabilities())

    def _become_task(self) -> JsonObject:
        """The request waiting now gets a `CreateTaskResult`; no retry may resume the call any more."""
        assert self.tasks is not None
        self.task = self.tasks.create(self, **self.task_seed)
        self.claimed, self.round_nonce = True, None
        return {**self.task.handle(), "resultType": "task"}

    def supersede(self) -> None:
        """A retry with the state of the one now waiting: that one was lost; the new one takes its place. The one
        waiting is woken to step aside (a flag it reads, not a cancel scope made around every wait for it)."""
        if self.current is not None:
            self._superseded = self.current
            _wake(self._changed)
            self._changed = None

    async def next_round(self, call: ClientRequest, declared: bool | None = None) -> JsonObject:
        """Wait, as `call`, for the parked call's result or its next questions (`declared`: as `_may_become_task`)."""
        self.current, self._latest = call, call
        superseded = False
        try:
            if self._url_waits:
                # A call that already has its outcome needs no completion (the gateway's own hosted
                # page never sends one to a 2026-07-28 client: its answer is the outcome).
                with anyio.move_on_after(self.config.url_complete_wait):
                    while (self.outcome is None and not all(e.is_set() for e in self._url_waits.values())
                           and self._superseded is not call):
                        await self._change()
                if self._superseded is not call:
                    self._url_waits.clear()
            if self._superseded is call:
                pass
            elif self._may_become_task(call, declared):
                assert self.tasks is not None
                after = self.tasks.hand_over_after
                with anyio.move_on_after(after if after is not None else float("inf")) as held:
                    while not self._ready() and not self._hand_over and self._superseded is not call:
                        await self._change()
                taken = self._superseded is call
                if not taken and self.outcome is None and (self._hand_over or held.cancelled_caught):
                    return self._become_task()
            else:  # no deadline to keep: no scope for it (most requests)
                while not self._ready() and self._superseded is not call:
                    await self._change()
        except anyio.get_cancelled_exc_class():
            # The request the client waited with is gone. A first request leaves it nothing to retry
            # with, and a cancel it asked for means it will not: the call ends. A retry that was merely
            # lost (its HTTP request dropped) keeps the call, and the same requestState resumes it.
            if self.spent_nonce is None or call.cancel_requested:
                if self.scope is not None:
                    self.scope.cancel()
            if self.outcome is not None and not self.claimed and (left := self.on_left) is not None:
                self.on_left = None
                left(self)
            raise
        finally:
            if self.current is call:
                self.current = None
            if self._superseded is call:
                superseded, self._superseded = True, None
        if superseded:
            raise errors.gateway_error(
                errors.ELICITATION_FAILED, "a newer retry with the same requestState took this request's place"
            )
        if self.outcome is not None:
            self.claimed = True
            if self.on_claimed is not None:
                self.on_claimed()
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome
        self.rounds += 1
        if self.rounds > self.config.max_rounds:
            if self.scope is not None:
                self.scope.cancel()
            raise errors.gateway_error(
                errors.ELICITATION_FAILED,
                f"the call asked for input more than {self.config.max_rounds} times",
                rule="bridging.max_rounds",
            )
        self.round_nonce, self.spent_nonce = _ROUND_NONCES.pop() if _ROUND_NONCES else _ROUND_NONCES.refill(), None
        self._seen, self._latest = (call.modes, call.raw_capabilities(), call.tool), None
        requests: JsonObject = {}
        for question in self.open.values():  # a loop, not a comprehension's frame
            requests[question.key] = {"method": question.method, "params": question.params}
        return {"resultType": "input_required", "inputRequests": requests,
                # `orjson.dumps({"k": STATE_KIND, "id": self.id, "n": self.round_nonce})`'s text (see `_POINTER_HEAD`)
                "requestState": f"{_POINTER_HEAD}{self.id}{_POINTER_NONCE}{self.round_nonce}{_POINTER_TAIL}"}

    def answer(self, responses: Mapping[str, Any]) -> None:
        """Hand the retry's `inputResponses` to the questions they answer."""
        for key, question in list(self.open.items()):
            if key not in responses:
                continue  # still open: asked again in the next round
            if question.elicitation is not None:
                self._processing[question.elicitation] = None
            del self.open[key]
            if not question.answered.done():
                question.answered.set_result(responses[key])
        self._signal()


class Rounds:
    """The parked calls of every 2026-07-28 client, and the two ways a request reaches one.

    Each parked call runs in a plain asyncio task of its own, under its own `CallScope` (`ParkedCall.scope`),
    which `close` cancels: most calls never ask, and a task in a task group of anyio's costs an event, a
    deque and callbacks more per call. A finished call whose outcome no request has taken yet stays in
    `parked` for `bridging.state_ttl` (a timer, not a waiting task), for the retry that comes for it.
    """

    def __init__(self, config: BridgingConfig) -> None:
        self.config = config
        self.parked: dict[str, ParkedCall] = {}
        self.home = ""
        """Prefix of this gateway's parked-call ids: with `redis_url`, `<replica id>.` (cluster.retries)."""
        self._tasks: dict[ParkedCall, asyncio.Task[None]] = {}
        """The parked calls running in tasks of their own; each leaves as its task's last step (`_run`), not in a
        done callback of the task's (one callback less through the loop for every parked call)."""
        self._expiries: dict[str, asyncio.TimerHandle] = {}
        self.tasks: contracts.CallTasks[ParkedCall] | None = None
        """The extension's tasks a `tools/call` may become (set by the gateway)."""
        self._read: tuple[str, StatePointer | None] | None = None
        """The state `parked_for` read last and what it held: the face looks a retry's parked call up, then
        resumes it with the same state (read once, not twice)."""

    async def start(
        self,
        call: ClientRequest,
        method: str,
        work: Callable[[ParkedCall], Awaitable[JsonObject]],
        then: Callable[[ParkedCall, object], Awaitable[JsonObject]] | None = None,
        parks_at_once: Callable[[ParkedCall], bool] | None = None,
    ) -> JsonObject:
        """A client's first request of a call: the call's outcome, or its first round.

        With `then`, `work` runs first in this request's own coroutine, as the parked task would run it, and a call
        that never asks (most) ends there, with no task; where it would ask it raises `GoesOn` instead, and `then`,
        given what it carries, goes on with the call in a parked task, as `work` alone would have. A call whose
        request may be answered with a task of the extension while it runs (`hand_over_after`) is `then`'s from the
        start (given None), and so is one `parks_at_once` says would raise `GoesOn(None)` before anything is sent
        (toward a server that asks by requests of its own): no scope, bookkeeping or exception in this request's
        coroutine for it. What `parks_at_once` raises is this request's error, as `work`'s would be."""
        if len(self.parked) >= self.config.max_parked_calls:
            raise errors.gateway_error(
                errors.ELICITATION_LIMIT,
                "too many calls are waiting for a retry",
                limit="bridging.max_parked_calls",
                value=self.config.max_parked_calls,
            )
        park = ParkedCall(call.peer, method, call, self.config)
        park.tasks = self.tasks
        park.id = self.home + park.id
        self.parked[park.id] = park
        # Read once for this request: here, and as it waits for the call's first round (`next_round`).
        declared = park._declares_tasks(call) if then is not None else None  # pyright: ignore[reportPrivateUsage]
        if then is not None and declared and park._may_become_task(call, declared):  # pyright: ignore[reportPrivateUsage]
            # Its request may be answered with a task while the call runs: parked from the start.
            work = _Then(then, None)
        elif then is not None and parks_at_once is not None and self._parks_at_once(park, parks_at_once):
            work = _Then(then, None)
        elif then is not None:
            going = await self._run_here(park, work)
            if going is None:
                return self._outcome(park)
            work = _Then(then, going.state)
            del going  # its traceback holds the frames it left, and what they held, while the round waits
        task = asyncio.get_running_loop().create_task(self._run(park, work))
        # The call's scope from now on, before its task's first step: what cancels the call meanwhile (`close`, its
        # first request cancelled) reaches its work, not the ended scope of `_run_here`.
        park.scope = CallScope(task)
        self._tasks[park] = task
        return await park.next_round(call, declared)

    def _parks_at_once(self, park: ParkedCall, parks_at_once: Callable[[ParkedCall], bool]) -> bool:
        """`parks_at_once(park)`; raising, the call ends with nothing kept (its request gets the error)."""
        try:
            return parks_at_once(park)
        except BaseException:
            park.claimed, park.current = True, None
            self.parked.pop(park.id, None)
            raise

    async def _run_here(self, park: ParkedCall, work: Callable[[ParkedCall], Awaitable[JsonObject]]) -> GoesOn | None:
        """`work` in the request's coroutine, under the call's scope as `ParkedCall.run` has it: its outcome set (None
        returned), or where it goes on parked (`GoesOn`, nothing asked yet)."""
        park.peer.calls.add(park)
        scope = park.scope = CallScope(asyncio.current_task())
        try:
            park.outcome = await work(park)
        except GoesOn as going:
            return going  # its scope ended as the `finally` below ends it
        except asyncio.CancelledError:
            # Cancelled by the call's scope (the gateway stopping): the request gets the call's end, as one waiting
            # for a parked call's outcome would. Cancelled from elsewhere (the client cancelled its request, or went
            # away): as a first request waiting on a parked call, the call ends with it.
            if not scope.end():
                self.parked.pop(park.id, None)
                raise
            park.outcome = park._failure or errors.gateway_error(  # pyright: ignore[reportPrivateUsage]
                errors.ELICITATION_FAILED, "the call was cancelled")
        except Exception as exc:
            park.outcome = park._failure or exc  # pyright: ignore[reportPrivateUsage]
        finally:
            scope.end()
            park.peer.calls.discard(park)
        return None

    def _outcome(self, park: ParkedCall) -> JsonObject:
        """The outcome of a call that ended in its request's coroutine: that request's answer; nothing stays parked."""
        park.claimed = True
        park.current = None
        self.parked.pop(park.id, None)
        if isinstance(park.outcome, BaseException):
            raise park.outcome
        assert park.outcome is not None
        return park.outcome

    async def _run(self, park: ParkedCall, work: Callable[[ParkedCall], Awaitable[JsonObject]]) -> None:
        park.peer.calls.add(park)
        keep = False
        try:
            keep = await park.run(work, park.scope)
        finally:
            self._tasks.pop(park, None)
            park.peer.calls.discard(park)
            if keep and not park.claimed and park.current is not None:
                # A request is waiting and was just woken: it takes the outcome in its next step (most calls) and the
                # call is dropped as it does; one cancelled as it was woken keeps it for the retry that comes for it.
                # Not a timer made and cancelled per call, nor a callback of the loop's ahead of the request's answer.
                park.on_claimed = partial(self.forget, park.id)
                park.on_left = self._keep_until_claimed
            else:
                self._settle(park, keep)

    def _settle(self, park: ParkedCall, keep: bool = True) -> None:
        """A finished call: its outcome kept for the retry that comes for it (`keep`, and no request took it), or
        the call dropped."""
        if keep and not park.claimed:
            self._keep_until_claimed(park)
        else:
            self.parked.pop(park.id, None)

    def _keep_until_claimed(self, park: ParkedCall) -> None:
        """Nobody may be looking right now: the outcome waits for the retry that comes for it, at most
        `bridging.state_ttl`."""
        self._expiries[park.id] = asyncio.get_running_loop().call_later(self.config.state_ttl, self.forget, park.id)
        park.on_claimed = lambda: self.forget(park.id)

    def forget(self, park_id: str) -> None:
        """Drop a finished call's kept outcome (claimed, or no retry came for it in time)."""
        self.parked.pop(park_id, None)
        expiry = self._expiries.pop(park_id, None)
        if expiry is not None:
            expiry.cancel()

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Cancel every parked call still running and wait (at most `timeout`, shielded: the gateway calls this
        as it stops) for them to end; drop the kept outcomes."""
        running = list(self._tasks.items())
        for park, _ in running:
            assert park.scope is not None, "made with the call's task (`start`)"
            park.scope.cancel()  # reaches the work at its first wait, if its task has not taken a step yet
        if running:
            with anyio.move_on_after(timeout, shield=True):
                await asyncio.wait([task for _, task in running])
        self._tasks.clear()  # any still running past `timeout` take themselves out as they end
        for park_id in list(self._expiries):
            self.forget(park_id)
        self.parked.clear()

    def parked_for(self, state: Any) -> ParkedCall | None:
        """The parked call a verified `requestState` points to, if it is still parked."""
        pointer = read_pointer(state)
        if type(state) is str:  # a str parsed from JSON (a subclass: read again by `resume`, as anything else)
            self._read = (state, pointer)
        return self.parked.get(pointer.id) if pointer is not None else None

    async def resume(self, call: ClientRequest, method: str, state: str, responses: Any) -> JsonObject:
        """A retry: the `requestState` the boundary verified (ours, unexpired, bound to this request)."""
        read, self._read = self._read, None
        # The very string `parked_for` read (a pointer holds only immutable strings), else read now.
        pointer = read[1] if read is not None and read[0] is state else read_pointer(state)
        if pointer is None:
            raise _invalid_state("requestState was not issued for a call of this gateway")
        park = self.parked.get(pointer.id)
        if park is None or park.claimed:
            raise _invalid_state("the call this requestState belongs to has ended or expired")
        if park.peer is not call.peer or park.method != method:
            raise _invalid_state("requestState belongs to another client's call")
        if responses is not None and not is_mapping(responses):
            raise errors.gateway_error(INVALID_PARAMS, "inputResponses must be an object", rule="inputResponses")
        nonce = pointer.nonce
        if nonce and nonce == park.spent_nonce:
            park.supersede()  # the retry that answered this round was lost: this one waits in its place
        elif nonce is None or nonce != park.round_nonce or park.current is not None:
            raise _invalid_state("requestState was already used; retry with the latest one")
        else:
            park.round_nonce, park.spent_nonce = None, nonce  # one retry per round
            park.answer(responses or {})
        return await park.next_round(call)


class _Then:
    """The rest of a call that went on parked (`Rounds.start`'s `then`, with what `GoesOn` carried), as the parked
    task's work; what it carries is handed over once, not held for as long as the call's questions wait."""

    __slots__ = ("_then", "_state")

    def __init__(self, then: Callable[[ParkedCall, object], Awaitable[JsonObject]], state: object) -> None:
        self._then = then
        self._state = state

    def __call__(self, park: ParkedCall) -> Awaitable[JsonObject]:
        state, self._state = self._state, None
        return self._then(park, state)


class CallScope:
    """The cancel scope around a parked call's work, without an anyio scope made for each call (most never ask, and
    nothing cancels them): `cancel` cancels the work's task as the scope would (`wire.scopes.TaskCancel`, made only
    then: a shielded step runs to its end), and `end`, as the work ends, takes back what it delivered."""

    __slots__ = ("_task", "_cancel", "_ended", "cancel_called")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self._task = task
        self._cancel: TaskCancel | None = None
        self._ended = False
        self.cancel_called = False

    def cancel(self) -> None:
        if self.cancel_called:
            return
        self.cancel_called = True
        if not self._ended and self._task is not None:
            self._cancel = TaskCancel(self._task, "the parked call was cancelled")

    def end(self) -> bool:
        """The work ended: no more cancellation. Whether a `CancelledError` caught now was this scope's (the task has
        no other cancellation pending)."""
        self._ended = True
        cancel, self._cancel = self._cancel, None
        return cancel is not None and cancel.stop()


@dataclass(frozen=True)
class StatePointer:
    """What a `requestState` of ours holds: the parked call and the nonce of the round it may answer."""

    id: str
    nonce: str | None


_POINTER_HEAD = f'{{"k":"{STATE_KIND}","id":"'
"""A round's pointer is `f"{_POINTER_HEAD}{id}{_POINTER_NONCE}{nonce}{_POINTER_TAIL}"`, as
`orjson.dumps({"k": STATE_KIND, "id": id, "n": nonce})` writes it: ids and nonces are URL-safe base64 (a replica's
prefix hex and a dot), which JSON writes as they are."""
_POINTER_HEAD_LEN = len(_POINTER_HEAD)
_POINTER_NONCE = '","n":"'
_POINTER_TAIL = '"}'


def read_pointer(state: Any) -> StatePointer | None:
    """The parked call and round a `requestState` of ours points to (None: not one of ours)."""
    if type(state) is str and state.startswith(_POINTER_HEAD) and state.endswith(_POINTER_TAIL) and state.isprintable():
        # As `next_round` writes it (every round's): split, not parsed. Printable, with no quote or backslash in
        # either value, it holds nothing JSON would escape, and reads as the parser would read it.
        park_id, found, nonce = state[_POINTER_HEAD_LEN:-2].partition(_POINTER_NONCE)
        if found and '"' not in park_id and '"' not in nonce and "\\" not in state:
            return StatePointer(park_id, nonce)
    try:
        pointer = orjson.loads(state) if isinstance(state, str) else None
    except ValueError:
        return None
    if not is_object(pointer) or pointer.get("k") != STATE_KIND or not isinstance(park_id := pointer.get("id"), str):
        return None
    nonce = pointer.get("n")
    return StatePointer(park_id, nonce if isinstance(nonce, str) else None)


def _wake(changed: asyncio.Future[None] | None) -> None:
    if changed is not None and not changed.done():
        changed.set_result(None)


_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def _url_safe(random: bytes) -> str:
    """`random` as `secrets.token_urlsafe` writes its bytes: URL-safe base64 without padding."""
    return binascii.b2a_base64(random, newline=False).translate(_URL_SAFE).rstrip(b"=").decode()


_CALL_IDS = RandomBatch(16, _url_safe)
"""Parked calls' ids (`secrets.token_urlsafe(16)`'s), made ahead."""
_ROUND_NONCES = RandomBatch(12, _url_safe)
"""Rounds' nonces (`secrets.token_urlsafe(12)`'s), made ahead."""



def _invalid_state(reason: str) -> MCPError:
    return errors.gateway_error(INVALID_PARAMS, "Invalid or expired requestState", reason=reason)


def _without_elicitation_id(params: JsonObject) -> JsonObject:
    """A 2026-07-28 URL-mode request carries no `elicitationId` (the retry is the completion)."""
    return {k: v for k, v in params.items() if k != "elicitationId"}
