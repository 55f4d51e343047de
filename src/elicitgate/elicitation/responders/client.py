"""The client of the call that caused a question shows it: a push (handshake era) or a round (2026-07-28)."""

from __future__ import annotations

from collections.abc import Awaitable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from mcp_types import CONNECTION_CLOSED

from mcp.shared.exceptions import MCPError

from elicitgate.elicitation.model import Elicitation, Responder
from elicitgate.errors import ClientGone, HumanGone
from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from elicitgate.contracts import Origin


class PushToClient:
    """Handshake-era delivery: `elicitation/create` to the client, on the call that caused it."""

    name = "client"
    cancel_on_timeout = False

    def ask(self, el: Elicitation, request: JsonObject) -> Awaitable[object]:
        # The call's own request to its client, not a coroutine around it: on stdio the face endpoint's future, no
        # frame at all held while a human is asked. How it fails when the client went away is the broker's to tell
        # (`gone`).
        origin = el.origin  # `el.asked()`, a call less on the question's way
        assert origin is not None, "an elicitation without an origin is refused before it is asked"
        return origin.send_request("elicitation/create", request)

    @staticmethod
    def gone(el: Elicitation, exc: MCPError) -> HumanGone | None:
        """The push failed because its client went away (its connection closed, or the client said so as it
        closed its session): the human is gone."""
        if isinstance(exc, ClientGone) or exc.error.code == CONNECTION_CLOSED or el.asked().peer.closed:
            return HumanGone("the client disconnected")
        return None

    def ended(self, el: Elicitation) -> None:
        """Nothing kept."""


class InputRequired:
    """2026-07-28 delivery: the request becomes an `inputRequests` entry of the result of the call that
    caused it (see `bridging.rounds`), and the answer arrives with the client's retry.

    A client that never retries is one that walked away: at the deadline the upstream gets
    `{"action": "cancel"}`, not an error.
    """

    name = "input_required"
    cancel_on_timeout = True

    def ask(self, el: Elicitation, request: JsonObject) -> CoroutineType[Any, Any, object]:
        # The parked call's own coroutine, not one around it: one frame less held while a human is asked.
        return el.asked().ask("elicitation/create", request, el)

    def ended(self, el: Elicitation) -> None:
        """Nothing kept."""


PUSH_TO_CLIENT = PushToClient()
INPUT_REQUIRED = InputRequired()


def to_client(origin: Origin) -> Responder:
    """How a request reaches the client of `origin` itself: a round of its call in 2026-07-28, a push before."""
    return INPUT_REQUIRED if origin.era == "modern" else PUSH_TO_CLIENT
