"""The stdio face: one client on our stdin / stdout.

With `http.hosted_listen` set, a side web server serves the hosted elicitation pages, the inbox, the
admin API and `/metrics` (stdio itself has no web server), see docs/hosting.md.

The gateway stops the same way when its stdin ends, on SIGTERM and on Ctrl-C: the audit trail stores what
it holds and the upstreams are stopped. SIGTERM matters as much as the end of stdin: a client stops a stdio
server by closing its stdin, then sends SIGTERM when it has not exited within a grace period (2 s in the mcp
SDKs, SIGKILL 2 s later), and a gateway whose audit store was still opening would lose the records it held.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack

import anyio
import anyio.abc

from elicitgate.faces.dispatch import serve_connection
from elicitgate.faces.server import build_server
from elicitgate.faces.stdio_pipes import stdio_wire
from elicitgate.gateway import Gateway


async def serve_stdio(gateway: Gateway, on_ready: Callable[[], None] | None = None) -> None:
    server = build_server(gateway, face="stdio")
    async with anyio.create_task_group() as tg:
        if sys.platform != "win32":  # asyncio has no signal handlers there
            await tg.start(_stop_on_sigterm, tg.cancel_scope)
        async with AsyncExitStack() as stack:
            listen = gateway.config.http.hosted_listen
            if listen is not None:
                from elicitgate.web.app import side_server

                await stack.enter_async_context(side_server(gateway, listen))
            await stack.enter_async_context(gateway.running())
            if on_ready is not None:
                on_ready()
            wire = await stack.enter_async_context(stdio_wire())
            await serve_connection(server, wire, server.create_initialization_options(), server.routes, server.modern)
        tg.cancel_scope.cancel()


async def _stop_on_sigterm(
    serving: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Cancel `serving` at the first SIGTERM: what it runs stops as it does when stdin ends (a second SIGTERM,
    once this handler is gone, ends the process at once)."""
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            serving.cancel()
            return
