"""Processes the bench starts: free ports, HTTP servers waited on until they answer, RSS from /proc."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx2

from mcp.client.stdio import StdioServerParameters, stdio_client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kb(pid: int) -> int:
    """Resident set size of one process, in KiB (VmRSS from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def rss_by_kind_kb(pid: int) -> dict[str, int]:
    """The process's RSS in KiB by kind of mapping (`/proc/<pid>/smaps`): `heap` (glibc's brk heap, the main
    thread's malloc), `malloc_arenas` (the 64 MiB regions other threads' malloc uses: SQLite's driver thread),
    `anon` (other anonymous mappings: pymalloc's 1 MiB arenas, large mallocs, thread stacks), `file` (the
    interpreter, extension modules and shared libraries, mapped files)."""
    kinds = {"heap": 0, "malloc_arenas": 0, "anon": 0, "file": 0}
    maps: list[tuple[int, int, str, str, int]] = []  # start, end, perms, path, rss
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if "-" in head[0] and not head[0].endswith(":"):
            start, end = (int(x, 16) for x in head[0].split("-"))
            maps.append((start, end, head[1], head[5] if len(head) > 5 else "", 0))
        elif head[0] == "Rss:":
            start, end, perms, path, _ = maps[-1]  # noqa: RUF059
            maps[-1] = (start, end, perms, path, int(head[1]))
    for i, (start, end, _perms, path, rss) in enumerate(maps):
        if path == "[heap]":
            kinds["heap"] += rss
        elif path.startswith("/") or path.startswith("[v"):
            kinds["file"] += rss
        elif (i + 1 < len(maps) and maps[i + 1][0] == end and maps[i + 1][2].startswith("---")
              and not maps[i + 1][3] and maps[i + 1][1] - start == 64 << 20):
            kinds["malloc_arenas"] += rss  # a thread arena: rw part, then the rest of its 64 MiB reserved
        else:
            kinds["anon"] += rss
    return kinds


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of `pid` so far, in nanoseconds' resolution (`schedstat`; `/proc/<pid>/stat` counts
    in clock ticks, 10 ms, as much as a hundred calls take)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            pass
    return total / 1e9


def children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc/*/stat)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid:
            found.append(int(entry.name))
    return found


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]


def find_child(marker: str, parent: int | None = None) -> int:
    """The child of `parent` (default: us) whose command line contains `marker`."""
    for pid in children(parent or os.getpid()):
        if marker in " ".join(cmdline(pid)):
            return pid
    raise LookupError(f"no child process running {marker!r}")


def stdio_transport(argv: list[str], log: IO[str]) -> Any:
    """An `mcp.Client` transport that starts `argv` over stdio, its stderr into `log`."""
    return stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ)), errlog=log)


class HttpProcess:
    """A server process on a 127.0.0.1 port, started and waited on until `ready_path` answers."""

    def __init__(self, argv: list[str], port: int, log: IO[str], *, ready_path: str = "/mcp") -> None:
        self.argv = argv
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.started = time.perf_counter()
        self.listening_after: float | None = None
        """Seconds from spawn until the first HTTP answer of any status."""
        self.proc = subprocess.Popen(argv, env=dict(os.environ), stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.ready_after = self._wait(ready_path)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait(self, path: str, timeout: float = 60.0) -> float:
        """Seconds from spawn until `path` answers (200 for /healthz, any status elsewhere)."""
        deadline = self.started + timeout
        with httpx2.Client(timeout=1.0) as client:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{' '.join(self.argv)} exited with {self.proc.returncode}")
                try:
                    response = client.get(self.url + path)
                    if self.listening_after is None:
                        self.listening_after = time.perf_counter() - self.started
                    if path != "/healthz" or response.status_code == 200:
                        return time.perf_counter() - self.started
                except httpx2.TransportError:
                    pass
                time.sleep(0.01)
        raise TimeoutError(f"{' '.join(self.argv)} not ready on {self.url}{path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> HttpProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_alone(prog: str, doc: str, measure: Any, describe: Any, **options: int) -> None:
    """A bench section on its own (`python -m bench.<section> [--option N ...]`, `options` with their
    defaults, passed to `measure` in that order): measure in a scratch directory, print, exit 0."""
    import argparse
    import tempfile

    import anyio

    parser = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    for name, default in options.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    args = vars(parser.parse_args())
    with tempfile.TemporaryDirectory(prefix=f"elicitgate-{prog.replace('.', '-')}-") as work:
        with open(Path(work) / "bench.log", "w") as log:
            results = anyio.run(measure, *(args[name] for name in options), log, Path(work))
    print(describe(results))
    sys.exit(0)


def pin_to_one_core() -> int:
    """This process, and every process it starts from now on, on one CPU (the first it may use).

    On 2 cores, which core each process of a target lands on (and stays on for the run) moves that target's
    p50 by up to +/-0.1 ms from run to run: more than a change of the hot path does. On one core the wall time
    is the CPU spent on the way of each call plus the switches between processes, the same from run to run
    (bench/README.md, "Against the floor"). For comparing two versions, not for the published figures.
    """
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu

