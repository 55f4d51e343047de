"""The registry of hosted elicitations: what the hosted pages, the inbox and the admin API see.

An entry exists while its elicitation is open and is keyed twice: by the elicitation's id (admin API)
and by the unguessable token in its page URL. When the broker ends the elicitation the entry goes,
leaving a small bounded tombstone (token -> id and final state) so that a late visit to the page or a
late answer is told how it ended (410 / 409) instead of "unknown".
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from elicitgate.elicitation.meta import ERRORS_META_KEY
from elicitgate.elicitation.model import Elicitation
from elicitgate.json_shapes import JsonObject, is_array, is_mapping

TOMBSTONES = 1000


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(eq=False)
class HostedEntry:
    """One hosted elicitation as the web side sees it."""

    el: Elicitation
    kind: str
    """`page` (the human reaches the page through a URL-mode link the client opened) or `inbox`."""
    request: JsonObject
    """The latest request as the broker presents it (server-prefixed message; errors on a repeat)."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    round: int = 1
    errors: list[JsonObject] = field(default_factory=list[JsonObject])
    """Problems to show next to the fields: the broker's (on a repeat) or the page's own check."""
    draft: JsonObject | None = None
    """What the human typed last (raw form values), so a reload or an error page shows it again."""
    review: JsonObject | None = None
    """Checked content waiting for the human's confirmation on the review step."""
    ui_html: str | None = None
    """The upstream's `ui://` resource when the request delegates rendering to it."""
    client_elicitation_id: str | None = None
    claim: str | None = None
    """sha256 of the claim cookie of the browser the page belongs to (web/claims.py); None: unclaimed."""
    claimed_at: float | None = None
    answer: Mapping[str, Any] | None = None
    _answered: anyio.Event = field(default_factory=anyio.Event)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def id(self) -> str:
        return self.el.id

    @property
    def server(self) -> str:
        return self.el.server

    @property
    def schema(self) -> JsonObject:
        return self.el.requested_schema

    @property
    def message(self) -> str:
        """The server's own message (the page names the server separately)."""
        return str(self.el.params.get("message", ""))

    @property
    def ended(self) -> bool:
        return self.el.state.terminal

    def deadline_wall(self) -> float:
        return time.time() + max(0.0, self.el.deadline - anyio.current_time())

    def give(self, raw: Mapping[str, Any]) -> bool:
        """Hand the human's answer to the waiting responder; False when one is already in."""
        if self.answer is not None or self.ended:
            return False
        self.answer = dict(raw)
        self._answered.set()
        return True

    async def next_answer(self) -> Mapping[str, Any]:
        await self._answered.wait()
        assert self.answer is not None
        return self.answer

    def reask(self, request: JsonObject) -> None:
        """The broker asks again (the answer failed its check): show its errors, take a new answer."""
        self.round += 1
        self.request = request
        self.errors = self.broker_errors()
        self.answer = None
        self.review = None
        self._answered = anyio.Event()
        self.touch()

    def broker_errors(self) -> list[JsonObject]:
        """The broker's verdict on the last answer, when it asked again because of it."""
        meta = self.request.get("_meta")
        problems = meta.get(ERRORS_META_KEY) if is_mapping(meta) else None
        return list(problems) if is_array(problems) else []

    def finish(self) -> None:
        """The elicitation ended: nobody waits on it any more, and its page learns it."""
        self._answered.set()
        self.touch()

    def touch(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def settled(self, round_: int) -> None:
        """Wait until the answer given in `round_` was judged: the elicitation ended, or was asked again."""
        while not self.ended and self.round == round_:
            await self._changed.wait()


class HostedRegistry:
    def __init__(self) -> None:
        self.by_id: dict[str, HostedEntry] = {}
        self.by_token: dict[str, HostedEntry] = {}
        self.tombstones: OrderedDict[str, JsonObject] = OrderedDict()
        """sha256(token) -> {"id", "state", "by"}: bounded, so a late visitor learns how it ended (and, for a
        question its page raced the client for, that the client answered it: `elicitation.responders.beside`)."""
        self.version = 0
        self._changed = anyio.Event()
        self.watchers: list[Callable[[], None]] = []
        """Told of every change made here (with `redis_url`: the board the other replicas read)."""

    def __len__(self) -> int:
        return len(self.by_id)

    def add(self, entry: HostedEntry) -> None:
        self.by_id[entry.id] = entry
        self.by_token[entry.token] = entry
        self.bump()

    def finish(self, el: Elicitation) -> None:
        entry = self.by_id.pop(el.id, None)
        if entry is None:
            return
        self.by_token.pop(entry.token, None)
        self.tombstones[token_digest(entry.token)] = {"id": el.id, "state": str(el.state), "by": el.answered_by}
        while len(self.tombstones) > TOMBSTONES:
            self.tombstones.popitem(last=False)
        entry.finish()
        self.bump()

    def ended_state(self, token: str) -> JsonObject | None:
        return self.tombstones.get(token_digest(token))

    def bump(self, *, here: bool = True) -> None:
        """A change; `here` False: another replica's (its watchers are not told)."""
        self.version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        if here:
            for watcher in self.watchers:
                watcher()

    async def wait_change(self, version: int) -> int:
        while self.version == version:
            await self._changed.wait()
        return self.version
