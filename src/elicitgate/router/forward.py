"""Forwarding one downstream request to the upstream that owns it: the way down (its twin, `router.inbound`,
is the way up).

Progress travels back on the caller's own progress token; cancellation travels up because the
face cancels this coroutine and the upstream endpoint then tells the upstream; upstream errors come back
with code, message and data intact. What comes up in a result (an `input_required` round, a -32042's
links) and the end of the call go to `router.inbound`, the one way into the broker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.bridging.envelope import modern_capabilities, upstream_params, without_upstream_identity
from elicitgate.bridging.input_requests import answer_input_requests, only_input_request, retry_params
from elicitgate.bridging.rounds import GoesOn
from elicitgate.config import HttpServer
from elicitgate.contracts import Era, Origin
from elicitgate.errors import NotSent, PeerLost, UrlElicitationRequired
from elicitgate.json_shapes import JsonObject
from elicitgate.router.inbound import InboundRouter
from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.upstreams.dual_era import CallKey, call_key
from elicitgate.upstreams.link import UpstreamLink, forgot_session
from elicitgate.wire.endpoint import CLOSED, ProgressCallback, progress_params


async def forward(
    inbound: InboundRouter,
    link: UpstreamLink,
    call: Origin,
    method: str,
    params: Mapping[str, Any],
    *,
    max_rounds: int = 10,
    until_asked: bool = False,
    resume: Resumed | None = None,
) -> JsonObject:
    """Send one client request upstream and return its final result.

    A 2026-07-28 upstream's `input_required` rounds are answered here, through `inbound`, and
    retried (at most `max_rounds`); the client only ever sees the final result. Toward a server that
    serves both eras, a call its handshake-era connection cannot carry is made once more in 2026-07-28
    (`upstreams.dual_era`). A request the server refused because it no longer knew the session (it
    restarted) is sent once more on a new session (`UpstreamLink.rejoin`): refused unread, it runs once
    whatever it does.

    `until_asked` (a 2026-07-28 client's call run in its request's own coroutine, `Rounds.start`): where the call
    would ask its client anything (an `input_required` answer), `GoesOn` is raised instead, holding what it takes to
    go on from there with `resume`, parked (`Resumed`; None: from the start). Only toward a 2026-07-28 server, whose
    questions come in its answers, never as requests of its own while the call is in flight; toward any other the
    call goes on parked before anything is borrowed or sent. A -32042 asks nothing here (its links go to the client
    in the error).
    """
    # A call is made once more over 2026-07-28 only toward a server of both eras (`era: auto`): for it the params are
    # kept (`again`), for any other not, while its questions wait for their humans.
    key = call_key(method, params) if link.dual.enabled else None
    again = params if key is not None else None
    if until_asked and not asks_only_in_answers(link):
        raise GoesOn(None)  # nothing borrowed or sent yet: the parked call starts it
    # A call learned to go 2026-07-28 needs no handshake-era connection of the client's own.
    conn = await _first_connection(link, call, key) if resume is None else resume.on
    if until_asked and conn.era != "modern":
        raise GoesOn(None)  # the server came back speaking the handshake: nothing was sent on its connection yet
    # The rounds are run here, in this one frame, not in a coroutine of their own: every question of the call waits
    # under it (for as long as its human thinks), so its locals are few and it holds no closure. `on`: the connection
    # the call goes on (`conn`, one in its place after `rejoin`, or the 2026-07-28 one); `asked` hears of the server's
    # requests during the handshake-era try (`link.dual.may_reissue`); `reissued` is set for the call made once more
    # over 2026-07-28, whose first answer decides where `key` goes from now on: a result sends it to 2026-07-28, an
    # error from the server keeps it on the handshake (and it is not made again), a lost connection or a timeout
    # decides nothing.
    on = conn
    asked: list[str] | None = []
    reissued: CallKey | None = None
    first: JsonObject | None = None
    if resume is None:
        sent, progress = _prepared(params, call, on.era)
    else:  # from where the call stopped in its request's coroutine: its first answer already received
        sent, progress, first = resume.sent, resume.progress, resume.take()
    del params, resume
    handed = False
    try:
        while True:  # at most twice: the call, and once more over 2026-07-28 toward a server of both eras
            try:
                minted: list[str] = []
                rejoined = False
                for _ in range(max_rounds + 1):
                    try:
                        if first is None:
                            result = await _send(link, on, call, method, sent, progress, asked)
                        else:
                            result, first = first, None
                    except PeerLost as lost:
                        if rejoined or not _unseen(link, lost):
                            raise
                        rejoined = True
                        on = await link.rejoin(call.peer, on)
                        result = await _send(link, on, call, method, sent, progress, asked)
                    if reissued is not None and reissued not in link.dual.learned:
                        link.dual.learn(reissued, "modern", "its handler returned a result only 2026-07-28 carries")
                    if minted:
                        await inbound.complete_minted(link.name, minted)
                    if result.get("resultType") != "input_required":
                        return without_upstream_identity(result)
                    if until_asked:
                        handed = True
                        raise GoesOn(Resumed(on, sent, progress, result))
                    requests, state = result.get("inputRequests"), result.get("requestState")
                    del result  # not held while the questions wait for their humans
                    if (one := only_input_request(call, requests)) is not None:
                        # The usual round asks one question: awaited here, in this frame, with nothing else held for
                        # as long as its human thinks (no coroutine, closure or task of the round's own, nor the
                        # decoded request).
                        input_key, request = one
                        del one, requests
                        asking = inbound.input_request(link, call, input_key, request, minted)
                        del request
                        sent = retry_params(sent, {input_key: await asking}, state)
                    else:
                        sent = await answer_input_requests(
                            link.name, call, sent, requests, state, _asker(inbound, link, call, minted)
                        )
                raise errors.gateway_error(
                    errors.ELICITATION_FAILED,
                    f"upstream {link.name!r} asked for input more than {max_rounds} times",
                    server=link.name,
                    rule="bridging.max_rounds",
                )
            except MCPError as exc:
                if reissued is not None:
                    if not isinstance(exc, PeerLost) and reissued not in link.dual.learned:
                        link.dual.learn(reissued, "handshake", _not_taken(exc))
                    raise
                if on.era != "handshake" or again is None or asked is None:
                    raise
                if not link.dual.may_reissue(key, exc, asked):
                    raise
                modern = await link.dual.connection()
                if modern is None:
                    raise
                on, asked, reissued = modern, None, key
                sent, progress = _prepared(again, call, on.era)
    except TimeoutError:
        raise errors.gateway_error(
            errors.UPSTREAM_TIMEOUT,
            f"upstream {link.name!r} did not answer within {link.config.request_timeout}s",
            server=link.name,
            method=method,
        ) from None
    except PeerLost as lost:
        raise await _upstream_lost(link, conn, method, lost) from None
    except UrlElicitationRequired as exc:
        await inbound.url_required(link, call, exc)
        raise
    finally:
        if not handed:
            inbound.call_ended(call, "the call that caused it ended")


class Resumed:
    """Where a call run `until_asked` stopped: the connection it went on, what it sent, its progress relay, and the
    server's `input_required` answer, given to `forward` once."""

    __slots__ = ("on", "sent", "progress", "_first")

    def __init__(
        self, on: UpstreamConnection, sent: JsonObject, progress: ProgressCallback | None, first: JsonObject
    ) -> None:
        self.on = on
        self.sent = sent
        self.progress = progress
        self._first: JsonObject | None = first

    def take(self) -> JsonObject | None:
        """The answer, handed over once (not held here while the call's questions wait)."""
        first, self._first = self._first, None
        return first


