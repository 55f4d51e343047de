"""A handshake-era `mcp` SDK client that calls one tool asking a question, says `ASKED` on stdout when the
question arrives, and never answers: the test kills it (SIGKILL, no DELETE) while the question is pending.

Run: `python -m tests.peers.waiting_client URL TOOL`.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types

from mcp import Client


async def main(url: str, tool: str) -> None:
    async def never(ctx: Any, params: Any) -> types.ElicitResult:
        print("ASKED", flush=True)
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    async with Client(url, mode="legacy", elicitation_callback=never) as client:
        print("READY", flush=True)
        await client.call_tool(tool, {})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
