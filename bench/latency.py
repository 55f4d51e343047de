"""Round-trip latency, side by side: direct, through elicitgate, through the FastMCP proxy.

Every target is one `mcp.Client` session kept open for the whole measurement. Rounds interleave
the targets (in a shuffled order each round) so that machine noise lands on all of them alike;
within a round each target makes `batch` sequential calls of each operation:

- `elicit`: the demo server's `confirm` tool, which does one form elicitation; the client's
  callback answers at once.
- `echo`: the demo server's `echo` tool, a plain pass-through call.

A target that cannot connect, or whose warm-up call of an operation fails, is not measured for it:
its error is recorded and reported instead.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types

from mcp import Client

from bench import configs
from bench.procs import HttpProcess, free_port, stdio_transport

OPS = ("elicit", "echo")
TOOLS = {"elicit": ("confirm", {"question": "Proceed?"}), "echo": ("echo", {"text": "hello"})}
CALL_TIMEOUT = 30.0
WARMUP_CALLS = 10


@dataclass
class Target:
    transport: str
    """`stdio` or `http`: the wire between the client and the first hop (and every hop after it)."""
    era: str
    """`handshake` or `2026-07-28`: the era of the row this target belongs to."""
    path: str
    """`direct`, `elicitgate`, `elicitgate-modern-client` or `fastmcp`."""
    client_mode: str
    """`mcp.Client(mode=...)`: `legacy` or `2026-07-28`."""
    server: Callable[[], Any]
    """Makes what `mcp.Client` connects to (a URL or a stdio transport)."""
    prefix: str = ""
    """Tool-name prefix on this path (the gateway namespaces `<server>__<tool>`)."""
    note: str = ""
    samples: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in OPS})
    round_p50: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in OPS})
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.transport}/{self.era}/{self.path}"


async def _answer(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"ok": True})


def bench_client(server: Any, mode: str = "legacy") -> Client:
    """An `mcp.Client` as the bench opens each one: `server` (a URL or a stdio transport) in `mode`, every question
    accepted at once, a call given `CALL_TIMEOUT` seconds."""
    return Client(server, mode=mode, elicitation_callback=_answer, read_timeout_seconds=CALL_TIMEOUT)


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


class CallFailed(Exception):
    """A tool call that came back with `isError`."""


async def call(client: Client, name: str, arguments: dict[str, Any]) -> float:
    """One tool call; returns its wall time in seconds, raises `CallFailed` on an error result."""
    start = time.perf_counter()
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments)
    elapsed = time.perf_counter() - start
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise CallFailed(text.strip() or "isError result")
    return elapsed


async def _open(stack: AsyncExitStack, target: Target) -> Client | None:
    """Connect and warm up; on failure record the error and return None."""
    sub = AsyncExitStack()
    try:
        # No cancel scope around this: the client's task groups must be exited in the scope they
        # were entered in. `read_timeout_seconds` bounds the handshake instead.
        client = await sub.enter_async_context(bench_client(target.server(), target.client_mode))
        await client.list_tools()
    except Exception as exc:  # noqa: BLE001 - reported, never hidden
        target.errors = {op: f"connect: {_describe(exc)}" for op in OPS}
        with anyio.move_on_after(10):
            try:
                await sub.aclose()
            except Exception:  # noqa: BLE001
                pass
        return None
    stack.push_async_exit(sub)
    for op in OPS:
        name, arguments = TOOLS[op]
        try:
            for _ in range(WARMUP_CALLS):
                await call(client, target.prefix + name, arguments)
        except Exception as exc:  # noqa: BLE001
            target.errors[op] = _describe(exc)
    return client


def targets(log: IO[str], workdir: Path, upstream_url: str, gateway_url: str, fastmcp_url: str,
            relay_url: str, lean_url: str) -> list[Target]:
    """The matrix: {stdio, http} x {handshake, 2026-07-28} x {direct, lean Python relay, bare Python relay,
    elicitgate, FastMCP}; the lean relay is the floor for any process in the middle. Over stdio for the handshake
    era, also the lean relay plus the question's work (`bench.lean_work_relay`)."""
    config = configs.write_config(
        workdir,
        "latency-stdio",
        configs.gateway_config(
            {"hs": configs.stdio_upstream("handshake"), "modern": configs.stdio_upstream("modern")}
        ),
    )
    def stdio(argv: list[str]) -> Callable[[], Any]:
        return lambda: stdio_transport(argv, log)

    def url(address: str) -> Callable[[], Any]:
        return lambda: address

    gw_stdio = stdio(configs.gateway_argv(config))
    fm_stdio = stdio(configs.fastmcp_argv())
    direct_stdio = stdio(configs.demo_argv())
    relay_stdio = stdio(configs.bare_relay_argv())
    lean_stdio = stdio(configs.lean_relay_argv())
    work_stdio = stdio(configs.lean_work_relay_argv())
    found: list[Target] = []
    for transport, direct, lean, relay, gateway, fastmcp in (
        ("stdio", direct_stdio, lean_stdio, relay_stdio, gw_stdio, fm_stdio),
        ("http", url(upstream_url), url(lean_url), url(relay_url), url(gateway_url), url(fastmcp_url)),
    ):
        floor = f"the floor: bench/{'lean_relay' if transport == 'stdio' else 'lean_http_relay'}.py"
        bare = f"on the gateway's libraries: bench/{'bare_relay' if transport == 'stdio' else 'bare_http_relay'}.py"
        found += [
            Target(transport, "handshake", "lean-relay", "legacy", lean, note=floor),
            Target(transport, "2026-07-28", "lean-relay", "2026-07-28", lean, note=floor),
            Target(transport, "handshake", "bare-relay", "legacy", relay, note=bare),
            Target(transport, "2026-07-28", "bare-relay", "2026-07-28", relay, note=bare),
            Target(transport, "handshake", "direct", "legacy", direct),
            Target(transport, "handshake", "elicitgate", "legacy", gateway, prefix="hs__"),
            Target(transport, "handshake", "fastmcp", "legacy", fastmcp),
            Target(transport, "2026-07-28", "direct", "2026-07-28", direct),
            Target(transport, "2026-07-28", "elicitgate", "legacy", gateway, prefix="modern__",
                   note="handshake-era client -> gateway -> 2026-07-28 upstream (input_required bridged)"),
            Target(transport, "2026-07-28", "elicitgate-modern-client", "2026-07-28", gateway, prefix="modern__",
                   note="2026-07-28 client -> gateway -> 2026-07-28 upstream"),
            Target(transport, "2026-07-28", "fastmcp", "2026-07-28", fastmcp),
        ]
    found.append(Target("stdio", "handshake", "lean-work-relay", "legacy", work_stdio,
                        note="the lean relay plus the question's work: bench/lean_work_relay.py"))
    return found


