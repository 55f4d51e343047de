"""Which URL-mode links may reach a person: the host a browser would visit, checked before anything is shown.

URLs are parsed as browsers parse them (WHATWG, via `ada-url`), so the host checked is the host the
browser goes to: `https://evil.example\\@bank.example/` is evil.example to a browser, whatever a
URI parser says. The gateway resolves the host to see which addresses it names but never fetches
the URL. A refusal is -32602 with `data.rule`, raised before the link reaches a client or the inbox.
"""

from __future__ import annotations

import ipaddress
import socket
import unicodedata
from collections.abc import Collection, Mapping
from typing import Any

import anyio
from mcp_types import INVALID_PARAMS

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import HttpServer, StdioServer, UrlPolicyConfig
from elicitgate.elicitation.embedded_ipv4 import embedded_ipv4

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254")
)
"""Cloud instance-metadata endpoints (AWS, ECS, Alibaba, Oracle, AWS IPv6)."""
INTERNAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan", ".intranet", ".corp")
LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def browser_host(url: str) -> str | None:
    """The host a browser visits for `url` (IDNA ASCII, IPv6 in brackets), or None when it has none."""
    import ada_url  # ~2 MiB, for the first URL-mode link or HTTP upstream's address, not at start (test_startup)

    try:
        return ada_url.parse_url(url).get("hostname") or None
    except ValueError:
        return None


def is_loopback_host(host: str | None) -> bool:
    """Whether a host (as written in a URL) names this machine without DNS: `localhost` or a loopback literal."""
    if host is None:
        return False
    host = host.lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    address = _literal(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address is not None and address.is_loopback


class UrlPolicy:
    def __init__(self, config: UrlPolicyConfig, local_servers: Collection[str] = ()) -> None:
        self.config = config
        self.local_servers = frozenset(local_servers)
        """Upstreams on this machine (stdio, or HTTP on loopback): only they may send loopback / http links."""
        self._networks = [ipaddress.ip_network(n, strict=False) for n in config.allow_networks]
        self._hosts = {h.lower().rstrip(".") for h in config.allow_hosts if not h.startswith("*.")}
        self._suffixes = tuple(h[1:].lower().rstrip(".") for h in config.allow_hosts if h.startswith("*."))

    async def check(self, server: str, url: Any, elicitation_id: Any = None, *, needs_id: bool = False) -> None:
        """Refuse (`MCPError` -32602 with `data.rule`) a URL-mode link a browser should not be sent to."""

        def refuse(message: str, rule: str, **data: Any) -> MCPError:
            exc = errors.gateway_error(INVALID_PARAMS, message, refusal="url_refused", server=server, rule=rule, **data)
            return exc

        if elicitation_id is not None or needs_id:
            if not isinstance(elicitation_id, str) or not elicitation_id:
                raise refuse("url-mode elicitation needs an elicitationId", "elicitationId is required")
            if len(elicitation_id) > self.config.max_elicitation_id_length:
                raise refuse(
                    "elicitationId too long",
                    f"elicitationId is at most {self.config.max_elicitation_id_length} characters",
                )
            if _has_invisible(elicitation_id):
                raise refuse(
                    "elicitationId contains control characters or whitespace",
                    "elicitationId has no control characters or whitespace",
                )
        if not isinstance(url, str) or not url:
            raise refuse("url-mode elicitation needs a url", "url is required")
        if len(url) > self.config.max_url_length:
            raise refuse("url too long", f"url is at most {self.config.max_url_length} characters")
        if _has_invisible(url):
            raise refuse("url contains control characters or whitespace", "url has no control characters or whitespace")
        if "\\" in url:
            raise refuse("url contains a backslash", "url has no backslashes")
        import ada_url

        try:
            parsed = ada_url.parse_url(url)
        except ValueError:
            raise refuse("url is not a valid URL", "url must be a valid URL") from None
        # parse_url returns every attribute; its TypedDict marks them all optional.
        scheme, host = parsed.get("protocol", "").rstrip(":"), parsed.get("hostname", "")
        if scheme not in ("https", "http") or not host:
            raise refuse(f"url scheme {scheme!r} is not allowed", "url must be https")
        if parsed.get("username") or parsed.get("password"):
            raise refuse("url carries userinfo (user:password@)", "url has no userinfo")
        local = server in self.local_servers
        if is_loopback_host(host):
            if local:
                return
            raise refuse(
                "url points at the person's own machine",
                "url host must not be loopback (only a local upstream may link to loopback)",
                host=host,
            )
        if scheme == "http":
            raise refuse("url must use https", "url must be https (http only to loopback from a local upstream)")
        if self._allowed_host(host):
            return
        await self._check_addresses(host, parsed.get("port", ""), refuse)

    def _allowed_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self._hosts or any(host.endswith("." + s) for s in self._suffixes)

    async def _check_addresses(self, host: str, port: str, refuse: Any) -> None:
        literal = _literal(host)
        addresses = [literal] if literal is not None else await self._resolve(host, int(port or 443))
        if not addresses:  # an unresolved name may still be one the person's own network resolves
            name = host.lower().rstrip(".")
            if "." not in name or name.endswith(INTERNAL_SUFFIXES):
                raise refuse("url host is an internal name", "url host must be a public name or address", host=host)
            if self.config.allow_unresolved:
                return
            raise refuse("url host does not resolve", "url host must resolve (url_policy.allow_unresolved)", host=host)
        for address in addresses:
            kind = self._address_kind(address)
            if kind is not None:
                raise refuse(
                    f"url host {'is' if literal is not None else 'resolves to'} a {kind} address",
                    f"url host must not be a {kind} address",
                    host=host,
                    address=str(address),
                )

    async def _resolve(self, name: str, port: int) -> list[IPAddress]:
        with anyio.move_on_after(self.config.resolve_timeout):
            try:
                # The resolver thread cannot be interrupted: give up on it at the timeout, not after it.
                infos = await anyio.to_thread.run_sync(
                    lambda: socket.getaddrinfo(name, port, type=socket.SOCK_STREAM), abandon_on_cancel=True
                )
            except (OSError, UnicodeError):
                return []
            return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        return []

    def _address_kind(self, address: IPAddress) -> str | None:
        """What kind of non-public address this is (None: public, or in `allow_networks`)."""
        if any(address in net for net in self._networks if net.version == address.version):
            return None
        if isinstance(address, ipaddress.IPv6Address):
            embedded = embedded_ipv4(address)
            if embedded:  # the form's own range may be non-global (::ffff:0:0/96): the IPv4 inside decides
                return next((kind for v4 in embedded if (kind := self._address_kind(v4)) is not None), None)
        if address in METADATA_ADDRESSES:
            return "metadata"
        if address.is_loopback:
            return "loopback"
        if address.is_link_local:
            return "link-local"
        if address.is_multicast:
            return "multicast"
        if address.is_private or not address.is_global:
            return "private"
        return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _has_invisible(text: str) -> bool:
    """Control, format (bidi overrides) or separator characters, which browsers drop or hide."""
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp") for ch in text)


def local_upstreams(upstreams: Mapping[str, StdioServer | HttpServer]) -> set[str]:
    """The upstreams on this machine: stdio ones, and HTTP ones on a loopback address."""
    return {
        name
        for name, cfg in upstreams.items()
        if isinstance(cfg, StdioServer) or is_loopback_host(browser_host(cfg.url))
    }
