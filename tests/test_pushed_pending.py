"""What a question pushed to a handshake-era client over stdio holds while its human thinks (issue #34, design invariant
8: a pending question is a record that carriers attach to, not a suspended call stack): the push is the face
endpoint's future (`Endpoint.asking`), with no `Endpoint.request` frame around it, and the call keeps what it reads of
its request (its id, its tool's name for the audit trail), not the SDK's request context with the decoded params.
And what the frame did still happens: the answer reaches the upstream, the audit record names the tool, and a push
abandoned (the client's `notifications/cancelled`, the deadline, the client gone) ends in its terminal state with the
client told to stop asking.

A real gateway (`Gateway`, its stdio face's `serve_connection`) in this process, over an in-memory wire to a raw
JSON-RPC client, with the demo server over stdio as its upstream."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp.server.context import ServerRequestContext

from elicitgate.audit.record import AuditRecord
from elicitgate.config import build_config
from elicitgate.faces.dispatch import serve_connection
from elicitgate.faces.server import build_server
from elicitgate.gateway import Gateway
from elicitgate.wire.base import Inbound
from elicitgate.wire.memory import MemoryWire
from tests.conftest import stdio_server
from tests.test_unit_frameless_requests import at_once_wires

pytestmark = pytest.mark.anyio

WAIT = 60
"""Seconds any one step may take on a busy machine (an upper bound: every step waits for an event)."""

CALL_ID = 2
TOOL = "demo__confirm"


@dataclass
class Pushed:
    gateway: Gateway
    client: MemoryWire
    push: dict[str, Any]
    """The `elicitation/create` the gateway pushed to the client."""
    records: list[AuditRecord]


async def _next(client: MemoryWire, wanted: Any) -> dict[str, Any]:
    """The next message the gateway sent that `wanted` accepts (log notifications and the like skipped)."""
    with anyio.fail_after(WAIT):
        while True:
            message, _ = await client.receive()
            assert isinstance(message, dict)
            if wanted(message):
                return message


@asynccontextmanager
async def pushed(tmp_path: Path, **demo: Any) -> AsyncIterator[Pushed]:
    """A gateway whose client called `demo__confirm` and holds the question the demo server asked, unanswered."""
    config = {
        "mcpServers": {"demo": stdio_server("elicitgate.demo.server", era="handshake", **demo)},
        "audit": {"url": f"sqlite:///{tmp_path / 'audit.db'}"},
    }
    gateway = Gateway(build_config(config, "test config"))
    records: list[AuditRecord] = []
    assert gateway.audit is not None
    trail = gateway.audit
    keep = trail.record

    def record(made: AuditRecord) -> None:
        records.append(made)
        keep(made)

    trail.record = record  # type: ignore[method-assign]
    face, client = at_once_wires()  # the face writes at once, as the gateway's pipe does when it has room
    async with gateway.running(), anyio.create_task_group() as tg:
        server = build_server(gateway, face="stdio")
        tg.start_soon(serve_connection, server, face, server.create_initialization_options(), server.routes,
                      server.modern)
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "raw", "version": "1"}}})
        await _next(client, lambda m: m.get("id") == 1)
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await client.send({"jsonrpc": "2.0", "id": CALL_ID, "method": "tools/call",
                           "params": {"name": TOOL, "arguments": {"question": "Proceed?"}}})
        push = await _next(client, lambda m: m.get("method") == "elicitation/create")
        try:
            yield Pushed(gateway, client, push, records)
        finally:
            client.close()
            tg.cancel_scope.cancel()


async def _recorded(records: list[AuditRecord]) -> AuditRecord:
    """The question's audit record, handed to the trail one event-loop turn after its end."""
    with anyio.fail_after(WAIT):
        while not records:
            await anyio.sleep(0.01)
    (made,) = records
    return made


def _stacks() -> list[list[object]]:
    """Every task's chain of awaits, outermost first: coroutines, and what the innermost waits on."""
    stacks: list[list[object]] = []
    for task in asyncio.all_tasks():
        chain: list[object] = []
        awaited: Any = task.get_coro()
        while awaited is not None:
            chain.append(awaited)
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        stacks.append(chain)
    return stacks


