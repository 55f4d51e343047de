"""An upstream's requests for input, answered for the call that caused them, whatever the two eras.

A 2026-07-28 upstream returns them as `input_required` rounds (put together here, then the call is
retried); a handshake-era upstream pushes them. Both come up through `router.inbound`, which sends each
elicitation to the broker; sampling and roots are relayed to the client when it declared them
(`relay_input_request`, the one place that decides it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.contracts import Origin
from elicitgate.json_shapes import JsonObject, is_mapping

PASSTHROUGH_INPUT_REQUESTS = {"sampling/createMessage": "sampling", "roots/list": "roots"}
"""Input requests relayed to the client as they are, with the capability the client must have declared."""


async def answer_input_requests(
    server: str,
    call: Origin,
    params: JsonObject,
    requests: object,
    request_state: object,
    answer_one: Callable[[str, Any], Awaitable[Any]],
) -> JsonObject:
    """One round of a 2026-07-28 upstream's multi round-trip (its `inputRequests` and `requestState`),
    each request answered by `answer_one(key, request)` (`router.inbound.InboundRouter.input_request`);
    returns the params of the retry.

    A handshake-era client is asked one question after another on its session; a parked call of a
    2026-07-28 client gets them all in one `input_required` round of its own.
    """
    requests = requests or {}
    if not is_mapping(requests):
        raise errors.gateway_error(
            errors.ELICITATION_FAILED, f"upstream {server!r} sent malformed inputRequests", server=server
        )
    responses: JsonObject = {}
    if call.asks_in_rounds and len(requests) == 1:
        # The usual round asks one question: awaited here, with no task and no task group (their scopes,
        # contexts and events) held for as long as its human thinks.
        call.expect(1)
        only: JsonObject = requests if isinstance(requests, dict) else dict(requests)
        key = next(iter(only))
        responses[key] = await answer_one(key, only.pop(key))  # not held meanwhile (see below)
    elif call.asks_in_rounds:

        async def answer(key: str, request: Any) -> None:
            responses[key] = await answer_one(key, request)

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
        unasked: JsonObject = requests if isinstance(requests, dict) else dict(requests)
        for key in list(unasked):
            responses[key] = await answer_one(key, unasked.pop(key))
    return retry_params(params, responses, request_state)


def only_input_request(call: Origin, requests: object) -> tuple[str, Any] | None:
    """The round's one request, `(key, request)`, when it asks exactly one (the usual round): `router.forward`
    awaits its answer itself, in its own frame, then makes the retry (`retry_params`). None for any other round
    (`answer_input_requests`). The request leaves the decoded result: only the broker's copy of its params is
    held while its human is asked."""
    if not is_mapping(requests) or len(requests) != 1:
        return None
    if call.asks_in_rounds:
        call.expect(1)
    only: JsonObject = requests if isinstance(requests, dict) else dict(requests)
    (key,) = only  # its one key
    return key, only.pop(key)


def retry_params(params: JsonObject, responses: JsonObject, request_state: object) -> JsonObject:
    """The params of the retry: the request again, with the answers and the upstream's `requestState`."""
    retry = dict(params)
    retry["inputResponses"] = responses
    if request_state is not None:
        retry["requestState"] = request_state
    return retry


async def relay_input_request(
    call: Origin, method: str, params: Mapping[str, Any], *, timeout: float, server: str
) -> JsonObject | None:
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
