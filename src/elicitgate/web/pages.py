"""The hosted elicitation page: `/e/{token}`.

One page per elicitation, generated from its `requestedSchema`; works without JavaScript (the script
only adds in-page checks, drafts kept across reloads, and the rich-UI bridge). Flow: form -> Review
(checked by the gateway, errors next to the fields) -> Submit; Decline and Cancel at every step. The
state lives on the server, so a reload shows the same step with what was typed. The token in the URL is
the capability, and the first browser to use it owns the page (web/claims.py); every POST also needs the
page's CSRF token (hidden field + SameSite=Strict cookie).
Once the elicitation ends the URL answers 410 with how it ended.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.schema import answer_problems
from elicitgate.elicitation.sensitive import DEFAULT_WORDS, SensitiveWords
from elicitgate.elicitation.url_policy import browser_host
from elicitgate.errors import NotFinite
from elicitgate.json_shapes import is_array, is_mapping
from elicitgate.web import claims, forms
from elicitgate.web.forms import e
from elicitgate.web.responses import UI_CSP, secure
from elicitgate.wire import codec

SETTLE_WAIT = 30.0
CSRF_COOKIE = "eg_csrf"

UI_MODES = ("inline", "modal", "sidebar")
CSS_LENGTH = re.compile(r"\d{1,4}(\.\d+)?(px|rem|em|vh|vw|%)")
UI_NOT_READY = "ui-not-ready"
"""`?plain=ui-not-ready`: where host-ui.js sends the person when the server's UI never started."""


def ui_options(ui: Mapping[str, Any]) -> dict[str, Any]:
    """The `ui` options a host page honours: `mode` (inline, modal, sidebar) and a preferred `size`
    (`{width, height}` or mcp-ui's `[width, height]`, in px or CSS lengths); anything else is ignored."""
    mode = ui.get("mode") if ui.get("mode") in UI_MODES else "inline"
    raw = ui.get("size")
    if is_array(raw) and len(raw) == 2:
        raw = {"width": raw[0], "height": raw[1]}
    size: dict[str, str] = {}
    for key in ("width", "height"):
        value = raw.get(key) if is_mapping(raw) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 4000:
            size[key] = f"{value:g}px"
        elif isinstance(value, str) and CSS_LENGTH.fullmatch(value.strip()):
            size[key] = value.strip()
    return {"mode": mode, "size": size}


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def layout(title: str, body: str, *, scripts: tuple[str, ...] = ()) -> str:
    tags = "".join(f'<script src="/static/{e(s)}" defer></script>' for s in scripts)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="/static/hosted.css">{tags}</head>'
        f'<body><main class="eg-card">{body}</main>'
        '<footer class="eg-foot">hosted by elicitgate</footer></body></html>'
    )


def page(title: str, body: str, status: int = 200, *, scripts: tuple[str, ...] = ()) -> Response:
    return secure(HTMLResponse(layout(title, body, scripts=scripts), status_code=status))


ANSWERED_ELSEWHERE = {
    "client": "It was answered in the MCP client, so this page is no longer needed.",
    "unattended": "Nobody answered in time, so the gateway ended it as configured.",
}
"""What the page says when something other than this page ended the question (`Elicitation.answered_by`)."""


def ended_page(state: str | None, status: int = 410, by: str | None = None) -> Response:
    words = {
        "accepted": "Your answer was sent.",
        "declined": "You declined.",
        "cancelled": "It was cancelled.",
        "timed_out": "Nobody answered in time.",
        "failed": "It failed.",
    }
    if state is None:
        return page("Not found", "<h1>Not found</h1><p>There is no request at this address.</p>", 404)
    said = ANSWERED_ELSEWHERE.get(by or "") or words.get(state, state)
    body = (
        f'<h1>This request has ended</h1><p class="eg-state" data-state="{e(state)}"'
        + (f' data-by="{e(by)}"' if by else "")
        + f">{e(said)} (<code>{e(state)}</code>)</p><p>You can close this page.</p>"
    )
    return page("Request ended", body, status, scripts=("form.js",))  # the script drops the page's draft


