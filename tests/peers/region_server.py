"""An upstream written with the official SDK's `MCPServer`, the way its docs write tools: one argument
annotated `x-mcp-header`, which a 2026-07-28 client mirrors into an `Mcp-Param-Region` header."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mcp.server import MCPServer

app = MCPServer("regions")


@app.tool()
def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], note: str = "") -> str:
    """Route a request to a region."""
    return f"routed to {region}"


if __name__ == "__main__":
    app.run()
