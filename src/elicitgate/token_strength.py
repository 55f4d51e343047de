"""Whether a bearer token the operator configured is too easy to guess: refused at start-up, not served.

The estimate is what the token itself shows: its length times the Shannon entropy of its characters
(bits per character, from how often each occurs). `aaaaaaaaaaaaaaaa` shows 0 bits, `0123456789abcdef` 64,
`change-me-0123456789abcdef` 111; 32 random bytes in URL-safe base64 (`secrets.token_urlsafe(32)`, 43
characters) show 190 to 230. It reads only the characters, so it underrates short random tokens (16 random
bytes, `token_urlsafe(16)` or `token_hex(16)` or a UUID, show 80 to 130 bits and may be refused) and cannot
tell a random token from a long phrase a person made up (`correct-horse-battery-staple-...`): it refuses the
tokens that are plainly weak, and the fix it names always passes.
"""

from __future__ import annotations

import math
from collections import Counter

MIN_TOKEN_BITS = 128
"""What a token must show at least (docs/security.md, "Token strength")."""
GENERATE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
"""A command whose output always passes."""


def estimated_bits(token: str) -> float:
    """The token's length times the Shannon entropy of its characters, in bits."""
    length = len(token)
    if not length:
        return 0.0
    return max(0.0, -sum(count * math.log2(count / length) for count in Counter(token).values()))


def weakness(token: str) -> str | None:
    """Why `token` is too easy to guess (never quoting it), or None when it shows enough entropy."""
    bits = estimated_bits(token)
    if bits >= MIN_TOKEN_BITS:
        return None
    return (
        f"is too easy to guess: about {bits:.0f} bits of entropy estimated from its characters, at least "
        f"{MIN_TOKEN_BITS} needed (repeated or few distinct characters, or too short); generate one with "
        f"`{GENERATE}`"
    )
