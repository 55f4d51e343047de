"""`mcpServers`: each upstream server's entry (stdio or HTTP), how their names are namespaced, and how
the gateway reconnects to them (`namespacing`, `upstream_retry`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from elicitgate.config.base import Strict, default_share
from elicitgate.config.notices import NotifyOverride, ToolQuestions, Unattended
from elicitgate.json_shapes import is_object

SessionPolicy = Literal["shared", "per_session"]


class _UpstreamCommon(Strict):
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


class NamespacingConfig(Strict):
    separator: str = Field(default="__", min_length=1)
    prefix_single_server: bool = True
    """With exactly one upstream and this off, names pass through unprefixed."""


class UpstreamRetryConfig(Strict):
    initial_backoff: float = Field(default=0.5, gt=0)
    max_backoff: float = Field(default=30.0, gt=0)
    connect_timeout: float = Field(default=20.0, gt=0)
