"""A client's requests, each routed to its upstream: the downward twin of `router.inbound`.

`call` resolves a public name or URI in the merged catalog (`router.catalog`), asks what the gateway must ask
first (`router.asks`), and hands the request to `router.forward`, which takes it down. On the way it picks
what runs the call: a 2025-11-25 task (`router.task_requests`), a task a 2026-07-28 upstream runs for a
plain call (`router.task_bridge`), a task the gateway runs for a tool that requires one (`router.task_runner`),
or a 2026-07-28 subscription (`bridging.subscriptions`). `logging/setLevel` goes to every upstream that logs.
What the servers send up during the call comes back through `router.inbound`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.bridging import subscriptions
from elicitgate.config import GatewayConfig
from elicitgate.contracts import Origin
from elicitgate.json_shapes import JsonObject, is_mapping
from elicitgate.router.asks import Answered, Ask, GatewayAsks
from elicitgate.router.catalog import Catalog
from elicitgate.router.forward import Resumed, forward
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.peers import Peers
from elicitgate.router.task_bridge import bridged, run_upstream_task
from elicitgate.router.task_requests import TaskRequests
from elicitgate.router.task_runner import TaskRunner, task_required
from elicitgate.router.tasks import TaskTable
from elicitgate.upstreams.link import UpstreamLink

logger = logging.getLogger(__name__)


class RequestRouter:
    """The client-to-upstream direction: one client request to the upstream that serves it."""

    def __init__(
        self,
        config: GatewayConfig,
        catalog: Catalog,
        links: Mapping[str, UpstreamLink],
        inbound: InboundRouter,
        *,
        asks: GatewayAsks,
        tasks: TaskTable,
        task_requests: TaskRequests,
        task_runner: TaskRunner,
        peers: Peers,
        task_group: Callable[[], anyio.abc.TaskGroup],
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.links = links
        self.inbound = inbound
        self.asks = asks
        self.tasks = tasks
        self.task_requests = task_requests
        self.task_runner = task_runner
        self.peers = peers
        self._task_group = task_group

    def call(self, call: Origin, method: str, params: Mapping[str, Any]) -> Awaitable[JsonObject]:
        """Route one client request to its upstream (tools/call, prompts/get, resources/*, completion).

        A plain tool call or prompt is `forward`'s own coroutine, not one around it: no frame of this method's is
        held while the call waits (on a human, for as long as an upstream's question does)."""
        if method in ("tools/call", "prompts/get"):
            kind, server, name, named, ask, plain = self._named(call, method, params)
            if plain:
                return forward(self.inbound, self.links[server], call, method, named,
                               max_rounds=self.config.bridging.max_rounds)
            return self._call_named(call, method, kind, params.get("name"), server, name, named, ask)
        return self._call_other(call, method, params)

    def plain(self, call: Origin, method: str, params: Mapping[str, Any]) -> tuple[UpstreamLink, JsonObject] | None:
        """The link and params of a tools/call, prompts/get or resources/read that `forward` alone serves (`call`'s
        commonest way: no question of the gateway's first, not run apart); None for any other. Raises as `call` does
        for a name or URI no upstream has."""
        if method in ("tools/call", "prompts/get"):
            _, server, _, named, _, plain = self._named(call, method, params)
            return (self.links[server], named) if plain else None
        if method == "resources/read":
            server, uri = self.catalog.resolve_uri(params.get("uri"))
            return self.links[server], {**params, "uri": uri}
        return None

    def _named(
        self, call: Origin, method: str, params: Mapping[str, Any]
    ) -> tuple[str, str, str, JsonObject, Ask | None, bool]:
        """A tools/call's or prompts/get's kind, server, name there, params with that name, the gateway's question
        first (if any), and whether `forward` alone serves it."""
        kind = "tool" if method == "tools/call" else "prompt"
        server, name = self.catalog.resolve_name(kind, params.get("name"))
        named = {**params, "name": name}
        item = self.catalog.find(f"{kind}s", server, name)  # once: the ask and `_runs_apart` read the same entry
        ask = self.asks.needed(f"{kind}s", server, name, item, named)
        plain = ask is None and not (method == "tools/call" and self._runs_apart(call, server, item, named))
        return kind, server, name, named, ask, plain

    def _runs_apart(self, call: Origin, server: str, tool: JsonObject | None, params: Mapping[str, Any]) -> bool:
        """A tools/call (of `tool`, the catalog's entry) that something other than `forward` runs: a 2025-11-25
        task, a task a 2026-07-28 upstream runs for a plain call, or a task the gateway runs for a tool that
        requires one (`_call_named`)."""
        if "task" in params and call.era == "handshake":
            return True
        if bridged(call, self.links[server], tool) is not None:
            return True
        return "task" not in params and self._runs_as_task(server, tool)

    async def _call_named(
        self, call: Origin, method: str, kind: str, public_name: object, server: str, name: str,
        params: JsonObject, ask: Ask | None,
    ) -> JsonObject:
        """A tools/call or prompts/get the gateway asks about first, or that runs as a task (`_runs_apart`)."""
        as_task = method == "tools/call" and "task" in params and call.era == "handshake"  # 2025-11-25 tasks
        if ask is not None:
            asked = await self.asks.run(ask, self.links[server], call, params)
            if isinstance(asked, Answered):
                if as_task:  # no task was made: a CallToolResult is not what the client waits for
                    raise errors.gateway_error(
                        INVALID_PARAMS, asked.result["content"][0]["text"], tool=public_name, as_task=True
                    )
                return asked.result
            params = asked
        if as_task:
            return await self.task_requests.create(call, server, params)
        if method == "tools/call":
            tool = self.catalog.find("tools", server, name)  # read again: the catalog may have changed while it asked
            if (park := bridged(call, self.links[server], tool)) is not None:
                return await run_upstream_task(self.inbound, self.links[server], self.tasks, park, params,
                                               max_rounds=self.config.bridging.max_rounds)
            if "task" not in params and self._runs_as_task(server, tool):
                return await self.task_runner.run(call, self.links[server], params)
        return await forward(self.inbound, self.links[server], call, method, params,
                             max_rounds=self.config.bridging.max_rounds)

    async def _call_other(self, call: Origin, method: str, params: Mapping[str, Any]) -> JsonObject:
        """Route a resources/*, completion/complete or logging/setLevel request."""
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            server, uri = self.catalog.resolve_uri(params.get("uri"))
            params = {**params, "uri": uri}
        elif method == "completion/complete":
            server, params = self._route_completion(params)
        elif method == "logging/setLevel":
            return await self._set_log_level(call, params)
        else:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)
        link = self.links[server]
        if method in ("resources/subscribe", "resources/unsubscribe") and link.primary is not None:
            if link.primary.era == "modern":  # 2026-07-28 subscribes with subscriptions/listen
                if method == "resources/subscribe":
                    return await subscriptions.subscribe(self._task_group(), call.peer, link, params["uri"])
                return subscriptions.unsubscribe(call.peer, server, params["uri"])
        result = await forward(self.inbound, link, call, method, params, max_rounds=self.config.bridging.max_rounds)
        if method in ("resources/subscribe", "resources/unsubscribe"):  # whom its updates are for
            subscriptions.remember(call.peer, server, params["uri"], subscribed=method == "resources/subscribe")
        return result

    async def call_once(
        self, call: Origin, method: str, params: Mapping[str, Any],
        route: tuple[UpstreamLink, JsonObject] | None = None, resume: Resumed | None = None,
    ) -> JsonObject:
        """`call`, then give back what a per-call client borrowed for it (its pooled upstream connections). `route`:
        what `plain` found for it already; `resume`: where it stopped, run until asked (`forward`)."""
        try:
            if route is not None:
                return await forward(self.inbound, route[0], call, method, route[1],
                                     max_rounds=self.config.bridging.max_rounds, resume=resume)
            return await self.call(call, method, params)
        finally:
            if call.peer.per_call and not self.peers.give_back_upstreams(call.peer):  # no shielded scope for nothing
                with anyio.CancelScope(shield=True):
                    await self.peers.release_upstreams(call.peer)

    def _runs_as_task(self, server: str, tool: JsonObject | None) -> bool:
        """A tool (the catalog's entry) of a 2025-11-25 upstream that can only be called as a task
        (`router.task_runner`)."""
        primary = self.links[server].primary
        # The tool first: most are not `required` (a dict read), where `era` is a property's call.
        return primary is not None and task_required(tool) and primary.era == "handshake"

    async def _set_log_level(self, call: Origin, params: Mapping[str, Any]) -> JsonObject:
        """`logging/setLevel` is remembered for the client and goes to every handshake-era upstream that
        offers logging (on the connection this client's calls use: its own under `per_session`, the
        shared one otherwise, where the last level set wins). 2026-07-28 upstreams take the remembered
        level with each request (`forward`). One upstream refusing does not fail the others."""
        if isinstance(params.get("level"), str):
            call.peer.log_level = params["level"]
        for link in self.links.values():
            negotiated = link.primary.negotiated if link.primary is not None else None
            if negotiated is None or negotiated.era == "modern" or "logging" not in negotiated.capabilities:
                continue  # a 2026-07-28 upstream gets the level with each request (`forward`)
            try:
                conn = await link.connection_for(call.peer)
                await conn.request("logging/setLevel", params, origin=call, timeout=link.config.request_timeout)
            except (MCPError, TimeoutError) as exc:
                logger.warning("upstream %r refused logging/setLevel: %s", link.name, exc)
        return {}

    def _route_completion(self, params: Mapping[str, Any]) -> tuple[str, JsonObject]:
        ref = params.get("ref")
        if not is_mapping(ref):
            raise errors.gateway_error(INVALID_PARAMS, "completion/complete needs a ref", rule="ref is required")
        if ref.get("type") == "ref/prompt":
            server, name = self.catalog.resolve_name("prompt", ref.get("name"))
            return server, {**params, "ref": {**ref, "name": name}}
        server, uri = self.catalog.resolve_uri(ref.get("uri"))
        return server, {**params, "ref": {**ref, "uri": uri}}
