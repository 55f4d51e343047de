"""Resumable response streams of handshake-era HTTP sessions (2025-11-25 transport, "Resumability and
Redelivery").

Every SSE event the face sends on a handshake-era session has an id, `<stream>/<seq>`: the stream's name (a
number, after the replica's id with `redis_url`) and the event's place in it. What a stream carries is kept
until its client has had the stream's end (bounded per session and in total), so that a client whose
connection broke comes back with
`GET` + `Last-Event-ID`, gets what followed that event on that stream (never another stream's), and then the
rest as it comes, its call's answer last. A broken stream is not a cancelled request: the call goes on, and
its questions wait for their client for `elicitation.abandoned_grace` (`elicitation.carriers`).

A stream is a carrier of the questions pushed on it: it attaches them while a client reads it, and detaches
them when its connection breaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
from collections.abc import Callable, Mapping
from typing import Literal, final

import anyio
from starlette.types import Receive, Send

from elicitgate.contracts import Mirror, Question
from elicitgate.faces.http_answers import (
    END,
    LATE,
    PING,
    SSE_HEADERS,
    SSE_PING_INTERVAL,
    Cancellable,
    Late,
    encode,
    event_bytes,
    json_headers,
    lean_cycle,
    on_disconnect,
    send_event,
)
from elicitgate.json_shapes import JsonObject
from elicitgate.metrics import STREAM_EVENTS_DROPPED, labelled
from elicitgate.web.http_protocol import LeanCycle
from elicitgate.wire.wakeup import Wakeable

logger = logging.getLogger(__name__)

EVENT_ID = re.compile(r"^((?:[0-9a-f]{1,32}-)?\d{1,12})/(\d{1,12})$")
"""`<stream>/<seq>`: a `Last-Event-ID` of this face."""
BROKE = "the client's stream broke before the call's answer"

_stream_numbers = itertools.count(1)
"""Stream names are unique in the process (and over replicas, with the replica's id before them), not only in a
session: another session's event id is unknown here (and is refused) instead of naming a stream of this one."""


class EventLimits:
    """The store's bounds: events kept per session (`http.resume_events_per_session`) and in all sessions
    (`http.resume_events_total`)."""

    __slots__ = ("per_session", "total", "kept", "prefix")

    def __init__(self, per_session: int, total: int, prefix: str = "") -> None:
        self.per_session = per_session
        self.total = total
        self.kept = 0
        self.prefix = prefix
        """Before each stream's number: with `redis_url`, `<replica id>-`."""


class SessionEvents:
    """The kept events of one session's streams, in memory."""

    __slots__ = ("limits", "streams", "kept")

    def __init__(self, limits: EventLimits) -> None:
        self.limits = limits
        self.streams: dict[str, EventStream] = {}
        self.kept = 0

    def open(self) -> EventStream:
        stream = EventStream(f"{self.limits.prefix}{next(_stream_numbers)}", self)
        self.streams[stream.name] = stream
        return stream

    def find(self, last_event_id: str) -> tuple[EventStream, int] | None | ValueError:
        """The stream a client's `Last-Event-ID` names and the event's seq; None when this session has no such
        event; `ValueError` when it is not an id this face makes."""
        match = EVENT_ID.match(last_event_id)
        if match is None:
            return ValueError("expected <stream>/<seq>, as in the id: line of the event last received")
        stream = self.streams.get(match[1])
        seq = int(match[2])
        if stream is None or seq >= stream.next_seq:
            return None
        return stream, seq

    def forget(self, stream: EventStream) -> None:
        """The client had the stream's end: its events go."""
        if self.streams.pop(stream.name, None) is stream:
            if stream.unseen:
                stream.unread()
            self._release(len(stream.events))
            stream.events.clear()
            stream.carried.clear()
            if stream.mirror is not None:
                stream.mirror.forget(stream)

    def clear(self) -> None:
        """The session ended: nobody can resume its streams (those being written go once written)."""
        for stream in list(self.streams.values()):
            if not stream.written_here:
                self.forget(stream)

    def trim(self) -> None:
        """An event was added (`EventStream.put`, which counted it) past a bound: the oldest that can go, go."""
        while self.kept > self.limits.per_session and self._drop_one("session_limit"):
            pass
        while self.limits.kept > self.limits.total and self._drop_one("total_limit"):
            pass

    def _drop_one(self, reason: str) -> bool:
        """Drop this session's oldest event a client no longer needs to resume: one already written to it, or a
        notification (progress, a log line). Requests and answers not yet written stay even past the bound:
        they are few (bounded by the requests in flight) and losing one would hang a call."""
        for stream in self.streams.values():
            for index, (seq, message) in enumerate(stream.events):
                if seq <= stream.written or ("method" in message and "id" not in message):
                    del stream.events[index]
                    self._release(1)
                    labelled(STREAM_EVENTS_DROPPED, reason).inc()
                    return True
        return False

    def _release(self, count: int) -> None:
        self.kept -= count
        self.limits.kept -= count


class EventStream(Wakeable):
    """One response stream of a session: a POST's (what is sent on behalf of its request, then the answer, which
    ends it) or the session's GET stream. Its events stay while its client may still resume it."""

    __slots__ = (
        "name", "_log", "events", "next_seq", "written", "closed", "carried", "mirror", "remote", "_reader", "_direct",
        "caught_up", "unseen",
    )

    def __init__(self, name: str, log: SessionEvents) -> None:  # pyright: ignore[reportMissingSuperCall]
        self._waiter = None  # `Wakeable`'s one field, set here (a frame less for every stream)
        self.name = name
        self._log = log
        self.events: list[tuple[int, JsonObject]] = []
        """A list, not a deque: a deque's first block is ~600 bytes, held by every stream a pending question
        keeps open, which carries a message or two."""
        self.next_seq = 1
        """Seq 0 is the priming event's: nothing before it."""
        self.written = 0
        """The last seq written to a client (it may not have read it)."""
        self.closed = False
        """Its last event is in (the answer), or it was ended without one."""
        self.carried: list[Question] = []
        """Questions pushed on it (`elicitation.carriers`): a few, so a list (an empty set is 216 bytes)."""
        self.mirror: Mirror | None = None
        """Set once it broke, with `redis_url`: its events are copied to Redis from then on."""
        self.remote = False
        """Another replica's response is writing it (its client came back there)."""
        self._reader: Cancellable | None = None
        """The response writing it now (`write`'s cancel scope, or a `Parked` response); None while its client is
        away."""
        self._direct: LeanCycle | JsonWindow | Parked | None = None
        """On the face's own server, while its reader waits for what comes next: the response `put` writes to itself,
        in its caller's step, one loop turn before the reader would (`write`, caught up after seq `caught_up`), the
        request's answer as one JSON body (`first`, `window`), or a response parked with no task (`park`)."""
        self.caught_up: int = 0
        """The seq `_direct`'s reader is caught up to."""
        self.unseen = False
        """Questions were carried while its request's response waited for its first event (`carry`): neither
        attached nor detached yet (`unread`)."""

    def event_id(self, seq: int) -> bytes:
        return f"{self.name}/{seq}".encode()

    @property
    def attached(self) -> bool:
        """A client reads it: here, or through another replica."""
        return self._reader is not None or self.remote

    @property
    def written_here(self) -> bool:
        return self._reader is not None

    # -- what goes in ---------------------------------------------------------------------------------

    def put(self, message: JsonObject, *, last: bool = False) -> bool:
        """Add `message` (False once the stream has ended)."""
        if self.closed:
            return False
        seq = self.next_seq
        self.events.append((seq, message))
        if self.mirror is not None:
            self.mirror.appended(self, seq, message, last)
        self.next_seq = seq + 1
        self.closed = last
        window = self._write_now(seq, message, last) if self._direct is not None else None
        log = self._log
        log.kept += 1
        limits = log.limits
        limits.kept += 1
        if log.kept > limits.per_session or limits.kept > limits.total:
            log.trim()
        if self._waiter is not None:  # a reader's task waits (written by `_direct`, none does)
            self._wake()
        if window is not None:
            window.end()
        return True

    def _write_now(self, seq: int, message: JsonObject, last: bool) -> JsonWindow | Parked | None:
        """`put`'s `message` written to `_direct` now (then `written` says so); left to the reader, which is woken all
        the same, when it cannot be written without waiting or is not the case `_direct` is for. The JSON window
        this event ended, or the parked response it ended or could not be written to, if any (ended by `put` once its
        own bookkeeping is done)."""
        direct, self._direct = self._direct, None
        try:
            # By type: the three kinds are none subclassed (no `isinstance` call per event).
            if type(direct) is JsonWindow:  # the first event: the answer alone goes as one JSON body
                if last and seq == 1 and "method" not in message:
                    body = encode(message)
                    if direct.cycle.respond(200, json_headers(body, direct.extra), body):
                        self.written = seq
                return direct
            if direct is None:
                return None
            cycle = direct.cycle if type(direct) is Parked else direct
            if seq == self.caught_up + 1 and cycle.write_now(event_bytes(encode(message), self.event_id(seq)), True):
                self.caught_up = self.written = seq
                if last:
                    cycle.write_now(b"", False)  # the response's end (its reader sees it complete)
                else:
                    cycle.write_held()
                    self._direct = direct
                    if type(direct) is Parked:
                        direct.wrote()
                        return None
            if type(direct) is Parked:  # ended by its last event, or left to a task to write
                return direct
        except Exception:  # the reader's own `send` meets it again, in the response's task
            logger.debug("writing stream %s's event %d in its caller's step failed: left to its reader", self.name,
                         seq, exc_info=True)
            if isinstance(direct, (JsonWindow, Parked)):
                return direct
        return None

    def close(self) -> None:
        self.closed = True
        self._wake()
        if isinstance(parked := self._direct, Parked):  # its end is written by the task it goes on in
            parked.end()

    async def next(self, after: int, timeout: float | None) -> tuple[int, JsonObject] | None | Late:
        """The first kept event after seq `after`; None once the stream is closed with nothing after it; `LATE`
        when `timeout` seconds pass first."""
        while True:
            if (found := self._after(after)) is not None:
                return found
            if self.closed:
                return None
            if not await self._wait(timeout):
                return LATE

    async def first(
        self, timeout: float, cycle: LeanCycle | None, extra: list[tuple[bytes, bytes]]
    ) -> tuple[int, JsonObject] | None | Late:
        """`next(0, timeout)` for a new stream whose request may be answered as one JSON body (with `extra`
        headers): on the face's own server (`cycle`), when that answer comes while this waits, `put` writes it
        itself (`written` is then its seq)."""
        if cycle is None or self.events or self.closed:
            return await self.next(0, timeout)
        window = self._direct = JsonWindow(cycle, extra, None)
        try:
            return await self.next(0, timeout)
        finally:
            if self._direct is window:
                self._direct = None

    def window(self, timeout: float, cycle: LeanCycle, extra: list[tuple[bytes, bytes]],
               then: Callable[[], object]) -> None:
        """`first` with no task waiting: `then` is called once the window ends, by the first event's `put` (the
        answer written as one JSON body when it could be: `written` then says so) or after `timeout` seconds;
        `first_now` says with what."""
        window = JsonWindow(cycle, extra, then)
        loop = cycle.transport.loop
        if self.events or self.closed:
            loop.call_soon(window.end)
            return
        self._direct = window
        window.timer = loop.call_later(timeout, self._window_passed, window)

    def _window_passed(self, window: JsonWindow) -> None:
        if self._direct is window:
            self._direct = None
            window.end()

    def first_now(self) -> tuple[int, JsonObject] | None | Late:
        """What `next(0, ...)` would give now without waiting: the first kept event, None once closed with none,
        else `LATE`."""
        found = self._after(0)
        if found is not None:
            return found
        return None if self.closed else LATE

    def _after(self, after: int) -> tuple[int, JsonObject] | None:
        """The first kept event after seq `after`, searched from the newest: a client reading along is one step
        from the end."""
        events = self.events
        index = size = len(events)
        while index and events[index - 1][0] > after:
            index -= 1
        return events[index] if index < size else None

    def written_by(self, reader: Cancellable) -> bool:
        return self._reader is reader

    def detach_reader(self) -> None:
        """Its reader's client has gone before the stream's end: its questions wait for one to come back (not while
        another replica's response writes it)."""
        self._reader = None
        if not self.remote:
            self._detach()

    def unpark(self, parked: Parked, *, forget: bool) -> None:
        """`parked` ended (`forget`: with the stream's end written, which its client has had)."""
        if self._direct is parked:
            self._direct = None
        if self._reader is parked:
            self._reader = None
        if forget:
            self._log.forget(self)

    def complete(self, after: int) -> bool:
        """Everything up to its end was written past seq `after`."""
        return self.closed and after >= self.next_seq - 1

    # -- carriers -------------------------------------------------------------------------------------

    def carry(self, elicitation: Question) -> None:
        """`elicitation` was caused by this stream's request (pushed on it, or hosted): attach it while a client
        reads the stream, else its grace period starts (the client's connection broke before it was asked). While
        the request's own response waits for its first event (`window`, `first`), neither: the reader that writes
        the stream once the wait ends attaches it (`write`), or `unread` detaches it when none does (detached here,
        each pushed question started a grace timer that its reader cancelled a step later)."""
        if self.carried:  # the ones that ended go (most streams carry none before)
            self.carried = [el for el in self.carried if not el.state.terminal and el is not elicitation]
        self.carried.append(elicitation)
        carriers = elicitation.carriers
        if carriers is not None:
            if self._reader is not None or self.remote:  # `attached`
                carriers.attach(self)
            elif type(self._direct) is JsonWindow:
                self.unseen = True
            else:
                carriers.detach(self, BROKE)

    def unread(self) -> None:
        """Its request's response ended with no reader having written the stream (one JSON body, a failure): the
        questions `carry` left for the reader have no carrier here, as a broken stream's."""
        if self.unseen:
            self.unseen = False
            if not self.attached:
                self._detach()

    def reader_elsewhere(self, attached: bool) -> None:
        """Another replica's response started (or stopped) writing this stream to its client."""
        self.remote = attached
        if attached:
            self._reattach()
        elif self._reader is None:
            self._detach()

    def _reattach(self) -> None:
        for el in self.carried:
            if el.carriers is not None and not el.state.terminal:
                el.carriers.attach(self)

    def _detach(self) -> None:
        for el in self.carried:
            if el.carriers is not None and not el.state.terminal:
                el.carriers.detach(self, BROKE)

    # -- what goes out --------------------------------------------------------------------------------

    def park(self, cycle: LeanCycle, after: int, then: Callable[[ParkedEnd, int], object]) -> bool:
        """After `begin` wrote the stream up to seq `after`: `write`'s wait for what comes next, with no task. `put`
        writes each event in its caller's step and the last one ends the response; a keep-alive comment goes every
        `SSE_PING_INTERVAL` seconds. `then(how, at)` once it ends (`ParkedEnd`: done, gone, taken over, or to go on
        in a task, `write` with `begun` after seq `at`). False, having done nothing, when something is still to be
        written (a task writes it, as before)."""
        if self.closed or self._reader is not None or self._after(after) is not None:
            return False
        parked = Parked(self, cycle, then)
        self._reader = parked
        self.unseen = False
        self._reattach()
        self._direct, self.caught_up = parked, after
        parked.watch = cycle.watch(parked.gone)
        parked.wrote()
        return True

    def begin(self, cycle: LeanCycle, *, after: int, priming: bool, headers: list[tuple[bytes, bytes]]) -> int | None:
        """`write`'s start in the caller's step, on the face's own server: the response's head, the priming event and
        the events kept after seq `after` written now; the seq written up to (then `write` goes on from there with
        `begun`), or None, having written nothing, when it cannot be done without waiting."""
        if not cycle.start_now(200, [*SSE_HEADERS, *headers]):
            return None
        cursor = after
        if priming:
            cycle.write_now(event_bytes(b"", self.event_id(after)), True)
        while (item := self._after(cursor)) is not None:
            seq, message = item
            if not cycle.write_now(event_bytes(encode(message), self.event_id(seq)), True):
                break  # the rest by `write`, once it can
            cursor = seq
            if seq > self.written:
                self.written = seq
        return cursor

    async def write(
        self,
        send: Send,
        receive: Receive,
        *,
        after: int,
        priming: bool,
        headers: list[tuple[bytes, bytes]],
        begun: bool = False,
        ping: bool = False,
    ) -> bool:
        """Write this stream as an SSE response from the event after seq `after` until its end (True), or until
        the client goes away or another response resumes it (False). `priming`: first an event with the id of
        seq `after` and no data, so that a client can resume before any message came (2025-11-25). `begun`: the
        response was started (`begin`) up to seq `after`. `ping`: a keep-alive comment first (one that a parked
        response could not write at once)."""
        if self._reader is not None:
            self._reader.cancel()  # the client came back before this side saw it leave: the new response wins
            self._direct = None  # not to the response left behind
        cycle = lean_cycle(send)
        cursor = after
        done = False
        with anyio.CancelScope() as scope:
            self._reader = scope
            self.unseen = False
            self._reattach()
            # The client going away cancels the same scope a newer response would: one scope and one plain
            # watching task for as long as the stream is written, which is as long as its questions wait.
            watch = on_disconnect(receive, scope.cancel)
            try:
                if not begun:
                    await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *headers]})
                    if priming:
                        await send_event(send, b"", self.event_id(after))
                if ping:
                    await send(PING)
                while True:
                    parked = cycle is not None and not self.closed and self._after(cursor) is None
                    if parked:
                        self._direct, self.caught_up = cycle, cursor
                    try:
                        item = await self.next(cursor, SSE_PING_INTERVAL)
                    finally:
                        if parked and self._direct is cycle:
                            self._direct = None
                    if parked and self.caught_up > cursor:  # `put` wrote what came meanwhile
                        cursor = self.caught_up
                        continue
                    if item is None:
                        break
                    if item is LATE:
                        await send(PING)
                        continue
                    seq, message = item
                    await send_event(send, encode(message), self.event_id(seq))
                    cursor = seq
                    self.written = max(self.written, seq)
                done = True
                if cycle is None or not cycle.response_complete:  # else `put` ended it with the last event
                    with contextlib.suppress(OSError):
                        await send(END)
            except OSError:  # the client has gone
                pass
            finally:
                watch.cancel()
                if self._reader is scope:
                    self._reader = None
                    if not done and not self.complete(cursor) and not self.remote:
                        self._detach()
        if done or self.complete(cursor):
            self._log.forget(self)
            return True
        return False




