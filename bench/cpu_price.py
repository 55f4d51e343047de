"""What a microsecond of CPU in the middle costs a call: `python -m bench.cpu_price [--transport stdio|http]
[--on question|every] [--rounds N] [--batch N] [--busy BEFORE/AFTER ...]`.

Side by side in interleaved rounds (as `bench.latency`), over stdio with a handshake-era client and the demo server's
`confirm` (one form elicitation per call): the demo server called directly, through the lean relay
(`bench.lean_relay`), through the lean relay made to stay busy for a set time on each `elicitation/create` it passes
on (`--busy BEFORE/AFTER`: that many microseconds of wall clock spent on the CPU before the message is written to the
client, and after it; `--on every`: on each of the call's four messages, both ways), through the lean relay plus the
question's work (`bench.lean_work_relay`: elicitgate's own functions doing what its broker does for each
elicitation), and through elicitgate (stdio, the bench's config), also with its audit trail and its log lines off
(the work its broker defers until the answer is out). Each busy relay does the lean relay's job otherwise. With
`--transport http` the same paths run on streamable HTTP: the lean HTTP relay (`bench.lean_http_relay`), busy before
it passes a message on (the question's SSE event; with `--on every` also each client request body and each JSON
body the upstream answers with), the lean HTTP relay + question work and elicitgate's HTTP face.

It prints each path's p50, what it adds to the direct call, and for the busy relays what each microsecond of busy
time added to the p50 beyond the lean relay's. The busy time after the write shows whether work done once a message
is out, while the peer it woke is at work, stays off the call's path (it did not on this 2-core machine: the woken
peer waits for it, bench/README.md, "What a microsecond costs"). Asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import orjson
import uvloop

from bench import configs, latency, lean_http_relay, lean_relay
from bench.procs import HttpProcess, free_port, stdio_transport

DEFAULT_BUSY = ("5/0", "10/0", "30/0", "100/0", "0/30", "0/100")
"""Microseconds busy before / after the write of each `elicitation/create`."""
DEFAULT_HTTP_BUSY = ("5/0", "10/0", "30/0", "100/0")
"""Over HTTP the busy relay spends its time before passing a message on only."""


def busy_for(microseconds: int) -> None:
    """Stay on the CPU for `microseconds` of wall clock (no sleep, no system call but the clock's)."""
    end = time.perf_counter_ns() + microseconds * 1000
    while time.perf_counter_ns() < end:
        pass


class BusyLines(lean_relay.Lines):
    """`lean_relay.Lines` that spends `before` microseconds on the CPU before writing an `elicitation/create` (with
    `every`, any message) and `after` microseconds after it; every other line passes as in the lean relay."""

    def __init__(self, out: Callable[[bytes], None], before: int, after: int, every: bool = False) -> None:
        super().__init__(out)
        self.before = before
        self.after = after
        self.every = every

    def feed(self, data: bytes) -> None:
        if (self.pending or not data.endswith(b"\n") or data.count(b"\n") != 1
                or not (self.every or b"elicitation/create" in data)):
            super().feed(data)
            return
        message = orjson.loads(data)
        if not self.every and not (isinstance(message, dict) and message.get("method") == "elicitation/create"):
            self.out(orjson.dumps(message) + b"\n")
            return
        busy_for(self.before)
        self.out(orjson.dumps(message) + b"\n")
        busy_for(self.after)


def relay_main(args: list[str]) -> None:
    """`python -m bench.cpu_price relay BEFORE AFTER question|every COMMAND [ARGS...]`: the busy relay in front of
    COMMAND, busy on the question (`elicitation/create`) only, or on every message both ways."""
    before, after, on, *argv = args
    every = on == "every"
    busy = functools.partial(BusyLines, before=int(before), after=int(after), every=every)
    client_lines = busy if every else lean_relay.Lines
    sys.exit(uvloop.run(lean_relay.relay(argv, server_lines=busy, client_lines=client_lines)))


class BusyBack(lean_http_relay.Back):
    relay: BusyRelay

    def event_again(self, event: bytes) -> bytes | None:
        if b"elicitation/create" in event or (self.relay.every and b'"jsonrpc"' in event):
            busy_for(self.relay.before)
        return super().event_again(event)

    def on_message_complete(self) -> None:
        if self.relay.every and not self.stream and self.body:
            busy_for(self.relay.before)
        super().on_message_complete()


class BusyRelay(lean_http_relay.Relay):
    """`lean_http_relay.Relay` whose connections spend `before` microseconds on the CPU before passing on the question
    (`every`: each JSON-RPC message, the client's request bodies and the upstream's SSE events and JSON bodies)."""

    back = BusyBack

    def __init__(self, upstream: str, before: int, every: bool) -> None:
        super().__init__(upstream)
        self.before = before
        self.every = every


class BusyFront(lean_http_relay.Front):
    relay: BusyRelay

    def on_message_complete(self) -> None:
        if self.relay.every and self.body:
            busy_for(self.relay.before)
        super().on_message_complete()


def http_relay_main(args: list[str]) -> None:
    """`python -m bench.cpu_price http-relay BEFORE question|every HOST:PORT URL`: the busy HTTP relay on HOST:PORT
    in front of URL."""
    before, on, listen, upstream = args
    relay = BusyRelay(upstream, int(before), every=on == "every")
    uvloop.run(lean_http_relay.serve(listen, upstream, relay=relay, front=BusyFront))


def busy_argv(before: int, after: int, on: str) -> list[str]:
    return [configs.PY, "-m", "bench.cpu_price", "relay", str(before), str(after), on, *configs.demo_argv()]


def busy_http_argv(before: int, on: str, listen: str, upstream: str) -> list[str]:
    return [configs.PY, "-m", "bench.cpu_price", "http-relay", str(before), on, listen, upstream]


def parse_busy(text: str) -> tuple[int, int]:
    before, _, after = text.partition("/")
    try:
        pair = int(before), int(after or 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not BEFORE/AFTER in whole microseconds") from None
    if min(pair) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: microseconds cannot be negative")
    return pair


GATEWAY = "elicitgate"
QUIET_GATEWAY = "elicitgate, its audit trail and log lines off"
SERVER = "up"
"""The upstream's name behind elicitgate (its tools are `up__<tool>`)."""


def gateway_config(directory: Path, quiet: bool, upstream: dict[str, Any]) -> Path:
    """The bench's gateway config in front of `upstream`; `quiet`: no audit trail and no log line per question (the
    work the broker defers until the answer is out)."""
    config = configs.gateway_config({SERVER: upstream}, log_level="warning" if quiet else "info")
    if quiet:
        config["audit"] = {"enabled": False}
    return configs.write_config(directory, "quiet" if quiet else "default", config)


def _labels(busy: list[tuple[int, int]], on: str) -> list[str]:
    what = "each message" if on == "every" else "the question"
    return [f"lean relay, busy on {what} {before} us before / {after} us after" for before, after in busy]


def stdio_paths(busy: list[tuple[int, int]], on: str, directory: Path, log: IO[str]) -> dict[str, Any]:
    """What each path's client connects to over stdio (its transport)."""
    argvs = {"direct": configs.demo_argv(), "lean relay": configs.lean_relay_argv()}
    for label, (before, after) in zip(_labels(busy, on), busy, strict=True):
        argvs[label] = busy_argv(before, after, on)
    argvs["lean relay + question work"] = configs.lean_work_relay_argv()
    for label, quiet in ((GATEWAY, False), (QUIET_GATEWAY, True)):
        argvs[label] = configs.gateway_argv(gateway_config(directory, quiet, configs.stdio_upstream("handshake")))
    return {label: stdio_transport(argv, log) for label, argv in argvs.items()}


@contextmanager
def http_paths(busy: list[tuple[int, int]], on: str, directory: Path, log: IO[str]) -> Iterator[dict[str, Any]]:
    """What each path's client connects to over streamable HTTP (a URL), its processes running for the block."""
    with ExitStack() as stack:

        def started(argv: Callable[[str], list[str]], ready_path: str = "/mcp") -> str:
            port = free_port()
            process = HttpProcess(argv(f"127.0.0.1:{port}"), port, log, ready_path=ready_path)
            return f"{stack.enter_context(process).url}/mcp"

        upstream = started(configs.demo_argv)
        found = {"direct": upstream,
                 "lean relay": started(lambda listen: configs.lean_http_relay_argv(listen, upstream))}
        for label, (before, _) in zip(_labels(busy, on), busy, strict=True):
            found[label] = started(functools.partial(busy_http_argv, before, on, upstream=upstream))
        found["lean relay + question work"] = started(
            lambda listen: configs.lean_http_work_relay_argv(listen, upstream))
        for label, quiet in ((GATEWAY, False), (QUIET_GATEWAY, True)):
            config = gateway_config(directory, quiet, configs.http_upstream(upstream, "handshake"))
            found[label] = started(functools.partial(configs.gateway_argv, config), ready_path="/healthz")
        yield found


async def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """Each path's `elicit` wall times, in `bench.latency`'s interleaved rounds; exits naming any path that failed."""
    with (open(os.devnull, "w") as log, tempfile.TemporaryDirectory(prefix="cpu-price-") as directory,
          ExitStack() as processes):
        if args.transport == "http":
            servers = processes.enter_context(http_paths(args.busy, args.on, Path(directory), log))
        else:
            servers = stdio_paths(args.busy, args.on, Path(directory), log)
        found = [
            latency.Target(args.transport, "handshake", label, "legacy", lambda server=server: server,
                           prefix=f"{SERVER}__" if label in (GATEWAY, QUIET_GATEWAY) else "")
            for label, server in servers.items()
        ]
        await latency.interleave(found, args.rounds, args.batch, seed=8, ops=("elicit",))
    failed = {target.path: target.errors["elicit"] for target in found if "elicit" in target.errors}
    if failed:
        sys.exit("bench.cpu_price: " + "; ".join(f"{path}: {error}" for path, error in failed.items()))
    return {target.path: target.samples["elicit"] for target in found}


MESSAGES_PER_CALL = 4
"""Through the relay in one `elicit` call: the `tools/call`, the question, its answer, the result."""


def report(times: dict[str, list[float]], busy: list[tuple[int, int]], on: str) -> None:
    p50 = {label: statistics.median(samples) * 1000 for label, samples in times.items()}
    direct, lean = p50["direct"], p50["lean relay"]
    per_call = MESSAGES_PER_CALL if on == "every" else 1
    print("| path | elicit p50 ms | added ms | added, % of direct | busy us per call | added beyond the lean relay, "
          "us per busy us |")
    print("|---|---:|---:|---:|---:|---:|")
    for (label, value), pair in zip(p50.items(), [None, None, *busy, None, None, None], strict=True):
        added = value - direct
        cells = [f"{value:.3f}", "", "", "", ""]
        if label != "direct":
            cells[1:3] = [f"{added:+.3f}", f"{added / direct * 100:.0f}%"]
        if pair is not None:
            spent = sum(pair) * per_call
            cells[3] = str(spent)
            cells[4] = f"{(value - lean) * 1000 / spent:.1f}" if spent else ""
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    if sys.argv[1:2] == ["relay"]:
        relay_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["http-relay"]:
        http_relay_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--busy", type=parse_busy, nargs="+", default=None,
                        metavar="BEFORE/AFTER", help="microseconds busy before / after the elicitation's write")
    parser.add_argument("--on", choices=("question", "every"), default="question",
                        help="busy on the `elicitation/create` only (default), or on every message both ways")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    args = parser.parse_args()
    if args.busy is None:
        args.busy = [parse_busy(b) for b in (DEFAULT_HTTP_BUSY if args.transport == "http" else DEFAULT_BUSY)]
    if args.transport == "http" and any(after for _, after in args.busy):
        parser.error("--transport http: busy time before the write only (BEFORE/0)")
    print(f"{args.transport}, handshake-era client and upstream, `elicit`: {args.rounds} interleaved rounds x "
          f"{args.batch} sequential calls per path; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f} at the start\n")
    times: Any = anyio.run(measure, args)
    report(times, args.busy, args.on)


if __name__ == "__main__":
    main()
