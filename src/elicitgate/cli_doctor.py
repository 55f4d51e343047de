"""`elicitgate doctor`: every server in a config started, asked what it offers (and whether it also
serves the other era), and the answers shown with why a server failed; with `--notify`, a test notice to
every notice target."""

from __future__ import annotations

import logging
import shutil
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import typer

from elicitgate.config import GatewayConfig
from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from elicitgate.upstreams.link import UpstreamLink


def report(cfg: GatewayConfig, config: Path, notify: bool) -> None:
    """Start the servers of `cfg` (read from `config`), show what each offers, and exit 0 when every one is up
    (and, with `notify`, every notice target took its test notice), else 1."""
    logging.basicConfig(level=logging.CRITICAL)  # the report below says it all, once
    rows = anyio.run(_doctor, cfg)
    notices = _doctor_notices(cfg) if notify else []
    width = min(shutil.get_terminal_size().columns, 100)

    def show(text: str, indent: str = "") -> None:
        typer.echo(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                                 break_long_words=False, break_on_hyphens=False))

    typer.echo(f"elicitgate doctor: {config}")
    for row in rows:
        typer.echo("")
        show(f"{row['server']} ({row['transport']}): {row['state']}" + (f", {row['era']}" if row["era"] else ""))
        if row["state"] == "up":
            show(f"{row['tools']} tools, {row['prompts']} prompts, {row['resources']} resources", "  ")
            show(f"era: {row['eraReason']}", "  ")
        if row["problem"]:
            problem = row["problem"].removeprefix(f"upstream {row['server']!r}: ")
            if row["stderr"]:  # shown whole below
                problem = problem.split("; its stderr ended with: ")[0]
            show(f"problem: {problem}", "  ")
        if row["stderr"]:
            show("its stderr ended with:", "  ")
            for line in row["stderr"]:
                show(line, "    ")
    if notify:
        typer.echo("")
        show("notice targets (a test notice each):" if notices else "notice targets: none (elicitation.notify.urls)")
        for notice in notices:
            show(f"{notice['where']} ({notice['scheme']}://...): {notice['outcome']}", "  ")
    servers_up = bool(rows) and all(row["state"] == "up" for row in rows)
    raise typer.Exit(0 if servers_up and all(n["outcome"] == "sent" for n in notices) else 1)


def _doctor_notices(cfg: GatewayConfig) -> list[dict[str, str]]:
    from elicitgate.elicitation.notify import send_test_notices

    return anyio.run(send_test_notices, cfg)


async def _doctor(cfg: GatewayConfig) -> list[JsonObject]:
    from elicitgate.gateway import Gateway

    retry = cfg.upstream_retry.model_copy(update={"max_backoff": 3600})
    gateway = Gateway(cfg.model_copy(update={"upstream_retry": retry}))
    rows: list[JsonObject] = []
    async with gateway.running():
        async with anyio.create_task_group() as tg:  # at once: each may wait for its server's answer
            for link in gateway.links.values():
                tg.start_soon(_ask_second_era, link)
        for name, link in gateway.links.items():
            status = link.status()
            items = gateway.catalog.by_server[name].items
            rows.append(
                {
                    "server": name,
                    "transport": status["transport"],
                    "state": status["state"],
                    "era": f"{status['era']} {status['protocolVersion']}" if status["era"] else None,
                    "eraReason": status["eraReason"],
                    "tools": len(items["tools"]),
                    "prompts": len(items["prompts"]),
                    "resources": len(items["resources"]) + len(items["resourceTemplates"]),
                    "problem": status["error"],
                    "stderr": list(link.stderr_tail) if status["state"] != "up" else [],
                }
            )
    return rows


async def _ask_second_era(link: UpstreamLink) -> None:
    """Whether a server the gateway speaks the handshake with also serves 2026-07-28 (`upstreams.dual_era`):
    `serve` asks when a call first needs it, `doctor` at once, to say which calls may go which way."""
    primary = link.primary
    if primary is None or primary.era != "handshake" or not link.dual.enabled:
        return
    with anyio.move_on_after(link.retry.connect_timeout + 1):
        await link.dual.connection()
