"""Errors a user can fix by configuration: each names the fix in its `data.fix`, and the gateway says it
once at WARNING (per kind and server), so an operator reading the log learns what to change without a
flood of the same line."""

from __future__ import annotations

import logging
from collections.abc import Hashable

from mcp.shared.exceptions import MCPError

from elicitgate.json_shapes import is_object

_said: set[Hashable] = set()


def warn_once(logger: logging.Logger, error: MCPError, *, key: Hashable) -> MCPError:
    """Log `error` (its message and fix) at WARNING the first time `key` is seen; return it to raise."""
    if key not in _said:
        _said.add(key)
        data = error.error.data if is_object(error.error.data) else {}
        logger.warning("%s; fix: %s", error.error.message, data.get("fix", "see docs/routing.md"))
    return error
