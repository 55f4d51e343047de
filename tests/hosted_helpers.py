"""Helpers for the hosted-elicitation tests: the admin API's event stream, and a hosted page driven
over plain HTTP (what a browser without JavaScript does)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2

TOKEN = "test-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def next_pending(base_url: str, *, token: str = TOKEN, count: int = 1) -> list[dict[str, Any]]:
    """Wait (on the admin API's server-sent events) until at least `count` elicitations are pending."""
    async with httpx2.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.stream("GET", "/api/elicitations/events", timeout=httpx2.Timeout(10, read=30)) as stream:
            event = None
            async for line in stream.aiter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event == "pending":
                    items = json.loads(line[5:])
                    if len(items) >= count:
                        return items
    raise AssertionError("event stream ended")


def next_pending_sync(base_url: str, *, token: str = TOKEN, count: int = 1) -> list[dict[str, Any]]:
    with httpx2.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}) as http:
        with http.stream("GET", "/api/elicitations/events", timeout=httpx2.Timeout(10, read=30)) as stream:
            event = None
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event == "pending":
                    items = json.loads(line[5:])
                    if len(items) >= count:
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
        data: dict[str, Any] = {"csrf": csrf_of(self.html), "action": action, **fields}
        response = await self.http.post(self.url, data=data, follow_redirects=True)
        self.html = response.text
        return response
