"""2026-07-28 retries across replicas: a retry that lands on B for a call parked on A is answered by A.

With `redis_url`, a parked call's id starts with the id of the replica that runs it (`Rounds.home`), and
the sealed `requestState` carries that id. B has already opened the seal (the replicas share the key,
`keys.py`), so the retry is genuine; it sends the retry (its `inputResponses`, the capabilities the
request declared, who asks) to A over A's channel, and A resumes the parked call with it as if the
request had reached it, then sends back the next round or the result. A replica that stopped: -32008
within seconds; Redis out of reach: -32009 at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcp_types import INVALID_PARAMS, ClientCapabilities

from elicitgate import errors
from elicitgate.capabilities import elicitation_modes
from elicitgate.cluster.bus import Replicas
from elicitgate.contracts import DownstreamPeer, Era, Origin
from elicitgate.json_shapes import JsonObject, is_mapping

if TYPE_CHECKING:
    from elicitgate.bridging.rounds import Rounds

RETRY_OP = "resume"
RETRY_TIMEOUT = 24 * 3600.0
"""A forwarded retry waits as long as the parked call does (it has its own limits); the owner's lease
is what bounds the wait when the owner dies."""


def home_of(state: Any) -> str | None:
    """The replica a `requestState` pointer's call is parked on, if the pointer names one."""
    from elicitgate.bridging.rounds import read_pointer

    pointer = read_pointer(state)
    call_id = pointer.id if pointer is not None else None
    if call_id is None or "." not in call_id:
        return None
    return call_id.split(".", 1)[0]


class ForwardedCall:
    """A retry that reached another replica, as the parked call here sees it (the `DownstreamCall` surface)."""

    era: Era = "modern"
    asks_in_rounds = False
    cancel_requested = False

    def __init__(self, peer: DownstreamPeer, method: str, args: Mapping[str, Any]) -> None:
        self.peer = peer
        self.method = method
        self.request_id = args.get("request_id")
        self._capabilities = dict(args.get("capabilities") or {})
        params = args.get("params")
        name = params.get("name") if is_mapping(params) else None
        self.tool = name if isinstance(name, str) and method in ("tools/call", "prompts/get") else None

    @property
    def modes(self) -> frozenset[str]:
        return elicitation_modes(ClientCapabilities.model_validate(self._capabilities))

    def raw_capabilities(self) -> JsonObject:
        return dict(self._capabilities)

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Progress of a forwarded retry is not relayed back (its result is)."""

    async def send_request(self, method: str, params: Mapping[str, Any]) -> JsonObject:
        raise errors.gateway_error(errors.ELICITATION_UNDELIVERABLE, "a forwarded retry cannot carry requests")

    # The parked call is what the broker asks (its questions become its rounds): a retry only carries them.

    async def ask(self, method: str, params: JsonObject, elicitation: Any) -> Any:
        raise errors.gateway_error(errors.ELICITATION_UNDELIVERABLE, "a forwarded retry is not asked: its call is")

    def expect(self, count: int) -> None:
        """Rounds are the parked call's."""

    def require(self, capabilities: JsonObject) -> None:
        """Rounds are the parked call's."""

    def elicitation_ended(self, elicitation: Any) -> None:
        """Nothing kept per elicitation."""

    def carry(self, elicitation: Any) -> None:
        """The channel back is Redis and the other replica's request: nothing to attach here."""

    async def url_completed(self, params: Mapping[str, Any]) -> None:
        """URL-mode completions reach the parked call, not the retry."""


def install(rounds: Rounds, replicas: Replicas) -> None:
    """Name this replica's parked calls after it, and take the retries the others forward."""
    rounds.home = f"{replicas.id}."

    async def resume(args: JsonObject) -> JsonObject:
        method, state = str(args.get("method")), args.get("state")
        park = rounds.parked_for(state)
        if park is None:
            raise errors.gateway_error(INVALID_PARAMS, "Invalid or expired requestState",
                                       reason="the call this requestState belongs to has ended or expired")
        if not park.peer.per_call and park.peer.principal != args.get("principal"):
            raise errors.gateway_error(INVALID_PARAMS, "Invalid or expired requestState",
                                       reason="requestState belongs to another client's call")
        call = ForwardedCall(park.peer, method, args)
        return await rounds.resume(call, method, str(state), args.get("responses"))

    replicas.handlers[RETRY_OP] = resume


async def forward(replicas: Replicas, home: str, call: Origin, principal: str | None,
                  method: str, params: Mapping[str, Any]) -> JsonObject:
    """Send this retry to the replica its call is parked on; its next round or result."""
    args = {
        "method": method,
        "state": params.get("requestState"),
        "responses": params.get("inputResponses"),
        "principal": principal,
        "capabilities": call.raw_capabilities(),
        "request_id": call.request_id,
        "params": {"name": params.get("name")},
    }
    result = await replicas.ask(home, RETRY_OP, args, what="this call", timeout=RETRY_TIMEOUT)
    return dict(result)
