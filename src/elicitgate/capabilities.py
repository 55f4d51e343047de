"""A client's declared capabilities, read: the elicitation modes it takes, the capabilities the gateway declares
to an upstream on its behalf, and the declaration as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import ClientCapabilities

Declared = tuple[ClientCapabilities | None, dict[str, Any], frozenset[str]]
"""A client's declaration read: its model, `capabilities_dict` of it and its `elicitation_modes` (read them, do not
change them)."""


def elicitation_modes(capabilities: ClientCapabilities | None) -> frozenset[str]:
    """The elicitation modes a client declared; `{"elicitation": {}}` means form only. Kept per model, as
    `capabilities_dict` is (read for every request a call makes upstream, and for every question)."""
    if capabilities is None or capabilities.elicitation is None:
        return _NONE
    kept = _MODES.get(id(capabilities))
    if kept is not None and kept[0] is capabilities:
        return kept[1]
    declared = capabilities.elicitation
    modes = frozenset({mode for mode, said in (("form", declared.form), ("url", declared.url)) if said is not None}
                      or {"form"})
    if len(_MODES) >= _DUMPED_MAX:
        _MODES.clear()
    _MODES[id(capabilities)] = (capabilities, modes)
    return modes


_NONE: frozenset[str] = frozenset()
_MODES: dict[int, tuple[ClientCapabilities, frozenset[str]]] = {}


def declared_capabilities(modes: frozenset[str], raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The client capabilities the gateway declares to an upstream for a client: the elicitation `modes`,
    and the sampling and roots the client itself declared (`raw`), which the gateway relays as they are.
    Without `raw`, one dict per set of modes, kept (read it, do not change it): a 2026-07-28 upstream is told
    them with every request."""
    if raw is None:
        kept = _DECLARED.get(modes)
        if kept is None:
            kept = _DECLARED[modes] = _declared(modes, None)
        return kept
    return _declared(modes, raw)


_DECLARED: dict[frozenset[str], dict[str, Any]] = {}
"""By the modes: at most four sets (none, form, url, both)."""


def _declared(modes: frozenset[str], raw: Mapping[str, Any] | None) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    if modes:
        caps["elicitation"] = {mode: {} for mode in sorted(modes)}
    for passthrough in ("sampling", "roots"):
        if raw is not None and passthrough in raw:
            caps[passthrough] = raw[passthrough]
    return caps


def capabilities_dict(capabilities: ClientCapabilities | None) -> dict[str, Any]:
    """Declared capabilities as JSON, the way the client sent them. One dict per model, kept (read it, do not
    change it): a 2026-07-28 client's capabilities are one model per distinct declaration (`faces.modern`), read
    two to four times a call, and a `model_dump` was ~10 us each."""
    if capabilities is None:
        return {}
    kept = _DUMPED.get(id(capabilities))
    if kept is not None and kept[0] is capabilities:
        return kept[1]
    dumped = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    if len(_DUMPED) >= _DUMPED_MAX:  # models the memos let go of: dumped again when next read
        _DUMPED.clear()
    _DUMPED[id(capabilities)] = (capabilities, dumped)
    return dumped


_DUMPED: dict[int, tuple[ClientCapabilities, dict[str, Any]]] = {}
"""`capabilities_dict` by the model's identity (the model held, so that its id is not reused while kept)."""
_DUMPED_MAX = 128
"""Few: a deployment's clients declare a handful of distinct capabilities at a time; a handshake-era session's own model
is kept at most until 128 others were read after it."""


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 tasks extension (SEP-2663), declared per request under `capabilities.extensions`."""


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's client capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    # Most clients declare none: None is ruled out before the ABC check, which costs far more.
    return extensions is not None and isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def knows_tasks(capabilities: Mapping[str, Any]) -> bool:
    """A client that says it knows tasks: a 2025-11-25 `tasks` capability, or the 2026-07-28 extension."""
    return "tasks" in capabilities or declares_tasks(capabilities)


def _declared_for_every_mode() -> None:
    for modes in (frozenset[str](), frozenset({"form"}), frozenset({"url"}), frozenset({"form", "url"})):
        _DECLARED[modes] = _declared(modes, None)


_declared_for_every_mode()
DECLARED: Mapping[frozenset[str], dict[str, Any]] = _DECLARED
"""`declared_capabilities(modes)` of every set of modes a client can declare, made at import: read by subscript
(no call) for every request to a 2026-07-28 upstream. Read them, do not change them."""
