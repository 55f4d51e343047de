"""A message's bytes to a message: one JSON-RPC message per line on a stdio wire (`LineBuffer`), one per body
or event on HTTP (`parse_message`), and the rule for NaN and Infinity, which JSON does not have
(`with_non_finite`). What cannot be read becomes the exception that says why, for the endpoint to answer."""

from __future__ import annotations

from typing import Any

from mcp_types import INTERNAL_ERROR

from elicitgate.errors import NonFiniteParams, NotAMessage, NotFinite
from elicitgate.json_shapes import JsonObject, is_object
from elicitgate.wire import codec


def parse_lines(buffer: bytes) -> tuple[list[JsonObject | Exception], bytes]:
    """The messages of the complete lines in `buffer` (blank ones skipped), and the incomplete rest."""
    *lines, rest = buffer.split(b"\n")
    return [parse_line(line) for line in lines if line.strip()], rest


class LineBuffer:
    """A stdio wire's messages from the chunks read off its pipe, one per line. A line that spans many
    chunks is joined once, when its newline comes: adding each chunk to what came before would copy the
    line again for every chunk, a cost that grows with the square of its length (`bench.big_message`)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        """The line read so far, newline still to come."""

    def feed(self, chunk: bytes) -> list[JsonObject | Exception]:
        """The messages of the lines `chunk` completes."""
        if b"\n" not in chunk:
            if chunk:
                self._parts.append(chunk)
            return []
        if self._parts:
            self._parts.append(chunk)
            chunk = b"".join(self._parts)
        messages, rest = parse_lines(chunk)
        self._parts = [rest] if rest else []
        return messages

    def end(self) -> JsonObject | Exception | None:
        """The wire ended: the message of a last line without its newline, if there was one."""
        rest, self._parts = b"".join(self._parts), []
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
    if not is_object(message):
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
