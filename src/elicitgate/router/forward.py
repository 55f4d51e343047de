"""Forwarding one downstream request to the upstream that owns it.

Progress travels back on the caller's own progress token; cancellation travels up because the
face cancels this coroutine and the dispatcher then tells the upstream; upstream errors come back
with code, message and data intact.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import anyio
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CONNECTION_CLOSED,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    URL_ELICITATION_REQUIRED,
)

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.elicitation.broker import Broker
from elicitgate.faces.peer import DownstreamCall
from elicitgate.upstreams.link import UpstreamLink
from elicitgate.upstreams.transports import STREAM_LOST_KEY

PASSTHROUGH_INPUT_REQUESTS = {"sampling/createMessage": "sampling", "roots/list": "roots"}
ENVELOPE_META_KEYS = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
"""A 2026-07-28 client's envelope describes it to the gateway; each upstream connection stamps its own."""
LOG_LEVEL_STATE_KEY = "elicitgate.log_level"
"""The level a handshake-era client set with `logging/setLevel`, for 2026-07-28 upstreams."""
CLOSE_GRACE = 1.0


async def forward(
    broker: Broker,
    link: UpstreamLink,
    call: DownstreamCall,
    method: str,
    params: Mapping[str, Any],
    *,
    max_rounds: int = 10,
) -> dict[str, Any]:
    """Send one client request upstream and return its final result.

    A 2026-07-28 upstream's `input_required` rounds are answered here, through the broker, and
    retried (at most `max_rounds`); the client only ever sees the final result.
    """
    conn = await link.connection_for(call.peer)
    params = dict(params)
    for key in ("requestState", "inputResponses"):  # the client's rounds are the gateway's, never the upstream's
        params.pop(key, None)
    meta = {k: v for k, v in (params.get("_meta") or {}).items() if k not in ENVELOPE_META_KEYS}
    # 2026-07-28 asks for log messages per request; the handshake era set a level once per session.
    level = meta.pop(LOG_LEVEL_META_KEY, None) or call.peer.state.get(LOG_LEVEL_STATE_KEY)
    if conn.era == "modern" and level is not None:
        meta[LOG_LEVEL_META_KEY] = level
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

    minted: list[str] = []
    try:
        for _ in range(max_rounds + 1):
            result = await conn.request(
                method,
                params,
                origin=call,
                timeout=link.config.request_timeout,
                on_progress=relay_progress if token is not None else None,
                client_capabilities=_modern_capabilities(call) if conn.era == "modern" else None,
            )
            await _complete_minted(broker, link.name, minted)
            if result.get("resultType") != "input_required":
                return _without_upstream_identity(result)
            params = await _answer_input_requests(broker, link, call, params, result, minted)
        raise errors.gateway_error(
            errors.ELICITATION_FAILED,
            f"upstream {link.name!r} asked for input more than {max_rounds} times",
            server=link.name,
            rule="bridging.max_rounds",
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
            await broker.check_url_elicitations(link.name, exc.error.data.get("elicitations"))
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
    modes = call.modes
    return {"elicitation": {mode: {} for mode in sorted(modes)}} if modes else {}


async def _answer_input_requests(
    broker: Broker,
    link: UpstreamLink,
    call: Any,
    params: dict[str, Any],
    result: Mapping[str, Any],
    minted: list[str],
) -> dict[str, Any]:
    """One round of a 2026-07-28 upstream's multi round-trip, answered through the broker.

    A handshake-era client is asked one question after another on its session; a parked call of a
    2026-07-28 client gets them all in one `input_required` round of its own.
    """
    requests = result.get("inputRequests") or {}
    if not isinstance(requests, Mapping):
        raise errors.gateway_error(
            errors.ELICITATION_FAILED, f"upstream {link.name!r} sent malformed inputRequests", server=link.name
        )
    responses: dict[str, Any] = {}

    async def answer(key: str, request: Any) -> None:
        responses[key] = await _answer_one(broker, link, call, key, request, minted)

    if hasattr(call, "expect"):
        call.expect(len(requests))
        try:
            async with anyio.create_task_group() as tg:
                for key, request in requests.items():
                    tg.start_soon(answer, key, request)
        except* MCPError as refused:  # one refusal ends the round; say which, not "a group failed"
            raise refused.exceptions[0] from None
    else:
        for key, request in requests.items():
            await answer(key, request)
    retry = dict(params)
    retry["inputResponses"] = responses
    if "requestState" in result:
        retry["requestState"] = result["requestState"]
    return retry


async def _answer_one(
    broker: Broker, link: UpstreamLink, call: Any, key: str, request: Any, minted: list[str]
) -> Any:
    method = request.get("method") if isinstance(request, Mapping) else None
    request_params = dict(request.get("params") or {}) if isinstance(request, Mapping) else {}
    if method == "elicitation/create":
        if request_params.get("mode") == "url" and "elicitationId" not in request_params and call.era != "modern":
            # The handshake-era client needs an id to match the completion the gateway sends it later.
            request_params["elicitationId"] = f"{link.name}-{uuid.uuid4().hex}"
            minted.append(request_params["elicitationId"])
        return await broker.elicit(
            server=link.name,
            origin=call,
            params=request_params,
            timeout=link.config.elicitation_timeout,
            url_ids=call.era != "modern",
        )
    capability = PASSTHROUGH_INPUT_REQUESTS.get(method) if isinstance(method, str) else None
    if capability is not None and capability in call.raw_capabilities():
        timeout = link.config.elicitation_timeout or broker.config.default_timeout
        return await relay_input_request(call, str(method), request_params, timeout=timeout, server=link.name)
    if capability is not None and (require := getattr(call, "require", None)) is not None:
        require({capability: {}})
    raise errors.gateway_error(
        errors.ELICITATION_UNDELIVERABLE,
        f"upstream {link.name!r} asked for input the client cannot give"
        if capability
        else f"upstream {link.name!r} asked for input the gateway cannot relay",
        server=link.name,
        inputRequest=key,
        method=method,
    )


async def relay_input_request(
    call: Any, method: str, params: Mapping[str, Any], *, timeout: float, server: str
) -> dict[str, Any]:
    """Sampling or roots, relayed to the client whose call caused it, with a human's deadline (that of
    the server's elicitations): a 2026-07-28 client's parked call would otherwise wait for a retry that
    may never come, and the upstream's request with it."""
    with anyio.move_on_after(timeout):
        return await call.send_request(method, params)
    raise errors.gateway_error(
        errors.ELICITATION_TIMEOUT,
        f"the client did not answer {method} within {timeout:g} s",
        server=server,
        method=method,
    )


async def _complete_minted(broker: Broker, server: str, minted: list[str]) -> None:
    """The upstream's retry came back: the URL interactions of that round are over."""
    for elicitation_id in minted:
        target = broker.url_route(server, elicitation_id, pop=True)
        if target is not None:
            await target.url_completed({"elicitationId": elicitation_id})
    minted.clear()
