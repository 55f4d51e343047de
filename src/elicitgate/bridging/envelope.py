"""What changes about a request and its result on the way between eras.

A 2026-07-28 request carries its client's description in `_meta` (protocol version, client info,
capabilities) and asks for log messages per request; a handshake-era client said all of that once per
session. Each upstream connection stamps its own envelope, so the client's is dropped, and what a
handshake-era client set for its session travels with each request to a 2026-07-28 upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)

from elicitgate.capabilities import DECLARED, declared_capabilities
from elicitgate.contracts import Era, Origin
from elicitgate.json_shapes import JsonObject, is_mapping

ENVELOPE_META_KEYS = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
"""A 2026-07-28 client's envelope describes it to the gateway; each upstream connection stamps its own."""
ROUND_KEYS = ("requestState", "inputResponses")
"""A 2026-07-28 client's rounds are the gateway's (`bridging.rounds`), never the upstream's."""


def upstream_params(params: Mapping[str, Any], call: Origin, era: Era) -> tuple[JsonObject, Any | None]:
    """`params` as an upstream of `era` gets them, and the client's progress token (None: no progress).

    The progress token is the gateway's to relay (`router.forward`): the upstream gets the dispatcher's own.
    """
    params = dict(params)  # a copy, and `del`: no comprehension's frame (the params of every call go through here)
    for key in ROUND_KEYS:
        if key in params:
            del params[key]
    given = params.get("_meta")
    if given is None:  # the commonest call: no `_meta` to read (and no ABC check of None as a mapping)
        meta: JsonObject = {}
        level, token = call.peer.log_level, None
    else:
        meta = {k: v for k, v in given.items() if k not in ENVELOPE_META_KEYS} if is_mapping(given) else {}
        level = meta.pop(LOG_LEVEL_META_KEY, None) or call.peer.log_level
        token = meta.pop("progressToken", None)
    if era == "modern" and level is not None:
        meta[LOG_LEVEL_META_KEY] = level
    if meta:
        params["_meta"] = meta
    else:
        params.pop("_meta", None)
    return params, token


def without_envelope(params: JsonObject) -> JsonObject:
    """`params` without the client's envelope in `_meta`, which no upstream gets (`upstream_params`): what a parked
    call keeps of its first request while it waits for retries."""
    given = params.get("_meta")
    if not is_mapping(given) or ENVELOPE_META_KEYS.isdisjoint(given):
        return params
    meta = {k: v for k, v in given.items() if k not in ENVELOPE_META_KEYS}
    kept = {k: v for k, v in params.items() if k != "_meta"}
    if meta:
        kept["_meta"] = meta
    return kept


def modern_capabilities(call: Origin) -> JsonObject:
    """The per-request capabilities a 2026-07-28 upstream is told: the elicitation modes of the call's client."""
    modes = call.modes
    try:
        return DECLARED[modes]  # every set a client declares: a subscript, not `declared_capabilities`' call and `get`
    except KeyError:
        return declared_capabilities(modes)


def without_upstream_identity(result: JsonObject) -> JsonObject:
    """Drop the upstream's `serverInfo` from a 2026-07-28 result's `_meta`: the client's server is the gateway."""
    meta = result.get("_meta")
    if meta is None or not is_mapping(meta) or SERVER_INFO_META_KEY not in meta:  # None: a handshake-era result's
        return result
    kept = dict(meta)  # copies and `del`: no comprehension's frame (every result of a 2026-07-28 upstream has it)
    del kept[SERVER_INFO_META_KEY]
    result = dict(result)
    del result["_meta"]  # and `_meta` goes last, if anything is left of it
    if kept:
        result["_meta"] = kept
    return result
