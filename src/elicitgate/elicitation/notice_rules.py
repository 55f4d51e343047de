"""What a question gets, per server and tool: its notices (`notify`) and its end when nobody answers
(`unattended`). The gateway-wide `elicitation` keys, then the server's entry, then its `per_tool` entry:
each key set at a narrower level wins (docs/notify.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from elicitgate.config import GatewayConfig, NotifyOverride, Unattended
from elicitgate.json_shapes import JsonObject

When = Literal["hosted", "always", "never"]


@dataclass(frozen=True, slots=True)
class NoticeRule:
    urls: tuple[str, ...]
    when: When
    after: float
    remind_every: float

    @property
    def on(self) -> bool:
        return bool(self.urls) and self.when != "never"


def own_tool_name(config: GatewayConfig, server: str, tool: str | None) -> str | None:
    """The server's own name of a tool the catalog namespaced (`files__delete` -> `delete`)."""
    if tool is None:
        return None
    prefix = f"{server}{config.namespacing.separator}"
    return tool[len(prefix) :] if tool.startswith(prefix) else tool


def _narrower(config: GatewayConfig, server: str, tool: str | None) -> list[Any]:
    """The server's entry and its tool's (`per_tool`), widest first; either may be missing."""
    entry = config.mcp_servers.get(server)
    if entry is None:
        return []
    levels: list[Any] = [entry]
    name = own_tool_name(config, server, tool)
    if name is not None and name in entry.per_tool:
        levels.append(entry.per_tool[name])
    return levels


def rule_for(config: GatewayConfig, server: str, tool: str | None) -> NoticeRule:
    """The `notify` keys that hold for a question `server` asks during a call to `tool` (namespaced)."""
    base = config.elicitation.notify
    values: JsonObject = {"urls": base.urls, "when": base.when, "after": base.after,
                              "remind_every": base.remind_every}
    for level in _narrower(config, server, tool):
        override: NotifyOverride | None = level.notify
        if override is not None:
            values.update(override.model_dump(exclude_none=True))
    return NoticeRule(tuple(values["urls"]), values["when"], values["after"], values["remind_every"])


def unattended_for(config: GatewayConfig, server: str, tool: str | None) -> Unattended:
    """What a question nobody answered by its deadline becomes (`cancel`, `decline`, `wait`)."""
    value: Unattended = config.elicitation.unattended
    for level in _narrower(config, server, tool):
        if level.unattended is not None:
            value = level.unattended
    return value


def every_target(config: GatewayConfig) -> list[tuple[str, str]]:
    """Each distinct notice URL in the config with where it is set (`elicitation.notify.urls[1]`...)."""
    found: dict[str, str] = {}

    def add(where: str, urls: list[str] | None) -> None:
        for position, url in enumerate(urls or [], 1):
            found.setdefault(url, f"{where}.notify.urls[{position}]")

    add("elicitation", config.elicitation.notify.urls)
    for name, entry in config.mcp_servers.items():
        add(f"mcpServers.{name}", entry.notify.urls if entry.notify else None)
        for tool, questions in entry.per_tool.items():
            add(f"mcpServers.{name}.per_tool.{tool}", questions.notify.urls if questions.notify else None)
    return [(where, url) for url, where in found.items()]
