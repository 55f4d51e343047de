"""`REQUEST_DURATION` observed through tallies (`metrics.request_tally`): what /metrics shows is exactly what
prometheus_client's own histogram shows for the same durations, and an observation costs one Python call."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import REGISTRY

from elicitgate.faces.observe import RequestObserver
from elicitgate.metrics import request_tally
from tests.profiled import calls_of

# Bounds themselves (an observation on a bound counts in that bucket), between them, zero, past the last.
DURATIONS = (0.0, 0.005, 0.0050001, 0.01, 0.3, 1.0, 2.5, 7.5, 10.0, 10.5, 1e6, 0.000123, 0.07499999, 0.075)


def _lines(text: bytes, name: str, face: str) -> list[str]:
    return [
        line.replace(f'face="{face}",', "").replace(f',face="{face}"', "")
        for line in text.decode().splitlines()
        if line.startswith(name) and f'face="{face}"' in line and not line.startswith(f"{name}_created")
    ]


def _reference() -> tuple[CollectorRegistry, Histogram]:
    """prometheus_client's histogram, default buckets as `REQUEST_DURATION`'s, in a registry of its own."""
    registry = CollectorRegistry()
    histogram = Histogram("elicitgate_request_duration_seconds", "reference", ["method", "face"], registry=registry)
    return registry, histogram


def test_the_scraped_histogram_equals_prometheus_clients_own_for_the_same_durations() -> None:
    face = "tally-test"
    tally = request_tally("tools/call", face)
    registry, reference = _reference()
    child = reference.labels(method="tools/call", face=face)
    name = "elicitgate_request_duration_seconds"
    observed = 0
    for round_ in range(3):  # scraped between rounds: nothing counted twice, nothing lost
        for seconds in DURATIONS[round_:]:
            tally.observe(seconds)
            child.observe(seconds)
            observed += 1
        ours = _lines(generate_latest(REGISTRY), name, face)
        assert ours == _lines(generate_latest(registry), name, face)
        assert f'{name}_count{{method="tools/call"}} {float(observed)}' in ours


def test_one_tally_per_child_however_many_observers() -> None:
    first = RequestObserver("tally-twice", {"tools/call"})
    second = RequestObserver("tally-twice", {"tools/call"})
    assert first.timer("tools/call") is second.timer("tools/call") is request_tally("tools/call", "tally-twice")
    assert first.timer("nope") is request_tally("other", "tally-twice")


def test_an_observation_is_one_python_call_and_takes_no_lock() -> None:
    tally = request_tally("ping", "tally-cost")
    _, called = calls_of(lambda: tally.observe(0.001), c_calls=True)
    assert called == ["observe", "bisect_left"]
