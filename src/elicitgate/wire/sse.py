"""An event stream (`text/event-stream`) parsed from bytes as they come, for the HTTP wires."""

from __future__ import annotations

from elicitgate.errors import SseEventTooLarge


class SseParser:
    """An event stream (`text/event-stream`) parsed from bytes as they come, keeping what a reconnect
    needs (the last event id, the server's retry delay). `feed` returns the data of each complete
    `message` event that has any (an event with an id and no data only primes resumption)."""

    __slots__ = (
        "_max_size", "_pending", "_pending_size", "_after_cr", "_data", "_size", "_event", "last_id", "retry"
    )

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        """The largest event's data, in bytes."""
        self._pending: list[bytes] | tuple[()] = ()
        """The line read so far, its end still to come: joined once when it comes (see `wire.framing.LineBuffer`).
        Empty, it is the empty tuple, as `_data`: a parser lives as long as its stream, held open while a person
        answers, and two empty lists are 112 bytes of it."""
        self._pending_size = 0
        self._after_cr = False
        """The last chunk ended with a CR: an LF that begins the next one is the rest of that CRLF."""
        self._data: list[bytes] | tuple[()] = ()
        self._size = 0
        self._event = b""
        self.last_id: str | None = None
        self.retry: float | None = None
        """Seconds, as the server's last `retry:` field said."""

    @property
    def blank(self) -> bool:
        """Nothing read that a later chunk or a reconnect needs: no partial line or event, no id, no retry (a fresh
        parser would do the same from here)."""
        return (
            not self._pending and not self._data and not self._event and not self._after_cr
            and self.last_id is None and self.retry is None
        )

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._after_cr and chunk:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        # find(), not `in`: bytes.__contains__ first tries its argument as an integer (a TypeError raised and caught)
        if chunk.find(b"\n") < 0 and chunk.find(b"\r") < 0:  # the line goes on
            pending = self._pending
            if pending:
                pending.append(chunk)
            else:
                self._pending = [chunk]
            self._pending_size += len(chunk)
            self._check_size()
            return []
        buffer = b"".join([*self._pending, chunk]) if self._pending else chunk
        if buffer.find(b"\r") >= 0:
            # A CR ends its line now, even at the end of the chunk (a stream's last event may end so).
            self._after_cr = buffer[-1:] == b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, rest = buffer.split(b"\n")
        self._pending = [rest] if rest else ()
        self._pending_size = len(rest)
        found: list[bytes] = []
        for line in lines:
            if not line:
                if self._data:
                    data = b"\n".join(self._data)
                    if data and self._event in (b"", b"message"):  # empty: a priming event (its id is kept)
                        found.append(data)
                    self._data = ()
                    self._size = 0
                self._event = b""
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":  # the usual fields here, with no frame of their own
                data_lines = self._data
                if data_lines:
                    data_lines.append(value)
                else:
                    self._data = [value]
                self._size += len(value)
                if self._size + self._pending_size > self._max_size:
                    self._check_size()  # here too: a whole event may come and end within one chunk
            elif name == b"event":
                self._event = value
            else:
                self._field(name, value)
        if self._size + self._pending_size > self._max_size:
            self._check_size()
        return found

    def _check_size(self) -> None:
        if self._size + self._pending_size > self._max_size:
            raise SseEventTooLarge(f"Server-sent event exceeded the {self._max_size} byte limit (max_event_bytes).")

    def _field(self, name: bytes, value: bytes) -> None:
        """A field other than `data` and `event` (a comment's name is empty: nothing)."""
        if name == b"id":
            if value.find(b"\0") < 0:
                self.last_id = value.decode(errors="replace")
        elif name == b"retry":
            if value.isdigit():
                self.retry = int(value) / 1000
