"""The `requestState` envelope the gateway issues: one AES-256-GCM seal per round, bound to its request.

In place of the SDK's `RequestStateBoundary`, which built a claims dict per round, dumped it as JSON with
`json.dumps`, digested the arguments with `json.dumps(sort_keys=True)`, salted and hashed the principal,
and did it all again (plus `json.loads` and a strict base64 round trip) on the retry: ~47 us to seal and
~60 us to unseal a round here, most of it Python around one AEAD call of ~2 us (bench/README.md).

What a token holds, encrypted and authenticated under a key derived from the configured secret (HKDF-SHA256,
a key id of 4 bytes for the rotation ring, `keys[0]` seals, every key unseals):

    "g1." base64url(kid | nonce (12) | AES-GCM(iat | exp | request digest (16) | principal digest (16) | state))

with "g1." and the key id as the associated data. The request digest covers the method, the target (tool or
prompt name, resource URI) and the arguments in a canonical form (keys sorted); the principal digest the audience
and the principal (`sealing.principal_of`). Unsealing checks, as the SDK's boundary did: the format, the key, the tag,
issued-at not in the future (60 s of skew), not expired, the same request, the same principal; any failure is
-32602 "Invalid or expired requestState" with the reason in the server's log only. The client cannot read the
state (the gateway's pointer to its parked call) nor change a bit of it.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import logging
import os
import struct
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from mcp.shared.exceptions import MCPError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

logger = logging.getLogger(__name__)

AUDIENCE = "elicitgate"
"""Who a token is for: the service identity that keeps state minted by another service under the same key out."""
PREFIX = "g1."
_PREFIX_BYTES = PREFIX.encode()
_PREFIX_LEN = len(PREFIX)
_KDF_INFO = b"elicitgate/request-state/g1/aes-256-gcm"
_KID_INFO = b"elicitgate/request-state/g1/kid:"
_KID_LEN = 4
_NONCE_LEN = 12
_TAG_LEN = 16
_DIGEST_LEN = 16
_HEAD = struct.Struct(">dd16s16s")
"""issued-at, expiry (seconds since the epoch), the request digest, the principal digest."""
_MIN_RAW = _KID_LEN + _NONCE_LEN + _HEAD.size + _TAG_LEN
FUTURE_SKEW = 60.0
"""Seconds a token's issued-at may lie ahead of this clock (replicas' clocks differ a little)."""

_NO_ARGUMENTS: Mapping[str, Any] = {}
_PRINCIPALS_MAX = 1024
_PRINCIPAL_KEPT_CHARS = 512
Binding = tuple[bytes, bytes]
"""(request digest, principal digest): what one round's token is bound to, computed once per request."""


class StateRejected(Exception):
    """A `requestState` that failed a check; the message is the reason, for the server's log only."""


def refused(method: str, reason: str) -> MCPError:
    """The one wire error for any state refused (the SDK boundary's: the reason never goes to the client)."""
    logger.warning("requestState rejected on %s: %s", method, reason)
    return MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState",
                    data={"reason": "invalid_request_state"})


def not_sealed(method: str, reason: str) -> MCPError:
    """A result whose state could not be sealed: an internal error, its reason in the log only."""
    logger.error("refusing to seal requestState on %s: %s", method, reason)
    return MCPError(code=INTERNAL_ERROR, message="Internal error")


def binding(method: str, params: Mapping[str, Any] | None, principal: str | None, audience: str) -> Binding:
    """What a round's token is bound to: the request (method, target, arguments) and who asks (audience,
    principal), each as a digest (BLAKE2b, 16 bytes: it travels encrypted) of one canonical form."""
    return request_digest(method, params), principal_digest(principal, audience)


