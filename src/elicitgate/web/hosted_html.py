"""The hosted elicitation page's HTML, generated from its `requestedSchema` (the fields themselves: `forms`):
the question and who asks, the form, its Review step, a server's rich UI (`ui://`) in a sandboxed frame,
a URL-mode link, and the pages for an ended question or one opened in another browser; the page shell
the inbox shares. No request handling here: `pages` serves these."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from starlette.responses import HTMLResponse, Response

from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.sensitive import DEFAULT_WORDS, SensitiveWords
from elicitgate.elicitation.url_policy import browser_host
from elicitgate.json_shapes import JsonObject, is_array, is_mapping
from elicitgate.web import forms
from elicitgate.web.forms import e
from elicitgate.web.responses import secure

UI_MODES = ("inline", "modal", "sidebar")
CSS_LENGTH = re.compile(r"\d{1,4}(\.\d+)?(px|rem|em|vh|vw|%)")
UI_NOT_READY = "ui-not-ready"
"""`?plain=ui-not-ready`: where host-ui.js sends the person when the server's UI never started."""


def ui_options(ui: Mapping[str, Any]) -> JsonObject:
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
        guest: JsonObject = dict(given) if is_mapping(given := ui.get("context")) else {}
        context: JsonObject = {
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
