"""The operator's inbox (`/inbox`): a login form that takes the admin token and starts a session (see
`admin_auth`), the pending elicitations with a link to each hosted page, and a Release button for a page a
browser opened. The list updates live from the admin API's events (static/inbox.js); without a token it
answers 404."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp.shared.exceptions import MCPError

from elicitgate.web.admin import AdminRoutes
from elicitgate.web.admin_auth import ADMIN_COOKIE
from elicitgate.web.forms import e
from elicitgate.web.hosted_html import page
from elicitgate.web.responses import problem, secure


class InboxPage:
    def __init__(self, admin: AdminRoutes) -> None:
        self.admin = admin
        self.auth = admin.auth
        self._form_key = secrets.token_bytes(32)

    def _inbox_form_token(self, request: Request) -> str:
        """The inbox's own posts carry this, bound to its session cookie (which alone is good for reads)."""
        return hmac.new(self._form_key, request.cookies.get(ADMIN_COOKIE, "").encode(), hashlib.sha256).hexdigest()

    async def inbox_release(self, request: Request) -> Response:
        """The inbox's Release button (a plain form post: works without JavaScript)."""
        if (denied := self.admin.refusal(request, write=False)) is not None:
            return denied
        form = await request.form()
        given = form.get("csrf")
        expected = self._inbox_form_token(request)
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected.encode()):
            return problem(403, "the inbox form expired: reload the inbox")
        self.admin.release_claim(request.path_params["id"])
        return secure(RedirectResponse("/inbox", status_code=303))

    async def inbox(self, request: Request) -> Response:
        if not self.auth.on:
            return self._inbox_off()
        if not self.auth.session_ok(request):
            return self._login_page("", 401)
        form_token = self._inbox_form_token(request)
        try:
            items = await self.admin.all_pending()
        except MCPError:
            items = self.admin.pending()
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
