"""The gateway's configuration: the `mcpServers` file desktop clients use, plus our own sections.

One pydantic-settings model. A file (JSON or YAML) is the base; `ELICITGATE_*` environment
variables override it (nested keys with `__`, e.g. `ELICITGATE_ELICITATION__DEFAULT_TIMEOUT=60`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from elicitgate.client_files import adapt, close_match, expand_placeholders, parse_jsonc
from elicitgate.hostport import parse_hostport
from elicitgate.json_shapes import is_object
from elicitgate.token_strength import GENERATE, weakness

ENV_PREFIX = "ELICITGATE_"
MIN_ADMIN_TOKEN_LENGTH = 16


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


SessionPolicy = Literal["shared", "per_session"]


Unattended = Literal["cancel", "decline", "wait"]
"""What a question nobody answered by its deadline becomes (docs/notify.md)."""


def apprise_sender(url: str) -> Any:
    """Apprise's sender for a notice URL, or None when Apprise cannot use it. The one place that reaches
    Apprise, imported only by a config with notices (it brings requests, markdown...)."""
    import apprise

    instantiate: Callable[[str], Any] = getattr(apprise.Apprise, "instantiate")  # noqa: B009 (its stubs are partial)
    return instantiate(url)


def _notice_urls(urls: list[str]) -> list[str]:
    """Every URL must be one Apprise can send to; the problem names the target (never its secrets)."""
    bad: list[str] = []
    for position, url in enumerate(urls, 1):
        scheme = url.split("://", 1)[0] if "://" in url else url[:12]
        if "://" not in url or apprise_sender(url) is None:
            bad.append(f"target {position} ({scheme}://...)")
    if bad:
        raise ValueError(
            f"{', '.join(bad)}: not a notification URL Apprise can send to (an unknown scheme, or parts missing); "
            "see docs/notify.md and https://github.com/caronc/apprise/wiki for each service's URL"
        )
    return urls


class NotifyOverride(_Strict):
    """`notify` in a server's entry or one of its `per_tool`: any key unset takes the wider one's."""

    urls: list[str] | None = None
    when: Literal["hosted", "always", "never"] | None = None
    after: float | None = Field(default=None, ge=0)
    remind_every: float | None = Field(default=None, ge=0)

    @field_validator("urls")
    @classmethod
    def _urls(cls, urls: list[str] | None) -> list[str] | None:
        return None if urls is None else _notice_urls(urls)


class ToolQuestions(_Strict):
    """What the questions asked during a call to one tool get: `mcpServers.<name>.per_tool.<tool>`."""

    notify: NotifyOverride | None = None
    unattended: Unattended | None = None


class _UpstreamCommon(_Strict):
    enabled: bool = True
    """A disabled server is neither started nor listed."""
    session_policy: SessionPolicy | None = None
    """How downstream sessions map onto upstream connections; see docs/routing.md. Default:
    `per_session` on every transport (a server may ask on a stream that names no call: stdio, SSE, and
    the standalone GET stream of streamable HTTP). A 2026-07-28 upstream never asks, so it is always
    shared."""
    max_upstream_sessions: int | None = Field(default=None, ge=1)
    """At most this many per-client upstream connections (processes, HTTP sessions) to this server,
    besides the primary one; default 16 for stdio (each is a process), 256 for HTTP and SSE. Past it,
    idle ones are closed to make room; a call finding all of them busy fails at once (-32010). See
    docs/routing.md."""
    max_upstream_sessions_per_principal: int | None = Field(default=None, ge=1)
    """With `http.auth`: at most this many of those connections owned by one principal's sessions; default half
    of `max_upstream_sessions` (at least 1), so that one principal at its share leaves the rest to the others.
    Past it, that principal's least recently used idle one is closed; with all of them busy its call fails at
    once (-32010). Clients without a principal (no `http.auth`) are bounded by the total only. See
    docs/routing.md."""
    max_opening_sessions: int = Field(default=8, ge=1)
    """At most this many per-client upstream connections being opened (spawned, initialized) at once; the
    others wait their turn, and each one's `upstream_retry.connect_timeout` starts when its own opening
    starts. Hundreds of clients arriving together then do not all time out on a busy machine. See
    docs/operations.md, "When an upstream goes away"."""
    idle_session_timeout: float = Field(default=300.0, gt=0)
    """Seconds a per-client upstream connection may sit without a call before it is closed (the next
    call of that client opens a new one)."""
    era: Literal["auto", "handshake", "modern"] = "auto"
    """`auto` probes `server/discover` (2026-07-28) and falls back to the `initialize` handshake;
    the others force one era."""
    request_timeout: float = Field(default=60.0, gt=0)
    """Seconds the gateway waits for an upstream answer. Time a human spends on an
    elicitation is not counted."""
    elicitation_timeout: float | None = Field(default=None, gt=0)
    """Deadline for this server's elicitations; the `elicitation.default_timeout` when unset."""
    hosting: Literal["auto", "always", "never"] = "auto"
    """When the gateway presents this server's elicitations itself (hosted form page, inbox):
    `auto` when the client lacks the mode or `elicitation.sensitive_fields` is `host` and the form
    asks for a secret; `always` for every form; `never`. See docs/hosting.md."""
    ask_missing_arguments: bool | None = None
    """This server's own `elicitation.ask_missing_arguments` (unset: the gateway-wide one)."""
    notify: NotifyOverride | None = None
    """This server's own `elicitation.notify` keys (unset ones: the gateway-wide ones). docs/notify.md."""
    unattended: Unattended | None = None
    """This server's own `elicitation.unattended` (unset: the gateway-wide one)."""
    per_tool: dict[str, ToolQuestions] = Field(default_factory=dict)
    """Per tool of this server (its own name, not namespaced): `notify` and `unattended` for the questions
    asked during a call to it, over the server's. docs/notify.md."""

    @property
    def principal_share(self) -> int:
        """How many per-client connections one principal's sessions may own (`max_upstream_sessions_per_principal`)."""
        return self.max_upstream_sessions_per_principal or default_share(self.session_cap)

    @property
    def session_cap(self) -> int:
        """`max_upstream_sessions`, or the transport's default (each subclass says which)."""
        raise NotImplementedError

    @model_validator(mode="after")
    def _share_within_cap(self) -> _UpstreamCommon:
        share = self.max_upstream_sessions_per_principal
        if share is not None and share > self.session_cap:
            raise ValueError(
                f"max_upstream_sessions_per_principal ({share}) cannot exceed max_upstream_sessions "
                f"({self.session_cap}); set it below, so that one principal at its share leaves room for the others"
            )
        return self


