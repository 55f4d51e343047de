"""Gateway-hosted elicitation: when the gateway presents an elicitation itself, and how.

The gateway builds one `Hosting` when the process has a web server for it (the HTTP face, or the side
server `http.hosted_listen` starts next to the stdio face) and hands it to the broker and the links;
`elicitgate.web` serves its pages. Per server, `hosting` decides:

- `never`: the client presents everything (or the broker refuses with -32013 / -32018).
- `auto` (default): host a form when the client cannot present form mode, or when the form asks for a
  secret and `elicitation.sensitive_fields` is `host`; host a URL-mode request when the client lacks URL
  mode.
- `always`: host every form.

A hosted form reaches its human one of two ways. A client that declared URL mode gets a URL-mode
elicitation pointing at the hosted page (`HostedPage`): what is typed there goes straight to the
gateway, the client only learns `accept`. Otherwise the elicitation waits in the inbox (`InInbox`):
`/inbox`, `elicitgate inbox` and the admin API list it with its page URL; that needs the admin token.
Both responders live with the others in `elicitation.responders`; this module is the policy and the
pages' shared part (the registry, the page's URL, an upstream's `ui://` HTML).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from elicitgate.capabilities import elicitation_modes
from elicitgate.config import GatewayConfig
from elicitgate.contracts import Announces, DownstreamPeer, Origin
from elicitgate.elicitation.hosted_registry import HostedEntry, HostedRegistry
from elicitgate.elicitation.model import Elicitation, Responder
from elicitgate.elicitation.responders import HostedPage, InInbox
from elicitgate.elicitation.sensitive import sensitive_words
from elicitgate.hostport import http_url
from elicitgate.json_shapes import JsonObject, is_array, is_mapping
from elicitgate.upstreams.link import UpstreamLink

logger = logging.getLogger(__name__)

UI_MIME = "text/html;profile=mcp-app"
UI_READ_TIMEOUT = 10.0


class Hosting:
    def __init__(self, config: GatewayConfig, links: Mapping[str, UpstreamLink]) -> None:
        self.config = config
        self.links = links
        """The gateway's links, to read an upstream's `ui://` resource."""
        self.registry = HostedRegistry()
        self.secret_words = sensitive_words(
            config.elicitation.sensitive_words, config.elicitation.extra_sensitive_words
        )
        """Which fields the page and the inbox mask (`elicitation.sensitive_words`)."""
        self._base_url = config.http.public_url
        token = config.admin_token
        self.admin_token: str | None = token.get_secret_value() if token is not None else None
        self.page = HostedPage(self)
        self.inbox = InInbox(self)
        self.admin: Any | None = None
        """The admin API's routes (`web.admin.AdminRoutes`), once mounted."""
        self.elsewhere: Callable[[], Awaitable[list[JsonObject]]] | None = None
        """With `redis_url`: the other replicas' pending elicitations (`web.replicas`)."""
        self.notices: Announces | None = None
        """With notice targets configured: the notifier, which brings people to pages the inbox does not list
        for them (docs/notify.md)."""

    # -- where people reach it -------------------------------------------------------------------

    @property
    def base_url(self) -> str | None:
        return self._base_url

    def serve_at(self, base_url: str | None) -> None:
        """The address the web server listens on, unless `public_url` says otherwise (None: learn it from
        the first request, see `learn_base_url`)."""
        if self._base_url is None:
            self._base_url = base_url

    def learn_base_url(self, scope: Mapping[str, Any]) -> None:
        """No `public_url` and no address given at start: take the one the first request came in on."""
        if self._base_url is not None or not scope.get("server"):
            return
        host, port = scope["server"][:2]
        self._base_url = http_url(str(host), port, scope.get("scheme", "http"))

    def page_url(self, entry: HostedEntry) -> str:
        return f"{self.base_url or ''}/e/{entry.token}"

    def inbox_url(self) -> str:
        return f"{self.base_url or ''}/inbox"

    @property
    def inbox_on(self) -> bool:
        return self.admin_token is not None

    # -- the policy ------------------------------------------------------------------------------

    def policy(self, server: str) -> str:
        cfg = self.config.mcp_servers.get(server)
        return cfg.hosting if cfg is not None else "never"

    def reachable(self, server: str, tool: str | None) -> bool:
        """A page that no client links to can still be found: in the inbox, or through a notice."""
        return self.inbox_on or (self.notices is not None and self.notices.reaches(server, tool))

    def responder_for(
        self, server: str, origin: Origin, mode: str, *, secrets: bool = False, headless: bool = False
    ) -> Responder | None:
        """The hosted responder for this elicitation, or None when the client presents it (or nobody can).
        A `headless` client is never asked: its questions wait on their page (inbox, notices)."""
        policy = self.policy(server)
        if policy == "never":
            return None
        modes = origin.modes
        if headless:
            return self._waiting(server, origin)
        if mode == "url":
            if "url" in modes:
                return None
            return self._waiting(server, origin)
        if not (policy == "always" or secrets or "form" not in modes):
            return None
        if "url" in modes:
            return self.page
        return self._waiting(server, origin)

    def _waiting(self, server: str, origin: Origin) -> Responder | None:
        """The question waits on its page, which no client links to: only where someone can find it."""
        if self.inbox_on or (self.notices is not None and self.notices.reaches(server, origin.tool)):
            return self.inbox
        return None

    def unavailable_reason(self, server: str, origin: Origin, mode: str) -> str:
        if self.policy(server) == "never":
            return f"hosting is 'never' for server {server!r}"
        return (
            "the client has no URL mode and the inbox is off: set ELICITGATE_ADMIN_TOKEN (or admin_token) to "
            "answer it in the gateway's inbox, see docs/hosting.md, or elicitation.notify to send its link to "
            "someone, see docs/notify.md"
        )

    def modes_for(self, server: str, peer: DownstreamPeer) -> frozenset[str]:
        """Modes the gateway can take for `peer` through hosting (what a per-session upstream is told)."""
        if self.policy(server) == "never":
            return frozenset()
        reachable = self.reachable(server, None)
        if "url" in elicitation_modes(peer.capabilities) or reachable:
            return frozenset({"form", "url"} if reachable else {"form"})
        return frozenset()

    # -- the upstream's own UI ---------------------------------------------------------------------

    async def read_ui(self, server: str, uri: str) -> str | None:
        """The HTML of an upstream `ui://` resource, or None (the plain form is shown instead)."""
        link = self.links.get(server)
        conn = link.primary if link is not None else None
        if conn is None:
            return None
        try:
            with anyio.fail_after(UI_READ_TIMEOUT):
                result = await conn.request("resources/read", {"uri": uri}, timeout=UI_READ_TIMEOUT)
        except Exception as exc:  # any failure: fall back to the generated form
            logger.warning("server %r: cannot read UI resource %s (%s); showing the plain form", server, uri, exc)
            return None
        contents = result.get("contents")
        for item in contents if is_array(contents) else []:
            if not is_mapping(item) or item.get("uri") != uri:
                continue
            mime = str(item.get("mimeType") or "").replace(" ", "").lower()
            if mime.split(";")[0] != "text/html":
                continue
            if isinstance(text := item.get("text"), str):
                return text
            if isinstance(blob := item.get("blob"), str):
                import base64

                try:
                    return base64.b64decode(blob).decode("utf-8")
                except ValueError:
                    return None
        logger.warning("server %r: UI resource %s is not %s; showing the plain form", server, uri, UI_MIME)
        return None

    # -- the responders' shared part ----------------------------------------------------------------

    async def open(self, el: Elicitation, request: JsonObject, kind: str) -> HostedEntry:
        entry = self.registry.by_id.get(el.id)
        if entry is not None:
            entry.reask(request)
            self.registry.bump()
            return entry
        entry = HostedEntry(el=el, kind=kind, request=request)
        ui = el.params.get("ui")
        if el.mode == "form" and is_mapping(ui) and str(ui.get("uri", "")).startswith("ui://"):
            entry.ui_html = await self.read_ui(el.server, str(ui["uri"]))
        self.registry.add(entry)
        return entry

    def ended(self, el: Elicitation) -> None:
        self.registry.finish(el)
