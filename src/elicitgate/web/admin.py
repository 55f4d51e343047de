"""The admin API (`/api/...`, JSON, OpenAPI at `/api/openapi.json`) and the operator's inbox (`/inbox`).

Both need the admin token (`ELICITGATE_ADMIN_TOKEN` or `admin_token` in the config): the API takes it as
`Authorization: Bearer <token>`; the inbox page logs in by POSTing it to `/inbox`, which sets a session
cookie and redirects to `/inbox` (the cookie is good for the API's reads only, so a page elsewhere
cannot answer or cancel anything with it). See `admin_auth` for sessions and slowed guesses. Without
a token both answer 404.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from mcp.shared.exceptions import MCPError

from elicitgate.audit.record import FIELDS, STATES, as_json, parse_filters
from elicitgate.audit.trail import AuditTrail
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.hosting import Hosting
from elicitgate.elicitation.model import ACTION_STATES, Elicitation, State
from elicitgate.errors import NotFinite
from elicitgate.json_shapes import is_mapping, is_object
from elicitgate.web import claims
from elicitgate.web.admin_auth import ADMIN_COOKIE, VOUCHED, AdminAuth
from elicitgate.web.forms import e
from elicitgate.web.pages import check_answer, deliver, iso, page
from elicitgate.web.responses import nosniff, problem, secure
from elicitgate.wire import codec

HEARTBEAT = 15.0
AUDIT_PAGE = 100
AUDIT_MAX = 10_000
AUDIT_OPEN_WAIT = 10.0
"""Seconds a read of the audit trail waits for the store to open (it opens at first use)."""
STOP_WAIT = 10.0


class AdminRoutes:
    def __init__(self, hosting: Hosting, broker: Broker, audit: AuditTrail | None, auth: AdminAuth) -> None:
        self.hosting = hosting
        self.registry = hosting.registry
        self.broker = broker
        self.audit_trail = audit
        self._form_key = secrets.token_bytes(32)
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

    def item(self, el: Any, *, detail: bool = False) -> dict[str, Any]:
        entry: HostedEntry | None = self.registry.by_id.get(el.id)
        data: dict[str, Any] = {
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

    def _ended(self, id_: str) -> dict[str, Any] | None:
        for summary in reversed(self.broker.recent):
            if summary["id"] == id_:
                return summary
        return None

    def pending(self) -> list[dict[str, Any]]:
        """This replica's pending elicitations."""
        els = sorted(self.broker.pending.values(), key=lambda el: el.created_at)
        return [self.item(el) for el in els if not el.state.terminal]

    async def all_pending(self) -> list[dict[str, Any]]:
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
        items: list[dict[str, Any]] = []
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
        raw: dict[str, Any] = {"action": action}
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
        return secure(JSONResponse({"id": el.id, "released": self._release(el.id)}))

    def _release(self, id_: str) -> bool:
        entry = self.registry.by_id.get(id_)
        released = entry is not None and claims.release(entry)
        if released:
            self.registry.bump()
        return released

    def _inbox_form_token(self, request: Request) -> str:
        """The inbox's own posts carry this, bound to its session cookie (which alone is good for reads)."""
        return hmac.new(self._form_key, request.cookies.get(ADMIN_COOKIE, "").encode(), hashlib.sha256).hexdigest()

    async def inbox_release(self, request: Request) -> Response:
        """The inbox's Release button (a plain form post: works without JavaScript)."""
        if (denied := self._deny(request, write=False)) is not None:
            return denied
        form = await request.form()
        given = form.get("csrf")
        expected = self._inbox_form_token(request)
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected.encode()):
            return problem(403, "the inbox form expired: reload the inbox")
        self._release(request.path_params["id"])
        return secure(RedirectResponse("/inbox", status_code=303))

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

    # -- the inbox page ------------------------------------------------------------------------------

    async def inbox(self, request: Request) -> Response:
        if not self.auth.on:
            return self._inbox_off()
        if not self.auth.session_ok(request):
            return self._login_page("", 401)
        form_token = self._inbox_form_token(request)
        try:
            items = await self.all_pending()
        except MCPError:
            items = self.pending()
        rows = "".join(self._row(item, form_token) for item in items)
        body = (
            '<h1>Pending elicitations</h1><p class="eg-meta" id="eg-live">Updates live.</p>'
            f'<table class="eg-inbox" id="eg-inbox" data-form-token="{e(form_token)}"><thead><tr><th>Server</th>'
            "<th>Message</th><th>Mode</th><th>Waiting</th><th>Deadline</th><th>Action</th></tr></thead>"
            f'<tbody id="eg-rows">{rows}</tbody></table>'
            f'<p class="eg-empty" id="eg-empty"{" hidden" if rows else ""}>Nothing is waiting for an answer.</p>'
        )
        return page("elicitgate inbox", body, scripts=("inbox.js",))

    async def login(self, request: Request) -> Response:
        """POST /inbox with the admin token: a new session, then the inbox."""
        if not self.auth.on:
            return self._inbox_off()
        form = await request.form()
        given = form.get("token")
        refused = self.auth.check_token(request, given if isinstance(given, str) else None)
        if refused is not None:
            if refused.status_code == 429:
                text = f"Too many wrong tokens; try again in {refused.headers['Retry-After']} s."
                response = self._login_page(text, 429)
                response.headers["Retry-After"] = refused.headers["Retry-After"]
                return response
            return self._login_page("Wrong token.", 401)
        response = RedirectResponse("/inbox", status_code=303)
        self.auth.start_session(request, response)
        return secure(response)

    @staticmethod
    def _inbox_off() -> Response:
        return page("Inbox is off", "<h1>The inbox is off</h1><p>Start the gateway with "
                    "<code>ELICITGATE_ADMIN_TOKEN</code> set.</p>", 404)

    @staticmethod
    def _login_page(error: str, status: int) -> Response:
        body = (
            "<h1>elicitgate inbox</h1><p>Enter the admin token.</p>"
            + (f'<p class="eg-error" id="eg-login-error">{e(error)}</p>' if error else "")
            + '<form method="post" action="/inbox" class="eg-form" id="eg-login"><div class="eg-field">'
            '<label for="token">Admin token</label>'
            '<input type="password" id="token" name="token" required autocomplete="current-password">'
            '</div><div class="eg-actions"><button class="eg-primary" type="submit">Open</button></div></form>'
        )
        return page("elicitgate inbox", body, status, scripts=("inbox.js",))

    @staticmethod
    def _row(item: Mapping[str, Any], form_token: str) -> str:
        link = (
            f'<a href="{e(item["form_url"])}" class="eg-answer">Answer</a>'
            if item.get("form_url")
            else f'<span class="eg-meta">with client {e(item.get("client") or "?")}</span>'
        )
        if item.get("claimed_at"):
            link += (
                f'<form method="post" action="/inbox/release/{e(item["id"])}" class="eg-release">'
                f'<input type="hidden" name="csrf" value="{e(form_token)}"><span class="eg-meta">opened</span> '
                '<button type="submit" class="eg-secondary">Release</button></form>'
            )
        return (
            f'<tr data-id="{e(item["id"])}"><td class="eg-col-server">{e(item["server"])}</td>'
            f'<td class="eg-col-message">{e(item.get("message") or "")}</td><td>{e(item["mode"])}</td>'
            f'<td><time class="eg-age" datetime="{e(item["created_at"])}">{e(item["created_at"])}</time></td>'
            f'<td><time datetime="{e(item["deadline"])}">{e(item["deadline"].replace("T", " "))}</time></td>'
            f"<td>{link}</td></tr>"
        )


