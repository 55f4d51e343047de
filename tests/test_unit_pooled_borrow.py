"""A per-call client's pooled upstream connection (`upstreams.client_connections`), taken and given back at once.

A 2026-07-28 client's every call in front of a handshake-era upstream borrows a per-client connection from the pool
and gives it back as the call ends. When one is free that needs no wait: no lock, no loop turn, no shielded scope.
The connection here is a stand-in with what the pool reads of one (the real ones: tests/test_routing.py)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import anyio
import pytest

from elicitgate.config import StdioServer
from elicitgate.contracts import DownstreamPeer
from elicitgate.upstreams.client_connections import ClientConnections, _pool_key  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio


class _Connection:
    """What `ClientConnections` reads of an `UpstreamConnection`."""

    def __init__(self) -> None:
        self.closed = anyio.Event()
        self.owner: DownstreamPeer | None = None
        self.pool_key = ""
        self.negotiated = None
        self.in_flight: list[object] = []
        self.closes = 0

    def in_flight_origins(self) -> list[object]:
        return self.in_flight

    def touch(self) -> None:
        pass

    async def close(self) -> None:
        self.closes += 1
        self.closed.set()


class _Envelope:
    client_capabilities = None


def _peer(name: str) -> DownstreamPeer:
    return DownstreamPeer(id=name, connection=_Envelope(), per_call=True)  # type: ignore[arg-type]


def _done_at_once(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` to its end in one step: it must not yield to the loop (a lock's checkpoint would)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError("it waited for a turn of the loop")


async def _pool_with_one() -> tuple[ClientConnections, list[_Connection]]:
    opened: list[_Connection] = []

    async def open_connection(peer: DownstreamPeer, capabilities: Any) -> Any:
        opened.append(_Connection())
        return opened[-1]

    config = StdioServer(command="true")
    connections = ClientConnections("up", config, open_connection, lambda: None, None, lambda _peer: False)
    return connections, opened


async def test_a_per_call_client_takes_a_free_pooled_connection_without_waiting():
    async with anyio.create_task_group() as tasks:
        connections, opened = await _pool_with_one()
        connections.task_group = tasks
        first = _peer("m1")
        conn = await connections.connection_for(first)  # none free: opened for it
        assert opened == [conn] and conn.owner is first
        assert connections.give_back(first)
        assert conn.owner is None and connections.connection_of(first) is None

        second = _peer("m2")
        assert _done_at_once(connections.connection_for(second)) is conn  # the same one, at once
        assert conn.owner is second and connections.connection_of(second) is conn
        assert len(opened) == 1 and connections.sessions == {conn}
        assert connections.give_back(second)
        tasks.cancel_scope.cancel()


async def test_a_connection_that_cannot_go_back_to_the_pool_is_left_for_release_to_close():
    async with anyio.create_task_group() as tasks:
        connections, _ = await _pool_with_one()
        connections.task_group = tasks
        peer = _peer("m1")
        conn = await connections.connection_for(peer)
        conn.closed.set()  # the upstream process ended during the call
        assert not connections.give_back(peer)
        assert connections.connection_of(peer) is conn  # still owned: `release_peer` closes it
        await connections.release_peer(peer)
        assert conn.closes == 1 and connections.connection_of(peer) is None

        again = _peer("m2")
        other = await connections.connection_for(again)
        other.in_flight.append(object())  # a request of the call still in flight: not reused by the next call
        assert not connections.give_back(again)
        assert connections.connection_of(again) is other
        tasks.cancel_scope.cancel()


async def test_a_client_that_holds_nothing_has_nothing_to_give_back():
    connections, opened = await _pool_with_one()
    assert connections.give_back(_peer("m1")) and opened == []


def test_a_pool_key_is_made_for_capabilities_orjson_does_not_write() -> None:
    """The codec reads integers beyond 64 bits and deep nesting (the standard library's way): a client declaring such
    a sampling capability still gets its pooled connections, keyed alike whatever order its keys came in."""
    big = {"sampling": {"n": 2**70, "a": 1}, "elicitation": {"form": {}}}
    assert _pool_key(big) == _pool_key({"elicitation": {"form": {}}, "sampling": {"a": 1, "n": 2**70}})
    assert str(2**70) in _pool_key(big)
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(300):
        inner["x"] = {}
        inner = inner["x"]  # type: ignore[assignment]
    assert _pool_key({"roots": deep}).count("{") == 302
    assert _pool_key({"elicitation": {"form": {}}}) == '{"elicitation":{"form":{}}}'
