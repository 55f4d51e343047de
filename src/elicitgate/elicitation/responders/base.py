"""What every responder is to the broker, and what the hosted ones need of the gateway's hosting."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from elicitgate.elicitation.hosted_registry import HostedEntry, HostedRegistry
    from elicitgate.elicitation.model import Elicitation


class HumanGone(Exception):
    """The human's side went away with the elicitation open (client disconnected, page closed for good).

    The broker ends the elicitation `cancelled` and tells the upstream `{"action": "cancel"}`.
    """


class Responder(Protocol):
    @property
    def name(self) -> str:
        """Shown in the audit event: `client`, `input_required`, `hosted_page`, `hosted_inbox`."""
        ...

    @property
    def cancel_on_timeout(self) -> bool:
        """At the deadline the upstream gets `{"action": "cancel"}` instead of a timeout error."""
        ...

    async def ask(self, el: Elicitation, request: dict[str, Any]) -> object:
        """Present `request` (already prefixed with the asking server; on a repeat, carrying the errors)
        and return the raw answer, whatever its shape (the broker checks it). Raises `HumanGone`, or
        `MCPError` when the human's side failed it.
        """
        ...

    def ended(self, el: Elicitation) -> None:
        """The broker recorded the end of `el`: drop whatever was kept to present it."""
        ...


class PageHost(Protocol):
    """The gateway's hosting as its responders see it (`elicitation.hosting.Hosting`)."""

    registry: HostedRegistry
    """Every hosted question's entry: what the pages, the inbox and the admin API see."""

    async def open(self, el: Elicitation, request: dict[str, Any], kind: str) -> HostedEntry:
        """The question's entry (its page), made on the first ask and shown again with `request` after."""
        ...

    def page_url(self, entry: HostedEntry) -> str: ...

    def inbox_url(self) -> str: ...

    def ended(self, el: Elicitation) -> None:
        """The question ended: its page says so from now on."""
        ...
