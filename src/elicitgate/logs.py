"""Log lines: plain text by default, one JSON object per line with `log_format: json`.

One event, one line: in text lines, control characters of the message (newlines above all) are
written escaped, the way `repr` writes them, so what others control (an upstream's field names, a
`ui://` URI, a request path) cannot forge a log line. Tracebacks are left as they are: the gateway's own.

Lifecycle events (`log_event`) carry their fields as data, so a JSON line has them as top-level keys
and a text line shows them as JSON after the event's name. The client request being served
(`request_context`) is added to every line logged while serving it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Any, TextIO

from elicitgate.json_shapes import JsonObject

_EVENT = "eg_event"
_FIELDS = "eg_fields"
_request: contextvars.ContextVar[JsonObject | None] = contextvars.ContextVar("elicitgate_request", default=None)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_event(logger: logging.Logger, event: str, fields: Mapping[str, Any], level: int = logging.INFO) -> None:
    """One line for one lifecycle event; `fields` must hold nothing a person typed."""
    if logger.isEnabledFor(level):
        lines = _only_lines(logger, level)
        if lines is not None and lines.event(logger.name, level, event, fields):
            return
        logger.handle(_event_record(logger, level, event, fields))


def _event_record(logger: logging.Logger, level: int, event: str, fields: Mapping[str, Any]) -> logging.LogRecord:
    """`log_event`'s record. Made here, not by `Logger.log`: its walk up the stack for the caller's file and line,
    which no format shows, was a quarter of the cost of this line, written for every elicitation."""
    extra = {_EVENT: event, _FIELDS: dict(fields)}
    return logger.makeRecord(logger.name, level, _EVENT_SOURCE, 0, "%s", (event,), None, extra=extra)


def _only_lines(logger: logging.Logger, level: int) -> _Lines | None:
    """The handler `configure_logging` installed, when it is the only one a record of `logger` at `level` would reach
    and nothing on the way filters or makes records its own way (a test's capture handler, a filter, another record
    factory): then `log_event` writes its line without a `LogRecord`."""
    if logger.disabled or logger.filters or type(logger) is not logging.Logger:
        return None
    if logging.getLogRecordFactory() is not logging.LogRecord:
        return None
    found: _Lines | None = None
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if level < handler.level:
                continue  # passed over by `callHandlers` too
            if found is not None or type(handler) is not _Lines:
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


_EVENT_SOURCE = "(lifecycle event)"
"""The `pathname` of a lifecycle event's record (`log_event` does not look for its caller)."""


class request_context:  # noqa: N801 - used as a function: `with request_context(request_id=...)`
    """While serving one client request: its ids go on every log line.

    A class, not a generator: one is open for every request and elicitation in flight."""

    __slots__ = ("_ids", "_token")

    def __init__(self, **ids: Any) -> None:
        self._ids = ids
        self._token: Token[JsonObject | None] | None = None

    def __enter__(self) -> None:
        self._token = _request.set(self._ids)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _request.reset(self._token)


def name_request(**ids: Any) -> None:
    """In a task that serves one client request and ends with it: its ids on every log line from now on. Nothing
    is kept to restore them (the task's context ends with it): a `request_context` less for every request in flight."""
    _request.set(ids)


current_request: Callable[[], JsonObject | None] = _request.get
"""The ids `request_context` or `name_request` put in force (None: none); the context variable's own `get`."""

set_request: Callable[[JsonObject | None], Token[JsonObject | None]] = _request.set
"""`name_request` with a dict the caller made: one call in C on an elicitation's way to its human, not three.
Its token undoes it (`reset_request`) where the task goes on to serve others."""

reset_request: Callable[[Token[JsonObject | None]], None] = _request.reset


def forget_request() -> None:
    """In a task that outlives the request it was started from (an upstream connection): no request ids."""
    _request.set(None)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with every control character written as an escape (`\\n`, `\\x1b`, `\\u2028`)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def strip_controls(text: str, *, keep_newlines: bool = False) -> str:
    """`text` without control or format characters (escape sequences, bidi overrides), for a terminal."""
    return "".join(
        ch for ch in text
        if (keep_newlines and ch in "\n\t") or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp")
    )


_FIELDS_ENCODER = json.JSONEncoder(default=str)
_FIELDS_JSON = _FIELDS_ENCODER.encode
"""`json.dumps(fields, default=str)`, without making an encoder for each line."""
_MAKE_ENCODER: Callable[..., Callable[[object, int], list[str]]] | None = getattr(json.encoder, "c_make_encoder", None)
_ENCODER_ARGS = (
    _FIELDS_ENCODER.default,
    json.encoder.encode_basestring_ascii if _FIELDS_ENCODER.ensure_ascii else json.encoder.encode_basestring,
    _FIELDS_ENCODER.indent,
    _FIELDS_ENCODER.key_separator,
    _FIELDS_ENCODER.item_separator,
    _FIELDS_ENCODER.sort_keys,
    _FIELDS_ENCODER.skipkeys,
    _FIELDS_ENCODER.allow_nan,
)
"""What `JSONEncoder.iterencode` hands C's encoder for `_FIELDS_ENCODER` (after a new dict of markers): an event's
line calls that encoder itself, not `encode` and `iterencode` (two Python calls for every elicitation's end)."""


