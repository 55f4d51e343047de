"""Fair shares (docs/security.md, "Fair shares"): with `http.auth`, one principal that floods the gateway gets its
own limit's error at its share, and another principal is still served. A real gateway on HTTP with static-token
principals, the `mcp` SDK's client, a real stdio upstream that asks and a human that does not answer."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT, inprocess_gateway, stdio_server
from tests.test_auth import ALICE, BOB, TOKENS, client
from tests.test_broker import Human, accept, text
from tests.test_http_face import HEADERS, initialize

pytestmark = pytest.mark.anyio

CAROL = "carol-gloDeJancM4ylc_gZSV3AlJJ3gYmfZCfVEeE7pH8Vnw"


def fair_config(server: dict[str, Any], **sections: Any) -> dict[str, Any]:
    http = {"auth": {"tokens": [*TOKENS, {"token": CAROL, "principal": "carol"}]}, **sections.pop("http", {})}
    return {"mcpServers": {"py": server}, "http": http, **sections}


def bearer(token: str) -> dict[str, str]:
    return {**HEADERS, "authorization": f"Bearer {token}"}


async def echo(url: str, token: str) -> str:
    """A new session of `token`'s principal (the SDK's client) initializes and calls a tool."""
    async with client(url, token, "legacy") as session:
        result = await session.call_tool("py__echo", {"text": "served"})
        content = result.content[0]
        assert isinstance(content, types.TextContent)
        return content.text


async def test_a_principal_opening_sessions_gets_429_at_its_share_and_others_still_initialize():
    server = stdio_server("tests.peers.py_server", era="handshake", session_policy="shared")
    config = fair_config(server, http={"max_sessions": 4, "max_sessions_per_principal": 3})
    async with inprocess_gateway(config) as gw, httpx2.AsyncClient(base_url=gw.url, timeout=30) as http:
        alice: list[str] = []
        refusals: list[dict[str, Any]] = []
        for _ in range(20):  # a flood: only the share opens
            opened = await http.post("/mcp", json=initialize(), headers=bearer(ALICE))
            if opened.status_code == 200:
                alice.append(opened.headers["mcp-session-id"])
            else:
                assert opened.status_code == 429, opened.text
                refusals.append(opened.json()["error"])
        assert len(alice) == 3 and len(refusals) == 17
        data = refusals[0]["data"]
        assert refusals[0]["message"] == "Too many open sessions for this principal"
        assert data["limit"] == "http.max_sessions_per_principal" and data["value"] == 3 and "fix" in data

        assert await echo(gw.url, BOB) == "served"
        async with client(gw.url, BOB, "legacy") as bob:  # the face holds its 4 sessions now
            # A third principal still gets in: Alice's longest idle session ends to make room (it holds the most).
            assert await echo(gw.url, CAROL) == "served"
            gone = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                   headers={**bearer(ALICE), "mcp-session-id": alice[0]})
            assert gone.status_code == 404
            still = (await bob.call_tool("py__echo", {"text": "still"})).content[0]
            assert isinstance(still, types.TextContent) and still.text == "still"


class Held:
    """A human who is asked (`asked` is set) and answers only once `release` is set."""

    def __init__(self, release: anyio.Event, asked: anyio.Event | None = None) -> None:
        self.asked = asked or anyio.Event()
        self.release = release

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.set()
        await self.release.wait()
        return accept({"answer": "late"})


async def test_a_principal_holding_its_share_of_upstream_sessions_gets_32010_and_another_principal_is_served():
    server = stdio_server("tests.peers.py_server", era="handshake", max_upstream_sessions=4)  # a share of 2
    async with inprocess_gateway(fair_config(server)) as gw:
        link = gw.gateway.links["py"]
        release = anyio.Event()
        refused: list[MCPError] = []
        answered: list[Any] = []

        async def alice_asks(settled: anyio.Event) -> None:
            async with client(gw.url, ALICE, "legacy", elicitation_callback=Held(release, settled)) as session:
                try:
                    answered.append(text(await session.call_tool("py__elicit", {})))
                except MCPError as exc:
                    refused.append(exc)
                    settled.set()
                await release.wait()

        async with anyio.create_task_group() as tg:
            # Alice's sessions each hold a call whose question nobody answers, one after another: the review's
            # flood, past the server's whole cap.
            for _ in range(5):
                settled = anyio.Event()
                tg.start_soon(alice_asks, settled)
                with anyio.fail_after(20):
                    await settled.wait()
            assert len(refused) == 3 and len(link.sessions) == 2
            error = refused[0].error
            assert error.code == -32010 and "max_upstream_sessions_per_principal" in error.message
            assert error.data["limit"] == "mcpServers.py.max_upstream_sessions_per_principal"
            assert error.data["value"] == 2 and "fix" in error.data
            # The rest of the server's sessions are Bob's.
            with anyio.fail_after(20):
                assert await echo(gw.url, BOB) == "served"
            release.set()
        assert answered == [{"action": "accept", "content": {"answer": "late"}}] * 2


async def test_a_principal_at_its_pending_limit_gets_32014_and_another_principals_question_still_reaches_its_human():
    server = stdio_server("tests.peers.py_server", era="handshake")
    config = fair_config(server, elicitation={"max_pending_per_session": 2, "max_pending_total": 3})
    async with inprocess_gateway(config) as gw:
        release = anyio.Event()
        held = [Held(release), Held(release)]

        async def alice_asks(human: Held) -> None:
            async with client(gw.url, ALICE, "legacy", elicitation_callback=human) as session:
                assert text(await session.call_tool("py__elicit", {}))["action"] == "accept"

        async with anyio.create_task_group() as tg:
            for human in held:  # two sessions of Alice's, each with a question open
                tg.start_soon(alice_asks, human)
                with anyio.fail_after(20):
                    await human.asked.wait()
            never = Human()
            async with client(gw.url, ALICE, "legacy", elicitation_callback=never) as third:
                over = text(await third.call_tool("py__elicit", {"report_errors": True}))
            assert never.seen == []
            assert over["error"]["code"] == -32014 and over["error"]["data"]["limit"] == "max_pending_per_session"
            assert over["error"]["data"]["value"] == 2
            assert "elicitation.max_pending_per_session" in over["error"]["data"]["fix"]

            bob = Human(accept({"answer": "bob"}))
            async with client(gw.url, BOB, "legacy", elicitation_callback=bob) as session:
                with anyio.fail_after(20):
                    result = text(await session.call_tool("py__elicit", {}))
            assert result == {"action": "accept", "content": {"answer": "bob"}} and len(bob.seen) == 1
            release.set()
        assert gw.gateway.broker.pending == {}


def test_the_documented_fair_shares_configuration_is_valid():
    from elicitgate.config import build_config

    page = (ROOT / "docs" / "security.md").read_text().split("## Fair shares", 1)[1]
    documented = json.loads(page.split("```json\n", 1)[1].split("```", 1)[0])
    config = build_config(documented, "docs/security.md", environ={})
    assert config.http.principal_share == 50 and config.mcp_servers["files"].principal_share == 4
    assert config.elicitation.max_pending_per_session < config.elicitation.max_pending_total
    servers = {"s": {"command": "s"}, "h": {"url": "http://h/mcp"}}
    defaults = build_config({"mcpServers": servers}, "defaults", environ={})
    assert defaults.http.principal_share == 5000  # the documented defaults: half of each total
    assert defaults.mcp_servers["s"].principal_share == 8 and defaults.mcp_servers["h"].principal_share == 128


@pytest.mark.parametrize(("data", "says"), [
    ({"http": {"max_sessions": 40, "max_sessions_per_principal": 41}},
     "http: Value error, max_sessions_per_principal (41) cannot exceed max_sessions (40)"),
    ({"mcpServers": {"s": {"command": "s", "max_upstream_sessions": 4, "max_upstream_sessions_per_principal": 5}}},
     "mcpServers.s: Value error, max_upstream_sessions_per_principal (5) cannot exceed max_upstream_sessions (4)"),
    ({"elicitation": {"max_pending_total": 32}},
     "elicitation: Value error, max_pending_per_session (32) must be less than max_pending_total (32)"),
])
def test_a_share_that_leaves_no_room_for_others_is_refused_naming_both_keys(data, says):
    from elicitgate.config import build_config
    from elicitgate.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        build_config(data, "test config", environ={})
    assert any(problem.startswith(says) for problem in refused.value.problems), refused.value.problems
