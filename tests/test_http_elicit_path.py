"""A handshake-era elicitation over HTTP end to end: the `mcp` SDK's client (streamable HTTP, `legacy` mode) in front
of `elicitgate serve --http`, in front of the bundled demo server over streamable HTTP. The question comes on the
call's POST as an SSE event (its stream parked with no task), the answer on a POST of its own, the result and the
stream's end last: calls one after another, answered in turns, each with its own result, with quick calls between,
and the gateway holds nothing of them once they are done (faces/http_session.py pushes the client's messages,
web/http_protocol.py writes a response's end and an event put from a callback in the step that writes them)."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types as types
import pytest

from mcp import Client

from tests.conftest import write_config

pytestmark = pytest.mark.anyio

ADMIN = "http-elicit-path-1f9Qy2Yb0c4GmV8sLwZt7rKpXuNaEo3J6dHiB5qTvCe"


async def test_handshake_elicitations_over_http_end_to_end(
    tmp_path: Any, http_upstream: Any, http_gateway: Any
) -> None:
    demo = http_upstream("elicitgate.demo.server")
    config = write_config(tmp_path, {"demo": {"url": f"{demo.url}/mcp", "era": "handshake"}})
    gateway = http_gateway(config, env={"ELICITGATE_ADMIN_TOKEN": ADMIN})
    asked: list[str] = []
    answers = iter([True, False, True, None])

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        ok = next(answers)
        if ok is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"ok": ok})

    async with Client(f"{gateway.url}/mcp", mode="legacy", elicitation_callback=answer) as client:
        texts: list[str] = []
        for number in range(4):
            result = await client.call_tool("demo__confirm", {"question": f"Proceed {number}?"})
            texts.append(result.content[0].text)  # pyright: ignore[reportAttributeAccessIssue]
            echoed = await client.call_tool("demo__echo", {"text": f"between {number}"})
            assert "between" in echoed.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
        assert asked == [f"[demo] Proceed {number}?" for number in range(4)]
        assert texts == [
            "confirm: accepted {'ok': True}",
            "confirm: accepted {'ok': False}",
            "confirm: accepted {'ok': True}",
            "confirm: decline",
        ]
    async with httpx2.AsyncClient(base_url=gateway.url, headers={"authorization": f"Bearer {ADMIN}"}) as admin:
        pending = await admin.get("/api/elicitations")
        assert pending.status_code == 200 and pending.json()["elicitations"] == []
