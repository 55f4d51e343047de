"""`/mcp` of the HTTP face, per request, in one process: `python -m bench.face_requests [--src DIR] [--requests N]
[--rounds R]`.

The HTTP face as `serve` builds it (`faces.http.build_http_app` over a gateway with no upstream, its lifespan entered,
`HttpFaceServer`'s `/mcp` route in its own protocol `web/http_protocol.LimitedHttpTools`) on uvloop, with a stand-in
socket: a session opened (`initialize`, `notifications/initialized`), then `--requests` `ping` POSTs one after the
other on one keep-alive connection, each answered by the gateway itself as one JSON body. What is measured is the
face's own work per request (the protocol, the Host / Origin guard, the endpoint, the session's JSON-RPC layer) with
no upstream, no other process and no timer in between. Prints the CPU (`time.thread_time`) per request, best of
`--rounds`. The CPU figure moves with the machine's load; for a count that does not, run it under valgrind twice with
different N and take the difference per request:
`valgrind --tool=callgrind --callgrind-out-file=/dev/null python -m bench.face_requests --requests N --rounds 1`
(the set-up, the same in both, cancels out). `--src`: the `src/` to run (for the base of an A/B, one exported by
`bench.ab.export_src`). Asserts nothing but that each answer came.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench import face_protocol

ROOT = Path(__file__).resolve().parent.parent
HEAD = (b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: application/json, text/event-stream\r\n"
        b"content-type: application/json\r\nuser-agent: python-httpx/0.28.1\r\naccept-encoding: gzip, deflate\r\n"
        b"connection: keep-alive\r\n")


def post(message: dict[str, Any], session: bytes | None = None) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    extra = b"mcp-session-id: %s\r\nmcp-protocol-version: 2025-06-18\r\n" % session if session is not None else b""
    return HEAD + extra + b"content-length: %d\r\n\r\n%s" % (len(body), body)


class Socket(face_protocol.Socket):
    """`bench.face_protocol`'s stand-in socket, which keeps what is written until a whole response (sized by its
    Content-Length) has come, then hands it to `answered`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.buffer = bytearray()
        self.answered: asyncio.Future[bytes] = loop.create_future()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: Any) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        if b"content-length: " in head:
            whole = end + 4 + int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        else:  # an answer later than the JSON window (under valgrind) comes as an SSE stream, chunked
            last = self.buffer.find(b"\r\n0\r\n\r\n", end)
            whole = last + 7 if last >= 0 else len(self.buffer) + 1
        if len(self.buffer) >= whole:
            response, self.buffer = bytes(self.buffer[:whole]), self.buffer[whole:]
            self.answered.set_result(response)

    def expect(self) -> asyncio.Future[bytes]:
        self.answered = self.loop.create_future()
        return self.answered


async def measure(args: argparse.Namespace) -> None:
    import uvicorn
    from uvicorn.server import ServerState

    from elicitgate.config import build_config
    from elicitgate.faces.http import HttpFaceServer, build_http_app
    from elicitgate.gateway import Gateway
    from elicitgate.web.client_address import ClientAddress
    from elicitgate.web.http_protocol import HttpLimits, limited_protocol

    loop = asyncio.get_running_loop()
    cfg = build_config({"mcpServers": {}}, "bench.face_requests")
    gateway = Gateway(cfg)
    app = build_http_app(gateway, "http://127.0.0.1:8000")
    config = uvicorn.Config(ClientAddress(app), log_level="warning", lifespan="off", access_log=False,
                            http=limited_protocol(HttpLimits.of(cfg.http)), proxy_headers=False)
    HttpFaceServer(config, app)  # `/mcp` routed in the protocol, as `serve` has it
    config.load()
    async with app.router.lifespan_context(app):
        protocol = config.http_protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
        socket = Socket(loop)
        protocol.connection_made(socket)

        async def exchange(request: bytes) -> bytes:
            answered = socket.expect()
            protocol.data_received(request)
            return await asyncio.wait_for(answered, 600)  # generous: under valgrind on a loaded machine

        opened = await exchange(post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}))
        session = opened.lower().split(b"mcp-session-id: ", 1)[1].split(b"\r\n", 1)[0]
        initialized = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        assert (await exchange(initialized)).startswith(b"HTTP/1.1 202")
        pings = [post({"jsonrpc": "2.0", "id": n, "method": "ping"}, session) for n in range(1, 101)]
        for request in pings:  # warm-up
            assert (await exchange(request)).startswith(b"HTTP/1.1 200")
        best = float("inf")
        for _ in range(args.rounds):
            started = time.thread_time()
            for n in range(args.requests):
                await exchange(pings[n % 100])
            best = min(best, (time.thread_time() - started) / args.requests)
        protocol.connection_lost(None)
    print(f"{args.src}: {best * 1e6:.1f} us CPU per /mcp request (a ping POST on a session, its JSON answer), "
          f"best of {args.rounds}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.face_requests", description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.src).resolve()))
    import uvloop

    uvloop.run(measure(args))


if __name__ == "__main__":
    main()
