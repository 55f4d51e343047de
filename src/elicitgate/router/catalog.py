"""The merged catalog: every upstream's tools, prompts, resources and templates under one face.

Tool and prompt names are namespaced `<server><sep><name>`. Resource URIs pass through unchanged
while they are unique; a URI that two servers both list is shown as `<server>+<uri>` for each.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_types import INVALID_PARAMS

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import NamespacingConfig
from elicitgate.errors import MethodNotFound
from elicitgate.json_shapes import JsonObject, is_array, is_object
from elicitgate.upstreams.connection import UpstreamConnection

logger = logging.getLogger(__name__)

MAX_PAGES = 100
LISTS: dict[str, tuple[str, str]] = {
    # kind: (list method, result key)
    "tools": ("tools/list", "tools"),
    "prompts": ("prompts/list", "prompts"),
    "resources": ("resources/list", "resources"),
    "resourceTemplates": ("resources/templates/list", "resourceTemplates"),
}
CAPABILITY_OF = {"tools": "tools", "prompts": "prompts", "resources": "resources", "resourceTemplates": "resources"}


@dataclass
class ServerCatalog:
    items: dict[str, list[JsonObject]] = field(default_factory=lambda: {kind: [] for kind in LISTS})


class Catalog:
    def __init__(self, servers: list[str], namespacing: NamespacingConfig) -> None:
        self.servers = servers
        self.namespacing = namespacing
        self.by_server: dict[str, ServerCatalog] = {name: ServerCatalog() for name in servers}
        self._uri_owner: dict[str, tuple[str, str]] = {}
        self._named: dict[tuple[str, str], dict[str, JsonObject]] = {}
        """(server, "tools" | "prompts") -> upstream name -> the listed item."""
        sep = namespacing.separator
        self._split_at_first: frozenset[str] = (
            frozenset(servers) if not any(sep[0] in server for server in servers) else frozenset()
        )
        """The servers, when a public name's first separator is always the one after its server (no server
        name holds the separator's first character); else empty, and every server's prefix is tried."""

    @property
    def prefixed(self) -> bool:
        return len(self.servers) > 1 or self.namespacing.prefix_single_server

    def public_name(self, server: str, name: str) -> str:
        return f"{server}{self.namespacing.separator}{name}" if self.prefixed else name

    def resolve_name(self, kind: str, public: Any) -> tuple[str, str]:
        """`(server, upstream name)` for a namespaced tool or prompt name."""
        if not isinstance(public, str):
            raise errors.gateway_error(INVALID_PARAMS, f"{kind} name must be a string", rule="name is required")
        if not self.prefixed:
            return self.servers[0], public
        sep = self.namespacing.separator
        server, found, name = public.partition(sep)
        if found and name and server in self._split_at_first:
            return server, name
        # Server names hold no separator, but one may end as it begins (`a_` before `__`): the first
        # separator in `a___x` is not the one after the server, so each server's prefix is tried.
        candidates = [
            (server, public[len(server) + len(sep) :])
            for server in self.servers
            if public.startswith(server + sep) and len(public) > len(server) + len(sep)
        ]
        if len(candidates) > 1:  # `a` + `_x` or `a_` + `x`: the server that lists the name
            candidates = [c for c in candidates if self.find(f"{kind}s", *c) is not None] or candidates
        if len(candidates) == 1:
            return candidates[0]
        rule = f"{kind} names look like <server>{sep}<name>"
        if not candidates:
            raise errors.gateway_error(INVALID_PARAMS, f"unknown {kind} {public!r}", rule=rule, servers=self.servers)
        servers = [server for server, _ in candidates]
        raise errors.gateway_error(INVALID_PARAMS, f"{kind} {public!r} is ambiguous", rule=rule, candidates=servers)

    def resolve_uri(self, uri: Any) -> tuple[str, str]:
        """`(server, upstream uri)` for a resource URI as the client sees it."""
        if not isinstance(uri, str):
            raise errors.gateway_error(INVALID_PARAMS, "uri must be a string", rule="uri is required")
        if (owner := self._uri_owner.get(uri)) is not None:
            return owner
        server, plus, rest = uri.partition("+")
        if plus and server in self.by_server:
            return server, rest
        matches = [s for s in self.servers if any(_template_matches(t, uri) for t in self._templates(s))]
        if len(matches) == 1:
            return matches[0], uri
        if len(self.servers) == 1:
            return self.servers[0], uri
        raise errors.gateway_error(
            INVALID_PARAMS,
            f"no upstream serves resource {uri!r}" if not matches else f"resource {uri!r} is ambiguous",
            uri=uri,
            candidates=matches,
        )

    def find(self, kind: str, server: str, name: str) -> JsonObject | None:
        """The tool or prompt (`kind` "tools" / "prompts") `server` lists as `name`, as the server sent it."""
        return self._named.get((server, kind), {}).get(name)

    def tool_input_schema(self, public: str) -> Mapping[str, Any] | None:
        """The `inputSchema` of the tool listed as `public`, or None when no server lists it.

        The SDK's HTTP face checks a 2026-07-28 call's `Mcp-Param-*` headers against it; without this
        lookup it would run the whole `tools/list` handler on every call to find one tool."""
        try:
            server, name = self.resolve_name("tool", public)
        except MCPError:
            return None
        schema = (self.find("tools", server, name) or {}).get("inputSchema")
        return schema if is_object(schema) else None

    def _reindex_names(self, server: str) -> None:
        for kind in ("tools", "prompts"):
            items = self.by_server[server].items[kind]
            self._named[(server, kind)] = {i["name"]: i for i in items if isinstance(i.get("name"), str)}

    def _templates(self, server: str) -> list[JsonObject]:
        return self.by_server[server].items["resourceTemplates"]

    def merged(self, kind: str) -> list[JsonObject]:
        out: list[JsonObject] = []
        for server in self.servers:
            for item in self.by_server[server].items[kind]:
                out.append(self._present(server, kind, item))
        return out

    def _present(self, server: str, kind: str, item: JsonObject) -> JsonObject:
        item = dict(item)
        if kind in ("tools", "prompts") and isinstance(item.get("name"), str):
            item["name"] = self.public_name(server, item["name"])
        elif kind == "resources" and isinstance(item.get("uri"), str):
            item["uri"] = self.public_uri(server, item["uri"])
        return item

    def public_uri(self, server: str, uri: str) -> str:
        owners = [s for s in self.servers if any(r.get("uri") == uri for r in self.by_server[s].items["resources"])]
        return f"{server}+{uri}" if len(owners) > 1 else uri

    def _reindex_uris(self) -> None:
        index: dict[str, tuple[str, str]] = {}
        for server in self.servers:
            for resource in self.by_server[server].items["resources"]:
                uri = resource.get("uri")
                if isinstance(uri, str):
                    index[self.public_uri(server, uri)] = (server, uri)
        self._uri_owner = index

    def clear(self, server: str) -> None:
        self.by_server[server] = ServerCatalog()
        self._reindex_names(server)
        self._reindex_uris()

    def update(self, server: str, lists: Mapping[str, list[JsonObject]]) -> None:
        """Replace the lists (by kind: "tools", "prompts", ...) `server` listed, all at once."""
        self.by_server[server].items.update(lists)
        self._reindex_names(server)
        self._reindex_uris()

    async def refresh(self, server: str, conn: UpstreamConnection, kinds: tuple[str, ...] = tuple(LISTS)) -> None:
        capabilities = conn.negotiated.capabilities if conn.negotiated else {}
        lists: dict[str, list[JsonObject]] = {}
        for kind in kinds:
            lists[kind] = []
            if CAPABILITY_OF[kind] not in capabilities:
                continue
            try:
                lists[kind] = await _fetch_all(conn, *LISTS[kind])
            except MethodNotFound:
                pass  # declaring `resources` without serving templates is common: that list is empty
            except MCPError as exc:  # one list an upstream refuses does not cost the others
                logger.warning("upstream %r: %s failed: %s", server, LISTS[kind][0], exc.error.message)
        self.update(server, lists)


async def _fetch_all(conn: UpstreamConnection, method: str, key: str) -> list[JsonObject]:
    items: list[JsonObject] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await conn.request(method, {"cursor": cursor} if cursor else None, timeout=conn.config.request_timeout)
        page = result.get(key)
        items += [item for item in page if is_object(item)] if is_array(page) else []
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return items


def _template_matches(template: Mapping[str, Any], uri: str) -> bool:
    pattern = template.get("uriTemplate")
    if not isinstance(pattern, str):
        return False
    prefix = pattern.split("{", 1)[0]
    return bool(prefix) and uri.startswith(prefix)
