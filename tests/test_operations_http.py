"""Operations on the HTTP face: /metrics after a scripted run, the audit trail through the admin API,
and JSON log lines, with a TypeScript SDK upstream (written as its docs show) beside an `mcp` SDK one."""

from __future__ import annotations

import json

import httpx2
import pytest

from mcp import Client

from tests.audit_helpers import TYPED, ScriptedHuman, scrape, stored, value
from tests.conftest import PEERS, stdio_server, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.node]

TOKEN = "ops-HMgqF-CXlD5udsW2PyexwZByfVo8z7qJXBbgBg42OoQ"


def api(url: str, path: str, token: str | None = TOKEN) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.get(f"{url}{path}", headers=headers)


@pytest.mark.timeout(300)
async def test_metrics_audit_api_and_json_logs_tell_what_happened(tmp_path, http_gateway):
    config = write_config(
        tmp_path,
        {"ts": {"command": "node", "args": [str(PEERS / "ts" / "elicit_server.mjs")]},
         "x": stdio_server("tests.peers.py_server", era="handshake")},
        elicitation={"rate_limit_burst": 5, "rate_limit_per_minute": 0.01},
        audit={"url": f"sqlite:///{tmp_path / 'audit.db'}"},
        log_format="json",
    )
    gw = http_gateway(config, env={"ELICITGATE_ADMIN_TOKEN": TOKEN})
    human = ScriptedHuman()
    async with Client(f"{gw.url}/mcp", mode="legacy", elicitation_callback=human) as client:
        for message in ("ts-form", "ts-reask", "decline-me"):
            await client.call_tool("ts__ask_form", {"message": message})
        for message in ("cancel-me", "accept-me"):
            await client.call_tool("x__elicit", {"message": message})
        limited = json.loads((await client.call_tool("x__elicit", {"report_errors": True})).content[0].text)
        assert limited["error"]["code"] == -32015  # the sixth elicitation of a burst of five
        assert (await client.call_tool("ts__echo", {"text": "no question"})).content[0].text == "no question"
        metrics = scrape(gw.url)

    def count(server: str, state: str) -> float:
        return value(metrics, "elicitgate_elicitations_total", server=server, mode="form", state=state)

    assert (count("ts", "accepted"), count("ts", "declined"), count("ts", "refused")) == (2, 1, 0)
    assert (count("x", "accepted"), count("x", "cancelled"), count("x", "refused")) == (1, 1, 1)
    assert value(metrics, "elicitgate_refusals_total", server="x", reason="rate_limited") == 1
    assert value(metrics, "elicitgate_elicitation_reasks_total", server="ts") == 1
    assert value(metrics, "elicitgate_elicitation_reasks_total", server="x") == 0
    assert value(metrics, "elicitgate_elicitation_duration_seconds_count", server="ts", mode="form",
                 state="accepted") == 2
    assert value(metrics, "elicitgate_elicitation_duration_seconds_bucket", server="ts", mode="form", state="accepted",
                 le="+Inf") == 2
    assert value(metrics, "elicitgate_elicitations_pending", server="ts") == 0
    assert value(metrics, "elicitgate_upstream_up", server="ts") == 1
    assert value(metrics, "elicitgate_upstream_up", server="x") == 1
    assert value(metrics, "elicitgate_request_duration_seconds_count", method="tools/call", face="http") == 7
    assert value(metrics, "elicitgate_request_duration_seconds_count", method="initialize", face="http") == 1

    # The admin API reads the same trail, once the gateway says its writer (in the background) stored it.
    await stored(gw.url, 6)
    records = api(gw.url, "/api/audit").json()["records"]
    assert [(r["server"], r["state"], r["attempts"]) for r in records] == [
        ("ts", "accepted", 1), ("ts", "accepted", 2), ("ts", "declined", 1), ("x", "cancelled", 1),
        ("x", "accepted", 1), ("x", "refused", 0)]
    assert {r["tool"] for r in records} == {"ts__ask_form", "x__elicit"}
    (refused,) = api(gw.url, "/api/audit?state=refused&server=x").json()["records"]
    assert refused["reason"] == "rate_limited"
    assert refused["detail"] == "elicitation rate limit exceeded for this client"
    assert api(gw.url, "/api/audit?server=ts&limit=1").json()["records"][0]["state"] == "declined"
    assert api(gw.url, f"/api/audit?since={records[-1]['created_at']}").json()["records"] == [refused]
    assert api(gw.url, "/api/audit", token=None).status_code == 401
    bad = api(gw.url, "/api/audit?since=last-week")
    assert bad.status_code == 422 and "ISO 8601" in bad.json()["error"]
    assert api(gw.url, "/api/audit?state=finished").status_code == 422
    assert api(gw.url, "/api/audit?limit=0").status_code == 422
    document = api(gw.url, "/api/openapi.json").json()
    assert "/api/audit" in document["paths"] and "AuditRecord" in document["components"]["schemas"]

    stderr = gw.stop()
    not_json = [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert not_json == [], not_json
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]  # every line is JSON
    ends = [line for line in lines if line.get("event") in ("elicitation.ended", "elicitation.refused")]
    assert [(e["event"], e["state"]) for e in ends] == [("elicitation.ended", r["state"]) for r in records[:5]] + [
        ("elicitation.refused", "refused")]
    assert [e["id"] for e in ends] == [r["id"] for r in records]
    for end in ends:
        assert end["request"]["client"] == end["client_id"]
        assert end["request"]["request_id"] == int(end["request_id"])
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert TYPED not in stderr
