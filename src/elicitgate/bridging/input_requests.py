"""An upstream's requests for input, answered for the call that caused them, whatever the two eras.

A 2026-07-28 upstream returns them as `input_required` rounds (answered here, then the call is
retried); a handshake-era upstream pushes them (`Gateway.on_server_request`). Elicitations go through
the broker; sampling and roots are relayed to the client when it declared them (`relay_input_request`,
the one place that decides it).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Mapping
from typing import Any

import anyio

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.contracts import Origin
from elicitgate.elicitation.broker import Broker
from elicitgate.json_shapes import is_mapping
from elicitgate.upstreams.link import UpstreamLink

PASSTHROUGH_INPUT_REQUESTS = {"sampling/createMessage": "sampling", "roots/list": "roots"}
"""Input requests relayed to the client as they are, with the capability the client must have declared."""


async def answer_input_requests(
    broker: Broker,
    link: UpstreamLink,
    call: Origin,
    params: dict[str, Any],
    requests: object,
    request_state: object,
    minted: list[str],
) -> dict[str, Any]:
    """One round of a 2026-07-28 upstream's multi round-trip (its `inputRequests` and `requestState`),
    answered through the broker; returns the params of the retry.

    A handshake-era client is asked one question after another on its session; a parked call of a
    2026-07-28 client gets them all in one `input_required` round of its own. URL-mode ids the gateway
    made up for a handshake-era client are added to `minted` (see `complete_minted`).
    """
    requests = requests or {}
    if not is_mapping(requests):
        raise errors.gateway_error(
            errors.ELICITATION_FAILED, f"upstream {link.name!r} sent malformed inputRequests", server=link.name
        )
    responses: dict[str, Any] = {}
    if call.asks_in_rounds:

        async def answer(key: str, request: Any) -> None:
            responses[key] = await _answer_one(broker, link, call, key, request, minted)

        call.expect(len(requests))
        try:
            async with anyio.create_task_group() as tg:
                for key, request in requests.items():
                    tg.start_soon(answer, key, request)
        except* MCPError as refused:  # one refusal ends the round; say which, not "a group failed"
            raise refused.exceptions[0] from None
    else:
        # Awaited here, not through a closure: one coroutine frame less held by every pending elicitation.
        # Each request leaves the decoded result (the caller's `requests` is this dict) before its human is
        # asked: only the broker's copy of its params is held meanwhile, with the schema that every elicitation
        # asking the same shares (`elicitation.form_schemas`).
        unasked: dict[str, Any] = requests if isinstance(requests, dict) else dict(requests)
        for key in list(unasked):
            responses[key] = await _answer_one(broker, link, call, key, unasked.pop(key), minted)
    retry = dict(params)
    retry["inputResponses"] = responses
    if request_state is not None:
        retry["requestState"] = request_state
    return retry


def _answer_one(
    broker: Broker, link: UpstreamLink, call: Origin, key: str, request: Any, minted: list[str]
) -> Awaitable[Any]:
    """The answer to one input request. An elicitation is the broker's coroutine itself, not one around it:
    one frame less held while the human is asked."""
    method = request.get("method") if is_mapping(request) else None
    given = request.get("params") if is_mapping(request) else None
    request_params: Mapping[str, Any] = given if is_mapping(given) else {}
    if method == "elicitation/create":
        if request_params.get("mode") == "url" and "elicitationId" not in request_params and call.era != "modern":
            # The handshake-era client needs an id to match the completion the gateway sends it later.
            minted.append(f"{link.name}-{uuid.uuid4().hex}")
            request_params = {**request_params, "elicitationId": minted[-1]}
        return broker.elicit(
            server=link.name,
            origin=call,
            params=request_params,
            timeout=link.config.elicitation_timeout,
            url_ids=call.era != "modern",
        )
    return _relay_one(broker, link, call, key, method, request_params)


async def _relay_one(
    broker: Broker, link: UpstreamLink, call: Origin, key: str, method: object, request_params: Mapping[str, Any]
) -> Any:
    """An input request other than an elicitation: sampling or roots, relayed to the client if it can."""
    relayable = isinstance(method, str) and method in PASSTHROUGH_INPUT_REQUESTS
    if relayable:
        timeout = broker.human_timeout(link.config.elicitation_timeout)
        relayed = await relay_input_request(call, str(method), request_params, timeout=timeout, server=link.name)
        if relayed is not None:
            return relayed
    raise errors.gateway_error(
        errors.ELICITATION_UNDELIVERABLE,
        f"upstream {link.name!r} asked for input the client cannot give"
        if relayable
        else f"upstream {link.name!r} asked for input the gateway cannot relay",
        server=link.name,
        inputRequest=key,
        method=method,
    )


async def relay_input_request(
    call: Origin, method: str, params: Mapping[str, Any], *, timeout: float, server: str
) -> dict[str, Any] | None:
    """Sampling or roots, relayed to the client whose call caused it, if the client declared it; None when
    `method` is not relayed or the client did not declare it (a call that can end with -32021 is told to).

    The answer gets a human's deadline (that of the server's elicitations): a 2026-07-28 client's parked
    call would otherwise wait for a retry that may never come, and the upstream's request with it.
    """
    capability = PASSTHROUGH_INPUT_REQUESTS.get(method)
    if capability is None:
        return None
    if capability not in call.raw_capabilities():
        call.require({capability: {}})
        return None
    with anyio.move_on_after(timeout):
        return await call.send_request(method, params)
    raise errors.gateway_error(
        errors.ELICITATION_TIMEOUT,
        f"the client did not answer {method} within {timeout:g} s",
        server=server,
        method=method,
    )


async def complete_minted(broker: Broker, server: str, minted: list[str]) -> None:
    """The upstream's retry came back: the URL interactions of that round are over."""
    for elicitation_id in minted:
        target = broker.url_route(server, elicitation_id, pop=True)
        if target is not None:
            await target.url_completed({"elicitationId": elicitation_id})
    minted.clear()
