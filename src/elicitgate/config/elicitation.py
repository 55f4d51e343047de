"""`elicitation`: deadlines, limits, sensitive fields, the gateway's own questions, URL-mode links."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from elicitgate.config.base import Strict
from elicitgate.config.notices import HeadlessConfig, NotifyConfig, Unattended


class UrlPolicyConfig(Strict):
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


class ElicitationConfig(Strict):
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
