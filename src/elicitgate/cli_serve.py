"""`serve`'s process around the gateway: the web face's port bound first, the stdio servers started
before the gateway's imports, logging, the replicas' shared key, then the stdio face or uvicorn.

`serve` with a command line typer would take as it is runs from here without typer (`serve_at_once`): typer and
its command tree are ~3.5% of the gateway's instructions before ready. So this module does not import typer: its
errors end the process with `SystemExit` (what `typer.Exit` comes to under typer, and under typer's test runner
alike)."""

from __future__ import annotations

import errno
import functools
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from elicitgate import codecache, heap
from elicitgate.config import GatewayConfig, load_config
from elicitgate.config_error import ConfigError
from elicitgate.console import say
from elicitgate.hostport import bind_tcp, http_url, parse_hostport, url_host
from elicitgate.upstreams import prespawn

if TYPE_CHECKING:
    from elicitgate.gateway import Gateway


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
        raise SystemExit(2) from None


def _with_replicas(cfg: GatewayConfig) -> GatewayConfig:
    """With `redis_url`: the replicas' shared requestState key, or a plain error when Redis is out of reach."""
    from elicitgate.cluster.keys import with_shared_state_key

    assert cfg.redis_url is not None
    try:
        return with_shared_state_key(cfg, cfg.redis_url.get_secret_value())
    except ConfigError as exc:
        say(exc.render(), "red")
        raise SystemExit(2) from None


LOG_LEVELS = ("debug", "info", "warning", "error")


def warn(message: str) -> None:
    say(f"elicitgate: warning: {message}", "yellow")


def load(config: Path) -> GatewayConfig:
    """FILE validated (its problems said, exit code 2), with a warning when it has no enabled server."""
    try:
        cfg = load_config(config, warn=warn)
    except ConfigError as exc:
        say(exc.render(), "red")
        raise SystemExit(2) from None
    if not cfg.upstreams():
        what = "only disabled servers" if cfg.mcp_servers else "no servers"
        warn(f"{config} has {what}: add them under \"mcpServers\" (docs/configuration.md)")
    return cfg


def serve_at_once(args: Sequence[str]) -> None:
    """`elicitgate serve` (`args`: the command line after the program) run now, without typer, when typer would
    take its command line as it is: `--config FILE` (or `-c FILE`, `--config=FILE`), `--stdio` or `--http HOST:PORT`,
    `--log-level LEVEL`; then the process exits as typer's would. Anything else (another command, `--help`, an
    option it does not know, a value missing or wrong) returns, and typer runs the command and says what is wrong."""
    if list(args[:1]) != ["serve"]:
        return
    options = prespawn.serve_options(args[1:])
    if options is None or not options.get("--config"):
        return
    http, log_level = options.get("--http"), options.get("--log-level")
    if http is not None and ("--stdio" in args or not _is_hostport(http)):
        return
    if log_level is not None and log_level not in LOG_LEVELS:
        return
    try:
        cfg = load(Path(options["--config"]))
        run_gateway(cfg if log_level is None else cfg.model_copy(update={"log_level": log_level}), http)
    # Ended as typer ends its commands: an interrupt quietly (uvicorn raises it again once it has stopped), an end of
    # input with click's word, a closed stdout with 1 (and nothing more written to it).
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except EOFError:
        print("\nAborted!", file=sys.stderr)
        raise SystemExit(1) from None
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
    raise SystemExit(0)


def _is_hostport(value: str) -> bool:
    try:
        parse_hostport(value)
    except ValueError:
        return False
    return True


def parse_http_option(value: str) -> tuple[str, int]:
    try:
        return parse_hostport(value)
    except ValueError as exc:
        import typer  # a usage error, said the CLI's way (`serve_at_once` leaves a bad address to the CLI)

        raise typer.BadParameter(str(exc)) from None


def claim_port(host: str, port: int) -> socket.socket:
    """Bind the web face's address before anything starts, so a port in use is the first thing said (`serve`
    binds it before it starts its stdio servers early: `prespawn.start_early`)."""
    early = prespawn.bound_early(host, port)
    if early is not None:
        return early
    try:
        sock = bind_tcp(host, port)
    except OSError as exc:
        shown = url_host(host)
        in_use = exc.errno == errno.EADDRINUSE
        why = "is already in use (another elicitgate?)" if in_use else f"cannot be used: {exc.strerror}"
        say(f"elicitgate: {shown}:{port} {why}; choose another port, e.g. --http {shown}:{port + 1}", "red")
        raise SystemExit(2) from None
    return sock


def _announce(cfg: GatewayConfig, text: str) -> None:
    """A start-up line for the person at the terminal; a log line when logs are JSON (every stderr line is)."""
    if cfg.log_format == "json":
        logging.getLogger("elicitgate").info("%s", text)
    else:
        print(text, file=sys.stderr, flush=True)


def _say_ready(gateway: Gateway, face: str) -> None:
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
        sock = claim_port(*parse_http_option(http))
    prespawn.start(cfg.upstreams())
    heap.hold()  # until the gateway settles its start-up heap (`Gateway.running`)
    try:
        _serve(cfg, http, sock)
    finally:
        codecache.finish()  # a start-up that ended before ready (`Gateway.running` finishes it there)
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
            raise SystemExit(130) from None
        return
    import uvicorn

    from elicitgate.faces.http import HttpFaceServer, build_http_app

    host, port = parse_http_option(http)
    assert sock is not None, "bound by run_gateway"
    base = http_url(host, port)
    _announce(cfg, f"elicitgate: MCP at {base}/mcp  health at {base}/healthz")
    if cfg.admin_token is not None:
        _announce(
            cfg, f"elicitgate: inbox at {cfg.http.public_url or base}/inbox  admin API at {base}/api/elicitations"
        )
    from elicitgate.faces.auth import AuthConfigError, exposure_warning
    from elicitgate.web.access_log import redact_access_log, uvicorn_log_config
    from elicitgate.web.client_address import ClientAddress
    from elicitgate.web.http_protocol import HttpLimits, limited_protocol

    if (warning := exposure_warning(host, cfg.http.auth)) is not None:
        if cfg.http.require_auth:
            say(f"elicitgate: {warning} (http.require_auth is on)", "red")
            raise SystemExit(2)
        logging.getLogger("elicitgate").warning(warning)
    try:
        app_ = build_http_app(gateway, None if host in ("0.0.0.0", "::") else base)
    except AuthConfigError as exc:
        say(f"invalid configuration: {exc}", "red")
        raise SystemExit(2) from None
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
