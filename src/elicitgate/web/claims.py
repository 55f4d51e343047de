"""Who a hosted page belongs to: the first browser that opens it.

The `/e/<token>` link is a bearer capability, and in URL mode it passes through the very client that
`sensitive_fields: host` keeps out. So the first browser to open the page claims it: it gets a random
claim cookie (HttpOnly, scoped to the page's path) and the entry keeps only the cookie's digest. Any
other browser gets a read-only "opened elsewhere" page and cannot post. The operator can release a
claim (inbox, admin API); the next browser to open the page claims it afresh.

The cookie is `SameSite=Lax`, not Strict: the person usually arrives by clicking the link in another
application, a cross-site navigation that a Strict cookie would miss, locking them out of their own
page. Posts are still guarded by the page's Strict CSRF cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from starlette.requests import Request
from starlette.responses import Response

from elicitgate.elicitation.hosted_registry import HostedEntry

CLAIM_COOKIE = "eg_claim"
CLAIM_DIGEST = "elicitgate.claim_digest"
"""Scope key of a request another replica forwarded (web/replicas.py): the digest of the claim cookie the
browser presented there, in place of the cookie, which never travels between replicas."""
CLAIM_OFFER = "elicitgate.claim_offer"
"""Scope key of a forwarded request without a claim cookie: the digest of the value the forwarding replica
gives the browser if this request claims the page (the value itself stays there)."""
CLAIM_SLOT = "~claim~"
"""The cookie value a forwarded response carries in place of the claim, put back by the forwarding replica."""


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def is_prefetch(request: Request) -> bool:
    """A browser's speculative fetch (no person looks at it yet): it must not claim the page."""
    purpose = (request.headers.get("sec-purpose") or request.headers.get("purpose") or "").lower()
    return "prefetch" in purpose or "prerender" in purpose


def holds(request: Request, entry: HostedEntry) -> bool:
    """This browser is the page's claimant (an unclaimed page belongs to nobody yet)."""
    if entry.claim is None:
        return False
    forwarded = request.scope.get(CLAIM_DIGEST)
    if isinstance(forwarded, str):
        return hmac.compare_digest(forwarded, entry.claim)
    given = request.cookies.get(CLAIM_COOKIE, "")
    return bool(given) and hmac.compare_digest(_digest(given), entry.claim)


def cookie_digest(value: str) -> str:
    """What a page keeps of its claim cookie, and what a replica forwards in place of it."""
    return _digest(value)


def claim(entry: HostedEntry, request: Request) -> str:
    """Bind the page to the browser that gets the returned cookie value."""
    offer = request.scope.get(CLAIM_OFFER)
    if isinstance(offer, str):  # the forwarding replica holds the value and puts it in the cookie
        entry.claim = offer
        entry.claimed_at = time.time()
        return CLAIM_SLOT
    value = secrets.token_urlsafe(32)
    entry.claim = _digest(value)
    entry.claimed_at = time.time()
    return value


def over_https(request: Request, public_url: str | None) -> bool:
    """The browser reaches the page over https (directly, through a trusted proxy, or by `http.public_url`):
    the page's cookies are then `Secure`, so that they never travel in clear."""
    return request.url.scheme == "https" or bool(public_url and public_url.startswith("https://"))


def set_claim_cookie(response: Response, entry: HostedEntry, value: str, *, secure: bool) -> None:
    response.set_cookie(
        CLAIM_COOKIE,
        value,
        path=f"/e/{entry.token}",
        httponly=True,
        samesite="lax",
        secure=secure,
    )


def release(entry: HostedEntry) -> bool:
    """The operator frees the page for the next browser; what the claimant typed is not handed on."""
    if entry.claim is None:
        return False
    entry.claim = None
    entry.claimed_at = None
    entry.draft = None
    entry.review = None
    entry.errors = entry.broker_errors()
    entry.touch()
    return True
