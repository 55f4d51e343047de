"""A client's declared capabilities, read: the elicitation modes it takes, the capabilities the gateway declares
to an upstream on its behalf, and the declaration as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import ClientCapabilities


def elicitation_modes(capabilities: ClientCapabilities | None) -> frozenset[str]:
    """The elicitation modes a client declared; `{"elicitation": {}}` means form only."""
    if capabilities is None or capabilities.elicitation is None:
        return frozenset()
    declared = capabilities.elicitation
    modes = {mode for mode, said in (("form", declared.form), ("url", declared.url)) if said is not None}
    return frozenset(modes or {"form"})


def declared_capabilities(modes: frozenset[str], raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The client capabilities the gateway declares to an upstream for a client: the elicitation `modes`,
    and the sampling and roots the client itself declared (`raw`), which the gateway relays as they are."""
    caps: dict[str, Any] = {}
    if modes:
        caps["elicitation"] = {mode: {} for mode in sorted(modes)}
    for passthrough in ("sampling", "roots"):
        if raw is not None and passthrough in raw:
            caps[passthrough] = raw[passthrough]
    return caps


def capabilities_dict(capabilities: ClientCapabilities | None) -> dict[str, Any]:
    """Declared capabilities as JSON, the way the client sent them."""
    return capabilities.model_dump(by_alias=True, mode="json", exclude_none=True) if capabilities is not None else {}


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 tasks extension (SEP-2663), declared per request under `capabilities.extensions`."""


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's client capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def knows_tasks(capabilities: Mapping[str, Any]) -> bool:
    """A client that says it knows tasks: a 2025-11-25 `tasks` capability, or the 2026-07-28 extension."""
    return "tasks" in capabilities or declares_tasks(capabilities)
