"""One audit record: how one elicitation ended, or why one was refused. Never a value typed by a person,
except `content` when `audit.store_content` is on (secret fields are left out even then)."""

from __future__ import annotations

import operator
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

from elicitgate.json_shapes import JsonObject

REFUSED = "refused"
"""The state of a record whose elicitation never reached a human (limits, bad schema, nobody to ask)."""
STATES = ("accepted", "declined", "cancelled", "timed_out", "failed", REFUSED)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    server: str
    mode: str
    state: str
    reason: str | None
    created_at: datetime
    ended_at: datetime
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    tool: str | None = None
    """The tool or prompt (as the client named it) whose call caused the elicitation."""
    client: str | None = None
    """The client's own name (`clientInfo.name`)."""
    client_id: str | None = None
    """The gateway's id of the client connection (`c1`, `m1`, ...), as in the logs and the admin API."""
    principal: str | None = None
    request_id: str | None = None
    """The JSON-RPC id of the client request that caused it."""
    source: str = "upstream"
    """`upstream` (a server asked) or `gateway` (the gateway asked on its own)."""
    gateway_reason: str | None = None
    """Why the gateway asked on its own (`missing_arguments`, `confirmation`); None for upstream requests."""
    detail: str | None = None
    """For a refusal: the error message the server got."""
    attempts: int = 0
    """Answers the human gave, re-asks included."""
    responder: str | None = None
    content: JsonObject | None = None

    @property
    def duration_s(self) -> float:
        return round((self.ended_at - self.created_at).total_seconds(), 3)

    def row(self) -> JsonObject:
        """The columns of its row in the store (shallow: `dataclasses.asdict` deep-copies, ten times slower)."""
        return {**{name: getattr(self, name) for name in _COLUMNS}, "duration_s": self.duration_s}


_COLUMNS = tuple(f.name for f in fields(AuditRecord))


FIELDS: tuple[str, ...] = (
    "id", "server", "tool", "client", "client_id", "principal", "request_id", "mode", "state", "reason", "detail",
    "source", "gateway_reason", "attempts", "responder", "created_at", "ended_at", "duration_s", "content",
)
"""The fields of a record as `elicitgate audit list --format jsonl` and `GET /api/audit` show them."""


def utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


_LOGGED = tuple(name for name in FIELDS if name != "content")
_logged_values = operator.attrgetter(*_LOGGED)


def as_json(row: JsonObject) -> JsonObject:
    """A stored row as JSON: times in ISO 8601 (UTC), fields in a fixed order."""
    out = {name: row.get(name) for name in FIELDS}
    for name in ("created_at", "ended_at"):
        if isinstance(when := out[name], datetime):
            out[name] = _iso(when)
    return out


def logged(record: AuditRecord) -> JsonObject:
    """`as_json` of the record's row without `content` (a value a person typed is never logged), read off the
    record in one pass: the fields of the log line written for every elicitation's end."""
    out = dict(zip(_LOGGED, _logged_values(record), strict=True))
    out["created_at"], out["ended_at"] = _iso(record.created_at), _iso(record.ended_at)
    return out


def _iso(when: datetime) -> str:
    """`when.astimezone(UTC).isoformat(timespec="milliseconds")` with `Z` for `+00:00`, formatted in one step
    (twice for every elicitation's log line)."""
    if when.tzinfo is not UTC:  # `utc`'s times are in UTC already
        when = when.astimezone(UTC)
    return _ISO_MS % (when.year, when.month, when.day, when.hour, when.minute, when.second, when.microsecond // 1000)


_ISO_MS = "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ"


def parse_filters(state: str | None, server: str | None, since: str | None) -> JsonObject:
    """The filters of `audit list` and `GET /api/audit`; a `ValueError` says which one is wrong and why."""
    if state is not None and state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)} (got {state!r})")
    when = None
    if since is not None:
        try:
            when = datetime.fromisoformat(since)
        except ValueError:
            raise ValueError(
                f"since must be an ISO 8601 date or time, e.g. 2026-11-23T15:00:00Z (got {since!r})"
            ) from None
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when
    return {"state": state, "server": server or None, "since": when}