def openapi_document() -> dict[str, Any]:
    summary = {
        "type": "object",
        "required": ["id", "server", "message", "mode", "state", "form_url", "created_at", "deadline"],
        "properties": {
            "id": {"type": "string"},
            "server": {"type": "string", "description": "the upstream server that asks"},
            "message": {"type": "string"},
            "mode": {"type": "string", "enum": ["form", "url"]},
            "state": {"type": "string", "enum": ["pending", "presented", "accepted", "declined", "cancelled",
                                                   "timed_out", "failed"]},
            "form_url": {"type": ["string", "null"], "description": "the hosted page; null when a client presents it"},
            "hosted": {"type": ["string", "null"], "enum": ["page", "inbox", None]},
            "created_at": {"type": "string", "format": "date-time"},
            "deadline": {"type": "string", "format": "date-time"},
            "client": {"type": ["string", "null"]},
            "claimed_at": {"type": ["string", "null"], "format": "date-time",
                           "description": "when a browser opened the hosted page (the only one that may answer)"},
            "url": {"type": "string", "description": "URL mode: the page the server wants opened"},
            "source": {"type": "string", "enum": ["upstream", "gateway"],
                       "description": "who asks: the upstream server, or the gateway on its own"},
            "gateway_reason": {"type": ["string", "null"], "enum": ["missing_arguments", "confirmation", None],
                               "description": "why the gateway asks (null when the upstream asks)"},
        },
    }
    detail = {
        "allOf": [
            {"$ref": "#/components/schemas/Elicitation"},
            {
                "type": "object",
                "properties": {
                    "requestedSchema": {"type": ["object", "null"]},
                    "errors": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}},
                    "attempts": {"type": "integer"},
                },
            },
        ]
    }
    error = {"type": "object", "required": ["error"], "properties": {
        "error": {"type": "string"}, "id": {"type": "string"}, "state": {"type": "string"},
        "errors": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}}}}

    def responses(ok: str, *codes: int) -> dict[str, Any]:
        out: dict[str, Any] = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ok}}}}}
        words = {401: "missing or wrong token", 404: "unknown id, or the admin API is off", 503:
                 "the audit store is not open yet (Retry-After)", 409:
                 "the elicitation already ended (its final state is in `state`) or is not hosted",
                 422: "the answer fails the form (`errors`, one per field), the body is malformed, or (audit) "
                      "a filter is"}
        for code in (401, *codes):
            out[str(code)] = {"description": words[code], "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}}
        return out

    id_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    nullable_text = {"type": ["string", "null"]}
    audit_record = {"type": "object", "required": list(FIELDS), "properties": {
        **{name: nullable_text for name in FIELDS},
        "id": {"type": "string"}, "server": {"type": "string"}, "mode": {"type": "string", "enum": ["form", "url"]},
        "state": {"type": "string", "enum": list(STATES)},
        "reason": {**nullable_text, "description": "how it ended; for a refusal: rate_limited, pending_limit, "
                   "invalid_schema, sensitive_blocked, undeliverable, url_refused, origin_unknown, invalid_request"},
        "source": {"type": "string", "enum": ["upstream", "gateway"]},
        "attempts": {"type": "integer", "description": "answers the human gave, re-asks included"},
        "created_at": {"type": "string", "format": "date-time"}, "ended_at": {"type": "string", "format": "date-time"},
        "duration_s": {"type": "number"},
        "content": {"type": ["object", "null"], "description": "the accepted answer (audit.store_content only), "
                    "without fields that look like secrets"},
    }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "elicitgate admin API", "version": "1",
                 "description": "Pending elicitations of the gateway, and answering the hosted ones."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Elicitation": summary,
                "ElicitationDetail": detail,
                "Problem": {"type": "object", "properties": {"property": {"type": ["string", "null"]},
                                                              "message": {"type": "string"}}},
                "Error": error,
                "ElicitResult": {"type": "object", "required": ["action"], "properties": {
                    "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
                    "content": {"type": "object", "description": "with accept on a form: the answers"}}},
                "Outcome": {"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}},
                "Released": {"type": "object", "properties": {"id": {"type": "string"}, "released": {
                    "type": "boolean", "description": "false when no browser had opened the page"}}},
                "List": {"type": "object", "properties": {"elicitations": {
                    "type": "array", "items": {"$ref": "#/components/schemas/Elicitation"}}}},
                "AuditRecord": audit_record,
                "AuditList": {"type": "object", "properties": {"records": {
                    "type": "array", "items": {"$ref": "#/components/schemas/AuditRecord"}}}},
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/api/elicitations": {"get": {
                "summary": "List elicitations",
                "parameters": [{"name": "state", "in": "query", "schema": {
                    "type": "string", "enum": ["pending", "ended", "all"], "default": "pending"}}],
                "responses": responses("#/components/schemas/List"),
            }},
            "/api/audit": {"get": {
                "summary": "The audit trail: one record per elicitation end and per refusal (the newest `limit`, "
                           "oldest first); 404 when the trail is off, 422 for a bad filter",
                "parameters": [
                    {"name": "state", "in": "query", "schema": {"type": "string", "enum": list(STATES)}},
                    {"name": "server", "in": "query", "schema": {"type": "string"}},
                    {"name": "since", "in": "query", "description": "records created at or after (ISO 8601; UTC "
                     "without a zone)", "schema": {"type": "string", "format": "date-time"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": AUDIT_MAX,
                                                                "default": AUDIT_PAGE}},
                ],
                "responses": responses("#/components/schemas/AuditList", 404, 422, 503),
            }},
            "/api/elicitations/events": {"get": {
                "summary": "Server-sent events: `pending` with the full pending list, on connect and on every change",
                "responses": {"200": {"description": "text/event-stream"}},
            }},
            "/api/elicitations/{id}": {"get": {
                "summary": "One elicitation (pending: with its schema; ended: its final summary)",
                "parameters": [id_param],
                "responses": responses("#/components/schemas/ElicitationDetail", 404),
            }},
            "/api/elicitations/{id}/answer": {"post": {
                "summary": "Answer a hosted elicitation; the answer is checked against its form",
                "parameters": [id_param],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/ElicitResult"}}}},
                "responses": responses("#/components/schemas/Outcome", 404, 409, 422),
            }},
            "/api/elicitations/{id}/release": {"post": {
                "summary": "Release a hosted page from the browser that opened it; the next browser to open it gets it",
                "parameters": [id_param],
                "responses": responses("#/components/schemas/Released", 404, 409),
            }},
            "/api/elicitations/{id}/cancel": {"post": {
                "summary": "Cancel a pending elicitation (the server gets {\"action\": \"cancel\"})",
                "parameters": [id_param],
                "responses": responses("#/components/schemas/Outcome", 404, 409),
            }},
        },
    }
