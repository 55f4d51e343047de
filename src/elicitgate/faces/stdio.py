"""The stdio face: one client on our stdin / stdout."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from elicitgate.faces.server import build_server
from elicitgate.gateway import Gateway


async def serve_stdio(gateway: Gateway) -> None:
    server = build_server(gateway)
    async with gateway.running(), stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
