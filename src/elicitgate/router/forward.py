"""Forwarding one downstream request to the upstream that owns it.

Progress travels back on the caller's own progress token; cancellation travels up because the
face cancels this coroutine and the dispatcher then tells the upstream; upstream errors come back
with code, message and data intact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from mcp_types import CONNECTION_CLOSED, SERVER_INFO_META_KEY, URL_ELICITATION_REQUIRED

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.elicitation.broker import Broker
from elicitgate.faces.peer import DownstreamCall
from elicitgate.upstreams.link import UpstreamLink
from elicitgate.upstreams.transports import STREAM_LOST_KEY

MAX_INPUT_ROUNDS = 10
CLOSE_GRACE = 1.0


async def forward(
    broker: Broker, link: UpstreamLink, call: DownstreamCall, method: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    conn = await link.connection_for(call.peer)
    params = dict(params)
    meta = dict(params.get("_meta") or {})
    token = meta.pop("progressToken", None)
    if meta:
        params["_meta"] = meta
    else:
        params.pop("_meta", None)

    async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
        note: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            note["total"] = total
        if message is not None:
            note["message"] = message
        await call.notify("notifications/progress", note)

    try:
        for _ in range(MAX_INPUT_ROUNDS):
            result = await conn.request(
                method,
                params,
                origin=call,
                timeout=link.config.request_timeout,
                on_progress=relay_progress if token is not None else None,
                client_capabilities=_modern_capabilities(call) if conn.era == "modern" else None,
            )
            if result.get("resultType") != "input_required":
                return _without_upstream_identity(result)
            params = await _answer_input_requests(broker, link, call, conn, params, result)
        raise errors.gateway_error(
            errors.ELICITATION_FAILED,
            f"upstream {link.name!r} asked for input more than {MAX_INPUT_ROUNDS} times",
            server=link.name,
        )
    except TimeoutError:
        raise errors.gateway_error(
            errors.UPSTREAM_TIMEOUT,
            f"upstream {link.name!r} did not answer within {link.config.request_timeout}s",
            server=link.name,
            method=method,
        ) from None
    except MCPError as exc:
        if exc.error.code == CONNECTION_CLOSED and (_stream_lost(exc) or await _connection_lost(exc, conn)):
            raise errors.gateway_error(
                errors.UPSTREAM_GONE,
                f"upstream {link.name!r} went away during {method}",
                server=link.name,
                method=method,
            ) from None
        if exc.error.code == URL_ELICITATION_REQUIRED and isinstance(exc.error.data, Mapping):
            broker.remember_url_elicitations(link.name, call.peer, exc.error.data.get("elicitations"))
        raise
    finally:
        broker.stop_for_call(call, "the call that caused it ended")


def _without_upstream_identity(result: dict[str, Any]) -> dict[str, Any]:
    """Drop the upstream's `serverInfo` from a 2026-07-28 result's `_meta`: the client's server is the gateway."""
    meta = result.get("_meta")
    if not isinstance(meta, Mapping) or SERVER_INFO_META_KEY not in meta:
        return result
    meta = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
    result = {k: v for k, v in result.items() if k != "_meta"}
    return {**result, "_meta": meta} if meta else result


def _stream_lost(exc: MCPError) -> bool:
    """The HTTP transport's own error for a POST whose response stream ended without a response."""
    return isinstance(exc.error.data, Mapping) and exc.error.data.get(STREAM_LOST_KEY) is True


async def _connection_lost(exc: MCPError, conn: Any) -> bool:
    """Whether a -32000 means the upstream connection died, not that the upstream answered with it.

    The dispatcher wakes its waiters a moment before the connection finishes closing: give the
    close that moment.
    """
    if exc.error.data is not None:
        return False
    with anyio.move_on_after(CLOSE_GRACE):
        await conn.closed.wait()
    return conn.closed.is_set()


def _modern_capabilities(call: DownstreamCall) -> dict[str, Any]:
    modes = call.peer.modes
    return {"elicitation": {mode: {} for mode in sorted(modes)}} if modes else {}


async def _answer_input_requests(
    broker: Broker,
    link: UpstreamLink,
    call: DownstreamCall,
    conn: Any,
    params: dict[str, Any],
    result: Mapping[str, Any],
) -> dict[str, Any]:
    """One round of a 2026-07-28 upstream's multi round-trip, answered through the broker."""
    responses: dict[str, Any] = {}
    for key, request in (result.get("inputRequests") or {}).items():
        if not isinstance(request, Mapping) or request.get("method") != "elicitation/create":
            raise errors.gateway_error(
                errors.ELICITATION_UNDELIVERABLE,
                f"upstream {link.name!r} asked for input the gateway cannot relay",
                server=link.name,
                inputRequest=key,
                method=request.get("method") if isinstance(request, Mapping) else None,
            )
        request_params = dict(request.get("params") or {})
        if request_params.get("mode") == "url" and "elicitationId" not in request_params:
            request_params["elicitationId"] = f"{link.name}-{key}"
        responses[key] = await broker.elicit(
            server=link.name,
            origin=call,
            params=request_params,
            timeout=link.config.elicitation_timeout,
            clocks=[],
        )
    retry = dict(params)
    retry["inputResponses"] = responses
    if "requestState" in result:
        retry["requestState"] = result["requestState"]
    return retry
