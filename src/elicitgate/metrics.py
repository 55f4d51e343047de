"""Prometheus metrics, served at /metrics on the HTTP face."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

ELICITATIONS_ENDED = Counter(
    "elicitgate_elicitations_total", "Elicitations that reached a terminal state", ["server", "state"]
)
ELICITATIONS_PENDING = Gauge("elicitgate_elicitations_pending", "Elicitations not yet ended")
UPSTREAM_UP = Gauge("elicitgate_upstream_up", "1 when the upstream's primary connection is up", ["server"])
