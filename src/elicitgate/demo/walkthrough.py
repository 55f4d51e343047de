"""`elicitgate demo --walkthrough`: a terminal MCP client that calls the demo's eliciting tool
through the gateway and asks you the form's questions (scripted sample answers, said so, when stdin is not a
terminal)."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from typing import Any

import anyio
import mcp_types as types
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from elicitgate.json_shapes import JsonObject

SAMPLE = {"name": "Ada", "email": "ada.example.com", "date": "2026-12-24", "guests": "4"}
"""The first sample email is invalid on purpose: the gateway sends the form back with the error."""


def _coerce(prop: JsonObject, text: str) -> Any:
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


SCRIPTED_NOTE = (
    "stdin is not a terminal, so the walkthrough plays scripted sample answers (the first email is wrong on "
    "purpose); run `elicitgate demo --walkthrough` in a terminal to type your own."
)


async def walkthrough(config_path: str, console: Console) -> None:
    interactive = sys.stdin.isatty()
    if not interactive:
        console.print(f"[yellow]{escape(SCRIPTED_NOTE)}[/yellow]")
    attempts = 0
    typed: dict[str, str] = {}
    """What the person answered last: a re-ask offers it again, as the terminal inbox does, not the samples."""

    async def answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal attempts
        attempts += 1
        console.print(f"\n[bold cyan]{escape(params.message)}[/bold cyan]")
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="decline")
        schema = params.requested_schema
        content: JsonObject = {}
        for name in schema.get("required", []):
            prop = schema["properties"][name]
            label = f"  {prop.get('title', name)}"
            if interactive:
                text = typed[name] = Prompt.ask(label, default=typed.get(name, SAMPLE.get(name, "")), console=console)
            else:
                text = "ada@example.com" if attempts > 1 and name == "email" else SAMPLE.get(name, "")
                console.print(f"{label}: {text} [dim](scripted)[/dim]")
            content[name] = _coerce(prop, text)
        return types.ElicitResult(action="accept", content=content)

    params = StdioServerParameters(command=sys.executable, args=["-m", "elicitgate.cli", "serve", "-c", config_path])
    # The gateway's own log (audit events included) goes to a file, not between the questions.
    with tempfile.TemporaryFile("w+", encoding="utf-8") as gateway_log:
        try:
            async with Client(
                stdio_client(params, errlog=gateway_log), mode="legacy", elicitation_callback=answer
            ) as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                console.print(f"tools through the gateway: {', '.join(tools)}")
                try:
                    result = await client.call_tool("demo__book_table", {"restaurant": "Chez Demo"})
                except MCPError as exc:
                    after = (
                        f" after {attempts} invalid answers (elicitation.max_answer_attempts)" if attempts > 1 else ""
                    )
                    console.print(f"\n[bold red]the server gave up{after}:[/bold red] {escape(exc.message)}")
                    raise WalkthroughFailed from None
                first = result.content[0] if result.content else None
                text = first.text if isinstance(first, types.TextContent) else ""
                label = (
                    "[bold red]tool error:[/bold red]" if result.is_error else "[bold green]tool result:[/bold green]"
                )
                console.print(f"\n{label} {escape(text)}")
                if result.is_error:
                    raise WalkthroughFailed
        except* (OSError, MCPError) as group:  # the gateway itself did not start or went away
            gateway_log.seek(0)
            tail = "".join(gateway_log.readlines()[-20:])
            console.print(f"[bold red]the gateway failed:[/bold red] {escape(str(group.exceptions[0]))}")
            if tail:
                console.print(escape(tail), highlight=False)
            raise WalkthroughFailed from None


class WalkthroughFailed(Exception):
    """Said to the person already; the command exits 1."""


def _exit_now(signum: int, frame: Any) -> None:
    # A blocking prompt does not return to the event loop, so cancelling it would wait for the gateway's
    # shutdown; the gateway (same terminal, same Ctrl-C) and its servers end on their own.
    sys.stdout.write("\ninterrupted\n")
    sys.stdout.flush()
    os._exit(130)


def run(config_path: str) -> int:
    """Run the walkthrough; the exit code (0 done, 1 failed, 130 Ctrl-C)."""
    previous = signal.signal(signal.SIGINT, _exit_now)
    code = 0
    try:
        anyio.run(walkthrough, config_path, Console())
    except* WalkthroughFailed:
        code = 1
    finally:
        signal.signal(signal.SIGINT, previous)
    return code
