"""The broker: the only owner of an elicitation's life.

A source hands the broker a request and the downstream call that caused it, always through `router.inbound` (a
server's push, an `input_required` round, a task's question, the gateway's own). The broker checks the
request, admits it against the limits, chooses its responder (`elicitation.responders`), presents it to the
origin client, checks the answer (asking again while attempts and time remain), and ends it exactly once: the
end is logged as one structured event, counted in the metrics and handed to the audit trail, and nothing of it
stays in any map. A request refused before it reaches a human is recorded the same way (state `refused`, with
a short reason).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from contextlib import nullcontext
from contextvars import Token
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
from mcp_types import INVALID_PARAMS

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.audit.record import REFUSED, AuditRecord, logged
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import ElicitationConfig, Unattended
from elicitgate.contracts import DownstreamPeer, Origin, SharedLimits, UrlCompletionTarget
from elicitgate.elicitation.form_schemas import CheckedSchema, FormSchemas
from elicitgate.elicitation.headless import is_headless
from elicitgate.elicitation.hosting import Hosting
from elicitgate.elicitation.limits import TokenBucket, pending_limit, rate_limited
from elicitgate.elicitation.meta import ERRORS_META_KEY, REASON_META_KEY, SERVER_META_KEY, SOURCE_META_KEY
from elicitgate.elicitation.model import ACTION_STATES, Elicitation, GatewayReason, Responder, Source, State
from elicitgate.elicitation.notify import Notifier
from elicitgate.elicitation.recent import RecentEnds
from elicitgate.elicitation.responders import (
    INPUT_REQUIRED,
    PUSH_TO_CLIENT,
    FirstAnswer,
    PageOnly,
    PushToClient,
    to_client,
)
from elicitgate.elicitation.schema import answer_problems
from elicitgate.elicitation.sensitive import sensitive_fields, sensitive_words
from elicitgate.elicitation.url_policy import UrlPolicy
from elicitgate.elicitation.url_routes import SessionTarget, UrlRoutes
from elicitgate.errors import HumanGone
from elicitgate.json_shapes import JsonObject, is_array, is_mapping
from elicitgate.logs import current_request, log_event, request_context, reset_request, set_request
from elicitgate.metrics import (
    ABANDONED,
    ELICITATIONS,
    REASKS,
    REFUSALS,
    elicitation_ended,
    labelled,
    pending_closed,
    pending_opened,
)
from elicitgate.upstreams.clock import PausableDeadline

logger = logging.getLogger(__name__)
audit = logging.getLogger("elicitgate.audit")

GATEWAY_ASKER = "elicitgate"
_MAX_IDLE_BUCKETS = 4096
_ENDED = frozenset(state for state in State if state.terminal)
"""`State.terminal`'s states: looked up in C, not through the enum's property."""
_KEEP_NOTHING = (PUSH_TO_CLIENT, INPUT_REQUIRED)
"""The client's own responders, whose `ended` has nothing to drop: not called on the answer's way."""
_CALLBACK_CONTEXT = contextvars.Context()
"""What `_after_answer`'s callbacks run in: a context of their own, not a copy of the task's for each elicitation."""


class Broker:
    def __init__(
        self,
        config: ElicitationConfig,
        audit: AuditTrail | None = None,
        url_policy: UrlPolicy | None = None,
        hosting: Hosting | None = None,
    ) -> None:
        self.config = config
        self.url_policy = url_policy or UrlPolicy(config.url_policy)
        self.audit = audit
        """The `AuditTrail` that keeps every end and refusal (None: audit off)."""
        self.pending: dict[str, Elicitation] = {}
        self._of_peer: dict[DownstreamPeer, set[Elicitation]] = {}
        """The pending elicitations of each client that has some."""
        self.recent = RecentEnds()
        """The last 1,000 ends' summaries (the admin API's `state=ended`)."""
        self.url_routes = UrlRoutes()
        self._open: dict[str, int] = {}
        """Pending elicitations per client identity (principal, else session)."""
        self._buckets: dict[str, TokenBucket] = {}
        self.shared_limits: SharedLimits | None = None
        """With `redis_url`: limits counted over all replicas (`cluster.limits.SharedLimits`), instead of here."""
        self.hosting = hosting
        """The gateway's own hosted page and inbox; None when the process has no web server for them."""
        self.secret_words = sensitive_words(config.sensitive_words, config.extra_sensitive_words)
        """What makes a field a secret (`elicitation.sensitive_words`): `sensitive_fields` decides with it."""
        self.form_schemas = FormSchemas(max_properties=config.max_properties, secret_words=self.secret_words)
        self._plain_checks = self.form_schemas.plain_checks.get
        self.notices: Notifier | None = None
        """With notice targets configured: who tells people a question waits (docs/notify.md)."""
        self.unattended: Callable[[str, str | None], Unattended] = lambda server, tool: config.unattended
        """What a question of (server, tool) nobody answered by its deadline becomes (`notice_rules`)."""
        self._abandon = self._abandoned
        """Bound once: every admitted elicitation keeps it (`Elicitation.abandon`), not a method object each."""

    # -- the source-facing entry -----------------------------------------------------------

    async def elicit(
        self,
        *,
        server: str,
        origin: Origin | None,
        params: Mapping[str, Any] | None,
        timeout: float | None = None,
        clocks: Sequence[PausableDeadline] = (),
        candidates: Callable[[], list[Origin]] | None = None,
        url_ids: bool = True,
        source: Source = "upstream",
        gateway_reason: GatewayReason | None = None,
        own_task: bool = False,
    ) -> JsonObject:
        """Run one upstream elicitation to its end; returns the `ElicitResult` for the upstream.

        `candidates` is given when `origin` is only a guess among the calls in flight on a pipe that
        cannot name its call: it returns those calls (see `Elicitation.candidates`).
        `url_ids` is false for a 2026-07-28 source, whose URL-mode requests carry no `elicitationId`.
        `source` and `gateway_reason` say who asks and why (the gateway's own questions: `router.asks`).
        `own_task`: the task awaiting this coroutine serves this question alone and ends with it (a server's push, in
        the upstream endpoint's task for it): the question's ids are put in that task's context for good, with
        nothing kept to restore them (`logs.name_request`).
        Raises `MCPError` with a specific code when the request is refused or cannot end well.
        """
        params = dict(params or {})
        try:
            origin, responder, identity, mode = await self._admitted(server, origin, params, url_ids)
        except MCPError as exc:
            self._refused(server, str(params.get("mode", "form")), origin, exc, source, gateway_reason)
            raise
        el = Elicitation(
            server=server,
            mode=mode,
            params=params,
            deadline=asyncio.get_running_loop().time() + (timeout or self.config.default_timeout),  # anyio's clock
            origin=origin,
            candidates=candidates,
            responder=responder,
            source=source,
            gateway_reason=gateway_reason,
        )
        task = asyncio.current_task()  # once: its deadline's wait and, in a task of its own, its end use it
        assert task is not None, "an elicitation is waited for in a task"
        self._opened(el, origin, identity, clocks)
        try:
            named = _named(origin, el, own_task)
            try:  # undone before the handlers below log, as a `with` did (a context manager was two calls more)
                # Here, not in a coroutine of its own: one frame less held by every pending elicitation, and with few
                # locals (what admits it and what it leaves behind are in `_admitted`, `_opened` and `_closed`). No
                # cancel scope either: its deadline is a loop timer that interrupts the wait (`Elicitation.interrupt`).
                paged = False
                while True:  # the question; then, past its deadline, maybe on its page only (`unattended: wait`)
                    cancelling = el.wait_begins(task)
                    try:
                        outgoing = _outgoing(el)
                        while True:  # asked again while the answer does not fit and attempts remain
                            try:
                                asking = self._asked(el, responder, outgoing)
                                del outgoing  # the client's request, once written, holds none either
                                raw = await asking
                            except (HumanGone, MCPError) as exc:
                                return self._not_asked(el, responder, exc)
                            answer, done = self._answered(el, raw)
                            if done:
                                return answer
                            outgoing = answer
                    except asyncio.CancelledError:
                        if not el.woken(cancelling):  # its deadline came, or it was stopped: else the call is cancelled
                            raise
                    finally:
                        el.wait_ends()
                    page = None if paged else self._page_past_deadline(el, responder, origin.tool)
                    if page is None:
                        return self._unanswered(el, responder, self.unattended(server, origin.tool))
                    # Past its deadline the question waits on its page only: the client's request was let go.
                    responder, paged = page, True
            finally:
                if named is not None:
                    reset_request(named)
        except anyio.get_cancelled_exc_class():
            self._end(el, el.stop_state or State.CANCELLED, el.reason or "the upstream cancelled its request")
            raise
        except MCPError as exc:
            if el.state not in _ENDED:
                self._end(el, State.FAILED, exc.error.message)
            raise
        except Exception as exc:
            self._end(el, State.FAILED, f"internal error: {type(exc).__name__}")
            logger.exception("elicitation %s failed", el.id)
            raise
        finally:
            self._closed(el, origin, identity)
            self._after_answer(el, task if own_task else None, clocks)
            if self.shared_limits is not None:
                await self.shared_limits.release(identity)

    async def _admitted(
        self, server: str, origin: Origin | None, params: JsonObject, url_ids: bool
    ) -> tuple[Origin, Responder, str, str]:
        """The checks a request passes before it is an elicitation (its form's schema put in `params`: the one every
        elicitation asking with it shares, `form_schemas`), who presents it, the identity its limits count and its
        mode; raises what refuses it."""
        mode = params.get("mode", "form")
        checked = self._check_request(server, mode, params, url_ids)
        if checked is not None:
            params["requestedSchema"] = checked.schema
        if mode == "url":
            await self.url_policy.check(server, params.get("url"), params.get("elicitationId"), needs_id=url_ids)
        if origin is None:
            raise errors.gateway_error(
                errors.ELICITATION_ORIGIN_UNKNOWN,
                "elicitation/create arrived outside any call the gateway can attribute it to",
                server=server,
            )
        peer = origin.peer
        secrets = checked.secrets if checked is not None else ()
        responder = self._responder(server, origin, mode, secrets)
        if self.shared_limits is None:
            return origin, responder, self.admit_here(server, peer, peer.identity), mode
        return origin, responder, await self.shared_limits.admit(server, peer), mode

    def _opened(self, el: Elicitation, origin: Origin, identity: str, clocks: Sequence[PausableDeadline]) -> None:
        """`el` is pending: its call's channel carries it, it is counted, and the request clocks stop while a person
        answers."""
        el.abandon, el.grace = self._abandon, self.config.abandoned_grace  # its carriers: made when one attaches
        origin.carry(el)  # the call's channel to its client, hosted or not: nothing is left to answer without it
        self.pending[el.id] = el
        self._open[identity] = self._open.get(identity, 0) + 1
        self._of_peer.setdefault(origin.peer, set()).add(el)
        pending_opened(el.server)
        if self.notices is not None:
            self.notices.watch(el)
        for clock in clocks:
            clock.pause()

    def _closed(self, el: Elicitation, origin: Origin, identity: str) -> None:
        """`el` is no longer pending (`_opened` undone but its request clocks, `_recorded`): nothing of it stays in any
        map."""
        self.pending.pop(el.id, None)
        if (left := self._open.pop(identity) - 1) > 0:
            self._open[identity] = left
        peer = origin.peer
        if (mine := self._of_peer.get(peer)) is not None:
            mine.discard(el)
            if not mine:
                del self._of_peer[peer]

    def _after_answer(
        self, el: Elicitation, own_task: asyncio.Task[Any] | None, clocks: Sequence[PausableDeadline]
    ) -> None:
        """What follows `el`'s answer on its way, in this order: its request `clocks` run again, the pending gauge,
        and for an end (`_end`) its summary in the last ends, metrics, log line and audit record (`_record_end`). In a
        task that serves `el` alone (`own_task`: a server's push), its done callback after the endpoint's, which writes
        the answer: the server has it before any of this is done. Else one callback later (the answer goes on its way
        in the caller's step first)."""
        if own_task is not None:
            own_task.add_done_callback(partial(self._recorded, el, clocks=clocks), context=_CALLBACK_CONTEXT)
        else:
            asyncio.get_running_loop().call_soon(self._recorded, el, None, clocks, context=_CALLBACK_CONTEXT)

    def _recorded(self, el: Elicitation, _task: object, clocks: Sequence[PausableDeadline] = ()) -> None:
        # The clocks stopped while a person answered (`_opened`) run again once the answer left: from the same budget,
        # a loop pass later at most (a clock whose call ended meanwhile arms nothing: `PausableDeadline.resume`).
        for clock in clocks:
            clock.resume()
        pending_closed(el.server)
        self.recent.settle()  # its summary in its slot (`_end` noted it)
        if el.state in _ENDED:
            # Logged with its request's ids and its own, named in the context this callback runs in: only these
            # callbacks run in it, each naming its own elicitation (no context copied for each end).
            origin = el.origin
            assert origin is not None  # admitted, so asked (`Elicitation.asked`)
            set_request({"request_id": origin.request_id, "client": origin.peer.id, "elicitation": el.id})
            self._record_end(el)

    def _page_past_deadline(self, el: Elicitation, responder: Responder, tool: str | None) -> Responder | None:
        """`unattended: wait` (for the server and the call's `tool`): past its deadline the question waits on its page
        only, until `unattended_wait` more has passed (its new deadline); None when it does not (it ends unanswered)."""
        if self.unattended(el.server, tool) != "wait" or (page := self._page_only(el, responder)) is None:
            return None
        el.deadline = anyio.current_time() + self.config.unattended_wait
        el.responder = page
        if self.notices is not None:
            self.notices.watch(el)
        return page

    def elicitations_of(self, peer: DownstreamPeer) -> Set[Elicitation]:
        """The pending elicitations `peer` caused."""
        return self._of_peer.get(peer, frozenset())

    def asking(self, peer: DownstreamPeer) -> bool:
        """`peer` has an elicitation pending."""
        return peer in self._of_peer

    def open_counts(self) -> dict[str, int]:
        """Pending elicitations per client identity (principal, else session)."""
        return dict(self._open)

    def human_timeout(self, server_timeout: float | None) -> float:
        """How long a human may take over a server's request: its `elicitation_timeout`, else the default."""
        return server_timeout or self.config.default_timeout

    def _responder(self, server: str, origin: Origin, mode: str, secrets: Sequence[str]) -> Responder:
        """Who presents this elicitation (`elicitation.responders`): the gateway's page or inbox when the
        hosting policy says so, else the client itself, raced with the question's page when notices say so.
        Refuses at once when nobody can (never after a timeout)."""
        if self.hosting is None and not (secrets and self.config.sensitive_fields == "host"):
            # Nothing hosted, nothing beside (`_beside`): the client, or a refusal (`_responder_for`).
            return to_client(origin) if mode in origin.modes else self._responder_for(server, origin, mode)
        responder = self._hosted_responder(server, origin, mode, secrets) or self._responder_for(server, origin, mode)
        if self._beside(server, origin, responder):
            assert self.hosting is not None
            return FirstAnswer(responder, self.hosting)
        return responder

    def _responder_for(self, server: str, origin: Origin, mode: str) -> Responder:
        """Who presents this elicitation; refuses at once when nobody can (never after a timeout)."""
        if mode in origin.modes:
            return to_client(origin)
        origin.require({"elicitation": {mode: {}}})  # a 2026-07-28 client learns why
        reason = self._why_not_hosted(server, origin, mode)
        raise errors.gateway_error(
            errors.ELICITATION_UNDELIVERABLE,
            f"the client cannot present {mode}-mode elicitations and the gateway cannot host them: {reason}",
            server=server,
            mode=mode,
            clientModes=sorted(origin.modes),
            reason=reason,
        )

    def _beside(self, server: str, origin: Origin, responder: Responder) -> bool:
        """The client shows it, and `notify.when: always` opens its page beside the client later."""
        if self.notices is None or self.hosting is None or responder not in (PUSH_TO_CLIENT, INPUT_REQUIRED):
            return False
        return self.notices.beside(server, origin.tool)

    def _page_only(self, el: Elicitation, responder: Responder) -> Responder | None:
        """`unattended: wait`: the question's page, where someone can still find it (inbox, notices)."""
        if el.stop_state is not None or self.hosting is None or el.mode != "form":
            return None
        if not self.hosting.reachable(el.server, el.asked().tool):
            return None
        return PageOnly(self.hosting, responder if isinstance(responder, FirstAnswer) else None)

    def _why_not_hosted(self, server: str, origin: Origin, mode: str) -> str:
        if self.hosting is not None:
            return self.hosting.unavailable_reason(server, origin, mode)
        return (
            "serve --stdio has no web server for the inbox: set http.hosted_listen and ELICITGATE_ADMIN_TOKEN, "
            "see docs/hosting.md"
        )

    def _hosted_responder(
        self, server: str, origin: Origin, mode: str, secrets: Sequence[str]
    ) -> Responder | None:
        """The gateway's own page / inbox when the server's `hosting` policy says so (docs/hosting.md), or
        when a form asks for `secrets` and `sensitive_fields` is `host`."""
        fields = list(secrets) if self.config.sensitive_fields == "host" else []
        responder = (
            self.hosting.responder_for(
                server, origin, mode, secrets=bool(fields), headless=is_headless(self.config.headless, origin.peer)
            )
            if self.hosting
            else None
        )
        if responder is None and fields:
            raise errors.gateway_error(
                errors.ELICITATION_SENSITIVE_BLOCKED,
                "form-mode elicitation asks for secrets and the gateway cannot host it",
                server=server,
                fields=fields,
                reason=self._why_not_hosted(server, origin, mode),
            )
        return responder

    def can_present(self, server: str, origin: Origin, params: JsonObject) -> bool:
        """Whether this request would reach a human for `origin` (checked, hosted or the client's own mode),
        without asking: the gateway's optional questions are skipped when it would not."""
        mode = params.get("mode", "form")
        try:
            checked = self._check_request(server, mode, params, url_ids=True)
            secrets = checked.secrets if checked is not None else ()
            return self._hosted_responder(server, origin, mode, secrets) is not None or mode in origin.modes
        except MCPError:
            return False

    def stop_for_peer(self, peer: DownstreamPeer, reason: str) -> None:
        """The client is gone: every elicitation it had ends cancelled."""
        for el in list(self.elicitations_of(peer)):
            el.stop(State.CANCELLED, reason)
        self.url_routes.drop_target(SessionTarget(peer))

    def _abandoned(self, el: Elicitation, why: str) -> None:
        """No carrier came back within `abandoned_grace`: the question ends (`abandoned: cancel`), the server
        is told `cancel` and stops waiting."""
        labelled(ABANDONED, el.server, self.config.abandoned).inc()
        if self.config.abandoned == "cancel":
            el.stop(State.CANCELLED, f"client gone: {why}")
        else:
            logger.info("elicitation %s has no client (%s): kept until its deadline (elicitation.abandoned)",
                        el.id, why)

    def url_route(self, server: str, elicitation_id: str, *, pop: bool) -> UrlCompletionTarget | None:
        return self.url_routes.get(server, elicitation_id, pop=pop)

    async def check_url_elicitations(self, server: str, elicitations: Any) -> None:
        """The links of a -32042's `data.elicitations` pass the URL policy, or the error is refused."""
        for item in elicitations if is_array(elicitations) else []:
            if is_mapping(item) and item.get("mode", "url") == "url":
                await self.url_policy.check(server, item.get("url"), item.get("elicitationId"), needs_id=True)

    def remember_url_elicitations(self, server: str, peer: DownstreamPeer, elicitations: Any) -> None:
        """Route later `notifications/elicitation/complete` for these ids (from a -32042) to `peer`'s session
        (its first `url_routes.per_error` items)."""
        items = elicitations[: self.url_routes.per_error] if is_array(elicitations) else []
        for item in items:
            if is_mapping(item) and isinstance(item.get("elicitationId"), str):
                self.url_routes.add(server, item["elicitationId"], SessionTarget(peer))

    # -- checks ------------------------------------------------------------------------------

    def _check_request(
        self, server: str, mode: str, params: Mapping[str, Any], url_ids: bool
    ) -> CheckedSchema | None:
        """Refuse a request the gateway does not pass on; a form's checked schema, shared (`FormSchemas`)."""
        if mode not in ("form", "url"):
            raise _refusal(server, f"unknown elicitation mode {mode!r}", rule="mode must be form or url")
        if "_meta" in params and params["_meta"] is not None and not is_mapping(params["_meta"]):
            # The gateway adds its own keys to it (`_outgoing`), and the spec makes it an object.
            raise _refusal(
                server, "elicitation/create: _meta must be an object", rule="_meta is an object when present"
            )
        message = params.get("message")
        if not isinstance(message, str):
            raise _refusal(server, "elicitation/create needs a string message", rule="message is required")
        if (len(message) if message.isascii() else len(message.encode())) > self.config.max_message_bytes:
            raise _refusal(
                server,
                "elicitation message too long",
                rule=f"message is at most {self.config.max_message_bytes} bytes",
            )
        if mode == "url":
            return None  # the link itself: `UrlPolicy.check`, which may resolve its host
        checked = self.form_schemas.check(params.get("requestedSchema"), max_bytes=self.config.max_schema_bytes)
        if checked.size > self.config.max_schema_bytes:
            raise _refusal(
                server,
                "requestedSchema too large",
                "invalid_schema",
                rule=f"schema is at most {self.config.max_schema_bytes} bytes of JSON",
                size=checked.size,
            )
        if checked.secrets:  # a list only for what says which (a request asking for none makes none)
            secrets = list(checked.secrets)
            if self.config.sensitive_fields == "block":
                raise errors.gateway_error(
                    errors.ELICITATION_SENSITIVE_BLOCKED,
                    "form-mode elicitation asks for secrets; use URL mode for those",
                    server=server,
                    fields=secrets,
                )
            logger.warning("server %r asks for secrets in a form (fields: %s)", server, ", ".join(secrets))
        problems = checked.problems
        if problems:
            first = problems[0]
            raise _refusal(
                server,
                f"requestedSchema is not a valid form-mode schema: {first}",
                "invalid_schema",
                property=first.property,
                rule=first.rule,
                problems=[p.as_dict() for p in problems],
            )
        return checked

    def admit_here(self, server: str, peer: DownstreamPeer, identity: str) -> str:
        """Check the limits for the client's `identity` (its principal, else its session) as counted in this
        process (with `redis_url`, while Redis is out of reach); returns the identity."""
        if self._open.get(identity, 0) >= self.config.max_pending_per_session:
            raise pending_limit(self.config, server, "max_pending_per_session")
        if len(self.pending) >= self.config.max_pending_total:
            raise pending_limit(self.config, server, "max_pending_total")
        bucket = self._buckets.get(identity)
        if bucket is None:
            if len(self._buckets) >= _MAX_IDLE_BUCKETS:  # a full bucket is a fresh one: dropping it loses nothing
                self._buckets = {k: b for k, b in self._buckets.items() if not b.full()}
            # Its first token taken as it is made (`burst` is at least 1: no wait), not by a call of `take`.
            self._buckets[identity] = TokenBucket(
                self.config.rate_limit_per_minute / 60.0, self.config.rate_limit_burst, taken=True
            )
            return identity
        wait = bucket.take()
        if wait:
            raise rate_limited(self.config, server, wait)
        return identity

    # -- presenting and answering -----------------------------------------------------------

    def _unanswered(self, el: Elicitation, responder: Responder, unattended: Unattended) -> JsonObject:
        """`el` reached its deadline or was stopped before an answer came: end it, and say what the upstream gets
        (`unattended`: `decline` declines; `wait` that found no page, and `cancel`, end it as they always did)."""
        if el.stop_state is not None:
            self._end(el, el.stop_state, el.reason or "stopped")
            return {"action": "cancel"}
        if unattended == "decline":
            el.answered_by = "unattended"
            self._end(el, State.TIMED_OUT, "no answer before the deadline: declined (elicitation.unattended)")
            return {"action": "decline"}
        self._end(el, State.TIMED_OUT, "no answer before the deadline")
        if responder.cancel_on_timeout:
            return {"action": "cancel"}
        raise errors.gateway_error(
            errors.ELICITATION_TIMEOUT,
            "the elicitation timed out waiting for the user",
            server=el.server,
            elicitationId=el.id,
        )

    def _asked(self, el: Elicitation, responder: Responder, outgoing: JsonObject) -> Awaitable[object]:
        """One more attempt: the responder's request to its human (its own coroutine, awaited by `elicit`)."""
        el.attempts += 1
        el.state = State.PRESENTED
        return responder.ask(el, outgoing)

    def _not_asked(self, el: Elicitation, responder: Responder, exc: HumanGone | MCPError) -> JsonObject:
        """The responder could not ask: its human went away (the upstream gets `cancel`), or it failed."""
        if isinstance(exc, HumanGone):
            self._end(el, State.CANCELLED, str(exc))
            return {"action": "cancel"}
        if responder is PUSH_TO_CLIENT and (gone := PushToClient.gone(el, exc)) is not None:
            self._end(el, State.CANCELLED, str(gone))
            return {"action": "cancel"}
        self._end(el, State.FAILED, f"{responder.name} error {exc.error.code}: {exc.error.message}")
        raise errors.gateway_error(
            errors.ELICITATION_FAILED,
            f"the {responder.name} failed the elicitation request",
            server=el.server,
            cause={"code": exc.error.code, "message": exc.error.message, "data": exc.error.data},
        ) from None

    def _answered(self, el: Elicitation, raw: object) -> tuple[JsonObject, bool]:
        """The human's answer checked: (the result for the upstream, True), or (the request asking again, False)
        while attempts remain for an answer that does not fit the form."""
        answer: Mapping[str, Any] = raw if is_mapping(raw) else {}
        if "action" in answer:
            el.answers += 1
        action = answer.get("action")
        if action not in ACTION_STATES:
            self._end(el, State.FAILED, "client answered with an invalid ElicitResult")
            raise errors.gateway_error(
                errors.ELICITATION_FAILED,
                "the client answered with an invalid ElicitResult",
                server=el.server,
                rule="action must be accept, decline or cancel",
            )
        if action != "accept" or el.mode == "url":
            self._end(el, ACTION_STATES[action], f"user chose {action}")
            if el.mode == "url" and action == "accept" and isinstance(el.params.get("elicitationId"), str):
                # A 2026-07-28 client learns of completion by retrying: its parked call waits for it.
                origin = el.asked()
                target: UrlCompletionTarget = origin if origin.era == "modern" else SessionTarget(origin.peer)
                self.url_routes.add(el.server, el.params["elicitationId"], target)
            return {"action": action}, True
        content: object = answer.get("content") or {}
        schema: JsonObject = el.params.get("requestedSchema") or {}  # `Elicitation.requested_schema`
        kept = self._plain_checks(id(schema))  # the form's shared copy: its check, not looked up by its JSON again
        problems = answer_problems(schema, content, kept[1] if kept is not None and kept[0] is schema else ...)
        if not problems and is_mapping(content):
            if self.audit is not None and self.audit.config.store_content:
                el.answer = dict(content)
            self._end(el, State.ACCEPTED, "user accepted")
            return {"action": "accept", "content": dict(content)}, True
        if el.attempts >= self.config.max_answer_attempts:
            self._end(el, State.FAILED, "answer invalid after all attempts")
            raise errors.gateway_error(
                INVALID_PARAMS,
                "the user's answer does not match the requested schema",
                server=el.server,
                errors=problems,
                attempts=el.attempts,
            )
        labelled(REASKS, el.server).inc()
        return _retry_params(el, problems), False

    def _end(self, el: Elicitation, state: State, reason: str) -> None:
        if el.state in _ENDED:
            return
        el.state, el.reason = state, reason
        el.ended_at = time.time()
        # Noted here, not after the answer: the admin API finds it pending or ended, never neither (its summary is
        # put in its slot after the answer: `_recorded`).
        self.recent.add(el)
        # Its metrics, log line and audit record once the answer is on its way to the server (`_after_answer`):
        # writing them costs more than relaying the answer, and the server, in a process of its own, can use that
        # time. An upstream's HTTP wire writes a request's POST (a 2026-07-28 upstream's retry with the answer) in its
        # caller's step on a kept-alive connection.
        el.mark_ended()  # and its carriers' grace timer stopped
        # Who else keeps state about it: a parked call counting its open answers, a hosted page.
        if el.origin is not None:
            el.origin.elicitation_ended(el)
        if el.responder is not None and el.responder not in _KEEP_NOTHING:
            el.responder.ended(el)

    def _record_end(self, el: Elicitation) -> None:
        assert el.ended_at is not None and el.reason is not None  # only called once it ended (`_end`)
        origin = el.origin
        assert origin is not None  # admitted, so asked (`Elicitation.asked`)
        peer, request_id = origin.peer, origin.request_id
        state = str(el.state)
        elicitation_ended(el.server, el.mode, state, el.ended_at - el.created_at)
        self._keep(
            "elicitation.ended",
            AuditRecord(
                id=el.id,
                server=el.server,
                mode=el.mode,
                state=state,
                reason=el.reason,
                created_at=datetime.fromtimestamp(el.created_at, UTC),  # `audit.record.utc`, a call less each
                ended_at=datetime.fromtimestamp(el.ended_at, UTC),
                attempts=el.answers,
                responder=el.answered_by or (el.responder.name if el.responder is not None else None),
                content=None if el.answer is None else self._kept_content(el, el.answer),
                source=el.source,
                gateway_reason=el.gateway_reason,
                # `_about(origin)`'s fields, given as they are (not a dict of them made to be spread)
                client=peer.client_name,
                client_id=peer.id,
                principal=peer.principal,
                request_id=None if request_id is None else str(request_id),
                tool=origin.tool,
            ),
        )

    def _refused(
        self, server: str, mode: str, origin: Origin | None, exc: MCPError, source: str, gateway_reason: str | None
    ) -> None:
        reason = exc.refusal if isinstance(exc, errors.GatewayError) else "invalid_request"
        # Any string a server sends as its mode would be a new time series: one label for all the others.
        labelled(ELICITATIONS, server, mode if mode in ("form", "url") else "other", REFUSED).inc()
        labelled(REFUSALS, server, reason).inc()
        now = datetime.now(UTC)
        record = AuditRecord(
            server=server, mode=mode, state=REFUSED, reason=reason, detail=exc.error.message,
            source=source, gateway_reason=gateway_reason, created_at=now, ended_at=now, **_about(origin),
        )
        with request_context(**_request_ids(origin)) if origin is not None else nullcontext():
            self._keep("elicitation.refused", record)

    def _keep(self, event: str, record: AuditRecord) -> None:
        """One log line (never a value a person typed) and one audit record."""
        log_event(audit, event, logged(record))
        if self.audit is not None:
            self.audit.record(record)

    def _kept_content(self, el: Elicitation, answer: JsonObject) -> JsonObject:
        """With `audit.store_content`: the accepted `answer` minus every field that looks like a secret."""
        secret = set(sensitive_fields(el.requested_schema, self.secret_words))
        return {name: value for name, value in answer.items() if name not in secret}


