"""A bundled demo upstream for the gateway's own questions: tools and a prompt with required arguments,
and a destructive tool. Written the way the `mcp` SDK's docs write servers (`MCPServer`, decorated
functions), so its `inputSchema`s are what such servers really list. The tests use it as their SDK peer.

Run: `python -m elicitgate.demo.tickets [--http HOST:PORT]` (stdio by default).

- `create_ticket(title, priority, points, urgent, reporter="anon")` -> the arguments it got, as JSON
- `delete_file(path, api_token="")` (destructiveHint) -> "deleted <path>"
- `tag_items(items)` (a free list of strings: no form can ask for it) -> "tagged n"
- `calls()` -> the tools this process ran so far, as JSON (what the gateway let through)
- prompt `review(language, style, focus="")`; completions offer three languages, and for `style` a
  list too long to be choices
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Literal

from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
    ToolAnnotations,
)
from pydantic import Field

from mcp.server.mcpserver import MCPServer

from elicitgate.hostport import parse_hostport

mcp = MCPServer("tickets-demo")
CALLS: list[str] = []


@mcp.tool()
def create_ticket(
    title: Annotated[str, Field(description="One line", min_length=3)],
    priority: Literal["low", "normal", "high"],
    points: Annotated[int, Field(ge=1, le=13)],
    urgent: bool,
    reporter: str = "anon",
) -> str:
    """Open a ticket."""
    CALLS.append("create_ticket")
    return json.dumps(
        {"title": title, "priority": priority, "points": points, "urgent": urgent, "reporter": reporter},
        sort_keys=True,
    )


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_file(path: str, api_token: str = "") -> str:
    """Delete a file for good."""
    CALLS.append("delete_file")
    return f"deleted {path}"


@mcp.tool()
def tag_items(items: list[str]) -> str:
    """Tag some items."""
    CALLS.append("tag_items")
    return f"tagged {len(items)}"


@mcp.tool()
def calls() -> str:
    """The tools called so far."""
    return json.dumps(CALLS)


@mcp.prompt()
def review(language: str, style: str, focus: str = "") -> str:
    """Review code."""
    return f"Review this {language} code in a {style} style{f', focusing on {focus}' if focus else ''}."


@mcp.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: CompletionContext | None
) -> Completion | None:
    if isinstance(ref, PromptReference) and ref.name == "review":
        if argument.name == "language":
            return Completion(values=[v for v in ("python", "rust", "go") if v.startswith(argument.value)])
        if argument.name == "style":
            return Completion(values=["terse", "kind"], total=40, has_more=True)
    return None


if __name__ == "__main__":
    if "--http" in sys.argv:
        host, port = parse_hostport(sys.argv[sys.argv.index("--http") + 1])
        mcp.run("streamable-http", host=host, port=port)
    else:
        mcp.run()
