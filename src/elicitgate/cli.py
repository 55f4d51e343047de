"""`elicitgate`: serve, doctor, demo."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from elicitgate.config import ConfigError, GatewayConfig, build_config, load_config

app = typer.Typer(
    help="elicitgate: an MCP gateway that makes elicitation work everywhere. Docs: docs/ in the source, "
    "starting with docs/configuration.md.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
err = Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"elicitgate {version('elicitgate')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_print_version, is_eager=True, help="print the version and exit"),
    ] = False,
) -> None:
    """elicitgate: an MCP gateway that makes elicitation work everywhere."""


def _warn(message: str) -> None:
    err.print(f"elicitgate: warning: {message}", style="yellow", highlight=False, markup=False, soft_wrap=True)


def _load(config: Path) -> GatewayConfig:
    try:
        cfg = load_config(config, warn=_warn)
    except ConfigError as exc:
        err.print(exc.render(), style="red", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if not cfg.upstreams():
        what = "only disabled servers" if cfg.mcp_servers else "no servers"
        _warn(f"{config} has {what}: add them under \"mcpServers\" (docs/configuration.md)")
    return cfg


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _parse_hostport(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise typer.BadParameter(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def run_gateway(cfg: GatewayConfig, http: str | None) -> None:
    from elicitgate.gateway import Gateway

    _setup_logging(cfg.log_level)
    gateway = Gateway(cfg)
    if http is None:
        from elicitgate.faces.stdio import serve_stdio

        anyio.run(serve_stdio, gateway)
        return
    import uvicorn

    from elicitgate.faces.http import build_http_app

    from elicitgate.web.app import attach_hosting

    host, port = _parse_hostport(http)
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    attach_hosting(gateway, None if host in ("0.0.0.0", "::") else base)
    err.print(f"elicitgate: MCP at {base}/mcp  health at {base}/healthz")
    if cfg.admin_token is not None:
        err.print(f"elicitgate: inbox at {cfg.http.public_url or base}/inbox  admin API at {base}/api/elicitations")
    uvicorn.run(build_http_app(gateway), host=host, port=port, log_level=cfg.log_level, lifespan="on")


@app.command()
def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="mcpServers JSON or YAML file")],
    stdio: Annotated[bool, typer.Option("--stdio", help="serve one client on stdin/stdout (default)")] = False,
    http: Annotated[str | None, typer.Option("--http", metavar="HOST:PORT", help="serve streamable HTTP")] = None,
) -> None:
    """Run the gateway in front of the servers in CONFIG."""
    if stdio and http:
        raise typer.BadParameter("choose one of --stdio and --http")
    run_gateway(_load(config), http)


@app.command()
def doctor(config: Annotated[Path, typer.Option("--config", "-c")]) -> None:
    """Check the config, start every upstream, and show what each offers."""
    cfg = _load(config)
    rows = anyio.run(_doctor, cfg)
    table = Table(title=f"elicitgate doctor: {config}")
    for column in ("server", "transport", "state", "era", "tools", "prompts", "resources", "problem"):
        table.add_column(column)
    ok = True
    for row in rows:
        ok &= row["state"] == "up"
        color = "green" if row["state"] == "up" else "red"
        table.add_row(
            row["server"], row["transport"], f"[{color}]{row['state']}[/{color}]", row["era"] or "-",
            str(row["tools"]), str(row["prompts"]), str(row["resources"]), row["problem"] or "",
        )
    Console().print(table)
    raise typer.Exit(0 if ok else 1)


async def _doctor(cfg: GatewayConfig) -> list[dict[str, Any]]:
    from elicitgate.gateway import Gateway

    gateway = Gateway(cfg.model_copy(update={"upstream_retry": cfg.upstream_retry.model_copy(update={"max_backoff": 3600})}))
    rows = []
    async with gateway.running():
        for name, link in gateway.links.items():
            status = link.status()
            items = gateway.catalog.by_server[name].items
            rows.append(
                {
                    "server": name,
                    "transport": status["transport"],
                    "state": status["state"],
                    "era": f"{status['era']} {status['protocolVersion']}" if status["era"] else None,
                    "tools": len(items["tools"]),
                    "prompts": len(items["prompts"]),
                    "resources": len(items["resources"]) + len(items["resourceTemplates"]),
                    "problem": status["error"],
                }
            )
    return rows


def demo_config() -> dict[str, Any]:
    return {
        "mcpServers": {
            "demo": {"command": sys.executable, "args": ["-m", "elicitgate.demo.server"]},
            # handshake: the SDK's typed 2026-07-28 result models drop the request's `ui` field
            "colours": {"command": sys.executable, "args": ["-m", "elicitgate.demo.colour_server"], "era": "handshake"},
        }
    }


@app.command()
def demo(
    http: Annotated[str, typer.Option("--http", metavar="HOST:PORT")] = "127.0.0.1:8808",
    stdio: Annotated[bool, typer.Option("--stdio", help="serve the demo on stdin/stdout instead")] = False,
    walkthrough: Annotated[
        bool, typer.Option("--walkthrough", help="call an eliciting tool from a terminal client and exit")
    ] = False,
) -> None:
    """Run the gateway over the bundled demo server (no setup needed)."""
    if walkthrough:
        import json
        import tempfile

        from elicitgate.demo.walkthrough import run

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(demo_config(), handle)
        run(handle.name)
        return
    import os
    import secrets

    config = demo_config()
    token = os.environ.get("ELICITGATE_ADMIN_TOKEN") or secrets.token_urlsafe(24)
    config["admin_token"] = token
    if stdio:
        config["http"] = {"hosted_listen": http}
    cfg = build_config(config, "built-in demo config")
    host, port = _parse_hostport(http)
    err.print(
        "elicitgate demo: the bundled demo servers' tools (demo__book_table, demo__confirm, "
        "demo__connect_account, colours__pick_colour) elicit; point an MCP client at the gateway. A client "
        "that cannot show forms gets them in the inbox:\n"
        f"  inbox: http://{host}:{port}/inbox?token={token}\n"
        f"  terminal: ELICITGATE_ADMIN_TOKEN={token} elicitgate inbox --url http://{host}:{port}"
    )
    run_gateway(cfg, None if stdio else http)


@app.command()
def inbox(
    url: Annotated[str, typer.Option("--url", help="the gateway's web address")] = "http://127.0.0.1:8808",
    token: Annotated[
        str | None, typer.Option("--token", envvar="ELICITGATE_ADMIN_TOKEN", help="admin token", show_default=False)
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="answer one (waiting for it if need be), then exit")] = False,
) -> None:
    """Answer the gateway's hosted elicitations in the terminal (the admin API's inbox)."""
    from elicitgate.web.terminal import InboxError, TerminalInbox

    if not token:
        err.print("[red]elicitgate inbox needs the admin token: --token or ELICITGATE_ADMIN_TOKEN[/red]")
        raise typer.Exit(2)
    try:
        TerminalInbox(url, token).run(once=once)
    except InboxError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@app.command("check-config")
def check_config(config: Annotated[Path, typer.Option("--config", "-c")]) -> None:
    """Validate CONFIG and print the servers it defines."""
    cfg = _load(config)
    for name, server in cfg.mcp_servers.items():
        typer.echo(f"{name}: {server.model_dump(exclude_defaults=True)}")
    if not cfg.upstreams():
        raise typer.Exit(1)




if __name__ == "__main__":
    app()
