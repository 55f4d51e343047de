"""Where the gateway reaches past the public surface of the libraries it builds on, and why.

Everything private of the `mcp` SDK (and of Starlette and httpx2) that the gateway touches is read here and
nowhere else, so an SDK upgrade that moves one of these has one place to mend.
"""

# Reading private members is this module's job (see above): the type checker's rule against it is off here only.
# pyright: reportPrivateUsage=false

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import cache
from inspect import CORO_SUSPENDED, getcoroutinestate
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcp.os.win32.utilities import ServerProcess
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.dispatcher import DispatchContext, Outbound
from mcp.shared.transport_context import TransportContext

from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.runner import ServerRunner


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The per-client `Connection` of a request: what the client declared, its outbound channel, and
    state kept for the client's whole session. The SDK has no public accessor for it."""
    return ctx.session._connection  # noqa: SLF001


def no_channel() -> Outbound:
    """The `Outbound` of a connection with no back-channel (a 2026-07-28 POST: nothing but its own response), the
    one `Connection.from_envelope` gives it: `has_standalone_channel` is False for it and it alone."""
    from mcp.server import connection

    return connection._NO_CHANNEL  # noqa: SLF001


def request_outbound(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The request-scoped channel of a request (its POST stream on HTTP): `send_raw_request` sends a
    server-to-client request unmodelled (the typed `send_request` drops fields it does not know, such as
    `ui` and extensions), `notify` a notification scoped to the request, and `cancel_requested` says
    whether the client cancelled the request."""
    return ctx.session._request_outbound  # noqa: SLF001


class HostRules:
    """The SDK's Host / Origin allow-list matching (wildcard ports and all), for routes the SDK does not
    guard itself."""

    def __init__(self, settings: TransportSecuritySettings) -> None:
        self._rules = TransportSecurityMiddleware(settings)

    def host_allowed(self, host: str | None) -> bool:
        return self._rules._validate_host(host)  # noqa: SLF001

    def origin_allowed(self, origin: str) -> bool:
        return self._rules._validate_origin(origin)  # noqa: SLF001


async def serve_modern_http(
    server: Server[Any],
    security: TransportSecuritySettings,
    lifespan_state: Any,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """One POST of a 2026-07-28-era client (stateless: no session), answered by the SDK's own handler for
    that era, which its session manager calls for the same requests; the SDK exports no public name for it."""
    from mcp.server._streamable_http_modern import handle_modern_request

    await handle_modern_request(server, security, False, lifespan_state, scope, receive, send)


def raw_send(request: Request) -> Send:
    """The ASGI `send` of a Starlette request, which an SSE transport needs to write its own response."""
    return request._send  # noqa: SLF001


async def spawn_stdio_server(
    command: str, args: list[str], env: dict[str, str], errlog: TextIO, cwd: str | Path | None
) -> ServerProcess:
    """Start a stdio server the way the SDK's `stdio_client` does: in a process group (a Job Object on
    Windows) of its own, so stopping it stops everything it started."""
    from mcp.client import stdio

    command = await stdio._get_executable_command(command)  # noqa: SLF001
    return await stdio._create_platform_compatible_process(  # noqa: SLF001
        command=command, args=args, env=env, errlog=errlog, cwd=cwd
    )


async def stop_stdio_server(process: ServerProcess) -> None:
    """The SDK's shutdown of a stdio server (the spec's order): close its stdin, wait, then kill the
    process tree, every wait bounded."""
    from mcp.client import stdio

    await stdio._stop_server_process(process)  # noqa: SLF001


def http_client_timeouts() -> tuple[float, float]:
    """The SDK's HTTP client timeouts in seconds, (each operation, a read of an SSE stream), so that an upstream
    over HTTP is waited on as the SDK's own client waits. Imported when first asked: the module loads the HTTP
    client, which a gateway of stdio servers never needs."""
    from mcp.shared import _httpx_utils

    return _httpx_utils.MCP_DEFAULT_TIMEOUT, _httpx_utils.MCP_DEFAULT_SSE_READ_TIMEOUT


PRE_REQUEST_REPLAY_LIMIT = 8
"""How many messages before a connection's first request are kept for the era it opens (the SDK's
`runner._PRE_REQUEST_REPLAY_LIMIT`, checked against it in tests/test_stdio_face.py)."""


def has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether a request carries the 2026-07-28 per-request `_meta` envelope (the SDK's era rule)."""
    if not params or "_meta" not in params:  # the rule reads `_meta` alone: without it, no envelope
        return False
    return _kernel()._has_modern_envelope(params)  # noqa: SLF001


@cache
def _kernel() -> ModuleType:
    """The SDK's server kernel (`mcp.server.runner`), imported when first needed (it loads the low-level server,
    which the gateway's start-up puts off) and looked up once: an `import` statement in a function costs ~0.7 us
    each time it runs, and these run for every request."""
    from mcp.server import runner

    return runner


def initialize_after_modern_data(params: Mapping[str, Any] | None) -> JsonObject:
    """The error data the SDK gives an `initialize` on a 2026-07-28 connection (the versions it serves)."""
    from mcp.server import runner

    return runner._initialize_after_modern_data(params)  # noqa: SLF001


def request_context(
    runner: ServerRunner[Any], context: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
) -> ServerRequestContext[Any, Any]:
    """The context the SDK's kernel hands a handler for one request (`_meta` lifted its way: a malformed
    one is no meta), for a request served past the kernel's middleware chain."""
    # The kernel's `_extract_meta` is None without `_meta` (most requests): called only when there is one.
    meta = _kernel()._extract_meta(params) if params and "_meta" in params else None  # noqa: SLF001
    return runner._make_context(context, method, params, meta, runner.connection.protocol_version)  # noqa: SLF001


def shaped_result(runner: ServerRunner[Any], method: str, result: JsonObject) -> JsonObject:
    """The kernel's outbound pass over a handler's result, for the client's version: cache hints, the
    per-version sieve (a result that does not fit is -32603 "Handler returned an invalid result", the detail
    in the log), and on 2026-07-28 `resultType` and the `serverInfo` stamp."""
    return runner._serialize(method, runner.connection.protocol_version, result)  # noqa: SLF001




def cancel_reaches(task: asyncio.Task[Any]) -> bool:
    """Whether a cancel scope around all of `task` would cancel it at this moment, as anyio's
    `CancelScope._deliver_cancellation` decides (for `wire.scopes.TaskCancel`, which cancels a task so without the
    scope): it has started and waits, no cancellation is on its way in already, no result is waking it (a
    cancellation now would lose it), and it is not inside a shielded anyio scope (anyio's `_task_states` has each
    task's innermost scope; each scope its parent)."""
    from anyio._backends import _asyncio as backend  # loaded already: the gateway runs on anyio's asyncio backend

    if getcoroutinestate(task.get_coro()) != CORO_SUSPENDED:  # pyright: ignore[reportArgumentType]  # a coroutine
        return False
    if task._must_cancel:  # type: ignore[attr-defined]  # noqa: SLF001
        return False
    waiter: object = task._fut_waiter  # type: ignore[attr-defined]  # noqa: SLF001
    if isinstance(waiter, asyncio.Future) and waiter.done():
        return False
    states: Any = getattr(backend, "_task_states")  # noqa: B009  # its types are partly unknown to the checker
    state = states.get(task)
    scope: Any = state.cancel_scope if state is not None else None
    while scope is not None:
        if scope.shield:
            return False
        scope = scope._parent_scope  # noqa: SLF001
    return True
