"""A message's bytes to a message: one JSON-RPC message per line on a stdio wire (`LineBuffer`), one per body
or event on HTTP (`parse_message`), and the rule for NaN and Infinity, which JSON does not have
(`with_non_finite`). What cannot be read becomes the exception that says why, for the endpoint to answer."""

from __future__ import annotations

from typing import Any

from mcp_types import INTERNAL_ERROR

from elicitgate.errors import LineTooLong, NonFiniteParams, NotAMessage, NotFinite
from elicitgate.json_shapes import JsonObject, is_object
from elicitgate.wire import codec
from elicitgate.wire.base import PLAIN_OBJECT

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line a stdio wire reads (the face's stdin, a stdio server's stdout): a peer that writes without
ever ending its line must not grow the gateway without bound. Far above any message an MCP peer sends (the
HTTP face takes bodies of at most `http.max_body_bytes`, 4 MiB by default; `bench.big_message` echoes 30 MB)."""


def too_long(max_line: int) -> LineTooLong:
    return LineTooLong(f"a line longer than {max_line} bytes (the stdio wire's limit): skipped to its end")


def parse_lines(buffer: bytes, max_line: int = MAX_LINE_BYTES) -> tuple[list[JsonObject | Exception], bytes]:
    """The messages of the complete lines in `buffer` (blank ones skipped, one longer than `max_line` a
    `LineTooLong` even if blank, as when it comes in pieces), and the incomplete rest."""
    *lines, rest = buffer.split(b"\n")
    return [parse_line(line) if len(line) <= max_line else too_long(max_line)
            for line in lines if len(line) > max_line or line.strip()], rest


class LineBuffer:
    """A stdio wire's messages from the chunks read off its pipe, one per line. A line that spans many
    chunks is joined once, when its newline comes: adding each chunk to what came before would copy the
    line again for every chunk, a cost that grows with the square of its length (`bench.big_message`).
    A line longer than `max_line` is not kept: it becomes one `LineTooLong` and the rest of it, up to its
    newline, is dropped as it comes."""

    __slots__ = ("_parts", "_size", "_max", "_skipping")

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._parts: list[bytes] = []
        """The line read so far, newline still to come."""
        self._size = 0
        self._max = max_line
        self._skipping = False
        """Inside a line past `max_line`, already reported: dropped up to its newline."""

    def feed(self, chunk: bytes) -> list[JsonObject | Exception]:
        """The messages of the lines `chunk` completes."""
        if not self._parts and not self._skipping and chunk.find(b"\n") == len(chunk) - 1 >= 0:
            # The usual chunk of a pipe: one whole line. Read here, without splitting and joining.
            if len(chunk) - 1 > self._max:
                return [too_long(self._max)]
            return [] if chunk.isspace() else [parse_message(chunk, "line")]  # `isspace`: no copy, as `strip` makes
        if self._skipping:
            end = chunk.find(b"\n")
            if end < 0:
                return []
            self._skipping = False
            chunk = chunk[end + 1:]
        if chunk.find(b"\n") < 0:  # not `in`, which tries the bytes as an integer first (a TypeError raised)
            if chunk:
                self._parts.append(chunk)
                self._size += len(chunk)
                if self._size > self._max:
                    return [self._skip()]
            return []
        if self._parts:
            self._parts.append(chunk)
            chunk = b"".join(self._parts)
        messages, rest = parse_lines(chunk, self._max)
        self._parts = [rest] if rest else []
        self._size = len(rest)
        if self._size > self._max:
            messages.append(self._skip())
        return messages

    def _skip(self) -> LineTooLong:
        self._parts, self._size, self._skipping = [], 0, True
        return too_long(self._max)

    def end(self) -> JsonObject | Exception | None:
        """The wire ended: the message of a last line without its newline, if there was one."""
        rest, self._parts, self._size = b"".join(self._parts), [], 0
        return parse_line(rest) if rest.strip() else None


def parse_message(data: bytes, what: str = "message") -> JsonObject | Exception:
    """One message's bytes: the message, or the exception that says why they are not one (`what` names
    them in it: a stdio wire's "line", an HTTP body's "message")."""
    try:
        message = codec.loads(data)
    except NotFinite as exc:
        return with_non_finite(exc.value, what, data)
    except ValueError as exc:  # not JSON, not UTF-8, or nested too deep (`TooDeep`)
        return ValueError(f"a {what} that is not JSON ({exc}): {data[:200]!r}")
    if type(message) is not PLAIN_OBJECT and not is_object(message):
        return NotAMessage(f"a {what} that is not a JSON-RPC message (a JSON object): {data[:200]!r}")
    return message


def with_non_finite(message: Any, what: str, data: bytes) -> JsonObject | Exception:
    """A message that holds NaN or Infinity. Only in an answer does it pass: a 2026-07-28 retry's
    `params.inputResponses`, an ElicitResult's `result.content`, where the answer check
    refuses it and asks again. A request or notification elsewhere is refused; a response becomes an error
    response to the same id, so that its caller hears at once instead of waiting for its timeout."""
    if not is_object(message):
        return ValueError(f"a {what} that is not JSON (NaN and Infinity are not JSON numbers): {data[:200]!r}")
    if "method" in message:
        params = message.get("params")
        kept = {k: v for k, v in params.items() if k != "inputResponses"} if is_object(params) else params
        where = codec.first_non_finite(kept, "params")
        return message if where is None else NonFiniteParams(message, where)
    result = message.get("result")
    # Only an ElicitResult's content (an object, beside `action`) is an answer; a tool result's `content` is a
    # list of blocks, which would reach the client with `null` in place of the number.
    if is_object(result) and "action" in result and is_object(result.get("content")):
        kept = {k: v for k, v in result.items() if k != "content"}
    else:
        kept = result
    where = codec.first_non_finite({"result": kept, "error": message.get("error")})
    if where is None:
        return message
    error = f"the answer holds a number JSON does not have (NaN or Infinity, RFC 8259) at {where}"
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": INTERNAL_ERROR, "message": error}}


def parse_line(line: bytes) -> JsonObject | Exception:
    """One line of a stdio wire: the message, or the exception that says why the line is not one."""
    return parse_message(line, "line")
