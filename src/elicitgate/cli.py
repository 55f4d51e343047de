"""`elicitgate`: serve, doctor, check-config, demo, inbox."""

from __future__ import annotations

import errno
import functools
import importlib.util
import logging
import shutil
import socket
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer

from elicitgate import heap
from elicitgate.config import GatewayConfig, build_config, load_config
from elicitgate.console import say
from elicitgate.errors import ConfigError
from elicitgate.hostport import http_url, parse_hostport, url_host
from elicitgate.upstreams import prespawn

if TYPE_CHECKING:
    from elicitgate.upstreams.link import UpstreamLink

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


def _warn(message: str) -> None:
    say(f"elicitgate: warning: {message}", "yellow")


def _load(config: Path) -> GatewayConfig:
    try:
        cfg = load_config(config, warn=_warn)
    except ConfigError as exc:
        say(exc.render(), "red")
        raise typer.Exit(2) from None
    if not cfg.upstreams():
        what = "only disabled servers" if cfg.mcp_servers else "no servers"
        _warn(f"{config} has {what}: add them under \"mcpServers\" (docs/configuration.md)")
    return cfg


def _setup_logging(level: str, log_format: str = "text") -> None:
    from elicitgate.logs import configure_logging

    configure_logging(level, log_format)
    if level != "debug":  # one INFO line per upstream HTTP request is noise; debug shows them
        logging.getLogger("httpx2").setLevel(logging.WARNING)


def _check_state_keys(cfg: GatewayConfig) -> None:
    """A state key file that cannot be used stops start-up here, said plainly (not as a traceback)."""
    from elicitgate.bridging.sealing import load_keys

    try:
        load_keys(cfg.bridging)
    except ConfigError as exc:
        say(exc.render(), "red")
        raise typer.Exit(2) from None


def _with_replicas(cfg: GatewayConfig) -> GatewayConfig:
    """With `redis_url`: the replicas' shared requestState key, or a plain error when Redis is out of reach."""
    from elicitgate.cluster.keys import with_shared_state_key

    assert cfg.redis_url is not None
    try:
        return with_shared_state_key(cfg, cfg.redis_url.get_secret_value())
    except ConfigError as exc:
        say(exc.render(), "red")
        raise typer.Exit(2) from None