def _name(awaited: object) -> str:
    code = getattr(awaited, "cr_code", None) or getattr(awaited, "gi_code", None)
    return code.co_qualname if code is not None else type(awaited).__name__


async def test_a_pushed_question_holds_no_request_frame_and_its_answer_goes_up_and_is_audited(tmp_path: Path) -> None:
    async with pushed(tmp_path) as p:
        stacks = _stacks()
        names = [[_name(awaited) for awaited in chain] for chain in stacks]
        assert not any("Endpoint.request" in chain for chain in names), names
        # The broker waits on the face endpoint's future itself: no coroutine between them.
        (waiting,) = [chain for chain in stacks if any(_name(a) == "Broker.elicit" for a in chain)]
        assert _name(waiting[-2]) == "Broker.elicit" and _name(waiting[-1]) == "FutureIter", names
        await p.client.send({"jsonrpc": "2.0", "id": p.push["id"],
                             "result": {"action": "accept", "content": {"ok": True}}})
        answer = await _next(p.client, lambda m: m.get("id") == CALL_ID)
        assert answer["result"]["content"][0]["text"] == "confirm: accepted {'ok': True}"  # the upstream had it
        made = await _recorded(p.records)
        assert (made.tool, made.state, made.responder, made.request_id) == (TOOL, "accepted", "client", str(CALL_ID))
        assert p.gateway.broker.pending == {}


async def test_a_pushed_questions_call_keeps_its_tool_name_not_the_sdks_context_of_its_request(tmp_path: Path) -> None:
    async with pushed(tmp_path) as p:
        (el,) = p.gateway.broker.pending.values()
        gc.collect()
        # Not the context (its decoded params, a session of its own) for as long as the human takes.
        assert not [ctx for ctx in gc.get_objects() if isinstance(ctx, ServerRequestContext)
                    and ctx.method == "tools/call"]
        # Nor the decoded message: the face's endpoint keeps the request's id beside an empty message (no token).
        (served,) = [inbound for inbound in gc.get_objects() if isinstance(inbound, Inbound)
                     and inbound.served_id == CALL_ID]
        assert served.message == {}
        call = el.asked()
        assert (call.tool, call.request_id, call.era, call.modes) == (TOOL, CALL_ID, "handshake", frozenset({"form"}))
        assert not call.cancel_requested
        await p.client.send({"jsonrpc": "2.0", "id": p.push["id"], "result": {"action": "decline"}})
        answer = await _next(p.client, lambda m: m.get("id") == CALL_ID)
        assert answer["result"]["content"][0]["text"] == "confirm: decline"
        made = await _recorded(p.records)
        assert (made.tool, made.state) == (TOOL, "declined")


async def test_a_call_the_client_cancels_withdraws_its_push_and_is_audited_cancelled(tmp_path: Path) -> None:
    async with pushed(tmp_path) as p:
        await p.client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": CALL_ID, "reason": "changed my mind"}})
        withdrawn = await _next(p.client, lambda m: m.get("method") == "notifications/cancelled")
        assert withdrawn["params"]["requestId"] == p.push["id"]
        made = await _recorded(p.records)
        assert (made.tool, made.state) == (TOOL, "cancelled")
        assert p.gateway.broker.pending == {}


async def test_a_push_past_its_deadline_is_withdrawn_and_audited_timed_out(tmp_path: Path) -> None:
    async with pushed(tmp_path, elicitation_timeout=1) as p:
        withdrawn = await _next(p.client, lambda m: m.get("method") == "notifications/cancelled")
        assert withdrawn["params"] == {"requestId": p.push["id"], "reason": "caller cancelled"}
        answer = await _next(p.client, lambda m: m.get("id") == CALL_ID)
        assert answer.get("error") or answer["result"].get("isError"), answer
        made = await _recorded(p.records)
        assert (made.tool, made.state) == (TOOL, "timed_out")
        assert p.gateway.broker.pending == {}


async def test_a_push_whose_client_went_away_ends_cancelled(tmp_path: Path) -> None:
    async with pushed(tmp_path) as p:
        p.client.close()  # the client's end of the pipe: the face's connection ends
        made = await _recorded(p.records)
        assert (made.tool, made.state) == (TOOL, "cancelled")
        assert made.reason == "the client disconnected"
        assert p.gateway.broker.pending == {}
