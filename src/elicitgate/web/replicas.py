"""The web surface across replicas: any replica lists all pending elicitations, and a hosted page or an
admin-API request for an elicitation another replica holds is served by that replica.

`ToOwner` sits in front of the web routes. For `/e/<token>...` and `/api/elicitations/<id>...` that this
replica does not know, it looks up the owner in Redis and sends the request there over the owner's
channel; the owner runs it through its own routes (its checks, CSRF and claims are the ones that apply)
and the answer comes back. A replica that stopped gets 410 with its id; Redis out of reach gets 503,
within seconds.

No secret travels through Redis, where whoever reads it would read it too (docs/deploy.md, "What Redis
sees"): the page token becomes its digest (the owner knows its own tokens), the claim cookie its digest
(a page keeps no more of it; a new claim's value is made here and only its digest goes), and the admin
token and cookies stay here: this replica checks the caller and the owner takes its word. What the owner
needs does travel: the form's fields as typed, the page's CSRF value, and the page as the owner renders
it (with the token taken out of it and put back here).
"""

from __future__ import annotations

import base64
import logging
import re
import secrets
from typing import TYPE_CHECKING

import httpx2
from redis.exceptions import RedisError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.cluster.board import PendingBoard
from elicitgate.cluster.bus import Replicas
from elicitgate.cluster.page_links import PageLinks
from elicitgate.elicitation.hosted_registry import token_digest
from elicitgate.json_shapes import JsonObject
from elicitgate.web.admin_auth import VOUCHED
from elicitgate.web.claims import CLAIM_COOKIE, CLAIM_DIGEST, CLAIM_OFFER, CLAIM_SLOT, cookie_digest
from elicitgate.web.forms import e
from elicitgate.web.hosted_html import ended_page, page
from elicitgate.web.pages import CSRF_COOKIE
from elicitgate.web.responses import secure

if TYPE_CHECKING:
    from elicitgate.elicitation.broker import Broker
    from elicitgate.elicitation.hosting import Hosting

logger = logging.getLogger(__name__)

PAGE_PATH = re.compile(r"^/e/([^/]+)(?:/[^/]*)?$")
API_PATH = re.compile(r"^/api/elicitations/([^/]+)(?:/(?:answer|cancel|release))?$")
FORWARDED = "elicitgate.forwarded"
"""Scope key of a request another replica sent here (never forwarded again)."""
FORWARD_TIMEOUT = 60.0
"""A forwarded page post waits, like a local one, until the broker judged the answer."""
KEPT_HEADERS = ("content-type", "accept", "sec-purpose", "purpose", "user-agent", "x-elicitgate-csrf")
"""What the owner's routes read of a request's headers; never `authorization` or `cookie`."""
PAGE_SLOT = "~page~"
"""Where the page token stood, in a forwarded request's path and in the owner's answer (never in a token:
they are URL-safe base64)."""