def asks_only_in_answers(link: UpstreamLink) -> bool:
    """A link whose server asks only in its answers (`input_required`), never by a request of its own while a call is
    in flight: a 2026-07-28 server, not one of both eras (`era: auto`, which may be reached over the handshake)."""
    primary = link.primary
    return primary is not None and primary.era == "modern" and not link.dual.enabled and not link.per_client


async def _first_connection(link: UpstreamLink, call: Origin, key: CallKey | None) -> UpstreamConnection:
    """The connection a call goes on first: the 2026-07-28 one for a call learned to go there (it needs no
    handshake-era connection of the client's own), else the client's."""
    # `key` is None toward a server of one era (no call of `goes_modern`, which says no to it).
    learned = (
        await link.dual.connection()
        if key is not None and link.dual.goes_modern(key) and link.primary is not None
        else None
    )
    return learned if learned is not None else await link.connection_for(call.peer)


def _prepared(params: Mapping[str, Any], call: Origin, era: Era) -> tuple[JsonObject, ProgressCallback | None]:
    """The params as an upstream of `era` gets them, and what relays its progress to the client (None: no progress)."""
    sent, token = upstream_params(params, call, era)
    # No closures: their cells would stay with `forward`'s frame for as long as a question of the call waits.
    return sent, _Progress(call, token) if token is not None else None


