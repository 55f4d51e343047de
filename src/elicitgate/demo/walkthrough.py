"""`elicitgate demo --walkthrough`: a terminal MCP client that calls the demo's eliciting tool
through the gateway and asks you the form's questions (sample answers when stdin is not a TTY)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from mcp import Client
from mcp.client.stdio import StdioServerParameters

SAMPLE = {"name": "Ada", "email": "ada.example.com", "date": "2026-12-24", "guests": "4"}
"""The first sample email is invalid on purpose: the gateway sends the form back with the error."""


def _coerce(prop: dict[str, Any], text: str) -> Any:
    kind = prop.get("type")
    if kind == "integer":
        return int(text) if text.lstrip("-").isdigit() else text
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "boolean":
        return text.lower() in ("y", "yes", "true", "1")
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


async def walkthrough(config_path: str, console: Console) -> None:
    interactive = sys.stdin.isatty()
    attempts = 0

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal attempts
        attempts += 1
        console.print(f"\n[bold cyan]{escape(params.message)}[/bold cyan]")
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="decline")
        schema = params.requested_schema
        content: dict[str, Any] = {}
        for name in schema.get("required", []):
            prop = schema["properties"][name]
            sample = SAMPLE.get(name, "")
            if attempts > 1 and name == "email":
                sample = "ada@example.com"
            text = Prompt.ask(f"  {prop.get('title', name)}", default=sample, console=console) if interactive else sample
            if not interactive:
                console.print(f"  {prop.get('title', name)}: {text}")
            content[name] = _coerce(prop, text)
        return types.ElicitResult(action="accept", content=content)

    gateway = StdioServerParameters(command=sys.executable, args=["-m", "elicitgate.cli", "serve", "-c", config_path])
    async with Client(gateway, mode="legacy", elicitation_callback=answer) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        console.print(f"tools through the gateway: {', '.join(tools)}")
        result = await client.call_tool("demo__book_table", {"restaurant": "Chez Demo"})
        text = result.content[0].text if result.content else ""
        console.print(f"\n[bold green]tool result:[/bold green] {escape(text)}")


def run(config_path: str) -> None:
    anyio.run(walkthrough, config_path, Console())
