"""A 2026-07-28 client's call on the short path (issue #34): a relayed call served with the observer's and the
requestState boundary's work in its own coroutine (`ModernMethods(..., relay=...)`), a well-formed envelope read with
dict reads (`faces.dispatch.fitting_envelope`), and a parked call's work cancelled without an anyio scope of its own
(`bridging.rounds.CallScope`). In memory: each checks what the longer path did still happens."""

from __future__ import annotations

import secrets
from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY

from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

from elicitgate import _compat
from elicitgate.bridging.rounds import ParkedCall, Rounds
from elicitgate.bridging.sealing import RequestsOnly
from elicitgate.config import BridgingConfig
from elicitgate.contracts import DownstreamPeer
from elicitgate.faces.dispatch import fitting_envelope
from elicitgate.faces.modern import RELAYED_PARAMS, EnvelopeConnection, ModernMethods
from elicitgate.faces.observe import RequestObserver
from elicitgate.logs import current_request

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
FACE = "unit-modern-path"
INFO = {"name": "t", "version": "1"}
CAPABILITIES = {"elicitation": {"form": {}}}
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": INFO,
    "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
}
ROUND = {"q1": {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
}}}


class Context:
    """What the table reads of a dispatch context."""

    request_id = 7
    message_metadata = None


def table() -> tuple[ModernMethods, list[Any]]:
    """A table whose `tools/call` is relayed on the short path, and what its handler saw of each request: the plain
    requestState and the ids on log lines while it ran."""
    observer = RequestObserver(FACE, {"tools/call"})
    boundary = RequestsOnly([secrets.token_bytes(32)], 600)
    modern = ModernMethods(Server("gw", version="1"), (observer, boundary), relay=(observer, boundary))
    seen: list[Any] = []

    async def call(ctx: Any) -> dict[str, Any]:
        seen.append(((ctx.params or {}).get("requestState"), current_request()))
        if (ctx.params or {}).get("inputResponses") is None:
            return {"resultType": "input_required", "inputRequests": ROUND, "requestState": "plain state"}
        return {"content": [{"type": "text", "text": "done"}], "isError": False}

    modern.add("tools/call", call, reads=RELAYED_PARAMS["tools/call"])
    return modern, seen


async def serve(modern: ModernMethods, params: dict[str, Any]) -> dict[str, Any]:
    connection = EnvelopeConnection(_compat.no_channel(), VERSION, INFO, CAPABILITIES)
    return await modern.serve(Context(), "tools/call", params, connection, None)  # type: ignore[arg-type]


def observed() -> float:
    return REGISTRY.get_sample_value(
        "elicitgate_request_duration_seconds_count", {"method": "tools/call", "face": FACE}
    ) or 0.0


async def test_a_relayed_call_is_observed_named_and_its_rounds_sealed_and_unsealed_as_through_the_chain():
    modern, seen = table()
    before = observed()
    params = {"name": "s__confirm", "arguments": {"q": "go?"}, "_meta": META}
    first = await serve(modern, params)
    assert first["resultType"] == "input_required" and first["inputRequests"] == ROUND
    token = first["requestState"]
    assert isinstance(token, str) and token != "plain state"  # sealed: the client never holds the plain state
    done = await serve(modern, {**params, "requestState": token, "inputResponses": {"q1": {"action": "accept"}}})
    assert done["resultType"] == "complete" and done["content"] == [{"type": "text", "text": "done"}]
    assert done["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gw"
    ids = {"request_id": 7, "method": "tools/call", "client": None}
    assert seen == [(None, ids), ("plain state", ids)]  # the retry's handler saw the state unsealed
    assert observed() == before + 2
    assert current_request() is None  # the ids were on the log lines while the request was served, not after
    with pytest.raises(MCPError) as forged:
        await serve(modern, {**params, "requestState": token[:-2] + "AA", "inputResponses": {}})
    assert forged.value.error.message == "Invalid or expired requestState"
    assert len(seen) == 2 and observed() == before + 3  # refused before the handler, and still observed


ENVELOPES: list[Any] = [
    META,
    {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"},
    {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientCapabilities"},
    {k: v for k, v in META.items() if k != "io.modelcontextprotocol/protocolVersion"},
    {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"},
    {**META, "io.modelcontextprotocol/protocolVersion": 20260728},
    {**META, "io.modelcontextprotocol/protocolVersion": None},
    {**META, "io.modelcontextprotocol/protocolVersion": ["2026-07-28"]},
    {**META, "io.modelcontextprotocol/clientCapabilities": None},
    {**META, "io.modelcontextprotocol/clientInfo": "not an object", "progressToken": 3},
    [META],
    "2026-07-28",
    None,
]


@pytest.mark.parametrize("meta", ENVELOPES)
@pytest.mark.parametrize("shape", ["in params", "params not an object", "no params"])
async def test_an_envelope_read_by_hand_is_what_the_sdks_ladder_reads_and_anything_else_goes_to_the_ladder(
    meta: Any, shape: str
):
    params: Any = {"name": "x", "_meta": meta} if shape == "in params" else [meta] if shape != "no params" else None
    route = classify_inbound_request({"method": "tools/call", "params": params})
    fitting = fitting_envelope(params)
    if isinstance(route, InboundLadderRejection):
        assert fitting is None
    else:
        assert fitting == (route.protocol_version, route.client_info, route.client_capabilities)
    if meta is META and shape == "in params":
        assert fitting == (VERSION, INFO, CAPABILITIES)


def request_of(peer: DownstreamPeer) -> Any:
    class Request:
        request_id = 1
        modes = frozenset({"form"})
        tool = "t"
        cancel_requested = False

        def __init__(self) -> None:
            self.peer = peer

        def raw_capabilities(self) -> dict[str, Any]:
            return CAPABILITIES

        async def notify(self, method: str, params: Any) -> None:
            pass

    return Request()


async def test_a_cancelled_parked_call_finishes_its_shielded_step_before_the_cancellation_lands():
    """As a cancel scope around the work would: the work's shielded step (giving back what it borrowed) runs to its
    end, the cancellation lands at its next wait, and the waiting request hears that the call was cancelled."""
    r = Rounds(BridgingConfig())
    steps: list[str] = []
    inside, release = anyio.Event(), anyio.Event()

    async def work(park: ParkedCall) -> dict[str, Any]:
        with anyio.CancelScope(shield=True):
            inside.set()
            await release.wait()
            await anyio.sleep(0)
            steps.append("shielded step done")
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    heard: list[MCPError] = []

    async def first() -> None:
        try:
            await r.start(request_of(DownstreamPeer(id="p", connection=None)), "tools/call", work)  # type: ignore[arg-type]
        except MCPError as exc:
            heard.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await inside.wait()
            (park,) = r.parked.values()
            assert park.scope is not None
            park.scope.cancel()
            for _ in range(5):
                await anyio.sleep(0)  # the cancellation is delivered turn after turn: the shield holds it off
            assert steps == [] and park.outcome is None
            release.set()
    assert steps == ["shielded step done"]
    assert [e.error.message for e in heard] == ["the call was cancelled"]
    assert r.parked == {}
    await r.close()
