"""A server's pushed question is answered before its end is recorded (issue #34, the stdio handshake elicit row): the
upstream's pipe endpoint writes the answer in its handler task's done callback (`Endpoint._answer_direct`, no task
per answer), and the broker's metrics, log line and audit record of the end follow it, from the same task's next done
callback (`Broker._after_answer`). Each still comes, once per question, in that order."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import anyio
import mcp_types as types
import pytest
from prometheus_client import REGISTRY

from mcp import Client

from elicitgate.audit.record import AuditRecord
from elicitgate.audit.trail import AuditTrail
from elicitgate.json_shapes import JsonObject
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.stdio import LineReader, PipeWire, WriteFlow
from tests.conftest import PY, inprocess_gateway

pytestmark = pytest.mark.anyio

SERVER = "after"
"""The upstream's name here: the metrics' label, which no other test uses (the registry is the process's)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def counted(state: str) -> float:
    labels = {"server": SERVER, "mode": "form", "state": state}
    return REGISTRY.get_sample_value("elicitgate_elicitations_total", labels) or 0.0


def timed(state: str) -> float:
    labels = {"server": SERVER, "mode": "form", "state": state}
    return REGISTRY.get_sample_value("elicitgate_elicitation_duration_seconds_count", labels) or 0.0


def pending() -> float:
    return REGISTRY.get_sample_value("elicitgate_elicitations_pending", {"server": SERVER}) or 0.0


class _Events(logging.Handler):
    """The audit logger's lifecycle events, in the order of everything else the test sees."""

    def __init__(self, events: list[tuple[Any, ...]], state: str) -> None:
        super().__init__()
        self.events = events
        self.state = state

    def emit(self, record: logging.LogRecord) -> None:
        if (event := getattr(record, "eg_event", None)) is not None:  # not the audit trail's own lines
            self.events.append(("log", event, counted(self.state)))


async def _accept(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "yes"})


async def _fail(ctx: Any, params: Any) -> types.ErrorData:
    return types.ErrorData(code=-32603, message="the client could not show it")


@pytest.mark.parametrize(("answer", "state", "written"), [(_accept, "accepted", "accept"), (_fail, "failed", "error")],
                         ids=["accepted", "failed"])
async def test_a_pushed_questions_answer_reaches_the_server_before_its_metrics_log_line_and_audit_record(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, answer: Any, state: str, written: str
) -> None:
    events: list[tuple[Any, ...]] = []
    send, send_now, record = PipeWire.send, PipeWire.send_now, AuditTrail.record

    def note_written(message: JsonObject) -> None:
        result = message.get("result")
        if isinstance(result, dict) and "action" in result:  # an ElicitResult, to the upstream
            events.append(("answer written", result["action"], counted(state), timed(state)))
        elif "error" in message and "method" not in message:  # the gateway's error for the upstream's request
            events.append(("answer written", "error", counted(state), timed(state)))

    async def spied_send(self: PipeWire, message: JsonObject, headers: Any = None) -> None:
        await send(self, message, headers)
        note_written(message)

    def spied_send_now(self: PipeWire, message: JsonObject) -> bool:
        if sent := send_now(self, message):  # the answer written in its handler's done callback, no task
            note_written(message)
        return sent

    def spied_record(self: AuditTrail, kept: AuditRecord) -> None:
        events.append(("audit", kept.state, counted(state), timed(state)))
        record(self, kept)

    monkeypatch.setattr(PipeWire, "send", spied_send)
    monkeypatch.setattr(PipeWire, "send_now", spied_send_now)
    monkeypatch.setattr(AuditTrail, "record", spied_record)
    handler = _Events(events, state)
    audit_log = logging.getLogger("elicitgate.audit")
    level = audit_log.level
    audit_log.addHandler(handler)
    audit_log.setLevel(logging.INFO)

    upstream = {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", SERVER], "era": "handshake"}
    config = {"mcpServers": {SERVER: upstream}, "audit": {"url": f"sqlite:///{tmp_path / 'audit.db'}"}}
    before, before_timed = counted(state), timed(state)
    try:
        async with inprocess_gateway(config) as gw:
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=answer) as client:
                for _ in range(3):
                    with anyio.fail_after(60):
                        result = await client.call_tool(f"{SERVER}__elicit", {"report_errors": True})
                    assert not result.is_error, result
                    with anyio.fail_after(30):
                        while not events or events[-1][0] != "audit":
                            await anyio.sleep(0.01)
            broker = gw.gateway.broker
            assert broker.pending == {}
            assert [s["state"] for s in broker.recent if s["server"] == SERVER][-3:] == [state] * 3
    finally:
        audit_log.removeHandler(handler)
        audit_log.setLevel(level)
    expected: list[tuple[Any, ...]] = []
    for n in range(3):
        done = before + n
        expected += [
            ("answer written", written, done, before_timed + n),  # the server has its answer: nothing counted yet
            ("log", "elicitation.ended", done + 1),  # then the metrics, the log line and the audit record
            ("audit", state, done + 1, before_timed + n + 1),
        ]
    assert events == expected
    assert pending() == 0


async def test_an_upstream_pipe_endpoint_writes_its_answer_in_the_handler_tasks_done_callback() -> None:
    """What the broker's `_after_answer` rests on: a callback the handler adds to its own task runs after the answer
    is in the pipe (before, a task of its own wrote it, after every done callback)."""
    loop = asyncio.get_running_loop()
    to_us_read, to_us_write = os.pipe()
    to_peer_read, to_peer_write = os.pipe()
    os.set_blocking(to_peer_read, False)
    reader, flow = LineReader(), WriteFlow()
    read_transport, _ = await loop.connect_read_pipe(lambda: reader, os.fdopen(to_us_read, "rb", 0))
    write_transport, _ = await loop.connect_write_pipe(lambda: flow, os.fdopen(to_peer_write, "wb", 0))
    endpoint = Endpoint(PipeWire(reader, write_transport, flow), "upstream 'u'")
    seen: list[bytes] = []
    looked = anyio.Event()

    def look(_task: object) -> None:
        try:
            seen.append(os.read(to_peer_read, 65536))
        except BlockingIOError:
            seen.append(b"")
        looked.set()

    async def handle(inbound: Inbound, method: str, params: JsonObject | None) -> JsonObject:
        task = asyncio.current_task()
        assert task is not None
        task.add_done_callback(look)
        return {"action": "accept", "content": {"n": 1}}

    async def ignore(inbound: Inbound, method: str, params: JsonObject | None) -> None:
        return None

    def on_request(inbound: Inbound, method: str, params: JsonObject | None) -> Any:
        return handle(inbound, method, params)

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(endpoint.run, on_request, ignore)
            os.write(to_us_write, b'{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}\n')
            with anyio.fail_after(10):
                await looked.wait()
            tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()
        os.close(to_us_write)
        os.close(to_peer_read)
    assert seen == [b'{"jsonrpc":"2.0","id":7,"result":{"action":"accept","content":{"n":1}}}\n']
