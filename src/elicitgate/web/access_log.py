"""uvicorn's access log without capabilities: no query strings, no hosted-page tokens.

The path is written with control characters escaped (a `%0A` in a URL cannot start a log line).
A hosted page's URL (`/e/<token>`) is the capability to answer it, and a query string can carry
anything a client put there; an access log is read by more people than the admin. The path keeps its
shape (`/e/***/ui`, `/inbox?***`) so the log still says what was asked.
"""

from __future__ import annotations

import copy
import logging
import re

from elicitgate.json_shapes import JsonObject
from elicitgate.logs import escape_controls

_PAGE_TOKEN = re.compile(r"^/e/[^/?]+")


def redact_path(path: str) -> str:
    path, query, _ = path.partition("?")
    return escape_controls(_PAGE_TOKEN.sub("/e/***", path)) + ("?***" if query else "")


class RedactCapabilities(logging.Filter):
    """For the `uvicorn.access` logger, whose args are (client, method, path with query, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], redact_path(args[2]), args[3], args[4])
        return True


def redact_access_log() -> None:
    """Redact the access log whoever formats it (also when uvicorn's lines go to the gateway's handler)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactCapabilities) for f in access.filters):
        access.addFilter(RedactCapabilities())


def uvicorn_log_config() -> JsonObject:
    """uvicorn's own logging config, with the access log redacted and on stderr like every other log."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_capabilities"] = {"()": RedactCapabilities}
    config["loggers"]["uvicorn.access"]["filters"] = ["redact_capabilities"]
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"  # stdout is the MCP channel of `serve --stdio`
    return config
