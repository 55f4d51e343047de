"""An elicitation's hosted-page link on the pending board, which every replica reads from Redis.

The page token is the capability to answer (the first browser to open it claims the page), so the board
carries it sealed (AES-256-GCM, bound to the elicitation's id) under a key derived from the admin token:
the operator on any replica gets the link, and whoever reads Redis does not. Without an admin token
nobody lists the pending elicitations, and the board carries no link at all.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12


class PageLinks:
    def __init__(self, admin_token: str) -> None:
        key = hmac.new(admin_token.encode(), b"elicitgate replicas: page links", hashlib.sha256).digest()
        self._aead = AESGCM(key)

    def seal(self, elicitation_id: str, token: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, token.encode(), elicitation_id.encode())
        return base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, elicitation_id: str, sealed: str) -> str | None:
        """The token, or None when it was sealed for another id or under another admin token."""
        try:
            raw = base64.urlsafe_b64decode(sealed.encode())
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], elicitation_id.encode()).decode()
        except (InvalidTag, ValueError):
            return None
