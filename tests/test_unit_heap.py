"""The start-up heap (`elicitgate.heap`): no collections while it is built, none of it scanned after."""

from __future__ import annotations

import gc

import pytest

from elicitgate import heap
from tests.conftest import inprocess_gateway

pytestmark = pytest.mark.anyio


def test_hold_stops_collections_until_settle_and_release_is_idempotent() -> None:
    assert gc.isenabled()
    try:
        heap.hold()
        assert not gc.isenabled()
        frozen = gc.get_freeze_count()
        heap.settle()
        assert gc.isenabled() and gc.get_freeze_count() >= frozen
        heap.release()  # nothing held any more: nothing changes
        assert gc.isenabled()
    finally:
        gc.enable()


def test_hold_leaves_collections_off_if_they_were_off_before() -> None:
    gc.disable()
    try:
        heap.hold()
        heap.settle()
        assert not gc.isenabled()  # someone else turned them off: not ours to turn on
    finally:
        gc.enable()


async def test_a_gateway_collects_again_once_its_upstreams_had_their_first_attempt() -> None:
    heap.hold()
    try:
        async with inprocess_gateway({"mcpServers": {}, "audit": {"enabled": False}}):
            assert gc.isenabled()
    finally:
        heap.release()
        gc.enable()
