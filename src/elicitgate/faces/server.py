"""The MCP server clients talk to: the SDK's `Server`, with every request handed to the gateway.

Handlers read the raw params (`ctx.params`) and return plain dicts, so what the gateway only routes
is never re-modelled; the SDK still owns the handshake, sessions and transports.
"""

from __future__ import annotations

from typing import Any

from mcp_types import RequestParams
from pydantic import ConfigDict

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from elicitgate import __version__
from elicitgate.faces.peer import DownstreamCall, peer_for
from elicitgate.gateway import Gateway

LISTS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
ROUTED = (
    "tools/call",
    "prompts/get",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
)


class RawParams(RequestParams):
    """Accepts whatever the SDK's own surface validation let through; handlers use `ctx.params`."""

    model_config = ConfigDict(extra="allow")


class GatewayServer(Server[Any]):
    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def build_server(gateway: Gateway) -> GatewayServer:
    server = GatewayServer(
        "elicitgate",
        version=__version__,
        instructions="elicitgate fronts several MCP servers; names are <server>"
        f"{gateway.config.namespacing.separator}<name>.",
    )
    server.middleware.clear()  # no per-message tracing span on the pass-through path

    def make_list(kind: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], _params: RawParams) -> dict[str, Any]:
            peer_for(ctx, gateway.add_peer)
            return {kind: gateway.catalog.merged(kind)}

        return handle

    def make_routed(method: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], _params: RawParams) -> dict[str, Any]:
            peer = peer_for(ctx, gateway.add_peer)
            call = DownstreamCall(peer=peer, ctx=ctx, method=method)
            peer.calls.add(call)
            try:
                return await gateway.call(call, method, ctx.params or {})
            finally:
                peer.calls.discard(call)

        return handle

    for method, kind in LISTS.items():
        server.add_request_handler(method, RawParams, make_list(kind))
    for method in ROUTED:
        server.add_request_handler(method, RawParams, make_routed(method))
    return server
