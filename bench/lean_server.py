"""A lean handshake-era MCP server over stdio, for `bench.scale`'s completed-questions phase:
`python -m bench.lean_server`.

The demo upstream (the `mcp` SDK's server) spends ~1.5 ms of CPU per `confirm` call, nearly twice the gateway's
own; a million questions are then mostly the upstream's time. This one serves the same two tools the same way on
its own stdin and stdout: `confirm` sends one `elicitation/create` (the demo's form: `ok`, a boolean) and returns
the answer as text once the client's answer has come back through the gateway, `echo` answers at once. It
answers `initialize` (2025-06-18, tools only), `tools/list`, `ping`; anything else gets -32601. Everything runs
in protocol callbacks, JSON by orjson. The gateway's side of it is the one any handshake-era stdio upstream gets.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from typing import Any, cast

import orjson

PROTOCOL_VERSION = "2025-06-18"
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "Yes?"}}, "required": ["ok"]}
TOOLS = [
    {"name": "confirm", "description": "Ask the user a yes / no question.",
     "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}},
    {"name": "echo", "description": "Echoes its text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]


class LeanServer(asyncio.Protocol):
    def __init__(self, out: asyncio.WriteTransport, closed: asyncio.Future[None]) -> None:
        self.out = out
        self.closed = closed
        self.pending = bytearray()
        self.ids = itertools.count(1)
        self.asked: dict[int, Any] = {}
        """Our `elicitation/create` ids -> the id of the `tools/call` that waits for its answer."""

    def data_received(self, data: bytes) -> None:
        self.pending += data
        lines = self.pending.split(b"\n")
        self.pending = bytearray(lines.pop())
        for line in lines:
            if line.strip():
                self.received(orjson.loads(line))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(orjson.dumps(message) + b"\n")

    def result(self, id_: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": id_, "result": result})

    def received(self, message: dict[str, Any]) -> None:
        method, id_ = message.get("method"), message.get("id")
        if method is None:  # the answer to one of our elicitations
            call = self.asked.pop(id_)
            answer = message.get("result") or {}
            text = (f"confirm: accepted {answer.get('content') or {}}" if answer.get("action") == "accept"
                    else f"confirm: {answer.get('action', 'error')}")
            self.result(call, {"content": [{"type": "text", "text": text}], "isError": "error" in message})
        elif id_ is None:
            return  # a notification (initialized, cancelled): nothing to do
        elif method == "initialize":
            self.result(id_, {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {}},
                              "serverInfo": {"name": "bench-lean-server", "version": "1"}})
        elif method == "tools/list":
            self.result(id_, {"tools": TOOLS})
        elif method == "ping":
            self.result(id_, {})
        elif method == "tools/call" and message["params"]["name"] == "confirm":
            asked = next(self.ids)
            self.asked[asked] = id_
            question = str(message["params"].get("arguments", {}).get("question", "Are you sure?"))
            self.send({"jsonrpc": "2.0", "id": asked, "method": "elicitation/create",
                       "params": {"mode": "form", "message": question, "requestedSchema": CONFIRM_SCHEMA}})
        elif method == "tools/call" and message["params"]["name"] == "echo":
            text = str(message["params"].get("arguments", {}).get("text", ""))
            self.result(id_, {"content": [{"type": "text", "text": text}], "isError": False})
        else:
            self.send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"no {method}"}})


async def serve() -> None:
    loop = asyncio.get_running_loop()
    closed: asyncio.Future[None] = loop.create_future()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    await loop.connect_read_pipe(lambda: LeanServer(cast(asyncio.WriteTransport, out), closed), sys.stdin)
    await closed


if __name__ == "__main__":
    asyncio.run(serve())
