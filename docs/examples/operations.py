"""A scripted run through elicitgate, then what operations see of it: /metrics, and the audit trail.

    python docs/examples/operations.py    # runs `elicitgate serve` on docs/examples/operations.json

The gateway's JSON log lines (one per elicitation end) go to this script's stderr.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import mcp_types as types

from mcp import Client
from mcp.client.stdio import StdioServerParameters

CONFIG = Path(__file__).with_name("operations.json")
SIDE = os.environ.get("ELICITGATE_HTTP__HOSTED_LISTEN") or json.loads(CONFIG.read_text())["http"]["hosted_listen"]
ANSWERS = iter(["accept", "decline"])


async def answer(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    action = next(ANSWERS)
    if action == "accept":
        return types.ElicitResult(action="accept", content={"ok": True})
    return types.ElicitResult(action=action)


async def main() -> None:
    gateway = StdioServerParameters(
        command=sys.executable, args=["-m", "elicitgate.cli", "serve", "--config", str(CONFIG)], env=dict(os.environ)
    )
    async with Client(gateway, mode="legacy", elicitation_callback=answer) as client:
        for question in ("Deploy to production?", "Drop the staging database?"):
            result = await client.call_tool("demo__confirm", {"question": question})
            print("tool:", result.content[0].text)
        metrics = httpx2.get(f"http://{SIDE}/metrics").text
        for line in metrics.splitlines():
            if line.startswith(("elicitgate_elicitations_total", "elicitgate_upstream_up")):
                print("metric:", line)
        # The trail is written in the background (the store opens at its first record): wait until both
        # records are stored, so that it does not matter how soon the client stops the gateway.
        with anyio.fail_after(60):
            while "elicitgate_audit_records_written_total 2.0" not in httpx2.get(f"http://{SIDE}/metrics").text:
                await anyio.sleep(0.1)
    # The audit trail is read from the store: the gateway need not be running.
    listed = subprocess.run(
        [sys.executable, "-m", "elicitgate.cli", "audit", "list", "--config", str(CONFIG), "--format", "jsonl"],
        capture_output=True, text=True, check=True,
    )
    for line in listed.stdout.splitlines()[-2:]:
        record = json.loads(line)
        print("audit:", record["tool"], record["state"], record["reason"], f"{record['duration_s']}s")


anyio.run(main)
