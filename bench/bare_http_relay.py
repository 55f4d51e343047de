"""A bare Python relay for streamable HTTP MCP: `python -m bench.bare_http_relay --listen HOST:PORT --upstream URL`.

Every request that reaches it (any path, any method) goes to URL with the same headers and body, and the
upstream's response comes back as it streams: a JSON body, and each `data:` line of an SSE stream, parsed
and serialised again on the way (in both directions), and nothing else: no routing, no ids rewritten, no
checks, no sessions of its own. It runs the way the gateway's HTTP side ran until issue 34: uvicorn on uvloop
and httptools in front, httpx2 behind on the network layer the gateway had then (`bench/httpcore_network.py`),
connections kept alive both ways. It is the floor for anything written on those libraries that sits between a
client and a server over streamable HTTP (`bench.floor` and `bench.latency` measure it beside the direct call and
elicitgate).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import httpx2
import uvicorn
from starlette.types import Receive, Scope, Send

from bench.httpcore_network import AsyncioBackend, http_transport

HOP_BY_HOP = frozenset({b"host", b"connection", b"keep-alive", b"content-length", b"transfer-encoding", b"te",
                        b"upgrade", b"proxy-connection"})
"""Headers about one connection, not the message: each side of the relay sets its own."""

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE = re.compile(rb"\r\n|\n|\r")


def _again(data: bytes) -> bytes:
    return json.dumps(json.loads(data), separators=(",", ":")).encode()


def _event_again(event: bytes) -> bytes:
    """One SSE event with each `data:` line's JSON written again (other lines as they were)."""
    lines = _LINE.split(event)
    return b"\r\n".join(b"data: " + _again(line[5:]) if line.startswith(b"data:") else line for line in lines)


class Relay:
    """The ASGI app: one upstream URL, one connection pool to it."""

    def __init__(self, upstream: str) -> None:
        self.upstream = httpx2.URL(upstream)
        self.transport = http_transport(
            httpx2.Limits(max_connections=None, max_keepalive_connections=None), AsyncioBackend()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body", False):
                break
        if body:
            body = _again(body)
        headers = [(name, value) for name, value in scope["headers"] if name not in HOP_BY_HOP]
        request = httpx2.Request(scope["method"], self.upstream, headers=headers, content=body)
        response = await self.transport.handle_async_request(request)
        try:
            await self._relay(response, send)
        finally:
            await response.aclose()

    async def _relay(self, response: httpx2.Response, send: Send) -> None:
        headers = [(name, value) for name, value in response.headers.raw if name.lower() not in HOP_BY_HOP]
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            pending = b""
            async for chunk in response.aiter_raw():
                pending += chunk
                out: list[bytes] = []
                while match := _EVENT_END.search(pending):
                    out.append(_event_again(pending[: match.start()]) + b"\r\n\r\n")
                    pending = pending[match.end():]
                if out:
                    await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
        else:
            body = b"".join([chunk async for chunk in response.aiter_raw()])
            if body and kind.startswith("application/json"):
                body = _again(body)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--upstream", required=True, metavar="URL")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    options: dict[str, Any] = {"loop": "uvloop", "http": "httptools", "lifespan": "off", "access_log": False,
                               "log_level": "warning"}
    uvicorn.run(Relay(args.upstream), host=host, port=int(port), **options)


if __name__ == "__main__":
    main()
