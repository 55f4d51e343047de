"""`bridging`: 2026-07-28 clients' multi round-trip calls and the `requestState` the gateway seals."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from elicitgate.config.base import Strict, state_dir


class BridgingConfig(Strict):
    """2026-07-28 clients: multi round-trip calls and the `requestState` the gateway issues."""

    state_keys: list[SecretStr] = Field(default_factory=list[SecretStr])
    """Secrets (each at least 32 bytes) protecting `requestState` with AES-256-GCM: the first seals,
    all unseal (rotation). Empty: a key is generated once and kept in `state_key_file`."""
    state_key_file: Path = Field(default_factory=lambda: state_dir() / "state.key")
    state_ttl: float = Field(default=600.0, gt=0)
    """Seconds a `requestState` the gateway issued stays valid."""
    max_rounds: int = Field(default=10, ge=1)
    """Input rounds one call may take, in every direction, before it fails."""
    url_complete_wait: float = Field(default=60.0, ge=0)
    """After a 2026-07-28 client accepts a URL-mode request from a handshake-era server, how long its
    retry waits for the server's `notifications/elicitation/complete`."""
    max_parked_calls: int = Field(default=10_000, gt=0)
    """Calls of 2026-07-28 clients waiting for a retry, in the whole gateway."""