def _parse_hostport(value: str) -> tuple[str, int]:
    try:
        return parse_hostport(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def claim_port(host: str, port: int) -> socket.socket:
    """Bind the web face's address before anything starts, so a port in use is the first thing said.

    The protocol is named: asyncio turns Nagle's algorithm off only on sockets whose `proto` is TCP, and
    accepted sockets inherit it. With `proto` 0 a response written in two parts (headers, then body)
    would wait for the client's delayed ACK, 40 ms per request."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        shown = url_host(host)
        in_use = exc.errno == errno.EADDRINUSE
        why = "is already in use (another elicitgate?)" if in_use else f"cannot be used: {exc.strerror}"
        say(f"elicitgate: {shown}:{port} {why}; choose another port, e.g. --http {shown}:{port + 1}", "red")
        raise typer.Exit(2) from None
    return sock


def _announce(cfg: GatewayConfig, text: str) -> None:
    """A start-up line for the person at the terminal; a log line when logs are JSON (every stderr line is)."""
    if cfg.log_format == "json":
        logging.getLogger("elicitgate").info("%s", text)
    else:
        print(text, file=sys.stderr, flush=True)


def _say_ready(gateway: Any, face: str) -> None:
    states = ", ".join(f"{name} {link.state}" for name, link in gateway.links.items()) or "no servers"
    _announce(gateway.config, f"elicitgate: ready on {face} ({states})")


def _has_uvloop() -> bool:
    """uvloop is a dependency except on Windows: the stdio face runs on it as uvicorn does on the HTTP face
    (its `loop="auto"`, with httptools for `http="auto"`)."""
    return importlib.util.find_spec("uvloop") is not None


def run_gateway(cfg: GatewayConfig, http: str | None, sock: socket.socket | None = None) -> None:
    """Serve on stdio (`http` None) or on `http` (HOST:PORT; `sock` if already bound there).

    The stdio servers' processes start first, before the gateway's own imports, so that theirs overlap
    (`upstreams.prespawn`); one that no connection took is stopped on the way out, whatever the way."""
    if http is not None and sock is None:
        sock = claim_port(*_parse_hostport(http))
    prespawn.start(cfg.upstreams())
    heap.hold()  # until the gateway settles its start-up heap (`Gateway.running`)
    try:
        _serve(cfg, http, sock)
    finally:
        heap.release()
        prespawn.stop_unclaimed()


def _serve(cfg: GatewayConfig, http: str | None, sock: socket.socket | None) -> None:
    from elicitgate.gateway import Gateway

    _setup_logging(cfg.log_level, cfg.log_format)
    key_in_redis = cfg.redis_url is not None and not cfg.bridging.state_keys
    if cfg.redis_url is not None:
        cfg = _with_replicas(cfg)
    _check_state_keys(cfg)
    gateway = Gateway(cfg, face="stdio" if http is None else "http")
    if key_in_redis and gateway.replicas is not None:
        from elicitgate.cluster.keys import announce_state_key

        announce_state_key(gateway.replicas, cfg.bridging.state_keys[0].get_secret_value())
    if http is None:
        from elicitgate.faces.stdio import serve_stdio

        try:
            anyio.run(
                functools.partial(serve_stdio, gateway, on_ready=functools.partial(_say_ready, gateway, "stdio")),
                backend_options={"use_uvloop": _has_uvloop()},
            )
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        return
    import uvicorn

    from elicitgate.faces.http import HttpFaceServer, build_http_app

    host, port = _parse_hostport(http)
    assert sock is not None, "bound by run_gateway"
    base = http_url(host, port)
    _announce(cfg, f"elicitgate: MCP at {base}/mcp  health at {base}/healthz")
    if cfg.admin_token is not None:
        _announce(
            cfg, f"elicitgate: inbox at {cfg.http.public_url or base}/inbox  admin API at {base}/api/elicitations"
        )
    from elicitgate.errors import AuthConfigError
    from elicitgate.faces.auth import exposure_warning
    from elicitgate.web.access_log import redact_access_log, uvicorn_log_config
    from elicitgate.web.client_address import ClientAddress
    from elicitgate.web.http_protocol import HttpLimits, limited_protocol

    if (warning := exposure_warning(host, cfg.http.auth)) is not None:
        if cfg.http.require_auth:
            say(f"elicitgate: {warning} (http.require_auth is on)", "red")
            raise typer.Exit(2)
        logging.getLogger("elicitgate").warning(warning)
    try:
        app_ = build_http_app(gateway, None if host in ("0.0.0.0", "::") else base)
    except AuthConfigError as exc:
        say(f"invalid configuration: {exc}", "red")
        raise typer.Exit(2) from None
    # The access log (one line per request, redacted) only when asked for, with log_level debug.
    # log_config=None: uvicorn's own lines go through the gateway's handler (JSON with `log_format: json`).
    log_config = None if cfg.log_format == "json" else uvicorn_log_config()
    redact_access_log()
    config = uvicorn.Config(
        ClientAddress(app_), log_level=cfg.log_level, lifespan="on", access_log=cfg.log_level == "debug",
        log_config=log_config, http=limited_protocol(HttpLimits.of(cfg.http)),
        proxy_headers=False,  # ClientAddress applies them, keeping the connecting address
    )
    HttpFaceServer(config, app_).run(sockets=[sock])


LOG_LEVEL_HELP = "debug, info (default), warning or error; overrides log_level and ELICITGATE_LOG_LEVEL"


def _with_log_level(cfg: GatewayConfig, log_level: str | None) -> GatewayConfig:
    if log_level is None:
        return cfg
    if log_level not in ("debug", "info", "warning", "error"):
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
    run_gateway(_with_log_level(_load(config), log_level), http)


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
    cfg = _load(config)
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


async def _doctor(cfg: GatewayConfig) -> list[dict[str, Any]]:
    from elicitgate.gateway import Gateway

    retry = cfg.upstream_retry.model_copy(update={"max_backoff": 3600})
    gateway = Gateway(cfg.model_copy(update={"upstream_retry": retry}))
    rows: list[dict[str, Any]] = []
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

    host, port = _parse_hostport(http)
    sock = claim_port(host, port)  # before the token: a second demo must not print one that works nowhere
    if stdio:
        sock.close()  # the side web server binds it itself
    config = demo_config()
    token = os.environ.get("ELICITGATE_ADMIN_TOKEN") or secrets.token_urlsafe(32)
    config["admin_token"] = token
    if stdio:
        config["http"] = {"hosted_listen": http}
    cfg = _with_log_level(build_config(config, "built-in demo config", warn=_warn), log_level)
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


def _masked(server: dict[str, Any]) -> dict[str, Any]:
    """A server entry for the screen: the names in `headers` and `env` kept, their values (secrets) not."""
    return {key: {name: "***" for name in value} if key in ("headers", "env") else value
            for key, value in server.items()}


@app.command("check-config")
def check_config(config: ConfigOption) -> None:
    """Validate FILE and print the servers it defines, starting nothing.

    Exit code 0 when valid, 2 when not (one line per problem), 1 when it defines no enabled server.
    """
    cfg = _load(config)
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
