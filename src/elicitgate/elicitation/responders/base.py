"""What the hosted responders need of the gateway's hosting (`Responder` itself is in `elicitation.model`, beside
the `Elicitation` that holds one; `HumanGone` in `errors`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from elicitgate.elicitation.hosted_registry import HostedEntry, HostedRegistry
    from elicitgate.elicitation.model import Elicitation


class PageHost(Protocol):
    """The gateway's hosting as its responders see it (`elicitation.hosting.Hosting`)."""

    registry: HostedRegistry
    """Every hosted question's entry: what the pages, the inbox and the admin API see."""

    async def open(self, el: Elicitation, request: JsonObject, kind: str) -> HostedEntry:
        """The question's entry (its page), made on the first ask and shown again with `request` after."""
        ...

    def page_url(self, entry: HostedEntry) -> str: ...

    def inbox_url(self) -> str: ...

    def ended(self, el: Elicitation) -> None:
        """The question ended: its page says so from now on."""
        ...
