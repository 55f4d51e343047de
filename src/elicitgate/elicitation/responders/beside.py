"""First answer wins: a question the client shows, with its hosted page opened beside it.

With `notify.when: always` a question the client shows may also be answered on its hosted page, whose link
a notice carries (docs/notify.md, design invariant 8: a question is a record several surfaces may answer).
`FirstAnswer` is the question's responder: it puts the request to the client (a push, or an
`input_required` round) and, once the notifier opened the page (`open_page`), waits on the page too. The
first answer goes to the broker, which checks it as any other; the other side is told it is over:

- the page answers 410 saying the question was answered in the client (`HostedRegistry.finish`);
- a handshake-era client's pending `elicitation/create` is cancelled, which sends it
  `notifications/cancelled` for that request (the JSON-RPC endpoint does so for an abandoned request);
- a 2026-07-28 client's question leaves the parked call's round, and its retry gets the call's result.

The broker ends the question once; `Elicitation.answered_by` says which side answered (audit: `responder`).

`PageOnly` is the hosted page alone: a question left open past its deadline for the page only
(`unattended: wait`).
"""

from __future__ import annotations

import anyio

from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.model import Elicitation, Responder
from elicitgate.elicitation.responders.base import PageHost
from elicitgate.json_shapes import JsonObject

CLIENT = "client"
PAGE = "notice_page"
NOTICE_KIND = "notice"
"""`HostedEntry.kind` of a page opened beside the client (the admin API's `hosted`)."""


class FirstAnswer:
    """The client's own responder and the question's page, raced; one per question."""

    def __init__(self, client: Responder, hosting: PageHost) -> None:
        self.client = client
        self.hosting = hosting
        self._request: JsonObject | None = None
        self._opened = anyio.Event()
        self.entry: HostedEntry | None = None
        self._page_answered_last = False

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def cancel_on_timeout(self) -> bool:
        return self.client.cancel_on_timeout

    async def open_page(self, el: Elicitation) -> HostedEntry:
        """The notifier's turn: the page exists from now on and answers race the client's."""
        if self.entry is None:
            self.entry = await self.hosting.open(el, self._request or _as_shown(el), NOTICE_KIND)
            self._opened.set()
        return self.entry

    async def ask(self, el: Elicitation, request: JsonObject) -> object:
        self._request = request
        if self.entry is not None and self._page_answered_last:
            self.entry.reask(request)  # the page's answer failed the broker's check: its errors show there
            self.hosting.registry.bump()
        won: list[tuple[str, object]] = []

        async with anyio.create_task_group() as race:

            async def client_side() -> None:
                won.append((CLIENT, await self.client.ask(el, request)))
                race.cancel_scope.cancel()  # the page's wait ends; its entry stays until the broker ends it

            async def page_side() -> None:
                await self._opened.wait()
                assert self.entry is not None
                answer = await self.entry.next_answer()
                won.append((PAGE, answer))
                race.cancel_scope.cancel()  # the client's request is abandoned: the endpoint tells it

            race.start_soon(client_side)
            race.start_soon(page_side)
        side, answer = won[0]
        self._page_answered_last = side == PAGE
        el.answered_by = side
        return answer

    def ended(self, el: Elicitation) -> None:
        self.client.ended(el)
        if self.entry is not None:
            self.hosting.ended(el)


class PageOnly:
    """The question's hosted page alone (`unattended: wait`, after the client was let go)."""

    name = "hosted_page"
    cancel_on_timeout = True

    def __init__(self, hosting: PageHost, first: FirstAnswer | None) -> None:
        self.hosting = hosting
        self.first = first
        self.entry: HostedEntry | None = None

    async def ask(self, el: Elicitation, request: JsonObject) -> object:
        if self.entry is None:
            self.entry = await self.first.open_page(el) if self.first is not None else None
            if self.entry is None:
                self.entry = await self.hosting.open(el, request, NOTICE_KIND)
        else:
            self.entry.reask(request)
            self.hosting.registry.bump()
        answer = await self.entry.next_answer()
        el.answered_by = PAGE
        return answer

    def ended(self, el: Elicitation) -> None:
        self.hosting.ended(el)


def _as_shown(el: Elicitation) -> JsonObject:
    return dict(el.params)
