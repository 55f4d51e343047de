"""The hosted elicitation page: `/e/{token}`.

One page per elicitation, generated from its `requestedSchema` (its HTML: `hosted_html`); works without
JavaScript (the script only adds in-page checks, drafts kept across reloads, and the rich-UI bridge). Flow:
form -> Review (checked by the gateway, errors next to the fields) -> Submit; Decline and Cancel at every
step. The state lives on the server, so a reload shows the same step with what was typed. The token in the
URL is the capability, and the first browser to use it owns the page (web/claims.py); every POST also needs
the page's CSRF token (hidden field + SameSite=Strict cookie).
Once the elicitation ends the URL answers 410 with how it ended.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.schema import answer_problems
from elicitgate.errors import NotFinite
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.web import claims, forms
from elicitgate.web.hosted_html import elsewhere_page, ended_page, page, render_entry
from elicitgate.web.responses import UI_CSP, secure
from elicitgate.wire import codec

if TYPE_CHECKING:
    from elicitgate.elicitation.hosting import Hosting

SETTLE_WAIT = 30.0
CSRF_COOKIE = "eg_csrf"


def with_csrf_cookie(response: Response, entry: HostedEntry, *, secure: bool) -> Response:
    response.set_cookie(
        CSRF_COOKIE, entry.csrf, path=f"/e/{entry.token}", httponly=True, samesite="strict", secure=secure
    )
    return response


def csrf_ok(request: Request, entry: HostedEntry, submitted: Any) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    return (
        isinstance(submitted, str)
        and secrets.compare_digest(submitted.encode(), entry.csrf.encode())
        and secrets.compare_digest(cookie.encode(), entry.csrf.encode())
    )


def check_answer(
    entry: HostedEntry, content: Mapping[str, Any], early: Sequence[JsonObject] = ()
) -> list[JsonObject]:
    """The gateway's verdict on an accepted answer (the broker's own check), after `early` typing problems."""
    flagged = {p["property"] for p in early}
    return list(early) + [p for p in answer_problems(entry.schema, content) if p["property"] not in flagged]


async def deliver(entry: HostedEntry, raw: Mapping[str, Any]) -> bool:
    """Give the answer to the waiting responder and wait for the broker's verdict. False if one was in."""
    round_ = entry.round
    if not entry.give(raw):
        return False
    with anyio.move_on_after(SETTLE_WAIT):
        await entry.settled(round_)
    return True