ParkedEnd = Literal["done", "gone", "taken", "task", "ping"]
"""How a `Parked` response ended: its stream's end written ("done"); its client gone ("gone"); another response
took the stream over ("taken": left unended, as `write` cancelled leaves it); or it goes on in a task, from the seq
it was written up to ("task"), first writing the keep-alive comment it owes ("ping")."""


@final  # told apart by `type` (`EventStream._write_now`)
class Parked:
    """A stream's SSE response on the face's own server waiting for the stream's next event with no task
    (`EventStream.park`): the stream's reader (`cancel`: another response takes it over), its `_direct` writer, the
    watch that tells it its client has gone and its keep-alive timer."""

    __slots__ = ("stream", "cycle", "then", "watch", "timer")

    def __init__(self, stream: EventStream, cycle: LeanCycle, then: Callable[[ParkedEnd, int], object]) -> None:
        self.stream = stream
        self.cycle = cycle
        self.then: Callable[[ParkedEnd, int], object] | None = then
        self.watch: Cancellable | None = None
        self.timer: asyncio.TimerHandle | None = None

    def wrote(self) -> None:
        """Something was written: the next keep-alive comment is `SSE_PING_INTERVAL` seconds from now."""
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.cycle.transport.loop.call_later(SSE_PING_INTERVAL, self._ping)

    def _ping(self) -> None:
        self.timer = None
        if self.cycle.write_now(PING["body"], True):
            self.wrote()
        elif not self.cycle.disconnected:  # writing is paused: a task writes it once it can (gone: `gone` is coming)
            self._leave("ping")

    def end(self) -> None:
        """`put` wrote the stream's last event (the response ended), or left an event unwritten; or `close`."""
        stream = self.stream
        self._leave("done" if stream.complete(stream.caught_up) and self.cycle.response_complete else "task")

    def gone(self) -> None:
        """The client has gone (`LeanCycle.watch`)."""
        stream = self.stream
        complete = stream.complete(stream.caught_up)
        if not complete and stream.written_by(self):
            stream.detach_reader()
        self._leave("done" if complete else "gone")

    def cancel(self) -> None:
        """Another response takes the stream over (`write`)."""
        self._leave("taken")

    def _leave(self, how: ParkedEnd) -> None:
        then, self.then = self.then, None
        if then is None:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None
        stream = self.stream
        stream.unpark(self, forget=how == "done")
        then(how, stream.caught_up)


