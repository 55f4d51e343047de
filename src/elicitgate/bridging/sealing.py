"""The `requestState` the gateway issues to 2026-07-28 clients: sealed, bound, expiring.

The SDK's `RequestStateBoundary` does the cryptography (AES-256-GCM via `cryptography`) and checks
expiry, the method, the target and a digest of the arguments, the audience and the principal on
every retry, before any gateway handler runs. What the gateway adds: where the key comes from, who
the principal is on a face without authentication, and that the boundary (with `cryptography`, ~7 MiB
of RSS) is loaded only once a 2026-07-28 round needs it.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_types import CLIENT_INFO_META_KEY
from mcp_types import methods as spec_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

if TYPE_CHECKING:
    from mcp.server.request_state import RequestStateBoundary

from elicitgate import heap
from elicitgate.config import BridgingConfig
from elicitgate.errors import ConfigError
from elicitgate.json_shapes import is_object
from elicitgate.sdk import connection_of

logger = logging.getLogger(__name__)

AUDIENCE = "elicitgate"
KEY_BYTES = 32


def authenticated_principal_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The identity `http.auth` vouched for (the SDK's issuer, client and subject of the token), if any.

    The SDK's `request_state.authenticated_principal`, spelled out here so that serving a request does not
    import `cryptography`."""
    token = get_access_token()
    if token is None:
        return None
    return "auth:" + json.dumps(principal_components(token), separators=(",", ":"))


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    """Who is asking: the authenticated identity, or else the client's identity.

    Without authentication the client identity is what the client says it is (its `clientInfo`),
    which keeps one client's state from being replayed by another, not an impostor out.
    """
    authenticated = authenticated_principal_of(ctx)
    if authenticated is not None:
        return authenticated
    info: Any = (ctx.meta or {}).get(CLIENT_INFO_META_KEY)
    if info is None:
        params = connection_of(ctx).client_params
        info = params.client_info.model_dump(mode="json") if params is not None else None
    if is_object(info):
        info = {k: info.get(k) for k in ("name", "version")}
    return "client:" + json.dumps(info, sort_keys=True, separators=(",", ":"))


def load_keys(config: BridgingConfig) -> list[bytes]:
    """The configured keys, or the deployment's own, generated on first use and kept 0600.

    Raises `ConfigError` when the key file exists but does not hold a 32-byte key (empty, truncated)."""
    if config.state_keys:
        return [key.get_secret_value().encode() for key in config.state_keys]
    path = config.state_key_file
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        _write_private(path, key.hex())
        logger.info("generated the requestState key in %s", path)
        return [key]
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read the requestState key file: {exc.strerror}"]) from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        what = "is empty" if not text else f"does not hold {KEY_BYTES * 2} hex digits (a {KEY_BYTES}-byte key)"
        raise ConfigError(str(path), [
            f"the requestState key file {what}; it must hold {KEY_BYTES * 2} hex digits. Delete it to have a "
            "new key generated (requestState issued with the old key stops working), or set "
            "bridging.state_keys",
        ])
    return [key]


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text + "\n")


def state_boundary(config: BridgingConfig) -> RequestsOnly:
    """The boundary for the face's middleware; the key is read (or made) now, so a bad key file stops the
    start."""
    return RequestsOnly(load_keys(config), config.state_ttl)


class RequestsOnly:
    """The SDK's requestState boundary, for the requests of a 2026-07-28 round only.

    The SDK runs server middleware for notifications too, and its boundary reads any message named like a
    retryable request: a notification `tools/call` (no id) carrying a malformed `requestState` raised,
    logged as an error with a traceback. A notification has no result to seal and no state to unseal.

    A handshake-era client's request has neither a state to unseal nor an `input_required` result to seal
    (the gateway answers its elicitations on the session), so it passes by without the boundary; a request
    that carries `requestState` always goes through it, whatever version it claims.
    """

    def __init__(self, keys: list[bytes], ttl: float) -> None:
        self._keys = keys
        self._ttl = ttl
        self._boundary: RequestStateBoundary | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method not in spec_methods.INPUT_REQUIRED_METHODS:
            return await call_next(ctx)
        if (ctx.params or {}).get("requestState") is None:
            # Nothing to unseal: the boundary only seals, and only an `input_required` result (the boundary's own
            # rule). Most calls end without a round: they pass by, and the boundary is not loaded for them.
            if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                return await call_next(ctx)
            result = await call_next(ctx)
            if not spec_methods.is_input_required(result):
                return result
            return await self._loaded()(ctx, _answered(result))
        return await self._loaded()(ctx, call_next)

    def _loaded(self) -> RequestStateBoundary:
        if self._boundary is None:
            from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

            security = RequestStateSecurity(
                keys=self._keys, ttl=self._ttl, bind_principal=principal_of, audience=AUDIENCE
            )
            self._boundary = RequestStateBoundary(security, default_audience=AUDIENCE)
            heap.settle()  # cryptography's modules stay for the process: out of every later full collection
        return self._boundary


def _answered(result: HandlerResult) -> CallNext:
    """The rest of the chain, already run: `result`."""

    async def call_next(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return result

    return call_next