class WebReplica:
    """This replica's part: its snapshot for the board, the others' pending items, and serving forwarded requests."""

    def __init__(self, replicas: Replicas, hosting: Hosting, broker: Broker) -> None:
        self.replicas = replicas
        self.hosting = hosting
        self.broker = broker
        self.links = PageLinks(hosting.admin_token) if hosting.admin_token is not None else None
        self._sealed: dict[str, str] = {}
        self.board = PendingBoard(replicas, self.snapshot, lambda: hosting.registry.bump(here=False))
        self.app: ASGIApp | None = None
        """The routes below `ToOwner`, which run the requests other replicas forward here."""
        replicas.handlers["http"] = self._serve_forwarded
        replicas.workers.append(self.board.run)
        hosting.registry.watchers.append(self.board.mark)
        hosting.elsewhere = self.others

    def snapshot(self) -> list[JsonObject]:
        """This replica's pending items for the board: no page link, its token's digest and, for the admin
        on other replicas, the token sealed (`cluster.page_links`)."""
        admin = self.hosting.admin
        items: list[JsonObject] = []
        sealed: dict[str, str] = {}
        for item in admin.pending() if admin is not None else ():
            shared = {k: v for k, v in item.items() if k != "form_url"}
            entry = self.hosting.registry.by_id.get(item["id"])
            if entry is not None:
                shared["token_digest"] = token_digest(entry.token)
                if self.links is not None:
                    page = sealed[item["id"]] = self._sealed.get(item["id"]) or self.links.seal(item["id"], entry.token)
                    shared |= {"page": page, "page_base": self.hosting.base_url or ""}
            items.append(shared)
        self._sealed = sealed
        return items

    async def others(self) -> list[JsonObject]:
        try:
            items = await self.board.others()
        except Exception as exc:
            raise self.replicas.failure(exc) from None
        return [self._shown(item) for item in items]

    def _shown(self, item: JsonObject) -> JsonObject:
        """Another replica's item as the admin API shows it: its page link unsealed, if this replica can."""
        token = self.token_of(item)
        shown = {k: v for k, v in item.items() if k not in ("token_digest", "page", "page_base")}
        shown["form_url"] = f"{item.get('page_base') or ''}/e/{token}" if token is not None else None
        return shown

    def token_of(self, item: JsonObject) -> str | None:
        sealed = item.get("page")
        if self.links is None or not isinstance(sealed, str):
            return None
        return self.links.open(str(item.get("id")), sealed)

    async def _serve_forwarded(self, args: JsonObject) -> JsonObject:
        assert self.app is not None
        token: str | None = None
        scope: JsonObject = {FORWARDED: True}
        path = str(args["path"])
        if (digest := args.get("page")) is not None:
            token = self._token_for(str(digest))
            if token is None:
                tomb = self.hosting.registry.tombstones.get(str(digest))
                return _reply_of(ended_page(tomb["state"] if tomb else None), token)
            path = path.replace(PAGE_SLOT, token, 1)
            if (claim := args.get("claim")) is not None:
                scope[CLAIM_DIGEST] = str(claim)
            elif (offer := args.get("offer")) is not None:
                scope[CLAIM_OFFER] = str(offer)
        elif args.get("vouched") is True:
            scope[VOUCHED] = True
            entry = self.hosting.registry.by_id.get(str(args.get("id")))
            token = entry.token if entry is not None else None
        headers = dict(args.get("headers") or {})
        if isinstance(csrf := args.get("csrf"), str):
            headers["cookie"] = f"{CSRF_COOKIE}={csrf}"
        transport = httpx2.ASGITransport(app=_Marked(self.app, scope))
        async with httpx2.AsyncClient(transport=transport, base_url=args["base"]) as client:
            response = await client.request(
                args["method"], path, params=args.get("query") or None, headers=headers,
                content=base64.b64decode(args.get("body") or ""), timeout=FORWARD_TIMEOUT,
            )
        return _reply_of(response, token)

    def _token_for(self, digest: str) -> str | None:
        for token in self.hosting.registry.by_token:
            if token_digest(token) == digest:
                return token
        return None


def _reply_of(response: httpx2.Response | Response, token: str | None) -> JsonObject:
    """The owner's answer as it travels back: the page token taken out (the asking replica puts it back)."""
    if isinstance(response, Response):
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
        status, body = response.status_code, bytes(response.body)
    else:
        headers = list(response.headers.multi_items())
        status, body = response.status_code, response.content
    if token is not None:
        body = body.replace(token.encode(), PAGE_SLOT.encode())
        headers = [(k, v.replace(token, PAGE_SLOT)) for k, v in headers]
    return {
        "status": status,
        "headers": [[k, v] for k, v in headers if k.lower() != "content-length"],
        "body": base64.b64encode(body).decode(),
    }


class _Marked:
    """The forwarded request as the owner's routes see it: marked, with what the asking replica vouched for."""

    def __init__(self, app: ASGIApp, marks: JsonObject) -> None:
        self.app = app
        self.marks = marks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app({**scope, **self.marks}, receive, send)