def _not_taken(exc: MCPError) -> str:
    return f"2026-07-28 did not take it either: {exc.error.message}"


def _unseen(link: UpstreamLink, lost: PeerLost) -> bool:
    """Refused unread, or never written because the connection had just ended (an HTTP link reconnects at once):
    either way the server has not seen it, and it goes on the connection in its place."""
    return forgot_session(lost) or (isinstance(lost, NotSent) and isinstance(link.config, HttpServer))


def _asker(
    inbound: InboundRouter, link: UpstreamLink, call: Origin, minted: list[str]
) -> Callable[[str, Any], Awaitable[Any]]:
    """How each question of a round of several is asked (`answer_input_requests`), into that round's `minted`."""
    return lambda input_key, request: inbound.input_request(link, call, input_key, request, minted)


async def _upstream_lost(link: UpstreamLink, conn: UpstreamConnection, method: str, lost: PeerLost) -> MCPError:
    """What the client is told when the upstream's connection failed the call. The wire's reason: the connection
    closed, or over HTTP this request's stream failed (an event past the server's `max_event_bytes`, a stream that
    ended without the answer) while the session goes on."""
    reason = lost.error.message
    if reason == CLOSED and (unreachable := await conn.unreachable()) is not None:
        link.suspect()
        return errors.gateway_error(
            errors.UPSTREAM_UNAVAILABLE, f"upstream {link.name!r} is not available", server=link.name,
            reason=unreachable,
        )
    return errors.gateway_error(
        errors.UPSTREAM_GONE,
        f"upstream {link.name!r} went away during {method}"
        if reason == CLOSED
        else f"upstream {link.name!r} did not answer {method}: {reason}",
        server=link.name,
        method=method,
        reason=reason,
    )


def _send(
    link: UpstreamLink,
    conn: UpstreamConnection,
    call: Origin,
    method: str,
    sent: JsonObject,
    progress: ProgressCallback | None,
    asked: list[str] | None,
) -> Awaitable[JsonObject]:
    """One try of the request on `conn` (the connection's own coroutine, no frame around it): its result,
    complete or `input_required`."""
    return conn.request(
        method,
        sent,
        origin=call,
        timeout=link.config.request_timeout,
        on_progress=progress,
        client_capabilities=modern_capabilities(call) if conn.era == "modern" else None,
        asked=asked,
    )


class _Progress:
    """The upstream's progress, relayed to the client on the client's own progress token."""

    __slots__ = ("_call", "_token")

    def __init__(self, call: Origin, token: object) -> None:
        self._call = call
        self._token = token

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        await self._call.notify("notifications/progress", progress_params(self._token, progress, total, message))
