"""The 2026-07-28 face's own work per request, in one process: `python -m bench.modern_face_cpu [--src DIR]
[--requests N] [--repeat N]`.

What a 2026-07-28 request costs the face before and after its handler, with no peer, pipe or socket: over HTTP, a
POST's body and head vetted (`faces.stateless.StatelessRequests._vetted`: the request told, its routing headers read,
its envelope routed, its `Mcp-Param-*` check); over stdio and HTTP alike, the envelope read into its connection
(`faces.dispatch.fitting_envelope`, `faces.modern.EnvelopeConnection`) and the request served by the method table on
the short path (`ModernMethods.serve` and `_relayed`: the params checked, the SDK's context made, the observer and the
requestState boundary, the result shaped) around a handler that returns a fixed `tools/call` result. `--src`: the
`src/` to import (default the work tree's), for an A/B against a base exported by `bench.ab.export_src`.

Prints, per stage, the Python and C calls per request (cProfile's count, the driver's own left out: it does not move
with the machine's load) and the CPU time per request (the fastest of `--repeat` rounds of `--requests`: the least
disturbed by other processes). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
PARAMS = {"name": "modern__echo", "arguments": {"text": "hello"}, "_meta": META}
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"modern__echo"),
    (b"user-agent", b"python-httpx/0.28.1"),
    (b"content-length", b"231"),
]
RESULT = {"content": [{"type": "text", "text": "hello"}], "isError": False}


class _Context:
    """What the method table reads of a dispatch context."""

    request_id = 7
    message_metadata = None


def _stages() -> dict[str, Callable[[], Any]]:
    """Each stage as a function of no arguments doing one request's work (imported from the `src/` on the path)."""
    import orjson
    from starlette.datastructures import Headers

    from mcp.server.lowlevel.server import Server
    from mcp.server.transport_security import TransportSecuritySettings

    from elicitgate import _compat
    from elicitgate.bridging.sealing import RequestsOnly
    from elicitgate.faces.dispatch import fitting_envelope
    from elicitgate.faces.modern import RELAYED_PARAMS, EnvelopeConnection, ModernMethods
    from elicitgate.faces.observe import RequestObserver
    from elicitgate.faces.stateless import StatelessRequests

    server: Any = type("Lookup", (), {"get_tool_input_schema": staticmethod(lambda name: None)})()
    stateless = StatelessRequests(server, TransportSecuritySettings(), json_wait=15)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": PARAMS})
    scope: Any = {"headers": HEADERS}
    headers = Headers(scope=scope)

    observer = RequestObserver("bench-modern-face", {"tools/call"})
    boundary = RequestsOnly([secrets.token_bytes(32)], 600)
    modern = ModernMethods(Server("gw", version="1"), (observer, boundary), relay=(observer, boundary))

    async def call(ctx: Any) -> dict[str, Any]:
        return dict(RESULT)

    modern.add("tools/call", call, reads=RELAYED_PARAMS["tools/call"])
    outbound = _compat.no_channel()
    context: Any = _Context()
    loop = asyncio.new_event_loop()

    def served() -> Any:
        envelope = fitting_envelope(PARAMS)
        assert envelope is not None
        connection = EnvelopeConnection(outbound, *envelope)
        coroutine: Any = modern.serve(context, "tools/call", PARAMS, connection, None)
        try:
            coroutine.send(None)
        except StopIteration as done:  # the handler never waits: the whole request in one step
            return done.value
        raise AssertionError("the request waited")

    served()  # what is made once (the memos, the server's stamp) made
    loop.close()
    return {"vetted (HTTP)": lambda: stateless._vetted(scope, headers, body), "served (both faces)": served}  # pyright: ignore[reportPrivateUsage]


def _calls(stage: Callable[[], Any], requests: int) -> float:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(requests):
        stage()
    profile.disable()
    stats = pstats.Stats(profile)
    total = sum(row[1] for key, row in stats.stats.items() if key[2] != "_calls")  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType, reportUnknownArgumentType]
    own = requests + 1  # the stage's lambda per request, and `disable`
    return (total - own) / requests


def _cpu(stage: Callable[[], Any], requests: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(requests):
            stage()
        best = min(best, time.process_time() - start)
    return best / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.src).resolve()))
    stages = _stages()
    import elicitgate

    assert Path(elicitgate.__file__).is_relative_to(Path(args.src).resolve()), elicitgate.__file__
    print(f"src {args.src}: per request, calls (cProfile) and CPU us (fastest of {args.repeat} x {args.requests})")
    for name, stage in stages.items():
        print(
            f"  {name:22} {_calls(stage, args.requests):7.1f} calls {_cpu(stage, args.requests, args.repeat):8.2f} us"
        )


if __name__ == "__main__":
    main()
