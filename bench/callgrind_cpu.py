"""Instructions per call of one gateway (HTTP face, demo server upstream over streamable HTTP), counted by valgrind's
callgrind: `python -m bench.callgrind_cpu [--src DIR] [--row handshake|2026-07-28|mixed] [--op echo|elicit]
[--calls N] [--face http|stdio]`.

CPU time per call moves by up to 2x on a busy machine (other processes' caches, frequency, preemption); the number of
instructions the gateway executes does not: two runs of the same code agree to three digits. The gateway runs under
`valgrind --tool=callgrind --instr-atstart=no` (tens of times slower, so start-up takes a minute or more); counting is
switched on (`callgrind_control -i on`) for `--calls` sequential calls after 20 warm-up calls, and the total is read
from valgrind's summary when the gateway stops. `--src`: the `src/` to run (for the base of an A/B, one exported by
`bench.ab.export_src`). Rows: `handshake` (a handshake-era client and upstream), `2026-07-28` (a 2026-07-28 client
and upstream), `mixed` (a handshake-era client, a 2026-07-28 upstream), `2026-07-28-client-hs` (a 2026-07-28 client, a
handshake-era upstream: each call borrows a pooled per-client upstream connection).

Everything is slower under valgrind, so what depends on time differs from a real run: an `elicit` answered after
`JSON_WINDOW` goes back as an SSE stream, and the audit commits once a second over far fewer calls. The `echo` rows
are the exact ones; read `elicit` rows as a second opinion beside `bench.http_cpu`. Needs valgrind (Debian's).
Asserts nothing.

`--face stdio`: the gateway's stdio face in front of the demo server over stdio (the client starts the gateway under
valgrind); the count is dumped (`callgrind_control -d`) once the calls are done, and that dump
(`bench/results/callgrind_cpu/<row>-<op>-stdio-<pid>/callgrind.out.*`) is a profile `callgrind_annotate` reads.
`--middle lean-relay|lean-work-relay`: the same count for the lean relay or the lean relay plus the question's work
(`bench.lean_relay` / `bench.lean_work_relay` with `--face stdio`, `bench.lean_http_relay` /
`bench.lean_http_work_relay` with `--face http`) in front of the demo server instead of the gateway (the floors of
`bench.floor`).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
from pathlib import Path

import anyio

from mcp import Client

from bench import configs, latency
from bench.http_cpu import gateway_argv
from bench.procs import HttpProcess, children, cmdline, free_port, stdio_transport

ROOT = Path(__file__).resolve().parent.parent
ROWS = {"handshake": ("legacy", "handshake"), "2026-07-28": ("2026-07-28", "modern"), "mixed": ("legacy", "modern"),
        "2026-07-28-client-hs": ("2026-07-28", "handshake")}
WARMUP = 20
READY_TIMEOUT = 600.0
"""Seconds the gateway may take to answer /healthz under valgrind."""


class SlowProcess(HttpProcess):
    def _wait(self, path: str, timeout: float = READY_TIMEOUT) -> float:
        return super()._wait(path, timeout)


async def measure(args: argparse.Namespace) -> float:
    if args.face == "stdio":
        return await measure_stdio(args)
    mode, era = ROWS[args.row]
    # A call's own bound too: under valgrind on a busy machine a 2026-07-28 client's first round (the gateway loads
    # `cryptography` for its requestState seal) took over latency's 30 s, and the `elicit` row failed in warm-up.
    latency.CALL_TIMEOUT = READY_TIMEOUT
    work = ROOT / "bench" / "results" / "callgrind_cpu" / f"{args.row}-{args.op}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    src = Path(args.src).resolve()
    log_path = work / "callgrind_cpu.log"
    with open(log_path, "w") as log:
        port = free_port()
        with HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log) as upstream:
            servers = {e: configs.http_upstream(f"{upstream.url}/mcp", e) for e in ("handshake", "modern")}
            config = configs.write_config(work, "gw", configs.gateway_config(servers, src=src))
            port = free_port()
            middle, ready, prefix = gateway_argv(src, config, f"127.0.0.1:{port}"), "/healthz", f"{era}__"
            if args.middle != "elicitgate":  # a relay in front of the demo server, its tools' names as they are
                lean = args.middle == "lean-relay"
                relay = configs.lean_http_relay_argv if lean else configs.lean_http_work_relay_argv
                middle, ready, prefix = relay(f"127.0.0.1:{port}", f"{upstream.url}/mcp"), "/mcp", ""
            argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={work}/callgrind.out",
                    *middle]
            with SlowProcess(argv, port, log, ready_path=ready) as gateway:
                async with Client(f"{gateway.url}/mcp", mode=mode, elicitation_callback=latency._answer,  # pyright: ignore[reportPrivateUsage]
                                  read_timeout_seconds=READY_TIMEOUT) as client:
                    name, arguments = latency.TOOLS[args.op]
                    for _ in range(WARMUP):
                        await latency.call(client, prefix + name, arguments)
                    _instrument(gateway.pid, "on")
                    for _ in range(args.calls):
                        await latency.call(client, prefix + name, arguments)
                    _instrument(gateway.pid, "off")
                gateway.proc.send_signal(signal.SIGINT)  # valgrind prints its summary as the gateway exits
                gateway.proc.wait(timeout=READY_TIMEOUT)
    counted = re.findall(r"Collected : (\d+)", log_path.read_text())
    if not counted:
        raise RuntimeError(f"valgrind printed no summary: see {log_path}")
    return int(counted[-1]) / args.calls


async def measure_stdio(args: argparse.Namespace) -> float:
    mode, era = ROWS[args.row]
    latency.CALL_TIMEOUT = READY_TIMEOUT  # as over HTTP: a 2026-07-28 client's first call starts the gateway
    work = ROOT / "bench" / "results" / "callgrind_cpu" / f"{args.row}-{args.op}-stdio-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    src = Path(args.src).resolve()
    servers = {e: configs.stdio_upstream(e) for e in ("handshake", "modern")}
    name = f"callgrind-stdio-{os.getpid()}"
    config = configs.write_config(work, name, configs.gateway_config(servers, src=src))
    middle = [configs.PY, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); from elicitgate.cli import app; app()",
              "serve", "--config", str(config)]
    marker, prefix = f"{name}.json", f"{era}__"
    if args.middle != "elicitgate":  # a relay in front of the demo server, its tools' names as they are
        middle = configs.lean_relay_argv() if args.middle == "lean-relay" else configs.lean_work_relay_argv()
        marker, prefix = f"bench.{args.middle.replace('-', '_')}", ""
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={work}/callgrind.out",
            *middle]
    with open(work / "callgrind_cpu.log", "w") as log:
        async with Client(stdio_transport(argv, log), mode=mode, elicitation_callback=latency._answer,  # pyright: ignore[reportPrivateUsage]
                          read_timeout_seconds=READY_TIMEOUT) as client:
            tool, arguments = latency.TOOLS[args.op]
            for _ in range(WARMUP):
                await latency.call(client, prefix + tool, arguments)
            # After the warm-up: a 2026-07-28 client has no handshake, so its transport starts the gateway with
            # its first request, not as the session opens.
            pid = next(p for p in children(os.getpid()) if marker in " ".join(cmdline(p)))
            _instrument(pid, "on")
            for _ in range(args.calls):
                await latency.call(client, prefix + tool, arguments)
            _instrument(pid, "off")
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    # The dump on request holds the calls; the one valgrind writes at exit holds nothing since (counting is off).
    totals = [int(found) for dump in work.glob("callgrind.out*")
              for found in re.findall(r"^totals: (\d+)", dump.read_text(errors="replace"), re.MULTILINE)]
    if not totals:
        raise RuntimeError(f"valgrind dumped no totals in {work}")
    return max(totals) / args.calls


def _instrument(pid: int, state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(pid)], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.callgrind_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--row", choices=sorted(ROWS), default="handshake")
    parser.add_argument("--op", choices=sorted(latency.OPS), default="echo")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--face", choices=("http", "stdio"), default="http")
    parser.add_argument("--middle", choices=("elicitgate", "lean-relay", "lean-work-relay"), default="elicitgate",
                        help="what is counted in front of the demo server (--row handshake for the relays)")
    args = parser.parse_args()
    per_call = anyio.run(measure, args)
    what = "" if args.middle == "elicitgate" else f" {args.middle}"
    print(f"{args.src} {args.face}{what} {args.row} {args.op}: {per_call / 1e6:.3f} M instructions per call")


if __name__ == "__main__":
    main()
