"""The admin API (`/api/...`, JSON): the pending and ended elicitations, answering, cancelling and
releasing hosted ones, live events, the audit trail. Its OpenAPI document is `admin_openapi`; the
operator's inbox page, which reads through it, is `inbox_page`.

The API needs the admin token (`ELICITGATE_ADMIN_TOKEN` or `admin_token` in the config) as
`Authorization: Bearer <token>`; the inbox's session cookie is good for its reads only, so a page elsewhere
cannot answer or cancel anything with it. See `admin_auth` for sessions and slowed guesses. Without a
token it answers 404.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from mcp.shared.exceptions import MCPError

from elicitgate.audit.record import as_json, parse_filters
from elicitgate.audit.trail import AuditTrail
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.hosting import Hosting
from elicitgate.elicitation.model import ACTION_STATES, Elicitation, State
from elicitgate.errors import NotFinite
from elicitgate.json_shapes import JsonObject, is_mapping, is_object
from elicitgate.web import claims
from elicitgate.web.admin_auth import VOUCHED, AdminAuth
from elicitgate.web.admin_openapi import AUDIT_MAX, AUDIT_PAGE, openapi_document
from elicitgate.web.hosted_html import iso
from elicitgate.web.pages import check_answer, deliver
from elicitgate.web.responses import nosniff, problem, secure
from elicitgate.wire import codec

HEARTBEAT = 15.0
AUDIT_OPEN_WAIT = 10.0
"""Seconds a read of the audit trail waits for the store to open (it opens at first use)."""
STOP_WAIT = 10.0


class AdminRoutes:
    def __init__(self, hosting: Hosting, broker: Broker, audit: AuditTrail | None, auth: AdminAuth) -> None:
        self.hosting = hosting
        self.registry = hosting.registry
        self.broker = broker
        self.audit_trail = audit
        self.auth = auth

    # -- auth ------------------------------------------------------------------------------------

    def refusal(self, request: Request, *, write: bool) -> Response | None:
        """None when the caller may use the admin API (`write`: answer, cancel, release); else the refusal."""
        return self._deny(request, write=write)

    def _deny(self, request: Request, *, write: bool) -> Response | None:
        if request.scope.get(VOUCHED) is True:  # checked by the replica it reached
            return None
        if not self.auth.on:
            return problem(404, "the admin API is off: set ELICITGATE_ADMIN_TOKEN (or admin_token in the config)")
        given = self.auth.bearer(request)
        if given is None and not write and self.auth.session_ok(request):
            return None
        return self.auth.check_token(request, given)

    # -- views of an elicitation -----------------------------------------------------------------------

    def item(self, el: Any, *, detail: bool = False) -> JsonObject:
        entry: HostedEntry | None = self.registry.by_id.get(el.id)
        data: JsonObject = {
            "id": el.id,
            "server": el.server,
            "message": el.params.get("message"),
            "mode": el.mode,
            "state": str(el.state),
            "form_url": self.hosting.page_url(entry) if entry is not None else None,
            "hosted": entry.kind if entry is not None else None,
            "created_at": iso(el.created_at),
            "deadline": iso(time.time() + max(0.0, el.deadline - anyio.current_time())),
            "client": el.origin.peer.id if el.origin is not None else None,
            "claimed_at": iso(entry.claimed_at) if entry is not None and entry.claimed_at is not None else None,
            "source": el.source,
            "gateway_reason": el.gateway_reason,
        }
        if el.mode == "url":
            data["url"] = el.params.get("url")
        if detail:
            data["requestedSchema"] = el.params.get("requestedSchema") if el.mode == "form" else None
            data["errors"] = entry.errors if entry is not None else []
            data["attempts"] = el.attempts
        return data

    def _ended(self, id_: str) -> JsonObject | None:
        return self.broker.recent.find(id_)

    def pending(self) -> list[JsonObject]:
        """This replica's pending elicitations."""
        els = sorted(self.broker.pending.values(), key=lambda el: el.created_at)
        return [self.item(el) for el in els if not el.state.terminal]

    async def all_pending(self) -> list[JsonObject]:
        """With `redis_url`, every replica's (raises the `MCPError` of an unreachable Redis); else `pending()`."""
        if self.hosting.elsewhere is None:
            return self.pending()
        return sorted([*self.pending(), *await self.hosting.elsewhere()], key=lambda item: item["created_at"])

    # -- the API ---------------------------------------------------------------------------------------

    async def list(self, request: Request) -> Response:
        if (denied := self._deny(request, write=False)) is not None:
            return denied
        state = request.query_params.get("state", "pending")
        if state not in ("pending", "ended", "all"):
            return problem(422, "state must be pending, ended or all")
        items: list[JsonObject] = []
        if state in ("pending", "all"):
            try:
                items += await self.all_pending()
            except MCPError as exc:
                data = exc.error.data
                return problem(503, exc.error.message, **(data if is_object(data) else {}))
        if state in ("ended", "all"):
            items += [{**s, "created_at": iso(s["created_at"])} for s in reversed(self.broker.recent)]
        return secure(JSONResponse({"elicitations": items}))

    async def show(self, request: Request) -> Response:
        if (denied := self._deny(request, write=False)) is not None:
            return denied
        id_ = request.path_params["id"]
        el = self.broker.pending.get(id_)
        if el is not None:
            return secure(JSONResponse(self.item(el, detail=True)))
        summary = self._ended(id_)
        if summary is not None:
            return secure(JSONResponse({**summary, "created_at": iso(summary["created_at"])}))
        return problem(404, "no such elicitation")

    async def _target(self, request: Request) -> Elicitation | Response:
        """The pending elicitation a write (answer, cancel, release) names, or the response that refuses
        it: no admin token, no such elicitation, already ended."""
        if (denied := self._deny(request, write=True)) is not None:
            return denied
        id_ = request.path_params["id"]
        el = self.broker.pending.get(id_)
        if el is None or el.state.terminal:
            summary = self._ended(id_)
            if summary is not None:
                return problem(409, "the elicitation has already ended", id=id_, state=summary["state"])
            if el is not None:
                return problem(409, "the elicitation has already ended", id=id_, state=str(el.state))
            return problem(404, "no such elicitation")
        return el

    async def answer(self, request: Request) -> Response:
        el = await self._target(request)
        if isinstance(el, Response):
            return el
        try:
            body = codec.loads(await request.body())
        except NotFinite as exc:  # NaN in the content: the answer check names the field
            body = exc.value
        except ValueError:  # not JSON, or nested too deep (`TooDeep`)
            return problem(422, "the body must be an ElicitResult: {\"action\": ..., \"content\": {...}}")
        action = body.get("action") if is_mapping(body) else None
        if action not in ACTION_STATES:
            return problem(422, "action must be accept, decline or cancel")
        entry = self.registry.by_id.get(el.id)
        if entry is None:
            return problem(
                409, "this elicitation is presented by its client, not hosted", id=el.id, state=str(el.state)
            )
        raw: JsonObject = {"action": action}
        if action == "accept" and el.mode == "form":
            given = body.get("content")
            content: Mapping[str, Any] = given if is_mapping(given) else {}
            problems = check_answer(entry, content)
            if problems:
                return secure(JSONResponse({"error": "the answer does not match the form", "errors": problems},
                                           status_code=422))
            raw["content"] = dict(content)
        if not await deliver(entry, raw):
            return problem(409, "an answer is already being sent", id=el.id, state=str(el.state))
        if not entry.ended:
            return secure(JSONResponse(
                {"error": "the answer was not accepted", "errors": entry.errors}, status_code=422
            ))
        return secure(JSONResponse({"id": el.id, "state": str(el.state)}))

    async def cancel(self, request: Request) -> Response:
        el = await self._target(request)
        if isinstance(el, Response):
            return el
        el.stop(State.CANCELLED, "cancelled by the operator")
        with anyio.move_on_after(STOP_WAIT):
            await el.wait_ended()  # the broker's task records the end on its next step
        return secure(JSONResponse({"id": el.id, "state": str(el.state)}))

    async def release(self, request: Request) -> Response:
        """Free a hosted page from the browser that claimed it (web/claims.py)."""
        el = await self._target(request)
        if isinstance(el, Response):
            return el
        return secure(JSONResponse({"id": el.id, "released": self.release_claim(el.id)}))

    def release_claim(self, id_: str) -> bool:
        entry = self.registry.by_id.get(id_)
        released = entry is not None and claims.release(entry)
        if released:
            self.registry.bump()
        return released

    async def events(self, request: Request) -> Response:
        """Server-sent events: `pending` with the whole pending list, at once and on every change."""
        if (denied := self._deny(request, write=False)) is not None:
            return denied

        async def stream() -> AsyncIterator[str]:
            version = -1
            while True:
                if version != self.registry.version:
                    version = self.registry.version
                    try:
                        items = await self.all_pending()
                    except MCPError:  # Redis out of reach: this replica's own, until it is back
                        items = self.pending()
                    yield f"event: pending\ndata: {json.dumps(items)}\n\n"
                with anyio.move_on_after(HEARTBEAT):
                    await self.registry.wait_change(version)
                    continue
                yield ": keep-alive\n\n"

        return nosniff(StreamingResponse(stream(), media_type="text/event-stream"))

    async def audit(self, request: Request) -> Response:
        """The audit trail (docs/operations.md), newest `limit` records oldest first, with the CLI's filters."""
        if (denied := self._deny(request, write=False)) is not None:
            return denied
        trail = self.audit_trail
        if trail is None:
            return problem(404, "the audit trail is off (audit.enabled: false)")
        query = request.query_params
        try:
            filters = parse_filters(query.get("state"), query.get("server"), query.get("since"))
            limit = int(query.get("limit", AUDIT_PAGE))
            if not 1 <= limit <= AUDIT_MAX:
                raise ValueError
        except ValueError as exc:
            return problem(422, str(exc) or f"limit must be an integer from 1 to {AUDIT_MAX}")
        store = await trail.opened(AUDIT_OPEN_WAIT)
        if store is None:
            response = problem(503, "the audit store is not open yet (see the gateway's log)")
            response.headers["Retry-After"] = "5"
            return response
        rows = await store.query(**filters, limit=limit)
        return secure(JSONResponse({"records": [as_json(row) for row in rows]}))

    async def openapi(self, request: Request) -> Response:
        return secure(JSONResponse(openapi_document()))
