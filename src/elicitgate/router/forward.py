"""Forwarding one downstream request to the upstream that owns it.

Progress travels back on the caller's own progress token; cancellation travels up because the
face cancels this coroutine and the upstream endpoint then tells the upstream; upstream errors come back
with code, message and data intact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elicitgate import errors
from elicitgate.bridging.envelope import modern_capabilities, upstream_params, without_upstream_identity
from elicitgate.bridging.input_requests import answer_input_requests, complete_minted
from elicitgate.elicitation.broker import Broker
from elicitgate.seams import Origin
from elicitgate.jsonrpc import CLOSED, PeerLost, UrlElicitationRequired, progress_params
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.link import UpstreamLink, forgot_session


async def forward(
    broker: Broker,
    link: UpstreamLink,
    call: Origin,
    method: str,
    params: Mapping[str, Any],
    *,
    max_rounds: int = 10,
) -> dict[str, Any]:
    """Send one client request upstream and return its final result.

    A 2026-07-28 upstream's `input_required` rounds are answered here, through the broker, and
    retried (at most `max_rounds`); the client only ever sees the final result. A request the server
    refused because it no longer knew the session (it restarted) is sent once more on a new session
    (`UpstreamLink.rejoin`): refused unread, it runs once whatever it does.
    """
    conn = await link.connection_for(call.peer)
    sent, token = upstream_params(params, call, conn.era)

    async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
        await call.notify("notifications/progress", progress_params(token, progress, total, message))

    async def send(conn: UpstreamConnection) -> dict[str, Any]:
        return await conn.request(
            method,
            sent,
            origin=call,
            timeout=link.config.request_timeout,
            on_progress=relay_progress if token is not None else None,
            client_capabilities=modern_capabilities(call) if conn.era == "modern" else None,
        )

    minted: list[str] = []
    rejoined = False
    try:
        for _ in range(max_rounds + 1):
            try:
                result = await send(conn)
            except PeerLost as lost:
                if rejoined or not forgot_session(lost):
                    raise
                rejoined = True
                conn = await link.rejoin(call.peer, conn)
                result = await send(conn)
            await complete_minted(broker, link.name, minted)
            if result.get("resultType") != "input_required":
                return without_upstream_identity(result)
            requests, state = result.get("inputRequests"), result.get("requestState")
            del result  # not held while the questions wait for their humans
            sent = await answer_input_requests(broker, link, call, sent, requests, state, minted)
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
    except PeerLost as lost:
        # The wire's reason: the connection closed, or over HTTP this request's stream failed (an event past
        # the server's `max_event_bytes`, a stream that ended without the answer) while the session goes on.
        reason = lost.error.message
        if reason == CLOSED and (unreachable := await conn.unreachable()) is not None:
            link.suspect()
            raise errors.gateway_error(
                errors.UPSTREAM_UNAVAILABLE, f"upstream {link.name!r} is not available", server=link.name,
                reason=unreachable,
            ) from None
        raise errors.gateway_error(
            errors.UPSTREAM_GONE,
            f"upstream {link.name!r} went away during {method}"
            if reason == CLOSED
            else f"upstream {link.name!r} did not answer {method}: {reason}",
            server=link.name,
            method=method,
            reason=reason,
        ) from None
    except UrlElicitationRequired as exc:
        await broker.check_url_elicitations(link.name, exc.elicitations)
        broker.remember_url_elicitations(link.name, call.peer, exc.elicitations)
        raise
    finally:
        broker.stop_for_call(call, "the call that caused it ended")