def header(entry: HostedEntry) -> str:
    deadline = iso(entry.deadline_wall())
    return (
        f'<header class="eg-head"><p class="eg-server">{asker(entry)}'
        f'</p><h1 class="eg-message" id="eg-message">{e(entry.message)}</h1>'
        f'<p class="eg-meta">Answer before <time datetime="{deadline}">{deadline.replace("T", " ")}</time></p>'
        "</header>"
    )


def asker(entry: HostedEntry) -> str:
    """Who asks: the server, or the gateway itself before a call to it (`router.asks`)."""
    server = f'<strong id="eg-server">{e(entry.server)}</strong>'
    if entry.el.source == "gateway":
        return f"elicitgate asks, before a call to the server {server}:"
    tool = entry.el.origin.tool if entry.el.origin is not None else None
    if tool:  # why it asks: the call it needs the answer for (what a notice names too)
        return f'The server {server} asks, during a call to <code id="eg-tool">{e(tool)}</code>:'
    return f"The server {server} asks:"


def csrf_field(entry: HostedEntry) -> str:
    return f'<input type="hidden" name="csrf" value="{e(entry.csrf)}">'


def action_buttons(*extra: str) -> str:
    return (
        '<div class="eg-actions">'
        + "".join(extra)
        + '<button type="submit" name="action" value="decline" formnovalidate class="eg-secondary">Decline</button>'
        '<button type="submit" name="action" value="cancel" formnovalidate class="eg-secondary">Cancel</button>'
        "</div>"
    )


def _errors_banner(entry: HostedEntry) -> str:
    if not entry.errors:
        return ""
    return (
        '<div class="eg-banner" role="alert" id="eg-banner">Some answers need another look: see the '
        "messages next to the fields.</div>"
    )