class PageRoutes:
    def __init__(self, hosting: Hosting) -> None:
        self.hosting = hosting
        self.registry = hosting.registry

    def _gone(self, token: str, entry: HostedEntry | None = None) -> Response:
        if entry is not None:  # ended, its tombstone perhaps not written yet
            return ended_page(str(entry.el.state), by=entry.el.answered_by)
        tomb = self.registry.ended_state(token)
        return ended_page(tomb["state"] if tomb else None, by=tomb.get("by") if tomb else None)

    async def show(self, request: Request) -> Response:
        token = request.path_params["token"]
        entry = self.registry.by_token.get(token)
        if entry is None or entry.ended:
            return self._gone(token, entry)
        claimed_now = None
        if not claims.holds(request, entry):
            if entry.claim is not None:
                return elsewhere_page(entry)
            if request.method == "HEAD" or claims.is_prefetch(request):
                return page("Open it to answer", "<h1>Open this page to answer</h1>", 503)
            claimed_now = claims.claim(entry, request)
            self.registry.bump()
        shown = render_entry(entry, plain=request.query_params.get("plain"),
                             ui_ready_timeout=self.hosting.config.http.ui_ready_timeout,
                             words=self.hosting.secret_words)
        secure = claims.over_https(request, self.hosting.config.http.public_url)
        response = with_csrf_cookie(shown, entry, secure=secure)
        if claimed_now is not None:
            claims.set_claim_cookie(response, entry, claimed_now, secure=secure)
        return response

    async def post(self, request: Request) -> Response:
        token = request.path_params["token"]
        entry = self.registry.by_token.get(token)
        if entry is None or entry.ended:
            return self._gone(token, entry)
        if not claims.holds(request, entry):
            return elsewhere_page(entry, 403)
        form = await request.form()
        if not csrf_ok(request, entry, form.get("csrf")):
            return page("Forbidden", "<h1>This form expired</h1><p>Reload the page and try again.</p>", 403)
        action = form.get("action")
        query = f"?{request.url.query}" if request.url.query else ""
        again = RedirectResponse(f"/e/{token}{query}", status_code=303)
        if entry.answer is not None:
            return page("Busy", "<h1>An answer is already being sent</h1>", 409)
        if action in ("decline", "cancel") or (action == "accept" and entry.el.mode == "url"):
            return await self._finish(entry, {"action": action})
        if entry.el.mode == "url":
            return again
        fields = forms.fields_of(entry.schema, self.hosting.secret_words)
        if action == "review":
            values = forms.raw_from_form(fields, form)
            content, early = forms.parse(fields, values)
            entry.draft = values
            entry.errors = check_answer(entry, content, early)
            entry.review = None if entry.errors else content
            return again
        if action == "edit":
            if entry.review is not None:
                entry.draft = {**(entry.draft or {}), **forms.raw_from_content(fields, entry.review)}
            entry.review = None
            return again
        if action == "submit" and entry.review is not None:
            return await self._finish(entry, {"action": "accept", "content": entry.review})
        return again

    async def _finish(self, entry: HostedEntry, raw: Mapping[str, Any]) -> Response:
        if not await deliver(entry, raw):
            return page("Busy", "<h1>An answer is already being sent</h1>", 409)
        # Ended (the page says how) or asked again (the errors are on the page): a GET either way, so that
        # a reload or the back button never posts the answer again.
        return RedirectResponse(f"/e/{entry.token}", status_code=303)

    async def ui_resource(self, request: Request) -> Response:
        entry = self.registry.by_token.get(request.path_params["token"])
        if entry is None or entry.ended or entry.ui_html is None:
            return secure(Response("gone", status_code=410, media_type="text/plain"))
        response = HTMLResponse(entry.ui_html)
        secure(response, UI_CSP)
        del response.headers["X-Frame-Options"]
        response.headers["X-Frame-Options"] = "SAMEORIGIN"
        return response

    async def ui_answer(self, request: Request) -> Response:
        """The rich-UI bridge (host-ui.js): check a submission, then send the reviewed one."""
        token = request.path_params["token"]
        entry = self.registry.by_token.get(token)
        if entry is None or entry.ended:
            tomb = self.registry.ended_state(token)
            return secure(JSONResponse({"ended": True, "state": tomb["state"] if tomb else None}, status_code=410))
        try:
            body = codec.loads(await request.body())
        except NotFinite as exc:  # NaN in the content: the answer check names the field
            body = exc.value
        except ValueError:  # not JSON, or nested too deep (`TooDeep`)
            body = None
        if not is_mapping(body) or not csrf_ok(request, entry, request.headers.get("x-elicitgate-csrf")):
            return secure(JSONResponse({"error": "bad request"}, status_code=403))
        if not claims.holds(request, entry):
            return secure(JSONResponse({"error": "this page was opened in another browser"}, status_code=403))
        action = body.get("action")
        if entry.answer is not None:
            return secure(JSONResponse({"error": "an answer is already being sent"}, status_code=409))
        if action in ("decline", "cancel"):
            await deliver(entry, {"action": action})
            return secure(JSONResponse({"ended": entry.ended, "state": str(entry.el.state)}))
        if body.get("step") == "submit":
            if entry.review is None:
                nothing = {"property": None, "message": "nothing to submit"}
                return secure(JSONResponse({"ok": False, "errors": [nothing]}))
            await deliver(entry, {"action": "accept", "content": entry.review})
            if entry.ended:
                return secure(JSONResponse({"ended": True, "state": str(entry.el.state)}))
            return secure(JSONResponse({"ok": False, "errors": entry.errors}))
        if action != "accept":
            return secure(JSONResponse({"ok": False, "errors": [{"property": None, "message": "unknown action"}]}))
        content = body.get("content")
        problems = check_answer(entry, content) if is_mapping(content) else [
            {"property": None, "message": "content must be an object"}
        ]
        entry.errors = problems
        review = None if problems or not is_mapping(content) else dict(content)
        entry.review = review
        if review is None:
            return secure(JSONResponse({"ok": False, "errors": problems}))
        fields = {f.name: f for f in forms.fields_of(entry.schema, self.hosting.secret_words)}
        shown = [
            {
                "label": fields[k].label if k in fields else k,
                "value": forms.display(fields[k], v) if k in fields else str(v),
            }
            for k, v in review.items()
        ]
        return secure(JSONResponse({"ok": True, "review": shown}))
