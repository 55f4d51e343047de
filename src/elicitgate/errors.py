"""The gateway's own JSON-RPC error codes.

2026-07-28 leaves -32000..-32019 to implementations (it uses -32020..-32022 and -32042 itself),
and the SDK itself takes -32000 (connection closed) and -32001 (request timeout), so every
gateway-made error lives in -32010..-32019, and the replicas' own (`redis_url`) in
-32008..-32009. `docs/errors.md` is the table people read; keep the two
in step.
"""

from __future__ import annotations

from typing import Any

from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from mcp.shared.exceptions import MCPError

UPSTREAM_UNAVAILABLE = -32010
"""The upstream server that owns the tool / prompt / resource is not connected."""
UPSTREAM_TIMEOUT = -32011
"""The upstream did not answer within its `request_timeout` (human time excluded)."""
ELICITATION_UNDELIVERABLE = -32013
"""No responder can present this elicitation: the client lacks the mode and hosting is off."""
ELICITATION_LIMIT = -32014
"""Too many pending elicitations for the session or the gateway."""
ELICITATION_RATE_LIMITED = -32015
"""The client's elicitation rate limit is exhausted."""
ELICITATION_TIMEOUT = -32016
"""No answer arrived before the elicitation's deadline."""
ELICITATION_ORIGIN_UNKNOWN = -32017
"""An upstream elicited outside any call the gateway can attribute it to."""
ELICITATION_SENSITIVE_BLOCKED = -32018
"""The form asks for a secret and `elicitation.sensitive_fields` is `block`."""
ELICITATION_FAILED = -32019
"""The downstream client failed the elicitation request (its error is in `data.cause`)."""
UPSTREAM_GONE = -32012
"""The upstream connection closed while a request was in flight."""
REPLICA_GONE = -32008
"""With `redis_url`: the gateway replica holding the call or elicitation stopped (or does not answer)."""
CLUSTER_UNAVAILABLE = -32009
"""With `redis_url`: Redis is unreachable, and this request needs what the replicas share there."""

__all__ = [
    "CLUSTER_UNAVAILABLE",
    "ELICITATION_FAILED",
    "ELICITATION_LIMIT",
    "ELICITATION_ORIGIN_UNKNOWN",
    "ELICITATION_RATE_LIMITED",
    "ELICITATION_SENSITIVE_BLOCKED",
    "ELICITATION_TIMEOUT",
    "ELICITATION_UNDELIVERABLE",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "REPLICA_GONE",
    "UPSTREAM_GONE",
    "UPSTREAM_TIMEOUT",
    "UPSTREAM_UNAVAILABLE",
    "ClientGone",
    "GatewayError",
    "gateway_error",
]

_REFUSALS = {
    ELICITATION_RATE_LIMITED: "rate_limited",
    ELICITATION_LIMIT: "pending_limit",
    ELICITATION_SENSITIVE_BLOCKED: "sensitive_blocked",
    ELICITATION_UNDELIVERABLE: "undeliverable",
    ELICITATION_ORIGIN_UNKNOWN: "origin_unknown",
}


class GatewayError(MCPError):
    """An error the gateway raises itself (`data.source` is `elicitgate`).

    `refusal` is the short reason the audit trail and the metrics give when it refuses an elicitation
    before a human sees it: the code's own reason, or a more specific one given where it is raised.
    """

    def __init__(self, code: int, message: str, data: dict[str, Any], refusal: str | None = None) -> None:
        super().__init__(code, message, data)
        self.refusal = refusal or _REFUSALS.get(code, "invalid_request")


class ClientGone(MCPError):
    """The downstream client's connection closed while the gateway was asking it something (the SDK's
    `CONNECTION_CLOSED` on the face, turned into this where the face calls the SDK)."""


def gateway_error(code: int, message: str, *, refusal: str | None = None, **data: Any) -> GatewayError:
    """A `GatewayError` whose `data` always says who raised it, plus the specifics."""
    return GatewayError(code, message, {"source": "elicitgate", **data}, refusal)