def _refusal(server: str, message: str, refusal: str = "invalid_request", **data: Any) -> MCPError:
    """`_check_request`'s refusals (a function of its own: not one made for every request checked)."""
    return errors.gateway_error(INVALID_PARAMS, message, refusal=refusal, server=server, **data)


def _request_ids(origin: Origin) -> JsonObject:
    """For the log lines written while it runs (this task may have been started by another request)."""
    return {"request_id": origin.request_id, "client": origin.peer.id}


def _named(origin: Origin, el: Elicitation, own_task: bool) -> Token[JsonObject | None] | None:
    """The log lines written while `el` waits name its request: in the task of another request, by ids of its own
    until the returned token resets them; in a task that serves `el` alone (`own_task`: a server's push) for good, or
    in the call's own task, which names it already, by nothing more held while it waits (None: nothing to reset; its
    end is logged with its own id all the same: `_recorded`)."""
    if own_task:
        set_request({"request_id": origin.request_id, "client": origin.peer.id, "elicitation": el.id})
        return None
    current = current_request()
    if current is not None and current.get("request_id") == origin.request_id and current.get("client") == (
        origin.peer.id
    ):
        return None
    return set_request({"request_id": origin.request_id, "client": origin.peer.id, "elicitation": el.id})


def _about(origin: Origin | None) -> JsonObject:
    """Who caused it: the client, its principal, the call (and its tool or prompt)."""
    if origin is None:
        return {}
    peer, request_id = origin.peer, origin.request_id
    return {
        "client": peer.client_name,
        "client_id": peer.id,
        "principal": peer.principal,
        "request_id": None if request_id is None else str(request_id),
        "tool": origin.tool,
    }


def _outgoing(el: Elicitation) -> JsonObject:
    """The request as the client sees it: says who asks (the server, or the gateway itself); everything
    else untouched."""
    outgoing = dict(el.params)
    asker = GATEWAY_ASKER if el.source == "gateway" else el.server
    outgoing["message"] = f"[{asker}] {el.params['message']}"
    outgoing["_meta"] = {**(el.params.get("_meta") or {}), SERVER_META_KEY: el.server}
    if el.source == "gateway":
        outgoing["_meta"] |= {SOURCE_META_KEY: el.source, REASON_META_KEY: el.gateway_reason}
    return outgoing


def _retry_params(el: Elicitation, problems: list[JsonObject]) -> JsonObject:
    listed = "; ".join(f"{p['property'] or 'form'}: {p['message']}" for p in problems)
    outgoing = _outgoing(el)
    prefix, _, message = outgoing["message"].partition(" ")
    outgoing["message"] = f"{prefix} Your previous answer was not accepted ({listed}). {message}"
    outgoing["_meta"][ERRORS_META_KEY] = problems
    return outgoing
