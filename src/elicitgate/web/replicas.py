"""The web surface across replicas: any replica lists all pending elicitations, and a hosted page or an
admin-API request for an elicitation another replica holds is served by that replica.

`ToOwner` sits in front of the web routes. For `/e/<token>...` and `/api/elicitations/<id>...` that this
replica does not know, it looks up the owner in Redis and sends the whole HTTP request there over the
owner's channel; the owner runs it through its own routes (its checks, cookies, CSRF and claims are the
ones that apply) and the answer comes back as it is. A replica that stopped gets 410 with its id; Redis
out of reach gets 503, within seconds.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Any

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
from elicitgate.web.forms import e
from elicitgate.web.pages import page
from elicitgate.web.responses import secure
from elicitgate.elicitation.hosted_registry import token_digest

logger = logging.getLogger(__name__)

PAGE_PATH = re.compile(r"^/e/([^/]+)(?:/[^/]*)?$")
API_PATH = re.compile(r"^/api/elicitations/([^/]+)(?:/(?:answer|cancel|release))?$")
FORWARDED = "elicitgate.forwarded"
"""Scope key of a request another replica sent here (never forwarded again)."""
FORWARD_TIMEOUT = 60.0
"""A forwarded page post waits, like a local one, until the broker judged the answer."""
KEPT_HEADERS = ("cookie", "content-type", "authorization", "accept", "sec-purpose", "purpose", "user-agent")


class WebReplica:
    """This replica's part: its snapshot for the board, the others' pending items, and serving forwarded requests."""

    def __init__(self, replicas: Replicas, hosting: Any, broker: Any) -> None:
        self.replicas = replicas
        self.hosting = hosting
        self.broker = broker
        self.board = PendingBoard(replicas, self.snapshot, lambda: hosting.registry.bump(here=False))
        self.app: ASGIApp | None = None
        """The routes below `ToOwner`, which run the requests other replicas forward here."""
        replicas.handlers["http"] = self._serve_forwarded
        replicas.workers.append(self.board.run)
        hosting.registry.watchers.append(self.board.mark)
        hosting.elsewhere = self.others

    def snapshot(self) -> list[dict[str, Any]]:
        admin = self.hosting.admin
        items: list[dict[str, Any]] = []
        for item in admin.pending() if admin is not None else ():
            entry = self.hosting.registry.by_id.get(item["id"])
            items.append({**item, "token_digest": token_digest(entry.token)} if entry is not None else item)
        return items

    async def others(self) -> list[dict[str, Any]]:
        try:
            items = await self.board.others()
        except Exception as exc:
            raise self.replicas.failure(exc) from None
        return [{k: v for k, v in item.items() if k != "token_digest"} for item in items]

    async def _serve_forwarded(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None
        transport = httpx2.ASGITransport(app=_Marked(self.app))
        async with httpx2.AsyncClient(transport=transport, base_url=args["base"]) as client:
            response = await client.request(
                args["method"], args["path"], params=args.get("query") or None, headers=args.get("headers"),
                content=base64.b64decode(args.get("body") or ""), timeout=FORWARD_TIMEOUT,
            )
        return {
            "status": response.status_code,
            "headers": [[k, v] for k, v in response.headers.multi_items() if k.lower() != "content-length"],
            "body": base64.b64encode(response.content).decode(),
        }


class _Marked:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app({**scope, FORWARDED: True}, receive, send)


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
        replica, what = owner
        request = Request(scope, receive)
        body = await request.body()
        headers = Headers(scope=scope)
        args = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": {k: headers[k] for k in KEPT_HEADERS if k in headers} | {"host": headers.get("host", "")},
            "body": base64.b64encode(body).decode(),
            "base": f"{scope.get('scheme', 'http')}://{headers.get('host', 'localhost')}",
        }
        try:
            reply = await self.web.replicas.ask(replica, "http", args, what=what, timeout=FORWARD_TIMEOUT + 5)
        except MCPError as exc:
            response = self._refusal(scope["path"], exc)
        else:
            response = Response(base64.b64decode(reply["body"]), status_code=reply["status"])
            response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply["headers"]]
            response.headers["content-length"] = str(len(response.body))
        await response(scope, receive, send)

    async def _elsewhere(self, scope: Scope) -> tuple[str, str] | None:
        """(replica, what) when another replica holds what this request is about."""
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
            if id_ in broker.pending or any(s["id"] == id_ for s in broker.recent):
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
        return replica, what

    @staticmethod
    def _refusal(path: str, exc: MCPError) -> Response:
        gone = exc.error.code == errors.REPLICA_GONE
        status = 410 if gone else 503
        if path.startswith("/e/"):
            title = "Request ended" if gone else "Try again shortly"
            return page(title, f"<h1>{title}</h1><p>{e(exc.error.message)}.</p>", status)
        return secure(JSONResponse({"error": exc.error.message, **(exc.error.data or {})}, status_code=status))
