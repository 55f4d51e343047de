"""The lean HTTP relay plus the question's work: `python -m bench.lean_http_work_relay --listen HOST:PORT
--upstream URL [--server NAME] [--audit-dir DIR]`.

`bench.lean_http_relay`'s plumbing (asyncio Protocols and httptools both ways, orjson, pooled keep-alive upstream
connections, callbacks) with `bench.lean_work_relay`'s `QuestionWork` on every JSON-RPC message: each client
request body, and each `data:` line of the upstream's SSE streams and each JSON body it answers with, goes through
it, so that each handshake-era `elicitation/create` gets the broker's work by elicitgate's own functions (see
`bench.lean_work_relay`). What the work writes in the direction of the message replaces it: the question as the
client sees it (the `[server] ` prefix, `_meta`, the relay's `eg-N` id) in its SSE event, the answer under the
server's id in the client's POST. What it writes the other way is sent on its own: a refusal (or an end at the
deadline) as a POST of its own to the upstream with the last client request's headers (its session), a re-ask as an
SSE event on the stream of the call that caused the question, and a client answer the work keeps (a re-ask) is
answered 202 by the relay. One client session at a time (the bench's). `bench.floor` measures it beside the direct
call, `bench.lean_http_relay` and elicitgate.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
from pathlib import Path
from typing import Any

import orjson
import uvloop

from bench import lean_http_relay as lean
from bench.lean_work_relay import QuestionWork, started_work

ANSWERED_HERE = b""
"""A queued request's method when the relay answers it itself (202): a client answer the work kept."""


def _sse(line: bytes) -> bytes:
    return b"event: message\r\ndata: " + line.rstrip(b"\n") + b"\r\n\r\n"


class WorkFront(lean.Front):
    """A client connection whose request bodies go through the question's work."""

    relay: WorkRelay

    def on_message_complete(self) -> None:
        body = bytes(self.body)
        relay = self.relay
        if self.parser.get_method() == b"POST":
            relay.headers = self.headers
        if body:
            body = relay.from_client(orjson.loads(body))
        method = self.parser.get_method() if body is not None else ANSWERED_HERE
        self.queue.append(lean.Request(method, self.headers, body or b"", self.parser.should_keep_alive()))
        if not self.busy:
            self.next()

    def next(self) -> None:
        if self.queue and self.queue[0].method == ANSWERED_HERE and self.transport is not None:
            self.busy = True
            self.keep_alive = self.queue.popleft().keep_alive
            self.answer(202, [], b"")
            return
        super().next()


class Sink(lean.Front):
    """Where the upstream's answer to a POST of the relay's own goes: nowhere."""

    def __init__(self, relay: WorkRelay) -> None:
        super().__init__(relay)
        self.transport = object()  # pyright: ignore[reportAttributeAccessIssue]

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def done(self) -> None:
        self.back = None


class WorkBack(lean.Back):
    """An upstream connection whose SSE events and JSON bodies go through the question's work."""

    relay: WorkRelay

    def event_again(self, event: bytes) -> bytes | None:
        """The event with each `data:` line's message through the work; None when the work kept it (a refusal)."""
        lines: list[bytes] = []
        for line in lean._LINE.split(event):  # pyright: ignore[reportPrivateUsage]
            if line.startswith(b"data:") and line[5:].strip():
                written = self.relay.from_server(orjson.loads(line[5:]), self.front)
                if written is None:
                    return None
                line = b"data: " + written
            lines.append(line)
        return b"\n".join(lines)

    def on_message_complete(self) -> None:
        if not self.stream and self.body:
            kind = next((value for name, value in self.headers if name.lower() == b"content-type"), b"")
            if kind.startswith(b"application/json"):
                written = self.relay.from_server(orjson.loads(bytes(self.body)), self.front)
                self.body = bytearray(written or b"")
        super().on_message_complete()


class WorkRelay(lean.Relay):
    """The upstream's pool, and the question's work between the two sides."""

    back = WorkBack

    def __init__(self, upstream: str, work: QuestionWork) -> None:
        super().__init__(upstream)
        self.work = work
        self.headers: lean.Headers = []
        """The last client POST's headers (its session): a POST of the relay's own goes with them."""
        work.to_server = self.post
        work.to_client = self.push_on_stream

    def from_client(self, message: Any) -> bytes | None:
        """The client's message through the work: what goes upstream in its place, or None (kept: a re-ask)."""
        out: list[bytes] = []
        work = self.work
        work.to_server = out.append
        try:
            work.from_client(message)
        finally:
            work.to_server = self.post
        return b"".join(out).rstrip(b"\n") or None

    def from_server(self, message: Any, front: lean.Front | None) -> bytes | None:
        """The upstream's message through the work: what goes to the client in its place, or None (kept)."""
        work = self.work
        if isinstance(message, dict) and message.get("method") == "elicitation/create":
            origin = next(reversed(work.calls.values()), None)
            if origin is not None:
                origin.stream = front  # a re-ask goes on the same stream
        out: list[bytes] = []
        work.to_client = out.append
        try:
            work.from_server(message)
        finally:
            work.to_client = self.push_on_stream
        return b"".join(out).rstrip(b"\n") or None

    def post(self, line: bytes) -> None:
        """A message of the work's own to the upstream (a refusal, an end at the deadline)."""
        self.send(Sink(self), lean.Request(b"POST", self.headers, line.rstrip(b"\n"), True))

    def push_on_stream(self, line: bytes) -> None:
        """A request of the work's own to the client (a re-ask): on the stream of the call that caused it."""
        request_id = orjson.loads(line).get("id")
        asked = self.work.asked.get(request_id)
        stream = asked.origin.stream if asked is not None else None
        if stream is not None and stream.transport is not None:
            stream.chunk(_sse(line))


async def serve(listen: str, upstream: str, server: str, audit_dir: Path) -> None:
    work, writer = await started_work(server, audit_dir, "lean_http_work_relay")
    host, _, port = listen.rpartition(":")
    relay = WorkRelay(upstream, work)
    loop = asyncio.get_running_loop()
    listening = await loop.create_server(lambda: WorkFront(relay), host, int(port))
    stop = loop.create_future()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, lambda: stop.done() or stop.set_result(None))
    await stop
    listening.close()
    await work.trail.close()
    await writer


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--upstream", required=True, metavar="URL")
    parser.add_argument("--server", default="up", help="the upstream's name in messages and records (default: up)")
    parser.add_argument("--audit-dir", type=Path, help="where the audit store goes (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lean-http-work-audit-") as temporary:
        uvloop.run(serve(args.listen, args.upstream, args.server, args.audit_dir or Path(temporary)))


if __name__ == "__main__":
    main()
