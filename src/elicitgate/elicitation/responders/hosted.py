"""The gateway shows a question itself: on its hosted page, or waiting in its inbox.

Which one, and when, is the hosting policy's choice (`elicitation.hosting.Hosting.responder_for`); these
present it. `HostedPage` hands a client that has URL mode a link to the page; `InInbox` lets it wait for
the operator (`/inbox`, the terminal's `elicitgate inbox`, the admin API) or a notice's link.
"""

from __future__ import annotations

import logging

import anyio

from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.model import Elicitation
from elicitgate.elicitation.responders.base import PageHost
from elicitgate.elicitation.responders.client import to_client
from elicitgate.elicitation.url_routes import SessionTarget
from elicitgate.json_shapes import JsonObject, is_mapping

logger = logging.getLogger(__name__)


class InInbox:
    """The elicitation waits for the operator: `/inbox`, `elicitgate inbox`, the admin API."""

    name = "hosted_inbox"
    cancel_on_timeout = False

    def __init__(self, hosting: PageHost) -> None:
        self.hosting = hosting

    async def ask(self, el: Elicitation, request: JsonObject) -> object:
        entry = await self.hosting.open(el, request, "inbox")
        logger.info("elicitation %s from %r waits in the inbox: %s", el.id, el.server, self.hosting.inbox_url())
        return await entry.next_answer()

    def ended(self, el: Elicitation) -> None:
        self.hosting.ended(el)


class HostedPage:
    """The client gets a URL-mode elicitation pointing at the hosted page; the page brings the answer."""

    name = "hosted_page"
    cancel_on_timeout = False

    def __init__(self, hosting: PageHost) -> None:
        self.hosting = hosting

    async def ask(self, el: Elicitation, request: JsonObject) -> object:
        first = el.id not in self.hosting.registry.by_id
        entry = await self.hosting.open(el, request, "page")
        if first:
            entry.client_elicitation_id = f"elicitgate-{el.id}"
            link: JsonObject = {
                "mode": "url",
                "message": f"{request['message']} (answer on elicitgate's page)",
                "url": self.hosting.page_url(entry),
                "elicitationId": entry.client_elicitation_id,
                "_meta": request.get("_meta") or {},
            }
            consent = await to_client(el.asked()).ask(el, link)
            action = consent.get("action") if is_mapping(consent) else None
            if action != "accept":
                return consent  # decline / cancel from the client (or an invalid result for the broker)
        answer = await entry.next_answer()
        await self._complete(el, entry)
        return answer

    async def _complete(self, el: Elicitation, entry: HostedEntry) -> None:
        """Tell the client the out-of-band interaction is over (2025-11-25 URL mode)."""
        origin = el.asked()
        if origin.era == "modern":
            return  # a 2026-07-28 client learns it by its retry
        try:
            with anyio.move_on_after(5):
                await SessionTarget(origin.peer).url_completed({"elicitationId": entry.client_elicitation_id})
        except Exception as exc:  # the answer matters more than the courtesy note
            logger.debug("could not send elicitation/complete to %s: %s", origin.peer.id, exc)

    def ended(self, el: Elicitation) -> None:
        self.hosting.ended(el)
