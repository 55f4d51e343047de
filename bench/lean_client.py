"""A lean handshake-era MCP client over stdio, for `bench.scale`'s completed-questions phase.

A million questions through the gateway take three processes' CPU each: the client, the gateway, the upstream.
The `mcp` SDK's client spends ~0.8 ms per call with one elicitation (validation, tasks, streams), about as much as
the gateway itself; this one spends a fraction of that, so the phase measures the gateway for longer in less time.
It speaks the same protocol as the SDK's client on the same pipes: `initialize` (2025-06-18, declaring form
elicitation), `notifications/initialized`, then `tools/call` requests; every `elicitation/create` the gateway sends
is answered at once by `answer` (a real answer: the gateway checks it against the form, relays it to the upstream,
and the call's result comes back only after that), `ping` with an empty result. Everything runs in protocol
callbacks, one future per call, JSON by orjson.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from collections.abc import Callable
from typing import IO, Any, cast

import orjson

PROTOCOL_VERSION = "2025-06-18"


class LeanClient(asyncio.SubprocessProtocol):
    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.answer = answer
        """The result for an `elicitation/create` request's params."""
        self.elicitations = 0
        """`elicitation/create` requests answered."""
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._pending = bytearray()
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def start(
        cls, argv: list[str], log: IO[str], answer: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> LeanClient:
        """Start `argv` (its stderr into `log`) and make the MCP handshake."""
        client = cls(answer)
        await asyncio.get_running_loop().subprocess_exec(
            lambda: client, *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        await client.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "bench-lean-client", "version": "1"},
        })
        client._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return client

    @property
    def pid(self) -> int:
        assert self._transport is not None
        return self._transport.get_pid()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of one request; an error response raises."""
        id_ = next(self._ids)
        waiting = self._waiting[id_] = asyncio.get_running_loop().create_future()
        self._send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        return await waiting

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> None:
        """One `tools/call`; a tool error raises."""
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(" ".join(block.get("text", "") for block in result.get("content", [])))

    async def close(self) -> None:
        """Close the gateway's stdin (it stops, as at the end of any stdio session) and wait for it to exit."""
        if self._stdin is not None:
            self._stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), 30)
        except TimeoutError:
            assert self._transport is not None
            self._transport.kill()
            await self._exited

    def _send(self, message: dict[str, Any]) -> None:
        assert self._stdin is not None
        self._stdin.write(orjson.dumps(message) + b"\n")

    # -- asyncio.SubprocessProtocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.SubprocessTransport, transport)
        self._stdin = cast(asyncio.WriteTransport, self._transport.get_pipe_transport(0))

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        self._pending += data
        lines = self._pending.split(b"\n")
        self._pending = bytearray(lines.pop())
        for line in lines:
            if line.strip():
                self._received(orjson.loads(line))

    def _received(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a response to one of ours
            waiting = self._waiting.pop(message["id"])
            if "error" in message:
                waiting.set_exception(RuntimeError(f"JSON-RPC error {message['error']}"))
            else:
                waiting.set_result(message["result"])
        elif "id" in message:  # the gateway's request
            if method == "elicitation/create":
                self.elicitations += 1
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": self.answer(message["params"])})
            elif method == "ping":
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            else:
                self._send({"jsonrpc": "2.0", "id": message["id"],
                            "error": {"code": -32601, "message": f"bench lean client: no {method}"}})

    def process_exited(self) -> None:
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(RuntimeError("the gateway exited"))
        self._waiting.clear()
        if not self._exited.done():
            self._exited.set_result(None)
