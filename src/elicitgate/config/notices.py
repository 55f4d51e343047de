"""Notices to people about questions waiting for them, and what an unanswered question becomes
(`elicitation.notify`, `elicitation.headless`, `elicitation.unattended`, and a server's or tool's own;
docs/notify.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator

from elicitgate.config.base import Strict

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


class NotifyOverride(Strict):
    """`notify` in a server's entry or one of its `per_tool`: any key unset takes the wider one's."""

    urls: list[str] | None = None
    when: Literal["hosted", "always", "never"] | None = None
    after: float | None = Field(default=None, ge=0)
    remind_every: float | None = Field(default=None, ge=0)

    @field_validator("urls")
    @classmethod
    def _urls(cls, urls: list[str] | None) -> list[str] | None:
        return None if urls is None else _notice_urls(urls)


class ToolQuestions(Strict):
    """What the questions asked during a call to one tool get: `mcpServers.<name>.per_tool.<tool>`."""

    notify: NotifyOverride | None = None
    unattended: Unattended | None = None


class NotifyConfig(Strict):
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


class HeadlessConfig(Strict):
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
