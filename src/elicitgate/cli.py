"""`elicitgate`: serve, doctor, check-config, demo, inbox (the commands and their options; `cli_serve` runs
the gateway's process, `cli_doctor` probes the servers, `cli_audit` reads the audit trail)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated

from elicitgate import codecache, heap
from elicitgate.upstreams import prespawn

if sys.argv[1:2] == ["serve"]:
    # No collections while `serve` imports what it runs on (pydantic, the configuration's and the SDK's models)
    # until the gateway settles its heap (`Gateway.running`): 90 collections before ready came down to 21, their
    # CPU from ~25 ms to ~5 ms. `run_gateway` releases them on its way out (a `serve` that ends before it, on an
    # invalid file, exits with them off).
    heap.hold()
    # The code libraries generate as they import (dataclasses' methods, typing's forward references) compiled at
    # an earlier start, until the gateway is ready (`Gateway.running`): ~15% of its start-up's instructions.
    codecache.install("serve")
# `serve`'s stdio servers start now, before the imports below (typer, pydantic, the configuration's models: ~0.2 s
# of CPU), so that their start-up runs on the other core beside all of the gateway's (`prespawn.start_early`).
prespawn.start_early(sys.argv[1:])

from elicitgate.cli_serve import (  # noqa: E402
    LOG_LEVELS,
    claim_port,
    load,
    parse_http_option,
    run_gateway,
    serve_at_once,
    warn,
)

# A `serve` command line typer would take as it is runs now and exits, before typer is imported (`serve_at_once`).
serve_at_once(sys.argv[1:])

import typer  # noqa: E402

from elicitgate.config import GatewayConfig, build_config  # noqa: E402
from elicitgate.console import say  # noqa: E402
from elicitgate.hostport import url_host  # noqa: E402
from elicitgate.json_shapes import JsonObject  # noqa: E402

app = typer.Typer(
    help="elicitgate: an MCP gateway that makes elicitation work everywhere. Docs: docs/ in the source, "
    "starting with docs/configuration.md.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


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


LOG_LEVEL_HELP = "debug, info (default), warning or error; overrides log_level and ELICITGATE_LOG_LEVEL"


def _with_log_level(cfg: GatewayConfig, log_level: str | None) -> GatewayConfig:
    if log_level is None:
        return cfg
    if log_level not in LOG_LEVELS:
        raise typer.BadParameter(f"expected debug, info, warning or error, got {log_level!r}", param_hint="--log-level")
    return cfg.model_copy(update={"log_level": log_level})


ConfigOption = Annotated[
    Path,
    typer.Option(
        "--config", "-c", metavar="FILE",
        help="the mcpServers file: JSON/JSONC (Claude Desktop, Cursor, VS Code's as they are) or YAML",
    ),
]
LogLevelOption = Annotated[str | None, typer.Option("--log-level", metavar="LEVEL", help=LOG_LEVEL_HELP)]


@app.command()
def serve(
    config: ConfigOption,
    stdio: Annotated[bool, typer.Option("--stdio", help="serve one client on stdin/stdout (the default)")] = False,
    http: Annotated[
        str | None, typer.Option("--http", metavar="HOST:PORT", help="serve streamable HTTP at /mcp instead")
    ] = None,
    log_level: LogLevelOption = None,
) -> None:
    """Run the gateway in front of the servers in FILE.

    Every setting can also come from the environment, which wins over the file: ELICITGATE_ and the
    key, __ between levels (ELICITGATE_ELICITATION__DEFAULT_TIMEOUT=60, ELICITGATE_LOG_LEVEL=debug).
    ELICITGATE_ADMIN_TOKEN turns on the inbox and the admin API (a client without forms needs them).
    Docs: docs/configuration.md (every key), docs/clients.md (your client's config), docs/hosting.md.
    """
    if stdio and http:
        raise typer.BadParameter("choose one of --stdio and --http")
    run_gateway(_with_log_level(load(config), log_level), http)


@app.command()
def doctor(
    config: ConfigOption,
    notify: Annotated[
        bool, typer.Option("--notify", help="also send a test notice to every notice target (docs/notify.md)")
    ] = False,
) -> None:
    """Check FILE, start every server in it, and show what each offers or why it failed.

    Exit code 0 when every server is up (and, with --notify, every notice target took its test notice),
    1 otherwise, 2 when FILE is invalid.
    """
    from elicitgate.cli_doctor import report

    report(load(config), config, notify)


def self_command() -> str:
    """How the person ran us, to repeat in hints: `elicitgate` when that is on PATH, else the path
    they used (`.venv/bin/elicitgate`, as the README does)."""
    argv0 = Path(sys.argv[0])
    if argv0.name != "elicitgate":
        return f"{sys.executable} -m elicitgate.cli"
    on_path = shutil.which("elicitgate")
    if on_path and Path(on_path).resolve() == argv0.resolve():
        return "elicitgate"
    try:
        return str(argv0.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(argv0.resolve())


def demo_config() -> JsonObject:
    return {
        "mcpServers": {
            "demo": {"command": sys.executable, "args": ["-m", "elicitgate.demo.server"]},
            # handshake: the SDK's typed 2026-07-28 result models drop the request's `ui` field
            "colours": {"command": sys.executable, "args": ["-m", "elicitgate.demo.colour_server"], "era": "handshake"},
        }
    }


@app.command()
def demo(
    http: Annotated[
        str, typer.Option("--http", metavar="HOST:PORT", help="where the gateway listens (and the inbox)")
    ] = "127.0.0.1:8808",
    stdio: Annotated[
        bool, typer.Option("--stdio", help="serve the demo on stdin/stdout; the inbox stays on --http")
    ] = False,
    walkthrough: Annotated[
        bool, typer.Option("--walkthrough", help="call an eliciting tool from a terminal client and exit")
    ] = False,
    log_level: LogLevelOption = None,
) -> None:
    """Run the gateway over the bundled demo servers (no setup needed)."""
    if walkthrough:
        import json
        import tempfile

        from elicitgate.demo.walkthrough import run

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(demo_config(), handle)
        raise typer.Exit(run(handle.name))
    import os
    import secrets

    host, port = parse_http_option(http)
    sock = claim_port(host, port)  # before the token: a second demo must not print one that works nowhere
    if stdio:
        sock.close()  # the side web server binds it itself
    config = demo_config()
    token = os.environ.get("ELICITGATE_ADMIN_TOKEN") or secrets.token_urlsafe(32)
    config["admin_token"] = token
    if stdio:
        config["http"] = {"hosted_listen": http}
    cfg = _with_log_level(build_config(config, "built-in demo config", warn=warn), log_level)
    shown = url_host(host)
    say(
        "elicitgate demo: the bundled demo servers' tools (demo__book_table, demo__confirm, "
        "demo__connect_account, colours__pick_colour) elicit; point an MCP client at the gateway. A client "
        "that cannot show forms gets them in the inbox:\n"
        f"  inbox: http://{shown}:{port}/inbox#token={token}\n"
        f"  terminal: ELICITGATE_ADMIN_TOKEN={token} {self_command()} inbox --url http://{shown}:{port}"
    )
    run_gateway(cfg, None if stdio else http, None if stdio else sock)


@app.command()
def inbox(
    url: Annotated[str, typer.Option("--url", help="the gateway's web address")] = "http://127.0.0.1:8808",
    token: Annotated[
        str | None, typer.Option("--token", envvar="ELICITGATE_ADMIN_TOKEN", help="admin token", show_default=False)
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="answer one (waiting for it if need be), then exit")] = False,
) -> None:
    """Answer the gateway's hosted elicitations in the terminal (the admin API's inbox)."""
    import httpx2

    from elicitgate.errors import InboxError
    from elicitgate.web.terminal import TerminalInbox

    if not token:
        say("elicitgate inbox needs the admin token: --token or ELICITGATE_ADMIN_TOKEN", "red")
        raise typer.Exit(2)
    try:
        TerminalInbox(url, token).run(once=once)
    except InboxError as exc:
        say(f"{exc}", "red")
        raise typer.Exit(1) from None
    except httpx2.TransportError as exc:
        say(
            f"elicitgate inbox: no gateway answers at {url} ({exc or type(exc).__name__}); start one "
            f"({self_command()} demo, or serve --http with ELICITGATE_ADMIN_TOKEN set) or pass --url",
            "red",
        )
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def _masked(server: JsonObject) -> JsonObject:
    """A server entry for the screen: the names in `headers` and `env` kept, their values (secrets) not."""
    return {key: {name: "***" for name in value} if key in ("headers", "env") else value
            for key, value in server.items()}


@app.command("check-config")
def check_config(config: ConfigOption) -> None:
    """Validate FILE and print the servers it defines, starting nothing.

    Exit code 0 when valid, 2 when not (one line per problem), 1 when it defines no enabled server.
    """
    cfg = load(config)
    if cfg.http.auth.tokens_file is not None:  # its tokens are checked as the file's own (strength included)
        from elicitgate.errors import AuthConfigError
        from elicitgate.faces.auth import load_tokens

        try:
            load_tokens(cfg.http.auth)
        except AuthConfigError as exc:
            say(f"invalid configuration: {exc}", "red")
            raise typer.Exit(2) from None
    for name, server in cfg.mcp_servers.items():
        typer.echo(f"{name}: {_masked(server.model_dump(exclude_defaults=True, exclude={'notify', 'per_tool'}))}")
    from elicitgate.elicitation.notice_rules import every_target
    from elicitgate.elicitation.notify import scheme_of

    for where, url in every_target(cfg):  # the URLs hold tokens: their scheme only
        typer.echo(f"notice target {where}: {scheme_of(url)}://...")
    if not cfg.upstreams():
        raise typer.Exit(1)


from elicitgate.cli_audit import audit_app  # noqa: E402

app.add_typer(audit_app, name="audit")


if __name__ == "__main__":
    app()
