"""Prometheus metrics, served at /metrics on the HTTP face and on the stdio face's side server
(`http.hosted_listen`). docs/operations.md lists them with what each means."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from functools import cache, partial
from typing import Protocol, TypeVar, cast

from prometheus_client.metrics import Counter, Gauge, Histogram, MetricWrapperBase
from prometheus_client.metrics_core import Metric

M = TypeVar("M", bound=MetricWrapperBase)


class _EndsCounter(Counter):
    """`ELICITATIONS`: the ends tallied since the last scrape (`elicitation_ended`) are added to it when collected."""

    def collect(self) -> Iterable[Metric]:
        _add_ends()
        return super().collect()


class _TalliedHistogram(Histogram):
    """A histogram observed through tallies in plain Python, which its children take when it is collected (`take`):
    `Histogram.observe` is six Python calls and two locks, and only the event loop observes or scrapes these."""

    def take(self, seconds: float, buckets: list[int]) -> None:
        """A child's sum becomes `seconds` (the tally's own, added to in the order `observe` adds), and each bucket
        gains its count in `buckets` (zeroed here)."""
        cast(_Value, self._sum).set(seconds)
        values = cast("list[_Value]", self._buckets)  # pyright: ignore[reportUnknownMemberType]
        for i, count in enumerate(buckets):
            if count:
                values[i].inc(count)
                buckets[i] = 0


class _EndsHistogram(_TalliedHistogram):
    """`ELICITATION_DURATION`: as `_EndsCounter`, and a child takes its tally (`_Ends.add_to_metrics`)."""

    def collect(self) -> Iterable[Metric]:
        _add_ends()
        return super().collect()


class _RequestsHistogram(_TalliedHistogram):
    """`REQUEST_DURATION`: each child takes its `Tally` when collected."""

    def collect(self) -> Iterable[Metric]:
        for tally in _TALLIES.values():
            tally.add_to_metric()
        return super().collect()


class _Value(Protocol):
    """prometheus_client's value of one sample (`values.MutexValue`), which it leaves unannotated."""

    def inc(self, amount: float) -> None: ...

    def set(self, value: float) -> None: ...


