"""Headless clients: agents in CI or in the background, whose questions nobody would ever see.

`elicitation.headless` names them by an HTTP header on their requests to `/mcp`, by `clientInfo.name`, or
by the `http.auth` principal. Their questions skip the client and wait on their hosted page, announced by
the notices (docs/notify.md). The HTTP face marks the requests that carry the header (`HEADER_MARKED`, a
context variable its request tasks inherit) and the face keeps the mark on the client's peer.
"""

from __future__ import annotations

import contextvars
import fnmatch
import json
from collections.abc import Mapping

from elicitgate.config import HeadlessConfig
from elicitgate.contracts import DownstreamPeer
from elicitgate.json_shapes import is_array

HEADER_MARKED: contextvars.ContextVar[bool] = contextvars.ContextVar("elicitgate_headless_header", default=False)
"""True while the face serves a request that carried one of `elicitation.headless.headers`."""


def header_matches(config: HeadlessConfig, headers: Mapping[str, str]) -> bool:
    """`headers` (lower-case names) carry one of the configured headers with its value (`*`: any value)."""
    for name, wanted in config.headers.items():
        value = headers.get(name.lower())
        if value is not None and (wanted == "*" or value == wanted):
            return True
    return False


def principal_names(principal: str | None) -> set[str]:
    """The names an `http.auth` principal goes by: a static token's `principal`, an OAuth token's client
    id and subject (`bridging.sealing.authenticated_principal_of` writes `auth:[client_id, iss, sub]`)."""
    if principal is None or not principal.startswith("auth:"):
        return set()
    try:
        parts = json.loads(principal[len("auth:") :])
    except ValueError:
        return set()
    if not is_array(parts) or len(parts) != 3:
        return set()
    return {str(parts[0]), str(parts[2])} - {"None"}


def is_headless(config: HeadlessConfig, peer: DownstreamPeer) -> bool:
    if not config.enabled:
        return False
    if peer.headless:
        return True
    if config.client_names and any(fnmatch.fnmatchcase(peer.client_name, glob) for glob in config.client_names):
        return True
    return bool(config.principals) and not principal_names(peer.principal).isdisjoint(config.principals)
