"""Where the gateway reaches past the public surface of the libraries it builds on, and why.

Everything private of the `mcp` SDK (and of Starlette) that the gateway touches is read here and
nowhere else, so an SDK upgrade that moves one of these has one place to mend.
"""

# Reading private members is this module's job (see above): the type checker's rule against it is off here only.
# pyright: reportPrivateUsage=false

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
from mcp_types import JSONRPCRequest
from starlette.requests import Request
from starlette.types import Send

from mcp.os.win32.utilities import ServerProcess
from mcp.server.lowlevel.server import Server
from mcp.server.models import InitializationOptions
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The per-client `Connection` of a request: what the client declared, its outbound channel, and
    state kept for the client's whole session. The SDK has no public accessor for it."""
    return ctx.session._connection  # noqa: SLF001


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


async def serve_stdio_connection(
    server: Server[Any],
    read_stream: ReadStream[SessionMessage | Exception],
    write_stream: WriteStream[SessionMessage],
    init_options: InitializationOptions,
) -> None:
    """`Server.run` on one client connection, minus the task that relays every inbound message.

    The SDK decides the connection's era from the client's first request and replays what it peeked
    through a relay task and a memory stream for the connection's whole life: a task switch per message.
    Here the frames read before that request are handed back first, then the dispatcher reads the
    transport itself. The era rule is the SDK's (`serve_dual_era_loop`): a first request other than
    `initialize` that carries the 2026-07-28 envelope opens a 2026-07-28 connection, anything else a
    handshake one.
    """
    from mcp.server import runner

    async with server.lifespan(server) as lifespan_state:
        try:
            lead: list[SessionMessage | Exception] = []
            opening: JSONRPCRequest | None = None
            async for item in read_stream:
                if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                    opening = item.message
                elif len(lead) >= runner._PRE_REQUEST_REPLAY_LIMIT:  # noqa: SLF001
                    continue
                lead.append(item)
                if opening is not None:
                    break
            replayed = _Replayed(lead, read_stream)
            if opening is not None and opening.method != "initialize" and runner._has_modern_envelope(opening.params):  # noqa: SLF001
                await runner._serve_modern_stream(  # noqa: SLF001
                    server, replayed, write_stream, lifespan_state=lifespan_state, raise_exceptions=False
                )
            else:
                await runner._serve_legacy_stream(  # noqa: SLF001
                    server, replayed, write_stream, lifespan_state=lifespan_state, session_id=None,
                    init_options=init_options, raise_exceptions=False,
                )
        finally:
            await write_stream.aclose()


class _Replayed:
    """A read stream that yields `lead` first, then whatever `inner` yields."""

    def __init__(self, lead: list[SessionMessage | Exception], inner: ReadStream[SessionMessage | Exception]) -> None:
        self._lead = lead
        self._inner = inner

    def __aiter__(self) -> _Replayed:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        if self._lead:
            return self._lead.pop(0)
        return await self._inner.__anext__()

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Replayed:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.aclose()
