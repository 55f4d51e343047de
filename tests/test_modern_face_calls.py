"""What a 2026-07-28 client's call through the stdio face no longer calls (issue #34), on a real gateway with the demo
server over stdio behind it as a 2026-07-28 upstream and the face on memory wires: the routed handler is the call's own
coroutine (no frame around it), the endpoint calls the face's handler with no frame of the dispatcher's between, a
call is routed once, and the client's capabilities are read with the envelope (not dumped nor read again for the
call); answers as before, a round of questions and its retry included."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest

from tests.profiled import collector_held, python_calls
from tests.test_pushed_pending import _next  # pyright: ignore[reportPrivateUsage]
from tests.test_stdio_path_calls import demo_face

pytestmark = pytest.mark.anyio

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
NOT_CALLED = ("handle", "_capabilities", "capabilities_dict", "elicitation_modes")
"""(`cast` and `_closed` are left out: the test's own `anyio.fail_after` calls the one, the broker has a `_closed` of
its own; tests/test_unit_modern_face_cost.py pins the face's.)"""


@contextmanager
def _qualnames() -> Iterator[list[str]]:
    """The qualified names of the Python functions the block entered (`sys.setprofile`)."""
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            entered.append(frame.f_code.co_qualname)

    with collector_held():
        sys.setprofile(profile)
        try:
            yield entered
        finally:
            sys.setprofile(None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_modern_call_and_its_round_skip_the_calls_they_do_not_need(tmp_path: Path) -> None:
    async with demo_face(tmp_path, "modern") as client:
        echo = {"name": "demo__echo", "arguments": {"text": "a"}, "_meta": META}
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": echo})
        first = await _next(client, lambda m: m.get("id") == 1)
        with python_calls() as called:
            await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo})
            again = await _next(client, lambda m: m.get("id") == 2)
        assert again["result"] == first["result"] and again["result"]["resultType"] == "complete"
        assert "forward" in called and "_serve_modern" in called and "fitting_envelope" in called
        assert not set(NOT_CALLED) & set(called)
        assert called.count("_routed_for") == 1  # routed once, by `parks_at_once`; `here` takes its route
        with _qualnames() as entered:
            await client.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": echo})
            assert (await _next(client, lambda m: m.get("id") == 5))["result"] == first["result"]
        assert "_serve_modern.<locals>.on_request" in entered
        # the endpoint calls the face's handler with no frame of the dispatcher's between
        assert "EndpointDispatcher.run.<locals>.request" not in entered
        confirm = {"name": "demo__confirm", "arguments": {"question": "Proceed?"}, "_meta": META}
        with python_calls() as called:
            await client.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": confirm})
            asked = (await _next(client, lambda m: m.get("id") == 3))["result"]
            assert asked["resultType"] == "input_required"
            ((key, question),) = asked["inputRequests"].items()
            assert question["method"] == "elicitation/create"
            retry = {**confirm, "requestState": asked["requestState"], "inputResponses": {key: {"action": "decline"}}}
            await client.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": retry})
            done = (await _next(client, lambda m: m.get("id") == 4))["result"]
        assert done["resultType"] == "complete" and "content" in done
        assert not set(NOT_CALLED) & set(called)
