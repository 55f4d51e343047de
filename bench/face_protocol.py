"""The HTTP face's own server on its own: `python -m bench.face_protocol [--src DIR] [--connections N] [--held N]`.

`web/http_protocol.LimitedHttpTools` on uvloop, as `faces.http` serves `/mcp` (the `DirectRoute`), with a socket
that keeps nothing in place of the real one, and an app that reads the body and answers one JSON body with
`faces.http_answers` (`read_body`, `reply`), as `/mcp` answers: per connection a new protocol, one POST and its
answer, then the close (what a handshake-era `mcp` client costs the face per elicitation answer: it opens a
connection per POST). Prints the CPU (`time.thread_time`) per connection, best of 6, and the bytes (tracemalloc) one
connection holds while its response stays open (a pushed question's POST). `--src`: the `src/` to run (for the base
of an A/B, one exported by `bench.ab.export_src`). The CPU figure moves with the machine's load; for a count that
does not, run it under valgrind (`valgrind --tool=callgrind python -m bench.face_protocol --connections N --held 0`,
twice with different N, and take the difference per connection). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}'
REQUEST = (b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: application/json, text/event-stream\r\n"
           b"content-type: application/json\r\nmcp-session-id: abcdef0123456789\r\nmcp-protocol-version: 2025-06-18\r\n"
           b"user-agent: python-httpx/0.28.1\r\naccept-encoding: gzip, deflate\r\nconnection: keep-alive\r\n"
           b"content-length: %d\r\n\r\n%s" % (len(BODY), BODY))


class Socket(asyncio.Transport):
    """A connection's transport that keeps nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 80)}.get(name, default)

    def write(self, data: Any) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def measure(args: argparse.Namespace) -> None:
    from uvicorn.config import Config
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
    from uvicorn.server import ServerState

    from elicitgate.faces.http_answers import read_body, reply
    from elicitgate.web.http_protocol import DirectRoute, HttpLimits, limited_protocol

    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    held = loop.create_future()

    async def answer(scope: Any, receive: Any, send: Any) -> None:
        await read_body(receive, 1 << 20)
        await reply(send, 200, {"jsonrpc": "2.0", "id": 1, "result": {}}, extra=[(b"mcp-session-id", b"abcdef")])
        answered.set_result(None)

    async def hold(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: 1\r\n\r\n", "more_body": True})
        await held

    def protocol(app: Any) -> Any:
        protocol_class = limited_protocol(HttpLimits())
        protocol_class.direct = DirectRoute(b"/mcp", app, app, ProxyHeadersMiddleware(app, trusted_hosts="127.0.0.2"))
        config = Config(app, lifespan="off", log_level="critical", access_log=False, proxy_headers=False)
        state = ServerState()
        return lambda: protocol_class(config=config, server_state=state, app_state={}, _loop=loop)

    make = protocol(answer)
    best = float("inf")
    for _ in range(6 if args.connections else 0):
        started = time.thread_time()
        for _ in range(args.connections):
            answered = loop.create_future()
            connection = make()
            connection.connection_made(Socket())
            connection.data_received(REQUEST)
            await answered
            await asyncio.sleep(0)
            connection.connection_lost(None)
        best = min(best, (time.thread_time() - started) / args.connections)
    if args.connections:
        print(f"{args.src}: {best * 1e6:.1f} us CPU per connection (a POST and its JSON answer), best of 6")
    if args.held:
        make = protocol(hold)
        kept: list[Any] = []
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(args.held):
            connection = make()
            connection.connection_made(Socket())
            connection.data_received(REQUEST)
            kept.append(connection)
        for _ in range(10):
            await asyncio.sleep(0)
        gc.collect()
        print(f"{args.src}: {(tracemalloc.get_traced_memory()[0] - before) / args.held:.0f} bytes per connection whose "
              "response stays open (tracemalloc)")
        held.cancel()
        for connection in kept:
            connection.connection_lost(None)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.face_protocol", description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--held", type=int, default=2_000)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.src).resolve()))
    import uvloop

    uvloop.run(measure(args))


if __name__ == "__main__":
    main()