async def measure(rounds: int, batch: int, log: IO[str], workdir: Path, seed: int = 6) -> list[Target]:
    """Run the interleaved rounds; returns every target with its samples and errors."""
    upstream_port, gateway_port, fastmcp_port, relay_port = free_port(), free_port(), free_port(), free_port()
    lean_port = free_port()
    with HttpProcess(configs.demo_argv(f"127.0.0.1:{upstream_port}"), upstream_port, log) as upstream:
        upstream_mcp = f"{upstream.url}/mcp"
        http_config = configs.write_config(
            workdir,
            "latency-http",
            configs.gateway_config(
                {"hs": configs.http_upstream(upstream_mcp, "handshake"),
                 "modern": configs.http_upstream(upstream_mcp, "modern")}
            ),
        )
        gateway_argv = configs.gateway_argv(http_config, f"127.0.0.1:{gateway_port}")
        fastmcp_argv = configs.fastmcp_argv(upstream_url=upstream_mcp, http=f"127.0.0.1:{fastmcp_port}")
        relay_argv = configs.bare_http_relay_argv(f"127.0.0.1:{relay_port}", upstream_mcp)
        lean_argv = configs.lean_http_relay_argv(f"127.0.0.1:{lean_port}", upstream_mcp)
        with HttpProcess(gateway_argv, gateway_port, log, ready_path="/healthz") as gateway, \
                HttpProcess(fastmcp_argv, fastmcp_port, log) as fastmcp, \
                HttpProcess(relay_argv, relay_port, log) as relay, \
                HttpProcess(lean_argv, lean_port, log) as lean:
            found = targets(log, workdir, upstream_mcp, f"{gateway.url}/mcp", f"{fastmcp.url}/mcp", f"{relay.url}/mcp",
                            f"{lean.url}/mcp")
            await interleave(found, rounds, batch, seed)
    return found


async def interleave(found: list[Target], rounds: int, batch: int, seed: int, ops: tuple[str, ...] = OPS) -> None:
    """Open every target, then run the rounds: each a shuffled order, each target `batch` calls per op."""
    async with AsyncExitStack() as stack:
        clients = await open_all(stack, found)
        await run_rounds(found, clients, rounds, batch, seed, ops)


async def open_all(stack: AsyncExitStack, found: list[Target]) -> dict[str, Client | None]:
    """A warmed-up client per target (None where it could not connect: its error is recorded)."""
    return {t.key: await _open(stack, t) for t in found}


async def run_rounds(found: list[Target], clients: dict[str, Client | None], rounds: int, batch: int, seed: int,
                     ops: tuple[str, ...] = OPS) -> None:
    """The rounds of `interleave` on clients already open."""
    rng = random.Random(seed)
    for _ in range(rounds):
        order = list(found)
        rng.shuffle(order)
        for target in order:
            client = clients[target.key]
            if client is None:
                continue
            for op in ops:
                if op in target.errors:
                    continue
                name, arguments = TOOLS[op]
                try:
                    times = [await call(client, target.prefix + name, arguments) for _ in range(batch)]
                except Exception as exc:  # noqa: BLE001
                    target.errors[op] = f"during the rounds: {_describe(exc)}"
                    continue
                target.samples[op] += times
                target.round_p50[op].append(sorted(times)[len(times) // 2])
