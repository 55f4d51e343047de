"""`http`: the HTTP face (hosts and origins, sessions, request limits, resumable streams) and who may use
`/mcp` (`http.auth`: bearer tokens, an OAuth issuer)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator

from elicitgate.config.base import Strict, default_share
from elicitgate.hostport import parse_hostport
from elicitgate.token_strength import weakness


class BearerToken(Strict):
    token: SecretStr = Field(min_length=16)
    """At least 128 bits of entropy as estimated from its characters (`token_strength`)."""
    principal: str = Field(min_length=1)
    """The identity this token stands for: rate limits, pending limits, sealed `requestState` and
    elicitation ownership are per principal."""

    @field_validator("token")
    @classmethod
    def _strong(cls, token: SecretStr) -> SecretStr:
        if (why := weakness(token.get_secret_value())) is not None:
            raise ValueError(f"the token {why}")
        return token


class OAuthResourceConfig(Strict):
    """OAuth 2.1 resource server: JWT access tokens checked against the issuer's JWKS."""

    issuer: str = Field(min_length=1)
    """The authorization server's issuer URL; tokens must carry it as `iss`, and the protected-resource
    metadata lists it in `authorization_servers`."""
    jwks_url: str | None = None
    """Where the issuer publishes its signing keys; default `<issuer>/.well-known/jwks.json`."""
    audience: str | None = None
    """The `aud` a token must carry; default the resource (`<public_url>/mcp`)."""
    resource: str | None = None
    """This gateway's resource identifier (RFC 8707); default `<public_url or listening address>/mcp`."""
    required_scopes: list[str] = Field(default_factory=list)
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "PS256", "EdDSA"])
    leeway: float = Field(default=30.0, ge=0)
    """Seconds of clock skew allowed on `exp` / `nbf`."""


class HttpAuthConfig(Strict):
    """Who may use `/mcp` (docs/security.md): static bearer tokens, an OAuth issuer, or both."""

    tokens: list[BearerToken] = Field(default_factory=list[BearerToken])
    tokens_file: Path | None = None
    """A JSON file with more `tokens` entries (`[{"token": ..., "principal": ...}]`), kept out of the config."""
    oauth: OAuthResourceConfig | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.tokens or self.tokens_file or self.oauth)


class HttpFaceConfig(Strict):
    allowed_hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"])
    allowed_origins: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    )
    public_url: str | None = None
    """Base URL people's browsers reach the gateway at (hosted form links), e.g. behind a proxy;
    default: the address the gateway listens on."""
    hosted_listen: str | None = None
    """`HOST:PORT` for a side web server with the hosted pages, inbox and admin API when the face
    is stdio (`serve --stdio` has no web server of its own)."""
    ui_ready_timeout: float = Field(default=10.0, gt=0)
    """Seconds a hosted page waits for a server's rich UI (`ui://`) to start before it shows the
    plain form instead (docs/hosting.md)."""
    auth: HttpAuthConfig = Field(default_factory=HttpAuthConfig)
    """Authentication on `/mcp`; off by default (see docs/security.md)."""
    require_auth: bool = False
    """Refuse to start when `/mcp` would be served on a non-loopback address without `auth` (the container
    image sets it, docs/deploy.md); false: a warning only."""
    session_idle_timeout: float = Field(default=1800.0, gt=0)
    """Seconds a handshake-era client's session may go with no request in flight and no GET stream open;
    then it ends, and its id answers 404 (the client starts a new session)."""
    max_sessions: int = Field(default=10_000, gt=0)
    """Open sessions at most; one more `initialize` gets 503 until one ends (with `auth`, after the longest idle
    session of the principal holding the most was ended to make room, if it has one)."""
    max_sessions_per_principal: int | None = Field(default=None, gt=0)
    """With `auth`: open sessions of one principal at most (default half of `max_sessions`); its next
    `initialize` gets 429 until one of its own ends. Without `auth` every client is the same anonymous
    principal and only `max_sessions` applies (docs/security.md, "Fair shares")."""
    json_wait: float = Field(default=15.0, ge=0)
    """Seconds a 2026-07-28 request's answer may take and still go back as one JSON body (unless something
    was sent on the request's behalf first); past it the POST turns into an SSE stream with keep-alive
    comments. A handshake-era session's request turns after 0.25 s (`faces.http_answers.JSON_WINDOW`)."""
    max_request_line_bytes: int = Field(default=8 * 1024, ge=256)
    """Bytes a request line (`POST /mcp?... HTTP/1.1`) may take; a longer one is answered 414 as soon as
    that many have arrived, on the HTTP face and the hosted pages' server (docs/security.md)."""
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    """Bytes a whole request head (request line and headers) may take; a bigger one is answered 431 as soon
    as that many have arrived, and the rest is never read into memory."""
    head_timeout: float = Field(default=30.0, gt=0)
    """Seconds a request head may take to arrive whole, from the connection's opening (or the head's first
    byte on a kept-alive connection); then 408 and the connection is closed."""
    body_timeout: float = Field(default=60.0, gt=0)
    """Seconds a request body may take to arrive whole after its head (while the gateway reads it); then 408
    and the connection is closed."""
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Bytes a request body may take: `/mcp` answers a bigger one 413 with a JSON-RPC error, every other
    route 413 as plain text (at once when `Content-Length` says so)."""
    resume_events_per_session: int = Field(default=1000, gt=0)
    """SSE events a handshake-era session keeps so that a client whose stream broke can resume it with
    `Last-Event-ID` (docs/reliability.md); past it the oldest already written or notifications go first
    (`elicitgate_stream_events_dropped`)."""
    resume_events_total: int = Field(default=100_000, gt=0)
    """The same bound over all sessions of the process."""

    @model_validator(mode="after")
    def _line_within_head(self) -> HttpFaceConfig:
        if self.max_request_line_bytes > self.max_header_bytes:
            raise ValueError(
                f"max_request_line_bytes ({self.max_request_line_bytes}) must not exceed max_header_bytes "
                f"({self.max_header_bytes}): the request line is part of the head"
            )
        return self

    @property
    def principal_share(self) -> int:
        """How many sessions one principal may hold (`max_sessions_per_principal`)."""
        return self.max_sessions_per_principal or default_share(self.max_sessions)

    @model_validator(mode="after")
    def _share_within_total(self) -> HttpFaceConfig:
        share = self.max_sessions_per_principal
        if share is not None and share > self.max_sessions:
            raise ValueError(
                f"max_sessions_per_principal ({share}) cannot exceed max_sessions ({self.max_sessions}); set it "
                "below, so that one principal at its share leaves room for the others"
            )
        return self

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value else value

    @field_validator("hosted_listen")
    @classmethod
    def _hostport(cls, value: str | None) -> str | None:
        if value is not None:
            parse_hostport(value)
        return value
