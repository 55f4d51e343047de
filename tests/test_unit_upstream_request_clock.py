"""A request's end on an upstream connection (`UpstreamConnection.request`) reads the clock once: when it ended
(`last_active`, which idle reaping reads) and, for an answer, when the server last answered (`last_answer`, which a
probe reads) are the same instant; a request that failed moves only `last_active`. The clock is the event loop's, read
through the loop the request's `PausableDeadline` holds (no `getpid` to find it): its reads are counted there, the
deadline's own (its start, its timer) before the end's. In memory."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from mcp.shared.exceptions import MCPError

from elicitgate.upstreams.connection import UpstreamConnection
from elicitgate.wire.endpoint import Endpoint
from tests.test_unit_upstream_stamp import modern_connection

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Answering:
    """An endpoint whose requests are settled at once with `outcome` (a result, or an error raised)."""

    def __init__(self, outcome: dict[str, Any] | MCPError) -> None:
        self.outcome = outcome

    def asking(self, request_id: str, method: str, params: Any, **_: Any) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if isinstance(self.outcome, MCPError):
            future.set_exception(self.outcome)
        else:
            future.set_result(self.outcome)
        return future

    def asked_over(self, request_id: str, headers: Any) -> None:
        pass


def _counting_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    read: list[float] = []
    clock = iter(range(1000, 2000))

    def counted() -> float:
        read.append(float(next(clock)))
        return read[-1]

    monkeypatch.setattr(asyncio.get_running_loop(), "time", counted)
    return read


DEADLINE_READS = [1000.0, 1001.0]
"""The request's deadline reads the clock as it starts and as it arms its timer; the end's read comes after."""


def _on(endpoint: _Answering) -> UpstreamConnection:
    conn = modern_connection()
    conn.endpoint = cast(Endpoint, endpoint)
    return conn


async def test_an_answered_request_reads_the_clock_once_for_its_end_and_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = _on(_Answering({"content": []}))
    read = _counting_clock(monkeypatch)
    assert await conn.request("tools/call", {"name": "echo"}, timeout=30) == {"content": []}
    assert read == [*DEADLINE_READS, 1002.0]
    assert conn.last_active == conn.last_answer == 1002.0
    assert conn.in_flight_origins() == []


async def test_a_failed_request_moves_only_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _on(_Answering(MCPError(code=-32602, message="no")))
    read = _counting_clock(monkeypatch)
    with pytest.raises(MCPError) as raised:
        await conn.request("tools/call", {"name": "echo"}, timeout=30)
    assert raised.value.error.message == "no"
    assert read == [*DEADLINE_READS, 1002.0]
    assert conn.last_active == 1002.0 and conn.last_answer == 0.0
