"""The Host / Origin guard in front of every route of the gateway's web servers."""

from __future__ import annotations

from mcp_types import INVALID_REQUEST
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.server.transport_security import TransportSecuritySettings

from elicitgate._compat import HostRules
from elicitgate.config import HttpFaceConfig
from elicitgate.web.request_headers import RequestHeaders


def security_settings(http: HttpFaceConfig) -> TransportSecuritySettings:
    """The allow-lists of `http.allowed_hosts` and `http.allowed_origins`, in the SDK's terms."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=http.allowed_hosts,
        allowed_origins=http.allowed_origins,
    )


MAX_ADMITTED = 256
"""The (Host, Origin) pairs `HostGuard` keeps as let through."""


class HostGuard:
    """DNS-rebinding guard for every route: a Host or Origin outside the allow-list gets 403.

    The SDK checks `/mcp` itself but answers a bad Host with 421; one rule and one status for all routes
    is easier to operate behind proxies, and `/healthz` and `/metrics` need the same protection.
    """

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self._rules = HostRules(settings)
        self._admitted: set[tuple[bytes | None, bytes | None]] = set()
        """(Host, Origin) as sent, of requests let through: the allow-lists do not change, and a client sends the
        same pair with every request (checked again, warning and all, only when refused)."""

    def refusal(self, scope: Scope) -> Response | None:
        """The 403 an HTTP request gets when its Host or Origin is outside the allow-list, else None (the
        connection's protocol asks before it starts `/mcp`'s request: `web.http_protocol.DirectRoute`)."""
        headers = RequestHeaders.of(scope)
        named = headers.named
        sent = (named.get(b"host"), named.get(b"origin"))
        if sent in self._admitted:
            return None
        host, origin = headers.first(b"host"), headers.first(b"origin")
        if not self._rules.host_allowed(host):
            header, value = "host", host
        elif origin is not None and not self._rules.origin_allowed(origin):
            header, value = "origin", origin
        else:
            self._admit(sent)
            return None
        body = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": INVALID_REQUEST,
                "message": f"{header.capitalize()} header not allowed",
                "data": {"source": "elicitgate", header: value, "setting": f"http.allowed_{header}s"},
            },
        }
        return JSONResponse(body, status_code=403)

    def _admit(self, sent: tuple[bytes | None, bytes | None]) -> None:
        if len(self._admitted) >= MAX_ADMITTED:  # bounded: a client may send any Host it likes (on allowed ports)
            self._admitted.clear()
        self._admitted.add(sent)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (refusal := self.refusal(scope)) is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)
