"""A server written exactly the way the `mcp` SDK's docs write servers: `MCPServer`, a tool that asks with
`ctx.elicit(message, Model)`, a tool that samples with `ctx.session.create_message(...)`.

Push-style: it speaks both eras, but its elicitation and sampling only work in the handshake era (in
2026-07-28 they raise "no back-channel"); through elicitgate they work for clients of both eras
(docs/routing.md). Run: `python docs/examples/restaurant.py [--http HOST:PORT]` (stdio by default).
"""

from __future__ import annotations

import argparse

from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent

mcp = MCPServer(name="Restaurant")


class BookingPreferences(BaseModel):
    """Schema for collecting user preferences."""

    checkAlternative: bool = Field(description="Would you like to check another date?")
    alternativeDate: str = Field(default="2024-12-26", description="Alternative date (YYYY-MM-DD)")


@mcp.tool()
async def book_table(date: str, time: str, party_size: int, ctx: Context) -> str:
    """Book a table with date availability check."""
    if date == "2024-12-25":
        result = await ctx.elicit(
            message=f"No tables available for {party_size} on {date}. Would you like to try another date?",
            schema=BookingPreferences,
        )
        if result.action == "accept" and result.data:
            if result.data.checkAlternative:
                return f"[SUCCESS] Booked for {result.data.alternativeDate}"
            return "[CANCELLED] No booking made"
        return "[CANCELLED] Booking cancelled"
    return f"[SUCCESS] Booked for {date} at {time}"


@mcp.tool()
async def generate_poem(topic: str, ctx: Context) -> str:
    """Generate a poem using LLM sampling."""
    prompt = f"Write a short poem about {topic}"
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
    )
    if result.content.type == "text":
        return result.content.text
    return str(result.content)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT")
    args = parser.parse_args()
    if args.http:
        host, _, port = args.http.rpartition(":")
        mcp.run(transport="streamable-http", host=host, port=int(port))
    else:
        mcp.run()