def request_digest(method: str, params: Mapping[str, Any] | None) -> bytes:
    """The request half of a binding: the method, the target (tool or prompt name, resource URI), the arguments."""
    p: Mapping[str, Any] = params or {}
    args: Any = _NO_ARGUMENTS
    if method == "resources/read":
        target = str(p.get("uri", ""))
    else:
        target = str(p.get("name", ""))
        args = p.get("arguments") or _NO_ARGUMENTS  # none given is none at all (as the SDK's boundary had it)
    try:  # `canonical`'s, with no call for it on the usual way
        text = b"o" + orjson.dumps([method, target, args], option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        text = canonical([method, target, args])
    return hashlib.blake2b(text, digest_size=_DIGEST_LEN).digest()


def principal_digest(principal: str | None, audience: str) -> bytes:
    """The principal half of a binding: who asks, and the service the token is for."""
    return hashlib.blake2b(canonical([audience, principal]), digest_size=_DIGEST_LEN).digest()


def canonical(value: Any) -> bytes:
    """One byte string per JSON value, keys sorted: orjson's, or the standard library's (ASCII, so total) for what
    orjson refuses (integers beyond 64 bits, lone surrogates); the first byte says which, so the two never meet."""
    try:
        return b"o" + orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return b"j" + json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


_TO_URL_SAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URL_SAFE = bytes.maketrans(b"-_", b"+/")


def _b64u(data: bytes) -> str:
    """URL-safe base64 without padding: `base64.urlsafe_b64encode`'s, with binascii's call alone (the module's
    wrappers are three Python calls more, for each round sealed and each retry opened)."""
    return binascii.b2a_base64(data, newline=False).translate(_TO_URL_SAFE).rstrip(b"=").decode()


def _b64u_strict(text: str) -> bytes:
    """The inverse of `_b64u`, for its canonical output only (anything else is ValueError): as
    `base64.urlsafe_b64decode`, which drops what is not of the alphabet (the comparison refuses it).

    `_b64u(raw) == text`, compared in the standard alphabet (the bytes decoded, not translated back): the same test,
    since `_b64u` writes no `+` nor `/`, and the standard alphabet no `-` nor `_`."""
    encoded = text.encode("ascii")
    standard = encoded.translate(_FROM_URL_SAFE)
    raw = binascii.a2b_base64(standard + b"=" * (-len(encoded) % 4))
    if b"+" in encoded or b"/" in encoded or binascii.b2a_base64(raw, newline=False).rstrip(b"=") != standard:
        raise ValueError("non-canonical base64url")
    return raw


def _hkdf_sha256(secret: bytes, info: bytes) -> bytes:
    """RFC 5869 (cryptography's HKDF) with no salt: the 32-byte key AES-256 seals under."""
    from cryptography.hazmat.primitives.hashes import SHA256
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(secret)


class StateSeal:
    """Seals and opens the gateway's `requestState` (see the module's docstring). Loads `cryptography` (AES-GCM)."""

    def __init__(self, keys: Sequence[bytes], ttl: float, audience: str) -> None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._invalid_tag = InvalidTag
        if not keys:
            raise ValueError("at least one requestState key is needed")
        self.ttl = ttl
        self.audience = audience
        self._ring: dict[bytes, AESGCM] = {}
        self._principals: dict[str | None, bytes] = {}
        """`principal_digest` by principal: a client is the same principal on every request (a few per deployment)."""
        self._mint = b""
        for i, secret in enumerate(keys):
            if len(secret) < 32:
                raise ValueError(f"requestState keys must be at least 32 bytes; keys[{i}] is {len(secret)}")
            key = _hkdf_sha256(bytes(secret), _KDF_INFO)
            kid = hashlib.sha256(_KID_INFO + key).digest()[:_KID_LEN]
            self._ring.setdefault(kid, AESGCM(key))
            if i == 0:
                self._mint = kid

    def binding(self, method: str, params: Mapping[str, Any] | None, principal: str | None) -> Binding:
        who = self._principals.get(principal)
        if who is None:
            who = principal_digest(principal, self.audience)
            if principal is None or len(principal) <= _PRINCIPAL_KEPT_CHARS:  # a client's own words: not any size
                if len(self._principals) >= _PRINCIPALS_MAX:  # many principals (an open face): digested again later
                    self._principals.clear()
                self._principals[principal] = who
        return request_digest(method, params), who

    def seal(self, state: str, bound: Binding) -> str:
        """A token for `state`, bound to `bound`, valid for `ttl` seconds from now. Raises ValueError for a state
        that is no text (lone surrogates)."""
        now = time.time()
        plain = _HEAD.pack(now, now + self.ttl, bound[0], bound[1]) + state.encode()
        kid = self._mint
        nonce = os.urandom(_NONCE_LEN)
        return PREFIX + _b64u(kid + nonce + self._ring[kid].encrypt(nonce, plain, _PREFIX_BYTES + kid))

    def unseal(self, token: str, bound: Binding) -> str:
        """The state `token` holds, when it is one of ours, unexpired, and bound to `bound`; else
        `StateRejected` with the reason."""
        if not token.startswith(PREFIX):
            raise StateRejected("malformed")
        try:
            raw = _b64u_strict(token[_PREFIX_LEN:])
        except ValueError:
            raise StateRejected("malformed") from None
        if len(raw) < _MIN_RAW:
            raise StateRejected("malformed")
        kid, nonce = raw[:_KID_LEN], raw[_KID_LEN:_KID_LEN + _NONCE_LEN]
        aead = self._ring.get(kid)
        if aead is None:
            raise StateRejected("unknown key")
        try:
            plain = aead.decrypt(nonce, raw[_KID_LEN + _NONCE_LEN:], _PREFIX_BYTES + kid)
        except self._invalid_tag:
            raise StateRejected("seal") from None
        issued, expires, request, who = _HEAD.unpack_from(plain)
        now = time.time()
        # Stated positively, so that a NaN fails them.
        if not issued <= now + FUTURE_SKEW:
            raise StateRejected("minted in the future")
        if not now < expires:
            raise StateRejected("expired")
        if not hmac.compare_digest(request + who, bound[0] + bound[1]):  # both at once: one call on the usual way
            if not hmac.compare_digest(request, bound[0]):
                raise StateRejected("request binding")
            raise StateRejected("principal")
        try:
            return plain[_HEAD.size:].decode()
        except UnicodeDecodeError:
            raise StateRejected("malformed") from None
