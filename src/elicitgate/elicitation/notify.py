"""Notices: telling a person that a question waits for them, wherever they are (docs/notify.md).

The broker hands every question it starts to `Notifier.watch`. The `notify` keys for its server and tool
(`notice_rules.rule_for`) decide whether and when a notice goes: at once when the gateway hosts the
question (the client cannot show it, the form asks for a secret, the client is headless); with `always`,
also `after` seconds into a question the client shows, whose hosted page is then opened beside the client
(the first answer wins: `elicitation.responders.beside`). Reminders follow every `remind_every` seconds until the
question ends.

Apprise's senders block, so each send runs in a daemon thread (at most `max_concurrent` at once), cut off
after `timeout`, off the question's path: a slow or failing target delays nothing, is retried `retries`
times, then logged once at WARNING; every outcome is counted per target scheme (`elicitgate_notices`).
A thread still sending when the gateway stops is abandoned, never waited for.

A notice says who asks (server, tool), the question's message, until when it waits and the absolute link
to its page. Never a default, a value typed, a `requestState` or the admin token: it is built from those
fields only (`notice_text`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio

from elicitgate.config import GatewayConfig, apprise_sender
from elicitgate.elicitation.hosted_registry import HostedEntry
from elicitgate.elicitation.model import Elicitation
from elicitgate.elicitation.notice_rules import NoticeRule, every_target, rule_for
from elicitgate.elicitation.responders import FirstAnswer
from elicitgate.metrics import NOTICES, labelled

if TYPE_CHECKING:
    from elicitgate.elicitation.hosting import Hosting

logger = logging.getLogger(__name__)

HOSTED_RESPONDERS = frozenset({"hosted_page", "hosted_inbox"})
MAX_MESSAGE_CHARS = 1000
"""A notice shows this much of the question's message (chat and push services cut long texts anyway)."""
MAX_BACKOFF = 30.0


def scheme_of(url: str) -> str:
    """What the metric and the log lines name a target by: its scheme, never the URL (it holds secrets)."""
    return url.split("://", 1)[0].lower() if "://" in url else "invalid"


@dataclass(frozen=True, slots=True)
class Notice:
    title: str
    body: str


