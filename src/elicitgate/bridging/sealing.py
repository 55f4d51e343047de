"""The `requestState` the gateway issues to 2026-07-28 clients: sealed, bound, expiring.

`state_seal.StateSeal` does the cryptography (AES-256-GCM via `cryptography`) and checks expiry, the
method, the target and the arguments, the audience and the principal on every retry, before any gateway
handler runs. What this module adds: where the key comes from, who the principal is on a face without
authentication, which requests go through the boundary, and that `cryptography` (~7 MiB of RSS) is loaded
only once a 2026-07-28 round needs it.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_types import CLIENT_INFO_META_KEY
from mcp_types import methods as spec_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from elicitgate import heap
from elicitgate._compat import connection_of
from elicitgate.bridging.state_seal import (
    AUDIENCE,
    Binding,
    StateRejected,
    StateSeal,
    canonical,
    not_sealed,
    refused,
)
from elicitgate.config import BridgingConfig
from elicitgate.errors import ConfigError
from elicitgate.json_shapes import JsonObject

logger = logging.getLogger(__name__)

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
    if isinstance(info, dict):
        fields: JsonObject = info  # pyright: ignore[reportUnknownVariableType]  (a dict parsed from JSON)
        name, version = fields.get("name"), fields.get("version")
        if (name is None or type(name) is str) and (version is None or type(version) is str):
            # The usual info: its principal made once, not dumped again for every request of a round.
            principal = _CLIENT_PRINCIPALS.get((name, version))
            return principal if principal is not None else _client_principal(name, version)
        info = {"name": name, "version": version}
    return "client:" + canonical(info).decode()


_CLIENT_PRINCIPALS: dict[tuple[str | None, str | None], str] = {}
"""`principal_of`'s principal by the client's (name, version), both text or absent: a few per deployment."""
_CLIENT_PRINCIPALS_MAX = 1024
_CLIENT_INFO_KEPT_CHARS = 512


def _client_principal(name: str | None, version: str | None) -> str:
    """The principal of a client that says it is `name` at `version`, kept for the next request that says so (not
    words of any size, nor more than `_CLIENT_PRINCIPALS_MAX` of them: many clients are dumped again later)."""
    principal = "client:" + canonical({"name": name, "version": version}).decode()
    if len(name or "") + len(version or "") <= _CLIENT_INFO_KEPT_CHARS:
        if len(_CLIENT_PRINCIPALS) >= _CLIENT_PRINCIPALS_MAX:
            _CLIENT_PRINCIPALS.clear()
        _CLIENT_PRINCIPALS[(name, version)] = principal
    return principal


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
    """The requestState boundary, for the requests of a 2026-07-28 round only.

    The SDK runs server middleware for notifications too, and its boundary read any message named like a
    retryable request: a notification `tools/call` (no id) carrying a malformed `requestState` raised,
    logged as an error with a traceback. A notification has no result to seal and no state to unseal.

    A handshake-era client's request has neither a state to unseal nor an `input_required` result to seal
    (the gateway answers its elicitations on the session), so it passes by without the boundary; a request
    that carries `requestState` always goes through it, whatever version it claims. A retry's binding (its
    request and principal) is computed once, to open its state and to seal its next round's.
    """

    def __init__(self, keys: list[bytes], ttl: float) -> None:
        self._keys = keys
        self._ttl = ttl
        self._seal: StateSeal | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method not in spec_methods.INPUT_REQUIRED_METHODS:
            return await call_next(ctx)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and (ctx.params or {}).get("requestState") is None:
            return await call_next(ctx)
        bound = self.open(ctx)
        return self.close(ctx, await call_next(ctx), bound)

    def open(self, ctx: ServerRequestContext[Any, Any]) -> Binding | None:
        """A request of a round (a request of a method that may ask, with an id): its `requestState` unsealed in place
        in its context (handlers see the plain state), and the binding its next round is sealed with (None: none made
        yet, it had no state)."""
        params = ctx.params
        wire = params.get("requestState") if params is not None else None
        if wire is None:
            # Nothing to unseal (an explicit null counts as absent: dropping the field is in any client's power):
            # only an `input_required` result is sealed. Most calls end without a round: they pass by, and
            # `cryptography` is not loaded for them.
            return None
        assert params is not None
        if not isinstance(wire, str):
            raise refused(ctx.method, "non-string requestState")
        seal = self._seal or self._loaded()  # loaded once: no call for it on every request after the first
        bound = self._binding(ctx, seal, refusing=True)
        try:
            state = seal.unseal(wire, bound)
        except StateRejected as exc:
            raise refused(ctx.method, str(exc)) from None
        ctx.params = {**params, "requestState": state}  # the request's own context: handlers see the plain state
        return bound

    def close(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult, bound: Binding | None) -> HandlerResult:
        """The result of a request `open` let in: an `input_required` one with its `requestState` sealed."""
        if not spec_methods.is_input_required(result):
            return result
        return self._sealed(ctx, result, bound)

    def close_round(self, ctx: ServerRequestContext[Any, Any], result: JsonObject, bound: Binding | None) -> JsonObject:
        """`close` of an `input_required` result that is a dict (`faces.modern`'s relayed calls: their results always
        are), with no check of its type and shape again: its `requestState` sealed when it is a string."""
        state = result.get("requestState")
        if not isinstance(state, str):
            return result  # nothing to seal
        return {**result, "requestState": self._sealed_state(ctx, state, bound)}

    def _sealed_state(self, ctx: ServerRequestContext[Any, Any], state: str, bound: Binding | None) -> str:
        """`state` sealed, bound to the request (`bound`, or the request's binding made now)."""
        seal = self._seal or self._loaded()
        if bound is None:
            bound = self._binding(ctx, seal, refusing=False)
        try:
            return seal.seal(state, bound)
        except ValueError as exc:
            raise not_sealed(ctx.method, str(exc)) from None

    def _binding(self, ctx: ServerRequestContext[Any, Any], seal: StateSeal, *, refusing: bool) -> Binding:
        """The request's binding; a principal that cannot be told refuses the state (a retry) or the seal."""
        try:
            principal = principal_of(ctx)
        except Exception:  # deny on error: an unreadable principal must fail closed
            logger.exception("the principal could not be told while processing requestState on %s", ctx.method)
            raise (refused if refusing else not_sealed)(ctx.method, "principal binding error") from None
        return seal.binding(ctx.method, ctx.params, principal)

    def _sealed(
        self, ctx: ServerRequestContext[Any, Any], result: HandlerResult, bound: Binding | None
    ) -> HandlerResult:
        """An `input_required` result with its `requestState` sealed (a result without a string state as it is)."""
        state = result.get("requestState") if isinstance(result, Mapping) else getattr(result, "request_state", None)
        if not isinstance(state, str):
            return result  # nothing to seal; only a short-circuiting middleware puts a non-string here
        token = self._sealed_state(ctx, state, bound)
        if isinstance(result, BaseModel):
            return result.model_copy(update={"request_state": token})
        assert isinstance(result, Mapping)
        return {**result, "requestState": token}

    def _loaded(self) -> StateSeal:
        if self._seal is None:
            self._seal = StateSeal(self._keys, self._ttl, AUDIENCE)
            heap.settle()  # cryptography's modules stay for the process: out of every later full collection
        return self._seal