_ESCAPED_EVENTS: dict[str, str] = {}
"""Event names with their control characters escaped (`escape_controls`): the few the code logs, escaped once."""
_ESCAPED_KEPT = 64


class _TextFormatter(logging.Formatter):
    _second: int | None = None
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """`logging.Formatter.formatTime`, its `strftime` made once per second instead of once per line (a
        lifecycle event is logged for every elicitation)."""
        if datefmt:
            return super().formatTime(record, datefmt)
        return self._time(record.created, record.msecs)

    def _time(self, created: float, msecs: float) -> str:
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(created))
            self._second = second
        msec_format = self.default_msec_format
        return msec_format % (self._stamp, msecs) if msec_format else self._stamp

    def event_line(self, name: str, level: int, event: str, fields: Mapping[str, Any]) -> str | None:
        """The line `format` writes for `log_event`'s record, made without the record; None when this formatter
        is set up otherwise than `configure_logging` sets it (its format, a date format)."""
        if self._fmt != TEXT_FORMAT or self.datefmt or type(self) is not _TextFormatter:
            return None
        when = self._time(*_record_time())
        escaped = _ESCAPED_EVENTS.get(event)
        if escaped is None:
            escaped = escape_controls(event)
            if len(_ESCAPED_EVENTS) < _ESCAPED_KEPT:
                _ESCAPED_EVENTS[event] = escaped
        make = _MAKE_ENCODER
        if make is not None and type(fields) is dict:
            markers: dict[int, object] = {}  # a new one for each line, as `JSONEncoder.iterencode` makes it
            text = "".join(make(markers, *_ENCODER_ARGS)(fields, 0))  # pyright: ignore[reportUnknownArgumentType]
        else:
            text = _FIELDS_JSON(fields)
        return f"{when} {logging.getLevelName(level)} {name}: {escaped} {text}"

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, _FIELDS, None)
        if fields is not None:
            line += " " + _FIELDS_JSON(fields)
        return line


def _json_line_formatter() -> logging.Formatter:
    """`log_format: json`'s formatter; python-json-logger is imported only then (issue 34: ~0.04 s of the start-up of
    a gateway logging text)."""
    from pythonjsonlogger.json import JsonFormatter

    class _JsonLineFormatter(JsonFormatter):
        def add_fields(self, log_data: JsonObject, record: logging.LogRecord, message_dict: JsonObject) -> None:
            fields = getattr(record, _FIELDS, None)
            event = getattr(record, _EVENT, None)
            # python-json-logger would add every `extra` key: ours go in by name, flattened.
            for key in (_FIELDS, _EVENT):
                record.__dict__.pop(key, None)
            super().add_fields(log_data, record, message_dict)
            if event is not None:
                log_data["event"] = event
                log_data.update(fields or {})
            ids = _request.get()
            if ids:
                log_data.setdefault("request", ids)

    return _JsonLineFormatter(
        "%(levelname)s %(name)s %(message)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
        json_default=str,
    )


def _record_time() -> tuple[float, float]:
    """`created` and `msecs` as a `LogRecord` made now has them (Python 3.13 takes them from `time.time_ns`)."""
    if sys.version_info >= (3, 13):
        now = time.time_ns()
        return now / 1e9, (now % 1_000_000_000) // 1_000_000 + 0.0
    created = time.time()
    return created, int((created - int(created)) * 1000) + 0.0


class _Lines(logging.StreamHandler[TextIO]):
    """The root handler `configure_logging` installs: a `StreamHandler` that also writes `log_event`'s lines
    without a `LogRecord` (its making and its handling were most of the cost of the line logged for every
    elicitation: bench/README.md, "The audit trail's pace")."""

    def event(self, name: str, level: int, event: str, fields: Mapping[str, Any]) -> bool:
        """Write the event's line as `emit` would; False when its formatter cannot make it (then the caller
        makes a record)."""
        formatter, lock = self.formatter, self.lock
        if self.filters or type(formatter) is not _TextFormatter or lock is None:
            return False
        with lock:  # taken once: `acquire`, then `flush`'s own `acquire`, were two more Python calls each
            try:
                line = formatter.event_line(name, level, event, fields)
                if line is None:
                    return False
                stream = self.stream
                stream.write(line + self.terminator)
                if hasattr(stream, "flush"):  # as `StreamHandler.flush`
                    stream.flush()
            except RecursionError:
                raise
            except Exception:
                self.handleError(_event_record(logging.getLogger(name), level, event, fields))
        return True


def configure_logging(level: str, log_format: str = "text") -> None:
    """The root handler on stderr (stdout may be the stdio face's channel)."""
    handler = _Lines(sys.stderr)
    if log_format == "json":
        handler.setFormatter(_json_line_formatter())
    else:
        handler.setFormatter(_TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("alembic", "aiosqlite"):  # their DEBUG is every statement
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))
