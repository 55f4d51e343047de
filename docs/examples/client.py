"""Call an eliciting tool through elicitgate and answer the form from Python.

    python docs/examples/client.py             # runs `elicitgate serve` on docs/examples/elicitgate.json
    python docs/examples/client.py 2026-07-28  # the same, as a stateless 2026-07-28 client

Either way both servers (one handshake-era, one 2026-07-28) are reached: the gateway bridges the eras.
"""

import sys
from pathlib import Path

import anyio
import mcp_types as types

from mcp import Client
from mcp.client.stdio import StdioServerParameters

CONFIG = Path(__file__).with_name("elicitgate.json")
MODE = sys.argv[1] if len(sys.argv) > 1 else "legacy"  # "legacy": the initialize handshake (2025-11-25)


async def answer(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    # The gateway says which server asks: "[demo] Booking at ...".
    print("asked:", params.message)
    return types.ElicitResult(
        action="accept",
        content={"name": "Ada", "email": "ada@example.com", "date": "2026-12-24", "guests": 4},
    )


async def main() -> None:
    gateway = StdioServerParameters(
        command=sys.executable, args=["-m", "elicitgate.cli", "serve", "--config", str(CONFIG)]
    )
    async with Client(gateway, mode=MODE, elicitation_callback=answer) as client:
        print("tools:", ", ".join(sorted(tool.name for tool in (await client.list_tools()).tools)))
        for tool in ("demo__book_table", "modern__book_table"):
            result = await client.call_tool(tool, {"restaurant": "Chez Ada"})
            print(f"{tool}:", result.content[0].text)


anyio.run(main)