def default_share(total: int) -> int:
    """One principal's share of a resource of `total` when its `*_per_principal` key is unset: half, at least 1.
    A principal at its share leaves the other half to everyone else; one user alone never notices it below
    the total's own defaults (docs/security.md, "Fair shares")."""
    return max(1, total // 2)


class StdioServer(_UpstreamCommon):
    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None

    @property
    def session_cap(self) -> int:
        return self.max_upstream_sessions or 16


DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""16 MiB: tool results of several megabytes (files, images) arrive as one event on a server's stream."""


class HttpServer(_UpstreamCommon):
    type: Literal["http", "streamable-http", "sse"] = "http"
    url: str = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    max_event_bytes: int = Field(default=DEFAULT_MAX_EVENT_BYTES, gt=0)
    """The largest server-sent event read from this server's streams (streamable HTTP); a larger one fails
    its call with -32012 saying so. The `mcp` SDK's own client stops at 1 MiB."""
    probe_interval: float = Field(default=5.0, gt=0)
    """Seconds between two pings of the server's primary session, with or without traffic: one that fails
    marks the server down (`/healthz`, `elicitgate_upstream_up`) and starts reconnecting. While it is down,
    reconnection is tried at least this often."""
    probe_timeout: float = Field(default=4.0, gt=0)
    """Seconds a probe's ping may take: a server that accepts the connection and answers nothing is down
    at most `probe_interval + probe_timeout` seconds after it stopped answering."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @property
    def transport(self) -> Literal["http", "sse"]:
        return "sse" if self.type == "sse" else "http"

    @property
    def session_cap(self) -> int:
        return self.max_upstream_sessions or 256


def _server_kind(value: Any) -> str:
    if is_object(value):
        if "url" in value or value.get("type") in ("http", "streamable-http", "sse"):
            return "http"
        return "stdio"
    return "stdio"


UpstreamConfig = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")],
    Discriminator(_server_kind),
]


class NamespacingConfig(_Strict):
    separator: str = Field(default="__", min_length=1)
    prefix_single_server: bool = True
    """With exactly one upstream and this off, names pass through unprefixed."""


class UrlPolicyConfig(_Strict):
    """What a URL-mode link must be before a person's browser is sent to it (docs/security.md).

    The gateway never fetches these URLs; it resolves the host to see where the browser would go."""

    allow_hosts: list[str] = Field(default_factory=list)
    """Hosts (`auth.corp.example`, or `*.corp.example` for its subdomains) exempt from the address
    checks: an internal sign-in page the operator trusts. Scheme, userinfo and length rules still apply."""
    allow_networks: list[str] = Field(default_factory=list)
    """Address ranges (CIDR, e.g. `10.20.0.0/16`) a link's host may resolve to although they are not public."""
    allow_unresolved: bool = True
    """A host the gateway cannot resolve (no DNS, or a name only the person's network knows) passes;
    `false` refuses it. Single-label names and `.local` / `.internal` / `.localhost` / `.home.arpa` names
    are refused either way unless allow-listed."""
    resolve_timeout: float = Field(default=2.0, gt=0)
    """Seconds to wait for DNS before treating the host as unresolved."""
    max_url_length: int = Field(default=2048, gt=0)
    max_elicitation_id_length: int = Field(default=256, gt=0)

    @field_validator("allow_networks")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        import ipaddress

        for value in values:
            ipaddress.ip_network(value, strict=False)  # ValueError names the bad entry
        return values


class NotifyConfig(_Strict):
    """Notices to a person that a question waits for them (docs/notify.md)."""

    urls: list[str] = Field(default_factory=list)
    """Apprise URLs (`ntfy://`, `slack://`, `msteams://`, `discord://`, `tgram://`, `mailto://`, `json://`
    for a webhook...): each notice goes to every one. Empty: no notices."""
    when: Literal["hosted", "always", "never"] = "hosted"
    """`hosted`: when the gateway hosts the question (the client cannot show it, or it asks for a secret);
    `always`: also any question the client shows that is still open after `after` seconds (its page is
    opened beside the client: the first answer wins); `never`."""
    after: float = Field(default=60.0, ge=0)
    """With `always`: seconds a question the client shows may stay unanswered before a notice goes."""
    remind_every: float = Field(default=0.0, ge=0)
    """Seconds between reminders while the question is open; 0: none."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds one send to one target may take before it is cut off (and retried)."""
    retries: int = Field(default=2, ge=0)
    """Sends again to a target that failed, this many times, 1 s, then 2 s... apart."""
    max_concurrent: int = Field(default=4, gt=0)
    """Sends in flight at once (each in a worker thread: Apprise's senders block)."""

    @field_validator("urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        return _notice_urls(urls)


class HeadlessConfig(_Strict):
    """Clients nobody watches (CI, background agents): their questions go straight to the hosted page and
    the notices, never to the client (docs/notify.md)."""

    headers: dict[str, str] = Field(default_factory=dict)
    """An HTTP header on the client's requests to `/mcp` (name: value, `*` for any value) marks it."""
    client_names: list[str] = Field(default_factory=list)
    """`clientInfo.name` globs (`ci-*`) that mark a client."""
    principals: list[str] = Field(default_factory=list)
    """Principals of `http.auth` tokens (a static token's `principal`, an OAuth token's `sub`)."""

    @property
    def enabled(self) -> bool:
        return bool(self.headers or self.client_names or self.principals)


class ElicitationConfig(_Strict):
    default_timeout: float = Field(default=300.0, gt=0)
    """Seconds a human has to answer, unless the server sets its own."""
    max_answer_attempts: int = Field(default=3, ge=1)
    """How many times the gateway asks again after an invalid answer."""
    max_message_bytes: int = Field(default=16_384, gt=0)
    max_schema_bytes: int = Field(default=65_536, gt=0)
    max_properties: int = Field(default=64, gt=0)
    max_pending_per_session: int = Field(default=32, gt=0)
    max_pending_total: int = Field(default=10_000, gt=0)
    """Open elicitations in the gateway; `max_pending_per_session` must stay below it, so that one principal at its
    limit leaves room for the others."""
    rate_limit_per_minute: float = Field(default=120.0, gt=0)
    """Sustained elicitations per minute per downstream client (token bucket)."""
    rate_limit_burst: int = Field(default=30, gt=0)
    sensitive_fields: Literal["warn", "block", "host"] = "warn"
    """What happens to a form that asks for a secret (password, token, API key, card number):
    `host` presents it on the gateway's own page so the secret never passes through the client."""
    sensitive_words: list[str] | None = None
    """Words and phrases that make a field a secret when its name, title or description holds them
    (docs/security.md, "Secrets in forms"); this list replaces the built-in one (English, German, French,
    Spanish, Italian, Portuguese, Dutch). Unset: the built-in list."""
    extra_sensitive_words: list[str] = Field(default_factory=list[str])
    """Words and phrases added to `sensitive_words` (or to the built-in list)."""
    ask_missing_arguments: bool = True
    """A `tools/call` or `prompts/get` without required arguments: the gateway asks the human for them
    (docs/elicitation.md, "The gateway asks on its own")."""
    confirm_tools: list[str] = Field(default_factory=list)
    """Tools the human confirms before each call: globs over namespaced names (`files__delete_*`), and
    `destructive` for every tool annotated `destructiveHint: true`."""
    url_policy: UrlPolicyConfig = Field(default_factory=UrlPolicyConfig)
    """Checks on URL-mode links (`elicitation/create`, -32042 items, 2026-07-28 input requests)."""
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    """Notices to people about questions waiting for them (docs/notify.md)."""
    unattended: Unattended = "cancel"
    """A question nobody answered by its deadline: `cancel` (the upstream gets what it gets today: a
    timeout error, or `cancel`), `decline`, or `wait` (it stays open on its hosted page only, up to
    `unattended_wait` more seconds)."""
    unattended_wait: float = Field(default=86_400.0, gt=0)
    """With `unattended: wait`: seconds a question stays open on its hosted page past its deadline."""
    headless: HeadlessConfig = Field(default_factory=HeadlessConfig)
    """Which clients are headless: their questions go to the hosted page and the notices directly."""
    abandoned_grace: float = Field(default=20.0, gt=0, le=600)
    """Seconds a question caused by a handshake-era client's call (pushed or hosted) waits once that call's
    stream broke (the client killed, its network gone, its call given up) for the client to resume it; then
    the question is abandoned (docs/reliability.md)."""
    abandoned: Literal["cancel", "keep"] = "cancel"
    """What happens to an abandoned question: `cancel` ends it (state `cancelled`, reason `client gone: ...`;
    the server gets `{"action": "cancel"}`) and the silent session; `keep` leaves it pending until its
    deadline, for a client that resumes later or a person on its hosted page (the upstream keeps waiting)."""

    @model_validator(mode="after")
    def _pending_share(self) -> ElicitationConfig:
        if self.max_pending_per_session >= self.max_pending_total:
            raise ValueError(
                f"max_pending_per_session ({self.max_pending_per_session}) must be less than max_pending_total "
                f"({self.max_pending_total}), so that one principal at its limit leaves room for the others"
            )
        return self

    @field_validator("sensitive_words", "extra_sensitive_words")
    @classmethod
    def _words(cls, words: list[str] | None) -> list[str] | None:
        for i, word in enumerate(words or []):
            if not any(ch.isalnum() for ch in word):
                raise ValueError(f"entry {i} ({word!r}) has no letter or digit to match")
        return words


class BridgingConfig(_Strict):
    """2026-07-28 clients: multi round-trip calls and the `requestState` the gateway issues."""

    state_keys: list[SecretStr] = Field(default_factory=list[SecretStr])
    """Secrets (each at least 32 bytes) protecting `requestState` with AES-256-GCM: the first seals,
    all unseal (rotation). Empty: a key is generated once and kept in `state_key_file`."""
    state_key_file: Path = Field(default_factory=lambda: _state_dir() / "state.key")
    state_ttl: float = Field(default=600.0, gt=0)
    """Seconds a `requestState` the gateway issued stays valid."""
    max_rounds: int = Field(default=10, ge=1)
    """Input rounds one call may take, in every direction, before it fails."""
    url_complete_wait: float = Field(default=60.0, ge=0)
    """After a 2026-07-28 client accepts a URL-mode request from a handshake-era server, how long its
    retry waits for the server's `notifications/elicitation/complete`."""
    max_parked_calls: int = Field(default=10_000, gt=0)
    """Calls of 2026-07-28 clients waiting for a retry, in the whole gateway."""


class TasksConfig(_Strict):
    """Tasks relayed between clients and the upstreams that run them, and the gateway's own (docs/tasks.md)."""

    max_ttl: float = Field(default=3600.0, gt=0)
    """Seconds a task may be kept: a `task.ttl` asked for above it is lowered to it (the spec lets the
    receiver choose), and the gateway forgets a task this long after it was created at the latest."""
    hand_over_after: float | None = Field(default=10.0, gt=0)
    """Seconds a 2026-07-28 `tools/call` that declared the `io.modelcontextprotocol/tasks` extension may wait
    with nothing to return (its upstream still working, its question on a hosted page) before the gateway
    answers it with a task instead; a question sent to a hosted page hands one over at once. `null`: the
    gateway makes no tasks itself (upstream tasks are still bridged)."""


def _state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "elicitgate"


class BearerToken(_Strict):
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


class OAuthResourceConfig(_Strict):
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


class HttpAuthConfig(_Strict):
    """Who may use `/mcp` (docs/security.md): static bearer tokens, an OAuth issuer, or both."""

    tokens: list[BearerToken] = Field(default_factory=list[BearerToken])
    tokens_file: Path | None = None
    """A JSON file with more `tokens` entries (`[{"token": ..., "principal": ...}]`), kept out of the config."""
    oauth: OAuthResourceConfig | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.tokens or self.tokens_file or self.oauth)


class HttpFaceConfig(_Strict):
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


class AuditConfig(_Strict):
    """The durable audit trail: one record per elicitation end and per refusal (docs/operations.md)."""

    enabled: bool = True
    url: str = Field(default_factory=lambda: f"sqlite:///{_state_dir() / 'audit.db'}")
    """`sqlite:///PATH` (a file), or `postgresql://USER:PASSWORD@HOST:PORT/DB` for a shared store."""
    retention_days: float = Field(default=90.0, gt=0)
    """Records whose elicitation ended longer ago than this are deleted (checked hourly)."""
    store_content: bool = False
    """Keep accepted answers' values; fields detected as secrets are never kept."""
    queue_size: int = Field(default=10_000, gt=0)
    """Records waiting for the writer; when full, new ones are dropped (counted and logged), never waited for."""
    open_at_start: bool = False
    """Open the store (and run its migrations) as the gateway starts, so that a wrong URL or an unreachable
    database is logged at once. By default it opens when first needed: the first record, a read of the admin
    API's audit trail, or the first hourly retention check (SQLAlchemy is ~19 MiB a gateway that never asks
    anything does not spend)."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite://", "postgresql://", "postgres://", "postgresql+")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return value


class UpstreamRetryConfig(_Strict):
    initial_backoff: float = Field(default=0.5, gt=0)
    max_backoff: float = Field(default=30.0, gt=0)
    connect_timeout: float = Field(default=20.0, gt=0)


class GatewayConfig(BaseSettings):
    """Everything `elicitgate serve` reads."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", populate_by_name=True
    )

    mcp_servers: dict[str, UpstreamConfig] = Field(default_factory=dict, alias="mcpServers")
    namespacing: NamespacingConfig = Field(default_factory=NamespacingConfig)
    elicitation: ElicitationConfig = Field(default_factory=ElicitationConfig)
    bridging: BridgingConfig = Field(default_factory=BridgingConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    http: HttpFaceConfig = Field(default_factory=HttpFaceConfig)
    upstream_retry: UpstreamRetryConfig = Field(default_factory=UpstreamRetryConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    log_format: Literal["text", "json"] = "text"
    """`json`: one JSON object per log line (docs/operations.md)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    admin_token: SecretStr | None = None
    """Bearer token for the admin API and the inbox (`ELICITGATE_ADMIN_TOKEN`), at least
    `MIN_ADMIN_TOKEN_LENGTH` characters and 128 bits of estimated entropy (`token_strength`); unset or
    empty, both are off."""

    redis_url: SecretStr | None = None
    """`redis://[:PASSWORD@]HOST:PORT/DB` (or `rediss://`, `unix://`): replicas with the same config and this
    URL act as one gateway (`ELICITGATE_REDIS_URL`, docs/deploy.md). Unset: everything stays in the process."""

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: SecretStr | None) -> SecretStr | None:
        if url is None or not url.get_secret_value().strip():
            return None
        if not url.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return url

    @field_validator("admin_token")
    @classmethod
    def _admin_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is None or not token.get_secret_value().strip():
            return None  # empty means off, never "any token will do"
        if len(token.get_secret_value()) < MIN_ADMIN_TOKEN_LENGTH:
            raise ValueError(
                f"the admin token must be at least {MIN_ADMIN_TOKEN_LENGTH} characters "
                f"(e.g. `{GENERATE}`), or empty to turn the admin API and the inbox off"
            )
        if (why := weakness(token.get_secret_value())) is not None:
            raise ValueError(f"the admin token {why} (or set it empty to turn the admin API and the inbox off)")
        return token

    @field_validator("mcp_servers")
    @classmethod
    def _names(cls, servers: dict[str, Any]) -> dict[str, Any]:
        for name in servers:
            if not name or any(ch.isspace() for ch in name):
                raise ValueError(f"server name {name!r} must be non-empty and contain no whitespace")
        return servers

    @model_validator(mode="after")
    def _separator_not_in_names(self) -> GatewayConfig:
        sep = self.namespacing.separator
        for name in self.mcp_servers:
            if sep in name:
                raise ValueError(f"server name {name!r} contains the namespace separator {sep!r}")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment wins over the file, which arrives as init kwargs.
        return (env_settings, init_settings)

    @field_validator("bridging")
    @classmethod
    def _key_lengths(cls, bridging: BridgingConfig) -> BridgingConfig:
        for i, key in enumerate(bridging.state_keys):
            if len(key.get_secret_value().encode()) < 32:
                raise ValueError(f"state_keys[{i}] must be at least 32 bytes of secret randomness")
        return bridging

    def upstreams(self) -> dict[str, StdioServer | HttpServer]:
        return {name: cfg for name, cfg in self.mcp_servers.items() if cfg.enabled}


class ConfigError(Exception):
    """A configuration problem, phrased for the person who wrote the file."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))

    def render(self) -> str:
        lines = [f"invalid configuration in {self.source}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def _key_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if item in ("stdio", "http") and parts and parts[-2:-1] == ["mcpServers"]:
            continue  # discriminator tags are not keys the user wrote
        parts.append(str(item))
    return ".".join(parts) or "(top level)"


def _describe(error: ErrorDetails, environ: Mapping[str, str]) -> str:
    loc = tuple(error["loc"])
    variable = _environment_variable(loc, environ)
    if loc and loc[0] == "mcp_servers":
        loc = ("mcpServers", *loc[1:])
    path = f"{variable} (environment)" if variable else _key_path(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        hint = close_match(str(loc[-1]), _known_keys(tuple(error["loc"])[:-1]))
        return f"{path}: unknown key" + (f" (did you mean {hint}?)" if hint else "")
    if kind == "missing":
        return f"{path}: required key is missing"
    msg = error["msg"]
    if "input" in error and kind not in ("value_error",):
        return f"{path}: {msg} (got {error['input']!r})"
    return f"{path}: {msg}"


def parse_config_text(text: str, source: str) -> dict[str, Any]:
    """YAML for `.yaml` / `.yml`, else JSON with comments and trailing commas (JSONC, as Cursor and
    VS Code write it)."""
    data: Any
    try:
        if Path(source).suffix.lower() in (".yaml", ".yml"):
            import yaml  # a JSON config (the usual kind) never needs it

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(source, [f"not valid YAML: {exc}"]) from None
        else:
            data = parse_jsonc(text)
    except ValueError as exc:
        where = re.match(r"<string>:(\d+) (.*) at column (\d+)$", str(exc))
        detail = f"{where[2]} at line {where[1]}, column {where[3]}" if where else str(exc)
        raise ConfigError(source, [f"not valid JSON: {detail}"]) from None
    if data is None:
        data = {}
    if not is_object(data):
        raise ConfigError(source, [f"the top level must be an object, not {type(data).__name__}"])
    return data


def _warn_to_log(message: str) -> None:
    logging.getLogger("elicitgate.config").warning("%s", message)


def build_config(
    data: dict[str, Any],
    source: str,
    warn: Callable[[str], None] = _warn_to_log,
    environ: Mapping[str, str] | None = None,
) -> GatewayConfig:
    """Validate a parsed file (a desktop client's as it is, see `client_files`) with the
    `ELICITGATE_*` environment on top; every failure is a `ConfigError` naming the key or variable."""
    environ = os.environ if environ is None else environ
    data, problems = adapt(data, _known_keys(()), warn)
    data["mcpServers"], unset = expand_placeholders(data.get("mcpServers", {}), environ)
    for message in _unknown_environment(environ):
        warn(message)
    if problems or unset:
        raise ConfigError(source, problems + unset)
    try:
        return GatewayConfig(**data)
    except ValidationError as exc:
        raise ConfigError(source, [_describe(e, environ) for e in exc.errors()]) from None
    except Exception as exc:  # pydantic-settings raises SettingsError for malformed env values
        field = re.search(r'field "([^"]+)"', str(exc))
        variable = _environment_variable((field[1],), environ) if field else None
        if variable:
            problem = f"{variable} (environment): not valid JSON (or set one key: {variable}__KEY=VALUE)"
            raise ConfigError(source, [problem]) from None
        raise ConfigError(f"{source} (with {ENV_PREFIX}* environment)", [str(exc)]) from None


def load_config(path: str | Path, warn: Callable[[str], None] = _warn_to_log) -> GatewayConfig:
    """Read, parse and validate a config file; every failure is a `ConfigError`, every warning
    (ignored keys, unknown `ELICITGATE_*` variables) goes to `warn`."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, ["file not found"]) from None
    except OSError as exc:
        raise ConfigError(source, [f"cannot read: {exc.strerror}"]) from None
    return build_config(parse_config_text(text, source), source, warn)


# Which key a problem is about, and which ELICITGATE_* variable set it.


def _section_model(name: str) -> type[BaseModel] | None:
    field = GatewayConfig.model_fields.get(name)
    annotation = field.annotation if field else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model accepts where `loc` (a validation location) points."""
    if not loc:
        fields = GatewayConfig.model_fields
        return [*fields, *(f.alias for f in fields.values() if f.alias)]
    if loc[0] in ("mcp_servers", "mcpServers"):
        return sorted({*StdioServer.model_fields, *HttpServer.model_fields}) if len(loc) >= 2 else []
    section = _section_model(str(loc[0]))
    return list(section.model_fields) if section and len(loc) == 1 else []


def _environment_variable(loc: tuple[int | str, ...], environ: Mapping[str, str]) -> str | None:
    """The `ELICITGATE_*` variable that set the value at `loc` (or the section around it), if any."""
    names = {name.upper(): name for name in environ if name.upper().startswith(ENV_PREFIX)}
    keys = [str(part) for part in loc if part not in ("stdio", "http")]
    for end in range(len(keys), 0, -1):
        candidate = ENV_PREFIX + "__".join(keys[:end]).upper()
        if candidate in names:
            return names[candidate]
    return None


def _unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """Warnings for `ELICITGATE_*` variables that name no setting (pydantic-settings ignores them)."""
    fields = list(GatewayConfig.model_fields)
    warnings: list[str] = []
    for name in environ:
        if not name.upper().startswith(ENV_PREFIX):
            continue
        top = name[len(ENV_PREFIX) :].split("__", 1)[0].lower()
        if top not in fields:
            hint = close_match(top, fields)
            guess = f" (did you mean {ENV_PREFIX}{hint.upper()}?)" if hint else ""
            warnings.append(f"the environment variable {name} is not a setting and is ignored{guess}")
    return warnings
