"""The gateway asks on its own: a call without its required arguments, a destructive tool, a prompt.

    python docs/examples/asks_client.py             # runs `elicitgate serve` on docs/examples/asks.json
    python docs/examples/asks_client.py 2026-07-28  # the same, as a stateless 2026-07-28 client
"""

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types

from mcp import Client
from mcp.client.stdio import StdioServerParameters

CONFIG = Path(__file__).with_name("asks.json")
MODE = sys.argv[1] if len(sys.argv) > 1 else "legacy"


async def human(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    print("asked:", params.message)
    fields = params.requested_schema["properties"]
    for name, field in fields.items():
        print(f"  {name}: {field['type']}", *(["one of", ", ".join(field["enum"])] if "enum" in field else []))
    if not fields:  # a confirmation: say no to deleting things
        return types.ElicitResult(action="decline")
    answers = {"priority": "high", "points": 3, "urgent": True, "language": "rust", "style": "terse"}
    return types.ElicitResult(action="accept", content={name: answers[name] for name in fields})


async def main() -> None:
    gateway = StdioServerParameters(command=sys.executable, args=["-m", "elicitgate.cli", "serve", "-c", str(CONFIG)])
    async with Client(gateway, mode=MODE, elicitation_callback=human) as client:
        ticket = await client.call_tool("tickets__create_ticket", {"title": "Printer on fire"})
        print("create_ticket:", ticket.content[0].text)
        deleted = await client.call_tool("tickets__delete_file", {"path": "/srv/old.db", "api_token": "tok-123"})
        print("delete_file:", deleted.content[0].text, "(isError)" if deleted.is_error else "")
        prompt = await client.get_prompt("tickets__review", {})
        print("review:", prompt.messages[0].content.text)
        ran = await client.call_tool("tickets__calls", {})
        print("the server ran:", json.loads(ran.content[0].text))


anyio.run(main)
