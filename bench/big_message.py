"""Large messages over stdio: `python -m bench.big_message [--sizes 1 10 30] [--repeats 3]`.

One `echo` whose argument (and so its result) is `size` MB of text, from a raw JSON-RPC client over
stdio, to the demo server directly, through the lean and the bare Python relays (`bench.lean_relay`,
`bench.bare_relay`) and through elicitgate; each after a small warm-up call on the same session. Prints the
median seconds per call and elicitgate's ratio to the direct call. A cost that grows faster than the message
(a line copied once per chunk read) shows here as a ratio that grows with the size. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import configs


def one_call(argv: list[str], tool: str, size: int) -> float:
    """Seconds for one `echo` of `size` bytes of text, the answer read whole."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    def call(request_id: int, text: str) -> float:
        assert proc.stdout is not None
        started = time.perf_counter()
        # Written from a thread: a message larger than the pipe's buffer blocks until the other end reads.
        writer = threading.Thread(target=send, args=({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                                      "params": {"name": tool, "arguments": {"text": text}}},))
        writer.start()
        answer = json.loads(proc.stdout.readline())
        writer.join()
        assert answer["result"]["content"][0]["text"] == text, answer
        return time.perf_counter() - started

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        proc.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call(1, "warm-up")
        return call(2, "x" * size)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 10, 30], help="message sizes in MB")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-big-"))
    config = configs.write_config(workdir, "big", {"mcpServers": {"demo": configs.stdio_upstream("handshake")},
                                                   "audit": {"enabled": False}})
    paths = {
        "direct": (configs.demo_argv(), "echo"),
        "lean relay": (configs.lean_relay_argv(), "echo"),
        "bare relay": (configs.bare_relay_argv(), "echo"),
        "elicitgate": (configs.gateway_argv(config), "demo__echo"),
    }
    print(f"{'MB':>6}  " + "  ".join(f"{name:>12}" for name in paths) + "  elicitgate / direct")
    for megabytes in args.sizes:
        size = int(megabytes * 1_000_000)
        medians = {name: statistics.median(one_call(argv, tool, size) for _ in range(args.repeats))
                   for name, (argv, tool) in paths.items()}
        print(f"{megabytes:>6g}  " + "  ".join(f"{medians[name]:>10.3f} s" for name in paths)
              + f"  {medians['elicitgate'] / medians['direct']:.1f}x")


if __name__ == "__main__":
    main()