ELICITATIONS = _EndsCounter(
    "elicitgate_elicitations",
    "Elicitations by how they ended; refusals (never shown to a human) have state=\"refused\"",
    ["server", "mode", "state"],
)
_DURATION_BUCKETS = (0.05, 0.25, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
ELICITATION_DURATION = _EndsHistogram(
    "elicitgate_elicitation_duration_seconds",
    "Seconds from an elicitation's start to its end (human time included)",
    ["server", "mode", "state"],
    buckets=_DURATION_BUCKETS,
)
ELICITATIONS_PENDING = Gauge("elicitgate_elicitations_pending", "Elicitations not yet ended", ["server"])
REASKS = Counter(
    "elicitgate_elicitation_reasks", "Times a human was asked again after an answer that failed the form", ["server"]
)
REFUSALS = Counter(
    "elicitgate_refusals",
    "Elicitations refused before reaching a human, by reason (rate_limited, pending_limit, invalid_schema, "
    "sensitive_blocked, undeliverable, url_refused, origin_unknown, invalid_request)",
    ["server", "reason"],
)
NOTICES = Counter(
    "elicitgate_notices",
    "Notices to people about waiting questions, per target's scheme (ntfy, slack, json...), by outcome (sent, "
    "failed, timed_out: after every retry)",
    ["scheme", "outcome"],
)
ABANDONED = Counter(
    "elicitgate_elicitations_abandoned",
    "Questions whose client left and did not come back within elicitation.abandoned_grace, by what was done "
    "(cancel: ended and the server told cancel; keep: left pending until its deadline)",
    ["server", "outcome"],
)
STREAM_EVENTS_DROPPED = Counter(
    "elicitgate_stream_events_dropped",
    "SSE events of handshake-era sessions dropped from the resumption store before the client could resume, by "
    "reason (session_limit: http.resume_events_per_session, total_limit: http.resume_events_total)",
    ["reason"],
)
STREAM_RESUMPTIONS = Counter(
    "elicitgate_stream_resumptions",
    "GET requests with Last-Event-ID, by outcome (resumed, unknown, malformed)",
    ["outcome"],
)
UPSTREAM_UP = Gauge("elicitgate_upstream_up", "1 when the upstream's primary connection is up", ["server"])
REDIS_UP = Gauge(
    "elicitgate_redis_up",
    "With redis_url: 1 while this replica reaches Redis, 0 while it serves alone (its own clients and pages)",
    ["redis"],
)
REQUEST_DURATION = _RequestsHistogram(
    "elicitgate_request_duration_seconds",
    "Seconds the gateway took to answer a client request, by method and face (human time included)",
    ["method", "face"],
)
AUDIT_WRITTEN = Counter("elicitgate_audit_records_written", "Audit records stored")
AUDIT_DROPPED = Counter(
    "elicitgate_audit_records_dropped",
    "Audit records lost: queue_full (the writer fell behind), write_failed (the store refused), stopped",
    ["reason"],
)


@cache
def labelled(metric: M, *values: str) -> M:
    """`metric.labels(*values)`, looked up once: prometheus_client checks the values and takes a lock on every
    call (1.1 us, four times per elicitation). Label values here come from the config and fixed sets."""
    return metric.labels(*values)


_PENDING: dict[str, int] = {}
"""Elicitations pending per server in this process: `ELICITATIONS_PENDING` reads its value from here when scraped."""


def pending_opened(server: str) -> None:
    """One more elicitation of `server` pending. A count in a dict, not the gauge's own value: `Gauge.inc` is four
    Python calls and a lock, paid on every elicitation's way to its human (and `dec` after its answer)."""
    count = _PENDING.get(server)
    if count is None:
        labelled(ELICITATIONS_PENDING, server).set_function(partial(_PENDING.__getitem__, server))
        count = 0
    _PENDING[server] = count + 1


def pending_closed(server: str) -> None:
    """One elicitation of `server` less pending (`pending_opened` came first)."""
    _PENDING[server] -= 1


_UPPER_BOUNDS = (*(float(b) for b in _DURATION_BUCKETS), float("inf"))
"""`ELICITATION_DURATION`'s buckets as `Histogram.observe` reads them: an observation counts in the first whose
bound is not below it (`bisect_left`)."""


class _Ends:
    """The ends of one (server, mode, state) not yet added to `ELICITATIONS` and `ELICITATION_DURATION`, whose
    children are made with the first (as `labelled` made them at the first end before)."""

    __slots__ = ("buckets", "count", "counter", "histogram", "seconds")

    def __init__(self, server: str, mode: str, state: str) -> None:
        self.counter = labelled(ELICITATIONS, server, mode, state)
        self.histogram = labelled(ELICITATION_DURATION, server, mode, state)
        self.count = 0
        """Ends since the last scrape."""
        self.seconds = 0.0
        """The histogram's sum, all ends included (only these ends observe it)."""
        self.buckets = [0] * len(_UPPER_BOUNDS)
        """Ends since the last scrape per bucket (not cumulative, as the histogram keeps them)."""

    def add_to_metrics(self) -> None:
        self.counter.inc(self.count)
        self.count = 0
        self.histogram.take(self.seconds, self.buckets)


_ENDS: dict[tuple[str, str, str], _Ends] = {}


def elicitation_ended(server: str, mode: str, state: str, seconds: float) -> None:
    """One elicitation ended after `seconds`: `ELICITATIONS` and `ELICITATION_DURATION` count it when next scraped.
    A tally in plain Python: the counter's `inc` and the histogram's `observe` were 9 Python calls and 3 locks for
    every end. Scrapes run on the event loop (`/metrics`, an async route), as the ends do."""
    ends = _ENDS.get((server, mode, state))
    if ends is None:
        ends = _ENDS[server, mode, state] = _Ends(server, mode, state)
    ends.count += 1
    ends.seconds += seconds
    ends.buckets[bisect_left(_UPPER_BOUNDS, seconds)] += 1


def _add_ends() -> None:
    for ends in _ENDS.values():
        if ends.count:
            ends.add_to_metrics()


class Tally:
    """The observations of one `REQUEST_DURATION` child (`tally`), taken by it when next collected: `observe` is one
    Python call where `Histogram.observe` was six and two locks, for every request the gateway answers."""

    __slots__ = ("_bounds", "buckets", "child", "seconds")

    def __init__(self, child: _TalliedHistogram) -> None:
        self.child = child
        self._bounds: list[float] = child._upper_bounds  # pyright: ignore[reportPrivateUsage]
        self.seconds = 0.0
        """The child's sum, all observations included (only this tally observes it)."""
        self.buckets = [0] * len(self._bounds)
        """Observations since the last collection per bucket (`Histogram.observe` counts one in the first bucket whose
        bound is not below it: `bisect_left`)."""

    def observe(self, seconds: float) -> None:
        self.seconds += seconds
        self.buckets[bisect_left(self._bounds, seconds)] += 1

    def add_to_metric(self) -> None:
        self.child.take(self.seconds, self.buckets)


_TALLIES: dict[tuple[str, str], Tally] = {}


def request_tally(method: str, face: str) -> Tally:
    """`REQUEST_DURATION`'s child for (`method`, `face`) as a tally: one per child, however many observers ask."""
    found = _TALLIES.get((method, face))
    if found is None:
        found = _TALLIES[method, face] = Tally(REQUEST_DURATION.labels(method=method, face=face))
    return found
