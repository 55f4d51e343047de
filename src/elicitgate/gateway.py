"""The gateway: upstream links, the merged catalog, the broker, and the peers on the face.

It builds the parts and hands them to each other. A client's request goes down through `router.requests`
(task requests through `router.task_requests`) to `router.forward`; what the servers send up comes in
through `router.inbound` (each link's handler), the one way into the broker. Who is on the face is
`router.peers`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.abc

from elicitgate import codecache, heap
from elicitgate.audit.trail import AuditTrail
from elicitgate.bridging.rounds import Rounds
from elicitgate.bridging.task_extension import ModernTasks
from elicitgate.config import GatewayConfig
from elicitgate.elicitation.broker import Broker
from elicitgate.elicitation.hosting import Hosting
from elicitgate.elicitation.notice_rules import every_target, unattended_for
from elicitgate.elicitation.notify import Notifier
from elicitgate.elicitation.url_policy import UrlPolicy, local_upstreams
from elicitgate.json_shapes import JsonObject
from elicitgate.router.asks import GatewayAsks
from elicitgate.router.catalog import Catalog
from elicitgate.router.elicitation_tasks import ElicitationTasks
from elicitgate.router.inbound import InboundRouter
from elicitgate.router.peers import Peers
from elicitgate.router.requests import RequestRouter
from elicitgate.router.task_requests import TaskRequests
from elicitgate.router.task_runner import TaskRunner
from elicitgate.router.tasks import TaskTable
from elicitgate.upstreams.link import LinkState, UpstreamLink

if TYPE_CHECKING:
    from elicitgate.cluster.bus import Replicas
    from elicitgate.cluster.modern_tasks import SharedModernTasks
    from elicitgate.cluster.tasks import SharedTasks

STARTUP_WAIT = 30.0


Face = Literal["stdio", "http"]


class Gateway:
    """Builds the parts once and hands them to each other.

    `face` says whether the process has a web server for the gateway's own hosted pages and inbox: the
    HTTP face always, the stdio face with `http.hosted_listen`. Only then is there a `hosting`.
    """

    def __init__(self, config: GatewayConfig, face: Face = "http") -> None:
        self.config = config
        upstreams = config.upstreams()
        self.catalog = Catalog(list(upstreams), config.namespacing)
        self.audit = AuditTrail(config.audit) if config.audit.enabled else None
        self.links: dict[str, UpstreamLink] = {}
        self.hosting = Hosting(config, self.links) if face == "http" or config.http.hosted_listen else None
        self.broker = Broker(
            config.elicitation,
            self.audit,
            UrlPolicy(config.elicitation.url_policy, local_upstreams(upstreams)),
            self.hosting,
        )
        self.broker.unattended = lambda server, tool: unattended_for(config, server, tool)
        if self.hosting is not None and every_target(config):
            self.broker.notices = self.hosting.notices = Notifier(config, self.hosting)
        self.tasks = TaskTable(config)
        """2025-11-25 tasks the clients run on upstreams through the gateway (docs/tasks.md)."""
        self.elicitation_tasks = ElicitationTasks(config.tasks.max_ttl)
        """Elicitations upstreams run as tasks on the gateway (`tasks.requests.elicitation.create`)."""
        self.face_listeners: list[Callable[[], None]] = []
        """Called when what the face declares may have changed (an upstream connected)."""
        self.peers = Peers(self.broker, self.links, self.tasks, idle_after=config.bridging.state_ttl)
        """The clients on the face, and what one that leaves gives back (`router.peers`)."""
        self.inbound = InboundRouter(
            self.catalog, self.broker, self.links, self.tasks, self.peers.connected,
            elicitation_tasks=self.elicitation_tasks,
            task_group=lambda: self.task_group,
            task_seen_ended=lambda relayed: self.task_requests.seen_ended(relayed),
        )
        """What the servers send up, and the one way into the broker (`router.inbound`)."""
        self.task_requests = TaskRequests(config, self.links, self.inbound, self.tasks)
        """A client's 2025-11-25 task requests, to the task's upstream or replica (`router.task_requests`)."""
        self.task_runner = TaskRunner(config, self.inbound, self.tasks)
        """Tasks the gateway runs for a plain call of a tool whose `taskSupport` is `required`."""
        self.asks = GatewayAsks(config, self.catalog, self.inbound)
        self.requests = RequestRouter(
            config, self.catalog, self.links, self.inbound,
            asks=self.asks, tasks=self.tasks, task_requests=self.task_requests, task_runner=self.task_runner,
            peers=self.peers, task_group=lambda: self.task_group,
        )
        """A client's requests, each down to its upstream (`router.requests`, then `router.forward`)."""
        self.rounds = Rounds(config.bridging)
        self.modern_tasks = ModernTasks(config)
        """Tasks of the 2026-07-28 extension (`io.modelcontextprotocol/tasks`), views of parked calls."""
        self.rounds.tasks = self.modern_tasks
        self.links.update(
            (name, UpstreamLink(
                name, cfg, config.upstream_retry, self.inbound, self._on_link_connected, self.hosting,
                asking=self.broker.asking,
            ))
            for name, cfg in upstreams.items()
        )
        self.replicas: Replicas | None = None
        """With `redis_url`: this replica among the others (`cluster.bus.Replicas`)."""
        if config.redis_url is not None:
            from elicitgate.cluster.bus import Replicas
            from elicitgate.cluster.limits import SharedLimits

            self.replicas = Replicas(config.redis_url.get_secret_value())
            self.broker.shared_limits = SharedLimits(
                self.replicas, config.elicitation, self.broker.open_counts, self.broker.admit_here
            )
        self.shared_tasks: SharedTasks | None = None
        """With `redis_url`: tasks followed across replicas (`cluster.tasks`)."""
        if self.replicas is not None:
            from elicitgate.cluster.tasks import SharedTasks

            self.shared_tasks = SharedTasks(self.replicas, self.task_requests, max_ttl=config.tasks.max_ttl)
            self.task_requests.shared = self.shared_tasks
            self.tasks.home = f"{self.replicas.id}."
        self.shared_modern_tasks: SharedModernTasks | None = None
        """With `redis_url`: the extension's tasks followed across replicas (`cluster.modern_tasks`)."""
        if self.replicas is not None:
            from elicitgate.cluster.modern_tasks import SharedModernTasks

            self.shared_modern_tasks = SharedModernTasks(self.replicas, self.modern_tasks)
        self._task_group: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def running(self, *, wait_for_upstreams: bool = True) -> AsyncGenerator[Gateway]:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for link in self.links.values():
                tg.start_soon(link.run, tg, name=f"link:{link.name}")
            tg.start_soon(self.peers.expire_idle, name="modern-peer-expiry")
            if self.broker.notices is not None:
                tg.start_soon(self.broker.notices.run, name="notices")
            if self.replicas is not None:
                tg.start_soon(self.replicas.run, name="replicas")
                await self.replicas.started.wait()
            if wait_for_upstreams:
                with anyio.move_on_after(STARTUP_WAIT):
                    for link in self.links.values():
                        await link.first_attempt_done.wait()
            codecache.finish()  # before `settle`: the cache it drops is no part of the heap kept
            heap.settle()
            if self.audit is not None:
                # After the upstreams' first attempt: with `audit.open_at_start` the writer opens the store
                # at once (importing SQLAlchemy, migrating), CPU the start-up needs; records made before it
                # is open wait in its queue.
                tg.start_soon(self.audit.run, name="audit-writer")
            try:
                yield self
            finally:
                try:
                    await self.rounds.close()  # before the audit trail closes: what they cut short is recorded
                    if self.replicas is not None:
                        await self.replicas.close()
                finally:
                    if self.audit is not None:
                        await self.audit.close()  # what is queued reaches the store; only this stops the writer
                tg.cancel_scope.cancel()

    # -- health --------------------------------------------------------------------------------

    def health(self) -> tuple[bool, JsonObject]:
        servers = {name: link.status() for name, link in self.links.items()}
        healthy = all(link.state is LinkState.UP for link in self.links.values())
        body: JsonObject = {"status": "ok" if healthy else "degraded", "upstreams": servers}
        if self.replicas is not None:
            redis = "up" if self.replicas.reachable else "unreachable"
            replica: JsonObject = {"id": self.replicas.id, "redis": redis}
            if (since := self.replicas.down_since) is not None:  # still 200: it serves its own clients alone
                replica["unreachable_for"] = round(anyio.current_time() - since, 1)
            body["replica"] = replica
        return healthy, body

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        assert self._task_group is not None, "the gateway is not running"
        return self._task_group

    async def _on_link_connected(self, link: UpstreamLink) -> None:
        assert link.primary is not None
        await self.catalog.refresh(link.name, link.primary)
        for listener in self.face_listeners:
            listener()
        await self.inbound.broadcast("notifications/tools/list_changed", None)
