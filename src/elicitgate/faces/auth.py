"""Authentication on `/mcp`: static bearer tokens and OAuth 2.1 JWT access tokens (`http.auth`).

The SDK's pieces do the HTTP side: `BearerAuthBackend` reads the header, `RequireAuthMiddleware`
answers 401 / 403 with `WWW-Authenticate`, `AuthContextMiddleware` makes the token visible to
handlers (`bridging/sealing.principal_of` turns it into the principal), and the session manager keeps a
session to the principal that opened it. What the gateway adds: the token verifiers, the
protected-resource metadata (RFC 9728), and applying all of it to `/mcp` only (the web surface has
its own admin token).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import anyio
from pydantic import AnyHttpUrl, TypeAdapter, ValidationError
from starlette.authentication import UnauthenticatedUser
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier

from elicitgate.config import BearerToken, HttpAuthConfig, OAuthResourceConfig
from elicitgate.elicitation.url_policy import is_loopback_host
from elicitgate.errors import AuthConfigError
from elicitgate.json_shapes import JsonObject

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
STATIC_ISSUER = "elicitgate:tokens"
"""The `iss` of a static token's principal, so a static principal never equals an OAuth subject."""


class StaticTokens:
    """`http.auth.tokens` (and `tokens_file`): each token stands for one principal."""

    def __init__(self, tokens: list[BearerToken]) -> None:
        self._by_digest = {_digest(t.token.get_secret_value()): t.principal for t in tokens}

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self._by_digest.get(_digest(token))
        if principal is None:
            return None
        return AccessToken(
            token=token, client_id=principal, subject=principal, scopes=[], claims={"iss": STATIC_ISSUER}
        )


class JwtAccessTokens:
    """OAuth 2.1 resource server: a JWT signed by a key of the issuer's JWKS, for this audience, unexpired."""

    def __init__(self, config: OAuthResourceConfig, audience: str) -> None:
        self.config = config
        self.audience = audience
        jwks_url = config.jwks_url or config.issuer.rstrip("/") + "/.well-known/jwks.json"
        import jwt  # with `cryptography`: loaded only by a gateway that checks JWTs

        self._keys = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300, timeout=10)

    async def verify_token(self, token: str) -> AccessToken | None:
        import jwt

        try:
            # PyJWKClient fetches (and caches) the key set with blocking I/O.
            key = await anyio.to_thread.run_sync(self._keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=self.config.algorithms,
                audience=self.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:  # its texts name the claim or check, never the token's content
            return _refused(f"{type(exc).__name__}: {exc}")
        except (TypeError, ValueError) as exc:
            # pyjwt lets cryptography raise these when the header's `alg` does not fit the key's type
            # (an RS256 header on an EC key): a forged token like any other, never a 500.
            return _refused(f"the token's alg does not fit the key ({type(exc).__name__})")
        if not isinstance(claims.get("sub"), str) or not claims["sub"].strip():
            return _refused("empty sub (the principal needs a subject)")
        scopes = claims.get("scope", claims.get("scp", ""))
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            scopes=scopes.split() if isinstance(scopes, str) else [str(s) for s in scopes],
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=str(claims["sub"]),
            claims=claims,
        )


class Verifiers:
    """Static tokens first (a dictionary lookup), then the issuer's JWTs."""

    def __init__(self, *verifiers: TokenVerifier) -> None:
        self.verifiers = verifiers

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            if (found := await verifier.verify_token(token)) is not None:
                return found
        return None


def load_tokens(config: HttpAuthConfig) -> list[BearerToken]:
    tokens = list(config.tokens)
    if config.tokens_file is not None:
        path = Path(config.tokens_file)
        try:
            tokens += TypeAdapter(list[BearerToken]).validate_json(path.read_bytes())
        except OSError as exc:
            raise AuthConfigError(f"http.auth.tokens_file {path}: cannot read: {exc.strerror}") from None
        except ValidationError as exc:
            where = ", ".join(".".join(map(str, e["loc"])) + ": " + e["msg"] for e in exc.errors(include_input=False))
            raise AuthConfigError(f"http.auth.tokens_file {path}: {where}") from None
    return tokens


class McpAuth:
    """Everything `http.auth` puts in front of `/mcp`: the verifier, and the metadata when OAuth is on."""

    def __init__(self, config: HttpAuthConfig, base_url: str | None) -> None:
        self.config = config
        oauth = config.oauth
        verifiers: list[TokenVerifier] = []
        if static := StaticTokens(load_tokens(config)):
            verifiers.append(static)
        self.resource: str | None = None
        self.metadata_url: str | None = None
        if oauth is not None:
            self.resource = oauth.resource or (base_url.rstrip("/") + MCP_PATH if base_url else None)
            if self.resource is None:
                raise AuthConfigError("http.auth.oauth needs http.public_url or http.auth.oauth.resource")
            verifiers.append(JwtAccessTokens(oauth, oauth.audience or self.resource))
            # The SDK's OAuth routes (their module imports every handler of an authorization server): with OAuth only.
            from mcp.server.auth.routes import build_resource_metadata_url

            self.metadata_url = str(build_resource_metadata_url(AnyHttpUrl(self.resource)))
        self.verifier = Verifiers(*verifiers)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        return RequireBearer(app, self)

    def routes(self) -> list[Route]:
        """RFC 9728 metadata, at the path-suffixed well-known URL and the root one (clients try both)."""
        oauth = self.config.oauth
        if oauth is None:
            return []
        body: JsonObject = {
            "resource": self.resource,
            "authorization_servers": [oauth.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "elicitgate",
        }
        if oauth.required_scopes:
            body["scopes_supported"] = oauth.required_scopes

        async def serve(request: Request) -> Response:
            return JSONResponse(body, headers={"Cache-Control": "public, max-age=3600",
                                               "Access-Control-Allow-Origin": "*"})

        paths = {METADATA_PATH, str(AnyHttpUrl(self.metadata_url or "").path)}
        return [Route(path, serve, methods=["GET"]) for path in sorted(paths)]


class RequireBearer:
    """`/mcp` needs a valid bearer token; every other route passes untouched."""

    def __init__(self, app: ASGIApp, auth: McpAuth) -> None:
        self.app = app
        self.backend = BearerAuthBackend(auth.verifier)
        scopes = auth.config.oauth.required_scopes if auth.config.oauth else []
        metadata = AnyHttpUrl(auth.metadata_url) if auth.metadata_url else None
        self.guarded = RequireAuthMiddleware(AuthContextMiddleware(app), scopes, metadata)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        found = await self.backend.authenticate(HTTPConnection(scope))
        scope["auth"], scope["user"] = found if found is not None else (None, UnauthenticatedUser())
        await self.guarded(scope, receive, send)


def _refused(reason: str) -> None:
    logger.info("bearer token refused: %s", reason)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()

def exposure_warning(host: str, config: HttpAuthConfig) -> str | None:
    """What to say at start-up when `/mcp` is reachable from other machines with no authentication."""
    if config.enabled or is_loopback_host(host):
        return None
    return (
        f"serving /mcp on {host} without authentication: anyone who can reach this address can use every "
        "tool of every upstream. Set http.auth (docs/security.md) or listen on 127.0.0.1."
    )