@final  # told apart by `type` (`EventStream._write_now`)
class JsonWindow:
    """A request's wait for its first event while its answer may still go as one JSON body (`EventStream.first`,
    `EventStream.window`): the response and its extra headers, and for a wait with no task, what to call once it
    ends and the timer that ends it."""

    __slots__ = ("cycle", "extra", "then", "timer")

    def __init__(self, cycle: LeanCycle, extra: list[tuple[bytes, bytes]], then: Callable[[], object] | None) -> None:
        self.cycle = cycle
        self.extra = extra
        self.then = then
        self.timer: asyncio.TimerHandle | None = None

    def end(self) -> None:
        then, self.then = self.then, None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if then is not None:
            then()


def protocol_at_least_2025_11_25(headers: Mapping[str, str], header: str) -> bool:
    """Whether the request's protocol revision takes a priming event (an event with no data): older clients
    cannot parse one (the SDK's server checks the same)."""
    version = headers.get(header)
    return version is not None and version >= PRIMING_SINCE


PRIMING_SINCE = "2025-11-25"
"""The first protocol revision whose clients take a priming event."""
PRIMING_SINCE_SENT = PRIMING_SINCE.encode("latin-1")
"""`PRIMING_SINCE` as a header sends it (latin-1 keeps the order: compared as bytes, the same answer)."""
