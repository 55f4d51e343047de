"""`bench.cpu_price`'s busy relay: the lean relay, busy only around the `elicitation/create` it passes on.

It prices a microsecond of CPU in the middle, so it must differ from the lean relay in nothing else: every other
message passes as there, the question and its answer arrive unchanged, and the busy time falls where it says (before
the write, after it), on that one message.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import orjson
import pytest

from mcp import Client, StdioServerParameters

from bench import cpu_price
from tests.conftest import PY, Process

ROOT = Path(__file__).resolve().parent.parent
ELICIT = {"jsonrpc": "2.0", "id": 3, "method": "elicitation/create",
          "params": {"message": "Go?", "requestedSchema": {"type": "object", "properties": {}}}}
RESULT = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "note": "elicitation/create"}}


def _fed(chunks: list[bytes], before: int, after: int, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What `BusyLines` does with `chunks`, in order: ("busy", us) for each busy stretch, ("out", message) per write."""
    done: list[Any] = []
    monkeypatch.setattr(cpu_price, "busy_for", lambda us: done.append(("busy", us)))
    lines = cpu_price.BusyLines(lambda data: done.extend(("out", orjson.loads(line)) for line in data.splitlines()),
                                before, after)
    for chunk in chunks:
        lines.feed(chunk)
    return done


def test_the_question_is_written_between_its_busy_stretches(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _fed([orjson.dumps(ELICIT) + b"\n"], 30, 100, monkeypatch) == [
        ("busy", 30), ("out", ELICIT), ("busy", 100)
    ]


def test_every_other_message_passes_as_in_the_lean_relay(monkeypatch: pytest.MonkeyPatch) -> None:
    # A result that mentions the method in its text is not a question: no busy time for it.
    assert _fed([orjson.dumps(RESULT) + b"\n"], 30, 100, monkeypatch) == [("out", RESULT)]
    # Lines split across reads, or two in one read, take the lean relay's own path, unchanged.
    line = orjson.dumps(ELICIT) + b"\n"
    assert _fed([line[:10], line[10:] + orjson.dumps(RESULT) + b"\n"], 30, 0, monkeypatch) == [
        ("out", ELICIT), ("out", RESULT)
    ]


def test_busy_pairs_are_checked() -> None:
    assert cpu_price.parse_busy("10/30") == (10, 30)
    assert cpu_price.parse_busy("10") == (10, 0)
    for bad in ("ten/0", "-1/0", "1/x"):
        with pytest.raises(argparse.ArgumentTypeError):
            cpu_price.parse_busy(bad)


def test_busy_for_stays_on_the_clock() -> None:
    # It is a wall-clock spin: at least what it was given, measured on the same clock.
    start = time.perf_counter_ns()
    cpu_price.busy_for(200)
    assert time.perf_counter_ns() - start >= 200_000


async def _asked_by_three_confirms(server: Any) -> list[str]:
    """A real SDK client calls the demo's `confirm` three times through `server`, accepting each question: the
    questions' messages as the client saw them (each call's result checked)."""
    asked: list[str] = []

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with Client(server, mode="legacy", elicitation_callback=answer) as client:
        results = [await client.call_tool("confirm", {"question": f"Go {n}?"}) for n in range(3)]
    assert [r.content[0].text for r in results] == ["confirm: accepted {'ok': True}"] * 3  # type: ignore[union-attr]
    return asked


@pytest.mark.anyio
async def test_a_real_client_is_answered_through_the_busy_relay() -> None:
    relay = StdioServerParameters(
        command=PY, args=["-m", "bench.cpu_price", "relay", "50", "50", "every", PY, "-m", "elicitgate.demo.server"],
        cwd=str(ROOT),
    )
    # unchanged: no prefix, no `_meta` of the gateway's
    assert await _asked_by_three_confirms(relay) == ["Go 0?", "Go 1?", "Go 2?"]


def test_the_http_relay_is_busy_on_the_question_or_on_each_message(monkeypatch: pytest.MonkeyPatch) -> None:
    spent: list[int] = []
    monkeypatch.setattr(cpu_price, "busy_for", spent.append)
    done = orjson.dumps(RESULT).replace(b"elicitation/create", b"done")
    question, result = (b"event: message\r\ndata: " + orjson.dumps(ELICIT), b"event: message\r\ndata: " + done)
    priming = b"id: 1\r\ndata: "
    for every, expected in ((False, [40]), (True, [40, 40])):
        spent.clear()
        back = cpu_price.BusyBack(cpu_price.BusyRelay("http://127.0.0.1:1/mcp", 40, every=every))
        passed = [back.event_again(event) for event in (question, result, priming)]
        assert spent == expected  # an event with no message (a stream's priming event) is never busy
        assert [orjson.loads(event.partition(b"data: ")[2]) for event in passed[:2] if event] == [ELICIT, RESULT | {
            "result": {"content": [], "note": "done"}}]


def _busy_http_relay(upstream: str) -> Process:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return Process.on_free_port(
        lambda port: [PY, "-m", "bench.cpu_price", "http-relay", "50", "every", f"127.0.0.1:{port}", upstream],
        env=env,
    )


@pytest.mark.anyio
async def test_a_real_client_is_answered_through_the_busy_http_relay(http_upstream: Callable[..., Process]) -> None:
    relay = _busy_http_relay(f"{http_upstream('elicitgate.demo.server').url}/mcp")
    try:
        assert await _asked_by_three_confirms(f"{relay.url}/mcp") == ["Go 0?", "Go 1?", "Go 2?"]
    finally:
        relay.stop()


def test_over_http_the_busy_time_is_before_the_write_only() -> None:
    done = subprocess.run([PY, "-m", "bench.cpu_price", "--transport", "http", "--busy", "10/5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--transport http: busy time before the write only" in done.stderr