class ToOwner:
    """ASGI middleware: requests about an elicitation held elsewhere go to the replica that holds it."""

    def __init__(self, app: ASGIApp, web: WebReplica) -> None:
        self.app = app
        self.web = web
        web.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            owner = await self._elsewhere(scope) if scope["type"] == "http" and not scope.get(FORWARDED) else None
        except MCPError as exc:
            await self._refusal(scope["path"], exc)(scope, receive, send)
            return
        if owner is None:
            await self.app(scope, receive, send)
            return
        replica, what, key = owner
        request = Request(scope, receive)
        headers = Headers(scope=scope)
        args: JsonObject = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": {k: headers[k] for k in KEPT_HEADERS if k in headers} | {"host": headers.get("host", "")},
            "base": f"{scope.get('scheme', 'http')}://{headers.get('host', 'localhost')}",
        }
        token: str | None = None
        claim_value: str | None = None
        if (match := PAGE_PATH.match(scope["path"])) is not None:
            token = match.group(1)
            args["path"] = scope["path"].replace(f"/e/{token}", f"/e/{PAGE_SLOT}", 1)
            args["page"] = key
            if (csrf := request.cookies.get(CSRF_COOKIE)) is not None:
                args["csrf"] = csrf
            if given := request.cookies.get(CLAIM_COOKIE):
                args["claim"] = cookie_digest(given)
            else:  # should the owner give this browser the page, the cookie's value is made here
                claim_value = secrets.token_urlsafe(32)
                args["offer"] = cookie_digest(claim_value)
        else:
            admin = self.web.hosting.admin
            refused = (admin.refusal(request, write=scope["method"] != "GET") if admin is not None
                       else secure(JSONResponse({"error": "the admin API is off"}, status_code=404)))
            if refused is not None:
                await refused(scope, receive, send)
                return
            args |= {"vouched": True, "id": key}
            token = await self._token_of(key)
        args["body"] = base64.b64encode(await request.body()).decode()
        try:
            reply = await self.web.replicas.ask(replica, "http", args, what=what, timeout=FORWARD_TIMEOUT + 5)
        except MCPError as exc:
            response = self._refusal(scope["path"], exc)
        else:
            response = Response(_restored(base64.b64decode(reply["body"]), token), status_code=reply["status"])
            response.raw_headers = [
                (k.lower().encode("latin-1"), _restored_header(k, v, token, claim_value).encode("latin-1"))
                for k, v in reply["headers"]
            ]
            response.headers["content-length"] = str(len(response.body))
        await response(scope, receive, send)

    async def _token_of(self, id_: str) -> str | None:
        """The page token of another replica's elicitation, from the board (the admin API's `form_url`)."""
        try:
            items = await self.web.board.others()
        except RedisError:
            return None  # asking the owner fails the same way, with its clear error
        return next((self.web.token_of(item) for item in items if item.get("id") == id_), None)

    async def _elsewhere(self, scope: Scope) -> tuple[str, str, str] | None:
        """(replica, what, key) when another replica holds what this request is about; `key` is the page
        token's digest or the elicitation's id."""
        path = scope["path"]
        hosting = self.web.hosting
        if (match := PAGE_PATH.match(path)) is not None:
            token = match.group(1)
            if token in hosting.registry.by_token or hosting.registry.ended_state(token) is not None:
                return None
            kind, value, what = "tok", token_digest(token), "this page's elicitation"
        elif (match := API_PATH.match(path)) is not None and match.group(1) != "events":
            id_ = match.group(1)
            broker = self.web.broker
            if id_ in broker.pending or broker.recent.find(id_) is not None:
                return None
            kind, value, what = "el", id_, f"elicitation {id_}"
        else:
            return None
        try:
            replica = await self.web.board.owner(kind, value)
        except RedisError as exc:
            raise self.web.replicas.failure(exc) from None
        if replica is None or replica == self.web.replicas.id:
            return None
        return replica, what, value

    @staticmethod
    def _refusal(path: str, exc: MCPError) -> Response:
        gone = exc.error.code == errors.REPLICA_GONE
        status = 410 if gone else 503
        if path.startswith("/e/"):
            title = "Request ended" if gone else "Try again shortly"
            return page(title, f"<h1>{title}</h1><p>{e(exc.error.message)}.</p>", status)
        return secure(JSONResponse({"error": exc.error.message, **(exc.error.data or {})}, status_code=status))


def _restored(body: bytes, token: str | None) -> bytes:
    return body.replace(PAGE_SLOT.encode(), token.encode()) if token is not None else body


def _restored_header(name: str, value: str, token: str | None, claim_value: str | None) -> str:
    if token is not None:
        value = value.replace(PAGE_SLOT, token)
    if claim_value is not None and name.lower() == "set-cookie":
        value = value.replace(f"{CLAIM_COOKIE}={CLAIM_SLOT}", f"{CLAIM_COOKIE}={claim_value}", 1)
    return value