def notice_text(el: Elicitation, link: str, *, reminder: bool = False, now: float | None = None) -> Notice:
    """The notice for `el`: who asks, its message, how long it waits, the link to its page."""
    now = time.time() if now is None else now
    left = max(0.0, el.deadline - anyio.current_time())
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now + left))
    origin = el.origin
    tool = origin.tool if origin is not None else None
    asker = f"elicitgate (before a call to {el.server})" if el.source == "gateway" else el.server
    message = str(el.params.get("message", ""))
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    title = f"{'Reminder: ' if reminder else ''}{asker} asks" + (f" ({tool})" if tool else "")
    body = "\n".join([
        f"The server {el.server} asks" + (f", during a call to {tool}" if tool else "") + ":"
        if el.source != "gateway" else f"elicitgate asks, before a call to {tool or el.server}:",
        message,
        f"It waits until {until} ({_minutes(left)} left).",
        f"Answer: {link}",
    ])
    return Notice(title, body)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{max(0, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _send(url: str, notice: Notice, timeout: float) -> bool:
    """One send to one target, in a worker thread (Apprise blocks)."""
    plugin = apprise_sender(url)
    if plugin is None:  # check-config refuses these; an env override may still bring one
        return False
    plugin.socket_connect_timeout = plugin.socket_read_timeout = timeout  # the thread ends near our cut-off
    return bool(plugin.notify(body=notice.body, title=notice.title))


class Notifier:
    """Sends the notices of a gateway whose config names at least one target. `run` must be running
    (the gateway's task group) for `watch` to do anything."""

    def __init__(self, config: GatewayConfig, hosting: Hosting) -> None:
        self.config = config
        self.hosting = hosting
        self.sender = Sender(config)
        self._tg: anyio.abc.TaskGroup | None = None
        self._watching: dict[str, anyio.Event] = {}
        """Questions with a watcher, each with the event that hurries its first notice."""
        self._warned_relative = False

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()  # sends in flight: their threads are abandoned, not awaited

    # -- what the broker and the hosting ask -------------------------------------------------------

    def rule(self, server: str, tool: str | None) -> NoticeRule:
        return rule_for(self.config, server, tool)

    def reaches(self, server: str, tool: str | None) -> bool:
        """A hosted question of this server and tool is announced: its page can be found without the inbox."""
        return self.rule(server, tool).on

    def beside(self, server: str, tool: str | None) -> bool:
        """A question the client shows is to have its page opened beside it later (`always`)."""
        rule = self.rule(server, tool)
        return rule.on and rule.when == "always"

    def watch(self, el: Elicitation) -> None:
        """`el` has started, or now waits on its page only: schedule its notices, if any (cheap; the work runs
        in a task of its own). A question already watched gets its first notice now if it has not had it."""
        if self._tg is None:
            return
        if (hurry := self._watching.get(el.id)) is not None:
            hurry.set()
            return
        origin = el.origin
        rule = self.rule(el.server, origin.tool if origin is not None else None)
        hosted = el.responder is not None and el.responder.name in HOSTED_RESPONDERS
        if not rule.on or not (hosted or rule.when == "always"):
            return
        self._watching[el.id] = anyio.Event()
        self._tg.start_soon(self._watch, el, rule, hosted, name=f"notices:{el.id}")

    # -- the notices of one question ---------------------------------------------------------------

    async def _watch(self, el: Elicitation, rule: NoticeRule, hosted: bool) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_at_end, el, tg.cancel_scope)
                if not hosted:
                    with anyio.move_on_after(rule.after):
                        await self._watching[el.id].wait()
                entry = await self._page(el)
                self._send(el, rule, notice_text(el, self._link(entry)))
                while rule.remind_every > 0:
                    await anyio.sleep(rule.remind_every)
                    self._send(el, rule, notice_text(el, self._link(entry), reminder=True))
                tg.cancel_scope.cancel()
        finally:
            self._watching.pop(el.id, None)

    def _send(self, el: Elicitation, rule: NoticeRule, notice: Notice) -> None:
        """In a task of the notifier's own: the question's end stops the retries, not a send under way (its
        outcome is counted)."""
        if self._tg is not None:
            send = partial(self.sender.send, rule.urls, notice, about=el.id, over=lambda: el.state.terminal)
            self._tg.start_soon(send)

    async def _page(self, el: Elicitation) -> HostedEntry:
        """The question's page: opened beside the client now (`always`), or once its hosted responder has."""
        if isinstance(el.responder, FirstAnswer):
            return await el.responder.open_page(el)
        return await self._hosted_entry(el)

    async def _hosted_entry(self, el: Elicitation) -> HostedEntry:
        """The page of a hosted question, once its responder opened it."""
        registry = self.hosting.registry
        version = registry.version
        while (entry := registry.by_id.get(el.id)) is None:
            version = await registry.wait_change(version)
        return entry

    def _link(self, entry: HostedEntry) -> str:
        link = self.hosting.page_url(entry)
        if not link.startswith(("http://", "https://")) and not self._warned_relative:
            self._warned_relative = True
            logger.warning("notices carry a link without a host: set http.public_url (docs/notify.md)")
        return link


class Sender:
    """Sends one notice to many targets: each in a worker thread, cut off, retried, counted."""

    def __init__(self, config: GatewayConfig) -> None:
        settings = config.elicitation.notify
        self.timeout = settings.timeout
        self.retries = settings.retries
        self._limiter = anyio.CapacityLimiter(settings.max_concurrent)
        # Apprise logs every failed send at WARNING; ours is one line per notice and target, after the retries.
        logging.getLogger("apprise").setLevel(logging.ERROR)

    async def send(
        self, urls: Sequence[str], notice: Notice, *, about: str = "", over: Callable[[], bool] = lambda: False
    ) -> dict[str, str]:
        """`notice` to every target at once, each retried on its own until `over()`; the outcome per URL."""
        outcomes: dict[str, str] = {}

        async def one(url: str) -> None:
            outcomes[url] = await self._send_retried(url, notice, about, over)

        async with anyio.create_task_group() as tg:
            for url in dict.fromkeys(urls):
                tg.start_soon(one, url)
        return outcomes

    async def _send_retried(self, url: str, notice: Notice, about: str, over: Callable[[], bool]) -> str:
        scheme = scheme_of(url)
        outcome = "failed"
        attempts = 0
        while True:
            attempts += 1
            outcome = await self._attempt(url, notice)
            if outcome == "sent" or attempts > self.retries:
                break
            await anyio.sleep(min(2.0 ** (attempts - 1), MAX_BACKOFF))
            if over():  # a notice about a question that has ended helps nobody
                break
        labelled(NOTICES, scheme, outcome).inc()
        if outcome != "sent":
            logger.warning(
                "notice%s to a %s:// target %s after %d attempts (docs/notify.md; `elicitgate doctor --notify` "
                "sends a test notice)",
                f" for elicitation {about}" if about else "", scheme,
                "timed out" if outcome == "timed_out" else "failed", attempts,
            )
        return outcome

    async def _attempt(self, url: str, notice: Notice) -> str:
        sent = False
        async with self._limiter:
            started = anyio.current_time()
            with anyio.move_on_after(self.timeout) as cut:
                try:
                    sent = await _in_daemon_thread(_send, url, notice, self.timeout)
                except Exception as exc:  # a sender's own bug must not end the watcher
                    logger.debug("notice to a %s:// target raised %s", scheme_of(url), type(exc).__name__)
        # The thread's own socket timeouts are ours too: on a busy loop its failure may come in before our cut.
        if cut.cancelled_caught or (not sent and anyio.current_time() - started >= self.timeout):
            return "timed_out"
        return "sent" if sent else "failed"


async def _in_daemon_thread(
    send: Callable[[str, Notice, float], bool], url: str, notice: Notice, timeout: float
) -> bool:
    """`send(...)` in a daemon thread of its own, its result awaited here. Not anyio's worker threads: the
    interpreter waits for those as it exits, and a target that hangs must never hold the gateway's exit."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bool] = loop.create_future()

    def settle(result: bool | None, error: BaseException | None) -> None:
        if done.done():  # cut off meanwhile
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(bool(result))

    def run() -> None:
        try:
            result, error = send(url, notice, timeout), None
        except Exception as exc:
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop has closed: nobody waits any more
            pass

    threading.Thread(target=run, name="elicitgate-notice", daemon=True).start()
    return await done


async def _cancel_at_end(el: Elicitation, scope: anyio.CancelScope) -> None:
    await el.wait_ended()
    scope.cancel()


async def send_test_notices(config: GatewayConfig) -> list[dict[str, str]]:
    """`elicitgate doctor --notify`: a test notice to every target of the config; where each is set, its
    scheme and the outcome."""
    targets = every_target(config)
    notice = Notice("elicitgate: test notice", "A test notice from `elicitgate doctor --notify`: this target works.")
    outcomes = await Sender(config).send([url for _, url in targets], notice)
    return [
        {"where": where, "scheme": scheme_of(url), "outcome": outcomes.get(url, "failed")} for where, url in targets
    ]
