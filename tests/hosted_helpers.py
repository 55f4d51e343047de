"""Helpers for the hosted-elicitation tests: the admin API's event stream, and a hosted page driven
over plain HTTP (what a browser without JavaScript does)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2

TOKEN = "test-admin-BUnZU22xf_nlbk1OswNzZYs7-LsoeE4urQCgJYknxV4"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class _PendingEvents:
    """Reads the admin API's event stream line by line until `count` elicitations are pending."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.event: str | None = None

    def feed(self, line: str) -> list[dict[str, Any]] | None:
        if line.startswith("event:"):
            self.event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and self.event == "pending":
            items = json.loads(line[5:])
            if len(items) >= self.count:
                return items
        return None


EVENTS_PATH = "/api/elicitations/events"
EVENTS_TIMEOUT = httpx2.Timeout(10, read=30)


async def next_pending(base_url: str, *, token: str = TOKEN, count: int = 1) -> list[dict[str, Any]]:
    """Wait (on the admin API's server-sent events) until at least `count` elicitations are pending."""
    reader = _PendingEvents(count)
    async with httpx2.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.stream("GET", EVENTS_PATH, timeout=EVENTS_TIMEOUT) as stream:
            async for line in stream.aiter_lines():
                if (items := reader.feed(line)) is not None:
                    return items
    raise AssertionError("event stream ended")


def next_pending_sync(base_url: str, *, token: str = TOKEN, count: int = 1) -> list[dict[str, Any]]:
    reader = _PendingEvents(count)
    with httpx2.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}) as http:
        with http.stream("GET", EVENTS_PATH, timeout=EVENTS_TIMEOUT) as stream:
            for line in stream.iter_lines():
                if (items := reader.feed(line)) is not None:
                    return items
    raise AssertionError("event stream ended")


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def error_next_to(html: str, field: str) -> str:
    match = re.search(rf'<p class="eg-error" id="err-{re.escape(field)}"[^>]*>([^<]*)</p>', html)
    assert match, html
    return match.group(1)


class PlainPage:
    """A hosted page answered with plain form posts, cookies kept (like a browser without JS)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.html = ""

    async def open(self) -> httpx2.Response:
        response = await self.http.get(self.url)
        self.html = response.text
        return response

    async def post(self, action: str, **fields: Any) -> httpx2.Response:
        """`fields` by property name (the page names their controls `f.<property>`)."""
        data: dict[str, Any] = {"csrf": csrf_of(self.html), "action": action,
                                **{f"f.{name}": value for name, value in fields.items()}}
        response = await self.http.post(self.url, data=data, follow_redirects=True)
        self.html = response.text
        return response
