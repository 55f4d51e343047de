"""The bundled demo upstream: a small MCP server (official `mcp` SDK) whose tools elicit.

Run it directly with `python -m elicitgate.demo.server` (stdio), or
`python -m elicitgate.demo.server --http 127.0.0.1:8765` (streamable HTTP at /mcp).
"""

from __future__ import annotations

from elicitgate import codecache, heap

if __name__ == "__main__":
    # Run as the server (not imported): no garbage collection while the SDK's imports below build their ~90,000
    # objects, only to walk them again and again (~0.06 s of the ~0.45 s they take); `run_server` settles the heap.
    heap.hold()
    codecache.install("demo")  # the code its imports generate, compiled at an earlier start (`run_server` ends it)

import mcp_types as types  # noqa: E402
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402

from mcp.server.context import ServerRequestContext  # noqa: E402
from mcp.server.lowlevel.server import Server  # noqa: E402
from mcp.shared.message import ServerMessageMetadata  # noqa: E402

from elicitgate.demo.serving import serve_main  # noqa: E402
from elicitgate.json_shapes import JsonObject  # noqa: E402

BOOKING_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "date": {"type": "string", "format": "date", "title": "Date"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 12, "default": 2},
        "seating": {
            "type": "string",
            "oneOf": [{"const": "inside", "title": "Inside"}, {"const": "terrace", "title": "Terrace"}],
            "default": "inside",
        },
        "extras": {
            "type": "array",
            "items": {"type": "string", "enum": ["cake", "flowers", "wine"]},
            "maxItems": 2,
        },
        "newsletter": {"type": "boolean", "default": False},
    },
    "required": ["name", "email", "date", "guests"],
}

TOOLS = [
    types.Tool(
        name="book_table",
        description="Book a table; asks the user for the booking details.",
        input_schema={"type": "object", "properties": {"restaurant": {"type": "string"}}},
    ),
    types.Tool(
        name="confirm",
        description="Ask the user a yes / no question.",
        input_schema={"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
    ),
    types.Tool(
        name="connect_account",
        description="Send the user to a page (URL-mode elicitation).",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="slow_count",
        description="Counts to n with progress notifications.",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    ),
    types.Tool(
        name="echo",
        description="Echoes its text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    ),
]


async def ask(
    ctx: ServerRequestContext, params: types.CallToolRequestParams, request: types.ElicitRequestParams
) -> types.ElicitResult | types.InputRequiredResult:
    """One elicitation in whichever era the caller speaks: pushed on a session (2025-06-18 /
    2025-11-25) or returned as an InputRequiredResult that the client answers on a retry (2026-07-28)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        result = await ctx.session.send_request(types.ElicitRequest(params=request), types.ElicitResult,
                                                metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
        return result
    if params.input_responses and "ask" in params.input_responses:
        return types.ElicitResult.model_validate(params.input_responses["ask"], from_attributes=True)
    return types.InputRequiredResult(input_requests={"ask": types.ElicitRequest(params=request)}, request_state="demo")


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    args = params.arguments or {}
    if params.name == "echo":
        return _text(str(args.get("text", "")))
    if params.name == "book_table":
        request = types.ElicitRequestFormParams(
            message=f"Booking at {args.get('restaurant', 'Chez Demo')}: who, when, how many?",
            requested_schema=BOOKING_SCHEMA,
        )
    elif params.name == "confirm":
        request = types.ElicitRequestFormParams(
            message=str(args.get("question", "Are you sure?")),
            requested_schema={
                "type": "object", "properties": {"ok": {"type": "boolean", "title": "Yes?"}}, "required": ["ok"]
            },
        )
    elif params.name == "connect_account":
        request = types.ElicitRequestURLParams(
            message="Connect your account", url="https://example.com/connect", elicitation_id="demo-connect-1"
        )
    else:
        request = None
    if request is not None:
        answer = await ask(ctx, params, request)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        if answer.action != "accept":
            return _text(f"{params.name}: {answer.action}")
        return _text(f"{params.name}: accepted {answer.content or {}}")
    if params.name == "slow_count":
        n = int(args.get("n", 3))
        for i in range(1, n + 1):
            await ctx.session.report_progress(i, n, f"step {i}")
        return _text(f"counted to {n}")
    raise ValueError(f"unknown tool {params.name}")


def build_demo_server() -> Server:
    return Server("elicitgate-demo", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    serve_main(build_demo_server, __doc__)


if __name__ == "__main__":
    main()