def render_entry(entry: HostedEntry, *, plain: str | None = None, ui_ready_timeout: float = 10.0,
                 words: SensitiveWords = DEFAULT_WORDS) -> Response:
    action = f"/e/{entry.token}" + (f"?plain={quote(plain)}" if plain else "")  # the plain form stays plain
    head = header(entry)
    if entry.el.mode == "url":
        url = str(entry.el.params.get("url", ""))
        host = browser_host(url) or url  # the host the browser goes to, not what a URI parser reads
        body = (
            f'{head}<section class="eg-url"><p>It asks you to open a page on '
            f'<strong class="eg-host">{e(host)}</strong>:'
            f'</p><p><a href="{e(url)}" rel="noopener noreferrer" target="_blank" id="eg-target">{e(url)}</a></p>'
            "<p>When you are done there, say so here.</p></section>"
            f'<form method="post" action="{e(action)}" class="eg-form">{csrf_field(entry)}'
            + action_buttons('<button type="submit" name="action" value="accept" class="eg-primary">Done</button>')
            + "</form>"
        )
        return page(f"{entry.server} asks", body, scripts=("form.js",))
    fields = forms.fields_of(entry.schema, words)
    if entry.review is not None:
        rows = "".join(
            f'<div class="eg-row"><dt>{e(f.label)}</dt><dd data-name="{e(f.name)}">'
            f"{e(forms.display(f, entry.review.get(f.name)))}</dd></div>"
            for f in fields
            if f.name in entry.review
        )
        body = (
            f'{head}<section class="eg-review" id="eg-review"><h2>Review your answer</h2>'
            f'<dl>{rows or "<p>(nothing filled in)</p>"}</dl>'
            f'<p class="eg-note">This goes to <strong>{e(entry.server)}</strong> when you submit.</p></section>'
            f'<form method="post" action="{e(action)}" class="eg-form">{csrf_field(entry)}'
            + action_buttons(
                '<button type="submit" name="action" value="submit" class="eg-primary" id="eg-submit">Submit</button>',
                '<button type="submit" name="action" value="edit" class="eg-secondary">Change</button>',
            )
            + "</form>"
        )
        return page(f"Review: {entry.server} asks", body, scripts=("form.js",))
    given_ui = entry.el.params.get("ui")
    ui: Mapping[str, Any] = given_ui if is_mapping(given_ui) else {}
    if entry.ui_html is not None and not plain:
        options = ui_options(ui)
        # What the server's UI gets; a `context` that is not an object is none (dict() of it raised).
        guest: dict[str, Any] = dict(given) if is_mapping(given := ui.get("context")) else {}
        context: dict[str, Any] = {
            "message": entry.message,
            "schema": entry.schema,
            "context": guest,
            "csrf": entry.csrf,
            "answerUrl": f"/e/{entry.token}/ui-answer",
            "size": options["size"],
            # A guest that speaks mcp-ui's lifecycle is ready when it says so, not when its frame loads.
            "lifecycle": "ui-lifecycle-iframe-ready" in entry.ui_html,
            "readyTimeoutMs": int(ui_ready_timeout * 1000),
            "plainUrl": f"/e/{entry.token}?plain={UI_NOT_READY}",
        }
        if entry.errors:
            guest["errors"] = entry.errors
            guest["error"] = "; ".join(f"{p.get('property') or 'form'}: {p['message']}" for p in entry.errors)
        data = json.dumps(context).replace("<", "\\u003c")
        body = (
            f'{head}<script type="application/json" id="eg-context">{data}</script>'
            f'<iframe id="eg-ui" class="eg-ui eg-ui-{options["mode"]}" title="{e(entry.server)} form" '
            'sandbox="allow-scripts" '
            f'data-src="/e/{e(entry.token)}/ui"></iframe>'
            '<p class="eg-banner" id="eg-ui-error" role="alert" hidden></p>'
            '<section class="eg-review" id="eg-ui-review" hidden><h2>Review your answer</h2><dl id="eg-ui-values"></dl>'
            f'<p class="eg-note">This goes to <strong>{e(entry.server)}</strong> when you submit.</p>'
            '<div class="eg-actions"><button type="button" class="eg-primary" id="eg-ui-send">Submit</button>'
            '<button type="button" class="eg-secondary" id="eg-ui-change">Change</button></div></section>'
            f'<form method="post" action="{e(action)}" class="eg-form">{csrf_field(entry)}{action_buttons()}</form>'
            f'<p class="eg-note"><a href="{e(action)}?plain=1" id="eg-plain-link">Use the plain form instead</a></p>'
        )
        return page(f"{entry.server} asks", body, scripts=("host-ui.js",))
    values = entry.draft if entry.draft is not None else forms.initial_values(fields)
    fallback = ""
    if str(ui.get("uri", "")).startswith("ui://") and (entry.ui_html is None or plain == UI_NOT_READY):
        fallback = ('<p class="eg-note" id="eg-ui-fallback">The server\'s own form could not be shown, so '
                    "here is the plain one.</p>")
    body = (
        f"{head}{fallback}{_errors_banner(entry)}"
        f'<form method="post" action="{e(action)}" class="eg-form" id="eg-form">{csrf_field(entry)}'
        f"{forms.render_fields(fields, values, entry.errors)}"
        + action_buttons('<button type="submit" name="action" value="review" class="eg-primary" id="eg-review-btn">'
                         "Review</button>")
        + "</form>"
    )
    return page(f"{entry.server} asks", body, scripts=("form.js",))


def elsewhere_page(entry: HostedEntry, status: int = 409) -> Response:
    """What any browser but the page's claimant sees: what is asked, nothing typed, no way to answer."""
    body = (
        f'{header(entry)}<section class="eg-elsewhere" id="eg-elsewhere"><h2>Opened in another browser</h2>'
        "<p>This page was already opened in another browser, and only that browser can answer it. If that "
        "was you, carry on there.</p><p>If it was not you, do not trust this request: tell the gateway's "
        "operator, who can release the page from the inbox so that it can be opened again.</p></section>"
    )
    return page("Opened elsewhere", body, status)


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
    entry: HostedEntry, content: Mapping[str, Any], early: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
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
    def __init__(self, hosting: Any) -> None:
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
