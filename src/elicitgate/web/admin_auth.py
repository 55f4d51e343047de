"""Who may use the admin API and the inbox: the admin token, inbox sessions, and slowing token guesses.

- The API takes the token as `Authorization: Bearer <token>`.
- The inbox page logs in by POST (never a token in a URL, where access logs and browser history keep
  it) and gets a session cookie: a fresh random id per login (the one presented is dropped), HttpOnly,
  SameSite=Strict, `Secure` when the page is served over https, expiring after `SESSION_TTL`.
- Wrong tokens slow their source down: after each failure it must wait (1 s, doubling up to a minute)
  before its next wrong token is answered 401 again; earlier wrong ones get 429 with `Retry-After`. The
  right token is never refused, so nobody's guesses lock the admin out. A source is the client's address
  and, when a trusted proxy named it (`X-Forwarded-For`), the connecting address too: a new
  `X-Forwarded-For` per guess does not start a fresh count. Nothing sleeps, so other addresses and the
  event loop carry on. What stops guessing is the token's length (16 characters at least).
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from elicitgate.web.client_address import client_address, connecting_address
from elicitgate.web.responses import problem

ADMIN_COOKIE = "eg_admin"
VOUCHED = "elicitgate.admin_vouched"
"""Scope key of an admin-API request another replica forwarded after it checked the caller itself: the
token and cookies stay there, they never travel between replicas (web/replicas.py)."""
SESSION_TTL = 8 * 3600.0
MAX_SESSIONS = 1000
FIRST_DELAY = 1.0
MAX_DELAY = 60.0
FORGET_AFTER = 15 * 60.0
MAX_TRACKED_ADDRESSES = 10_000


@dataclass
class _Failures:
    count: int
    next_allowed: float


class LoginThrottle:
    """Per source address: how long until its next wrong token is answered 401 (rather than 429) again."""

    def __init__(self) -> None:
        self._by_address: OrderedDict[str, _Failures] = OrderedDict()

    def wait_for(self, address: str) -> float:
        """Seconds the address must still wait (0 when its attempt may be checked now)."""
        failures = self._by_address.get(address)
        return max(0.0, failures.next_allowed - time.monotonic()) if failures is not None else 0.0

    def failed(self, address: str) -> float:
        now = time.monotonic()
        failures = self._by_address.pop(address, None)
        if failures is None or now - failures.next_allowed > FORGET_AFTER:
            failures = _Failures(0, now)
        failures.count += 1
        delay = min(MAX_DELAY, FIRST_DELAY * 2 ** (failures.count - 1))
        failures.next_allowed = now + delay
        self._by_address[address] = failures
        while len(self._by_address) > MAX_TRACKED_ADDRESSES:
            self._by_address.popitem(last=False)
        return delay

    def succeeded(self, address: str) -> None:
        self._by_address.pop(address, None)




def _unauthorized() -> Response:
    response = problem(401, "missing or wrong admin token (Authorization: Bearer <token>)")
    response.headers["WWW-Authenticate"] = 'Bearer realm="elicitgate"'
    return response


def sources(request: Request) -> list[str]:
    """What a wrong token counts against: the client's address, and the connecting one when it differs."""
    client = client_address(request)
    peer = connecting_address(request)
    return [client] if peer is None or peer == client else [client, f"via {peer}"]


class AdminAuth:
    def __init__(self, token: str | None, public_url: str | None) -> None:
        self.token = token
        self._https_public = bool(public_url and public_url.startswith("https://"))
        self._sessions: OrderedDict[str, float] = OrderedDict()  # session id -> expiry (monotonic)
        self.throttle = LoginThrottle()

    @property
    def on(self) -> bool:
        return self.token is not None

    def _matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def check_token(self, request: Request, given: str | None) -> Response | None:
        """None when `given` is the token; otherwise the refusal: 401, or 429 while its source waits.

        The token is compared first: the right one always passes. Only a wrong token counts as a failed
        attempt, not a missing one, and one within its source's wait is not counted again."""
        if not given:
            return _unauthorized()
        keys = sources(request)
        if self._matches(given):
            self.throttle.succeeded(keys[0])
            return None
        wait = max(self.throttle.wait_for(key) for key in keys)
        if wait > 0:
            response = problem(429, "too many wrong admin tokens from this address; try again later",
                                retryAfterSeconds=math.ceil(wait))
            response.headers["Retry-After"] = str(math.ceil(wait))
            return response
        for key in keys:
            self.throttle.failed(key)
        return _unauthorized()

    def bearer(self, request: Request) -> str | None:
        """The bearer token the request carries, if any."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return given if scheme.lower() == "bearer" else None

    # -- inbox sessions --------------------------------------------------------------------------------

    def session_ok(self, request: Request) -> bool:
        sid = request.cookies.get(ADMIN_COOKIE)
        if not self.on or not sid:
            return False
        expiry = self._sessions.get(sid)
        if expiry is None:
            return False
        if expiry <= time.monotonic():
            del self._sessions[sid]
            return False
        return True

    def start_session(self, request: Request, response: Response) -> None:
        """A new session for a login (the one the browser presented, if any, ends)."""
        old = request.cookies.get(ADMIN_COOKIE)
        if old:
            self._sessions.pop(old, None)
        now = time.monotonic()
        for sid, expiry in list(self._sessions.items()):
            if expiry <= now:
                del self._sessions[sid]
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.popitem(last=False)
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = now + SESSION_TTL
        response.set_cookie(
            ADMIN_COOKIE, sid, max_age=int(SESSION_TTL), path="/", httponly=True, samesite="strict",
            secure=self._https_public or request.url.scheme == "https",
        )
