"""Scale: many elicitations in one gateway process.

Set-up: one handshake-era client talks to the gateway over stdio (`bench.gateway_probe`, the real
gateway plus a SIGUSR1 probe); the gateway talks to its upstream over stdio (the desktop default: one
upstream process for the client's session). Every call is `demo__confirm`: one form elicitation,
answered by the client. Each phase has a gateway of its own.

Phases, in this order (so that the leak check runs before the pending phase inflates the heap):
1. waves: `total` completed questions (the full run: 1,000,000) in waves of `wave` concurrent calls, between
   `bench.lean_client` and `bench.lean_server` (the SDK's client and server spend ~3x the gateway's CPU per
   question between them; these a quarter of it, so a million take minutes, not hours); the gateway's RSS after
   the warm-up wave, at every tenth (with glibc's heap in use and free, and Python's traced memory with
   BENCH_TRACEMALLOC=1) and after the last wave (no leak: within 2%), every elicitation answered, the broker
   empty after, and the audit records stored and dropped (none may be: every question's end is one) and the most
   queued at once, on an audit store of the phase's own, made at head before the gateway starts (`--audit-store`:
   a copy of a SQLite file; BENCH_AUDIT_BATCHES=1 times each batch the writer stores);
2. throughput at concurrency 1 / 10 / 100, through the gateway and direct (client -> upstream), the median
   of `THROUGHPUT_ROUNDS` runs each, alternating;
3. pending: calls whose elicitations the client holds unanswered, all at once; the gateway's RSS
   then, minus before, divided by their number; the broker's own count as a check. Twice:
   `pushed_pending` (10,000 in the full run) pushed by the handshake-era HTTP upstream (each also holds its
   call's upstream POST; at most `PUSHED_ON_THE_WAY` calls on their way at once, so that the demo server's
   listen backlog holds their connections), then `pending` (10,000) through a fresh gateway whose 2026-07-28
   stdio upstream returns `input_required`, so that only the gateway holds them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types

from mcp import Client

from bench import configs
from bench.lean_client import LeanClient
from bench.procs import (
    HttpProcess,
    children,
    cpu_seconds,
    find_child,
    free_port,
    rss_by_kind_kb,
    rss_kb,
    stdio_transport,
)

TOOL = "confirm"
PUSHED_UPSTREAM_TIMEOUT = 900.0
"""Seconds the pushed phase's upstream may take to answer the link's probe (`probe_timeout`, default 4) and to
send a call's elicitation (`request_timeout`, default 60), and its questions' deadline (`elicitation_timeout`)."""
PUSHED_ON_THE_WAY = 1_000
"""Calls of the pushed phase on their way at once (sent, their elicitation not yet at the client): each opens a
connection to the demo server, whose listen backlog (uvicorn's, 2,048) overflows when thousands come at once, and
a connection still unanswered after the connect timeout (30 s) ends the gateway's session with the upstream."""
ARGS = {"question": "Proceed?"}


class Answerer:
    """The client's elicitation callback: answers at once, or holds every answer until released."""

    def __init__(self) -> None:
        self.hold = False
        self.held = 0
        self.target = 0
        self.all_held = anyio.Event()
        self.release = anyio.Event()

    def start_holding(self, target: int) -> None:
        self.hold, self.held, self.target = True, 0, target
        self.all_held, self.release = anyio.Event(), anyio.Event()

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        if self.hold:
            self.held += 1
            if self.held == self.target:
                self.all_held.set()
            await self.release.wait()
        return types.ElicitResult(action="accept", content={"ok": True})


PROBE_WAIT = 600
"""Seconds a probe may take: a tracemalloc snapshot by traceback of 10,000 pending questions takes minutes on a
loaded machine."""


class Probe:
    """Asks `bench.gateway_probe` what its broker holds."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid = pid
        self.path = path

    async def read(self, *, traced: bool = True) -> dict[str, Any]:
        self.path.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1 if traced else signal.SIGUSR2)
        with anyio.fail_after(PROBE_WAIT):
            while not self.path.exists():
                await anyio.sleep(0.02)
        stats = json.loads(self.path.read_text())
        stats["rss_kb"] = rss_kb(self.pid)
        return stats

    async def audit_stored(self, ended: int) -> dict[str, Any]:
        """The probe once the records of the `ended` questions are stored or dropped (the writer lingers up to a
        second for a batch): the records stored (`audit_written`) and dropped (`audit_dropped`, by reason) since the
        gateway started. A gateway without the counters (an older one) is not waited for."""
        with anyio.fail_after(PROBE_WAIT):
            while "audit_written" in (found := await self.read(traced=False)) and (
                    found["audit_written"] + sum(found["audit_dropped"].values()) < ended):
                await anyio.sleep(0.1)
        return found

    async def audit_opened(self) -> None:
        """Wait until the audit store, opened by the first call's record, is open: its import (SQLAlchemy)
        is the gateway's start, not memory the measured elicitations hold."""
        with anyio.fail_after(60):
            while not (await self.read(traced=False))["audit_open"]:
                await anyio.sleep(0.05)


async def concurrent_calls(call: Callable[[], Awaitable[Any]], n: int, concurrency: int) -> list[float]:
    """`n` calls made by `concurrency` workers; returns each call's latency in seconds."""
    latencies: list[float] = []
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return latencies


def _checked(client: Client, name: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        result = await client.call_tool(name, ARGS)
        if result.is_error:
            raise RuntimeError(" ".join(getattr(b, "text", "") for b in result.content))

    return call


async def run(
    *, pending: int, pushed_pending: int, total: int, wave: int, levels: tuple[int, ...], per_level: int, log: IO[str],
    workdir: Path, progress: Callable[[str], None],
) -> dict[str, Any]:
    out: dict[str, Any] = {"waves": await waves_phase(total, wave, log, workdir, progress),
                           "throughput": await throughput_phase(levels, per_level, log, workdir, progress)}
    out["pending_pushed"] = await pushed_phase(pushed_pending, log, workdir, progress)
    out["pending"] = await pending_phase(pending, log, workdir, progress)
    return out


async def throughput_phase(levels: tuple[int, ...], per_level: int, log: IO[str], workdir: Path,
                           progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Phase 2 alone: the `mcp` SDK's client through the gateway to the demo upstream, and to the demo directly."""
    answer = Answerer()
    async with _gateway(workdir, "scale-stdio", configs.stdio_upstream("handshake"), answer, log) as (client, _), \
            Client(stdio_transport(configs.demo_argv(), log), mode="legacy", elicitation_callback=answer,
                   read_timeout_seconds=900) as direct:
        return await _throughput(_checked(client, f"demo__{TOOL}"), _checked(direct, TOOL), levels, per_level,
                                 progress)


async def pushed_phase(pending: int, log: IO[str], workdir: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """Phase 3's other half alone: `pending` elicitations pushed by a handshake-era upstream over streamable HTTP."""
    port = free_port()
    with HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log) as upstream:
        answer = Answerer()
        http = configs.http_upstream(f"{upstream.url}/mcp", "handshake")
        # The demo server takes the calls' POSTs one after another, slower as more are pending (about 20 ms each at
        # 2,000): at 10,000 a probe's ping queued behind them waits longer than the default 4 s (the link would take
        # the busy server for gone), a call for its elicitation longer than the default request timeout (60 s), and
        # on a loaded machine the first question held longer than its default deadline (300 s) before the last one.
        http["probe_timeout"] = http["request_timeout"] = PUSHED_UPSTREAM_TIMEOUT
        http["elicitation_timeout"] = PUSHED_UPSTREAM_TIMEOUT
        async with _gateway(workdir, "scale-http", http, answer, log) as (client, probe):
            return {
                "setup": "handshake-era upstream over streamable HTTP pushes each elicitation/create; each pending "
                         "elicitation also holds its call's POST to the upstream",
                **await _pending(client, answer, probe, pending, progress, on_the_way=PUSHED_ON_THE_WAY),
                "on_the_way": PUSHED_ON_THE_WAY,
            }


async def pending_phase(pending: int, log: IO[str], workdir: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """Phase 3's main half alone: `pending` elicitations through a 2026-07-28 stdio upstream."""
    answer = Answerer()
    # 900 s for the upstream's answer, as in `bench.pending_paths`: at 60 s, 10,000 calls queued on one stdio upstream
    # fail with -32011 before all are pending when the machine is busy.
    upstream = {**configs.stdio_upstream("modern"), "request_timeout": 900}
    async with _gateway(workdir, "scale-modern", upstream, answer, log) as (client, probe):
        return {
            "setup": "2026-07-28 upstream over stdio returns input_required; the broker pushes elicitation/create "
                     "to the client and holds it; the upstream holds nothing",
            **await _pending(client, answer, probe, pending, progress),
        }


@asynccontextmanager
async def _gateway(
    workdir: Path, name: str, upstream: dict[str, Any], answer: Answerer, log: IO[str],
    audit_store: Path | None = None,
) -> AsyncIterator[tuple[Client, Probe]]:
    """A gateway (stdio face, with the probe) in front of one upstream named `demo`, and its client (`audit_store`: its
    audit store's file, else the one in the state directory)."""
    config = configs.gateway_config({"demo": upstream})
    if audit_store is not None:
        config["audit"] = {**config.get("audit", {}), "url": f"sqlite:///{audit_store}"}
    config = configs.write_config(workdir, name, config)
    probe_file = workdir / f"{name}.probe.json"
    argv = [configs.PY, "-m", "bench.gateway_probe", str(config), str(probe_file)]
    async with Client(stdio_transport(argv, log), mode="legacy", elicitation_callback=answer,
                      read_timeout_seconds=900) as client:
        await _checked(client, f"demo__{TOOL}")()
        probe = Probe(find_child(str(probe_file)), probe_file)
        await probe.audit_opened()
        yield client, probe


async def _waves(call: Callable[[], Awaitable[None]], probe: Probe, total: int, wave: int,
                 progress: Callable[[str], None]) -> dict[str, Any]:
    await concurrent_calls(call, wave, wave)  # warm-up: the heap reaches a wave's high-water mark
    # ... and its records are stored: the writer's first batch (its connection's first INSERT, SQLite's page cache
    # filling) is part of the warm-up, not of what a million questions grow by.
    await probe.audit_stored(1 + wave)  # the first call's record too
    before = await probe.read()
    trace = [{"completed": 0, **_memory(before), **rss_by_kind_kb(probe.pid)}]
    if before.get("gc_types"):
        trace[-1]["gc_types"] = before["gc_types"]

    def cpu_now() -> tuple[float, float, float]:  # the gateway, its upstream processes, this client
        return cpu_seconds(probe.pid), sum(map(cpu_seconds, children(probe.pid))), time.process_time()

    cpu_before = cpu_now()
    start = time.perf_counter()
    done = first_tenth = 0
    while done < total:
        n = min(wave, total - done)
        await concurrent_calls(call, n, n)
        done += n
        at_tenth = done * 10 // total != (done - n) * 10 // total
        if at_tenth or _power_of_ten(done):  # every tenth and at 100, 1,000, ...: what the probe says (traced, if on)
            found = await probe.read()
            trace.append({"completed": done, **_memory(found), **rss_by_kind_kb(probe.pid)})
            if found.get("gc_types"):
                trace[-1]["gc_types"] = found["gc_types"]
            if not at_tenth:
                continue
            tenth = found
            first_tenth = first_tenth or tenth["rss_kb"]
            progress(f"waves: {done:,}/{total:,} completed, gateway RSS {tenth['rss_kb'] / 1024:.1f} MiB"
                     + (f", audit queued {tenth['audit_queued']:,} (at most {tenth['audit_queued_max']:,}), "
                        f"dropped {sum(tenth['audit_dropped'].values()):,}" if "audit_dropped" in tenth else "")
                     + "".join(f", {name} {value / 1024:.1f} MiB" for name, value in _memory(tenth).items()
                               if name.endswith("_kb") and name != "rss_kb"))
        else:
            trace.append({"completed": done, "rss_kb": rss_kb(probe.pid)})
    elapsed = time.perf_counter() - start
    cpu = [now - then for now, then in zip(cpu_now(), cpu_before, strict=True)]
    after = await probe.read()
    audit: dict[str, Any] = {}
    if "audit_written" in after:  # every question's end is a record: none may be dropped
        most = max(point.get("audit_queued_max", 0) for point in [*trace, _memory(after)])
        stored = await probe.audit_stored(1 + wave + total)
        audit = {"audit_written": stored["audit_written"], "audit_dropped": stored["audit_dropped"],
                 "audit_queued_max": most}
        progress(f"waves: audit records stored {audit['audit_written']:,}, dropped "
                 f"{sum(audit['audit_dropped'].values()):,} {audit['audit_dropped']}, "
                 f"most queued at once {audit['audit_queued_max']:,}")
    return {
        "total": total,
        "wave": wave,
        "seconds": round(elapsed, 2),
        "per_second": round(total / elapsed, 1),
        "cpu_ms_per_question": {name: round(1000 * seconds / total, 3)
                                for name, seconds in zip(("gateway", "upstream", "client"), cpu, strict=True)},
        "rss_before_kb": before["rss_kb"],
        "rss_after_kb": after["rss_kb"],
        "growth_pct": round(100 * (after["rss_kb"] - before["rss_kb"]) / before["rss_kb"], 2),
        # From the first tenth on: the bounded records (the broker's last 1,000 ends, caches) are full by then,
        # so what grows after it is what would grow without end.
        "rss_first_tenth_kb": first_tenth,
        "growth_after_first_tenth_pct": round(100 * (after["rss_kb"] - first_tenth) / first_tenth, 2),
        "broker_pending_after": after["pending"],
        "tasks_before": before["tasks"],
        "tasks_after": after["tasks"],
        **audit,
        "trace": trace,
    }


def _power_of_ten(n: int) -> bool:
    return n >= 100 and str(n).rstrip("0") == "1"


WAVE = 100
"""Concurrent calls per wave of phase 1 (`bench/__main__.py`'s profiles set their own)."""


def _memory(stats: dict[str, Any]) -> dict[str, Any]:
    """From a probe: the gateway's RSS, what Python has allocated (traced, with BENCH_TRACEMALLOC=1), glibc's heap in
    use and free inside it, pymalloc's arenas and the blocks live in them: RSS rising while the traced, in-use and
    allocated figures stay flat is an allocator holding freed memory, not objects kept."""
    found: dict[str, Any] = {"rss_kb": stats["rss_kb"]}
    if "traced_total_kb" in stats:
        found["traced_kb"] = stats["traced_total_kb"]
        found["traced_peak_kb"] = stats["traced_peak_kb"]
    if malloc := stats.get("malloc"):
        found |= {"malloc_in_use_kb": malloc["in_use_kb"], "malloc_free_kb": malloc["free_kb"]}
    if pymalloc := stats.get("pymalloc"):
        found |= {"pymalloc_arenas_kb": pymalloc["arenas_kb"], "pymalloc_allocated_kb": pymalloc["allocated_kb"]}
    if sqlite := stats.get("sqlite"):
        found |= {"sqlite_used_kb": sqlite["used_kb"], "sqlite_highwater_kb": sqlite["highwater_kb"]}
    if "audit_queued" in stats:
        found |= {"audit_queued": stats["audit_queued"], "audit_queued_max": stats["audit_queued_max"]}
    if "audit_written" in stats:
        found |= {"audit_written": stats["audit_written"], "audit_dropped": sum(stats["audit_dropped"].values())}
    if "gc_objects" in stats:
        found["gc_objects"] = stats["gc_objects"]
    if "audit_batches" in stats:
        found["audit_batches"] = stats["audit_batches"]
    return found


THROUGHPUT_ROUNDS = 3
"""Measurements per target and level, alternating direct and elicitgate (the order flips each round): a
single back-to-back pair moved by 25% from run to run on this machine; the median of three holds."""


async def _throughput(via_gateway: Callable[[], Awaitable[None]], direct: Callable[[], Awaitable[None]],
                      levels: tuple[int, ...], per_level: int, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    targets = (("direct", direct), ("elicitgate", via_gateway))
    for level in levels:
        n = max(per_level, 10 * level)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in targets}
        for _, call in targets:
            await concurrent_calls(call, level, level)  # warm-up
        for round_ in range(THROUGHPUT_ROUNDS):
            for name, call in targets if round_ % 2 == 0 else targets[::-1]:
                start = time.perf_counter()
                latencies = await concurrent_calls(call, n, level)
                elapsed = time.perf_counter() - start
                runs[name].append((n / elapsed, statistics.median(latencies) * 1000))
        row: dict[str, Any] = {"concurrency": level, "calls": n, "rounds": THROUGHPUT_ROUNDS}
        for name, measured in runs.items():
            row[name] = {
                "per_second": round(statistics.median(rate for rate, _ in measured), 1),
                "p50_ms": round(statistics.median(p50 for _, p50 in measured), 2),
                "per_second_runs": [round(rate, 1) for rate, _ in measured],
            }
        progress(f"throughput at concurrency {level}: elicitgate {row['elicitgate']['per_second']}/s "
                 f"({row['elicitgate']['per_second_runs']}), direct {row['direct']['per_second']}/s "
                 f"({row['direct']['per_second_runs']})")
        rows.append(row)
    return rows


async def _pending(client: Client, answer: Answerer, probe: Probe, n: int,
                   progress: Callable[[str], None], *, on_the_way: int | None = None) -> dict[str, Any]:
    """`n` calls held pending at once. `on_the_way`: at most that many calls sent and not yet held by the client
    at any moment (else all `n` are sent at once)."""
    before = await probe.read()
    answer.start_holding(n)
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for sent in range(n):
            if on_the_way is not None:
                while sent - answer.held >= on_the_way:
                    await anyio.sleep(0.02)
            tg.start_soon(_checked(client, f"demo__{TOOL}"))
        with anyio.fail_after(900):
            await answer.all_held.wait()
        reached = time.perf_counter() - start
        await anyio.sleep(1.0)
        during = await probe.read()
        progress(f"pending: {answer.held:,} held by the client, {during['pending']:,} pending in the broker, "
                 f"gateway RSS {during['rss_kb'] / 1024:.1f} MiB")
        answer.hold = False
        answer.release.set()
    drained = time.perf_counter() - start - reached
    after = await probe.read()
    return {
        "pending": n,
        "seconds_to_all_pending": round(reached, 2),
        "seconds_to_drain": round(drained, 2),
        "broker_pending_during": during["pending"],
        "tasks_during": during["tasks"],
        "rss_before_kb": before["rss_kb"],
        "rss_during_kb": during["rss_kb"],
        "rss_after_kb": after["rss_kb"],
        "bytes_per_pending": round((during["rss_kb"] - before["rss_kb"]) * 1024 / n),
        "broker_pending_after": after["pending"],
        # With BENCH_TRACEMALLOC=1: Python's own allocations per pending (steadier than RSS), and where they are.
        **({"traced_bytes_per_pending": round((during["traced_total_kb"] - before["traced_total_kb"]) * 1024 / n),
            "traced_during": during["traced"], "traced_growth": during.get("traced_growth", [])}
           if "traced" in during else {}),
    }


LEAN_UPSTREAM: dict[str, Any] = {"command": configs.PY, "args": ["-m", "bench.lean_server"], "era": "handshake"}


def _fresh_audit_store(workdir: Path, start_from: Path | None) -> tuple[Path, int]:
    """The waves' audit store: a file of their own, empty, or a copy of `start_from`; and the records it holds.

    In the state directory it held every earlier run's records (the published million at 4ac107e began with 1.9
    million), and the cost of a stored row grew with the store (`audit/migrations` 0002): the figures depended on
    how many runs came before."""
    store = workdir / "scale-waves.audit.db"
    for path in (store, *(store.with_name(store.name + side) for side in ("-wal", "-shm", "-journal"))):
        path.unlink(missing_ok=True)
    if start_from is None:
        return store, 0
    shutil.copyfile(start_from, store)
    with open(store, "rb+") as copied:  # on disk now: else the store's first checkpoint waits for its writeback
        os.fsync(copied.fileno())
    with contextlib.closing(sqlite3.connect(store)) as conn:
        return store, conn.execute("SELECT count(*) FROM elicitgate_audit").fetchone()[0]


def _migrated(config: Path, log: IO[str]) -> None:
    """The audit store of `config` made (or migrated) by `elicitgate audit list` before the gateway starts, as a
    gateway that ran before finds it: a gateway that makes its store imports Alembic to do it (about 12 MiB of RSS
    for the rest of its life, in the waves' baseline)."""
    argv = [configs.PY, "-m", "elicitgate.cli", "audit", "list", "--limit", "1", "--config", str(config)]
    subprocess.run(argv, stdout=log, stderr=log, check=True, timeout=900)


async def waves_phase(total: int, wave: int, log: IO[str], workdir: Path, progress: Callable[[str], None],
                      *, sdk_client: bool = False, demo_upstream: bool = False,
                      audit_store: Path | None = None) -> dict[str, Any]:
    """Phase 1 alone: `total` elicitations completed in waves of `wave`, through a fresh gateway, between the lean
    client and the lean upstream (`bench.lean_client`, `bench.lean_server`: the gateway's CPU is then most of each
    question's; `sdk_client`: the `mcp` SDK's client, as the other phases; `demo_upstream`: the demo server). The
    gateway's audit store starts empty, or as a copy of `audit_store` (a SQLite file)."""
    upstream = configs.stdio_upstream("handshake") if demo_upstream else LEAN_UPSTREAM
    store, rows = _fresh_audit_store(workdir, audit_store)
    if sdk_client:
        answer = Answerer()
        _migrated(configs.write_config(workdir, "scale-waves", {"audit": {"url": f"sqlite:///{store}"}}), log)
        async with _gateway(workdir, "scale-waves", upstream, answer, log, store) as (client, probe):
            found = await _waves(_checked(client, f"demo__{TOOL}"), probe, total, wave, progress)
            return {"client": "mcp SDK", "upstream": upstream["args"][-1], "audit_rows_before": rows, **found}
    settings = configs.gateway_config({"demo": upstream})
    settings["audit"] = {**settings.get("audit", {}), "url": f"sqlite:///{store}"}
    config = configs.write_config(workdir, "scale-waves", settings)
    _migrated(config, log)
    probe_file = workdir / "scale-waves.probe.json"
    accept = {"action": "accept", "content": {"ok": True}}
    lean = await LeanClient.start([configs.PY, "-m", "bench.gateway_probe", str(config), str(probe_file)], log,
                                  lambda params: accept)
    try:
        async def call() -> None:
            await lean.call_tool(f"demo__{TOOL}", ARGS)

        await call()
        probe = Probe(lean.pid, probe_file)
        await probe.audit_opened()
        asked = lean.elicitations
        found = await _waves(call, probe, total, wave, progress)
        if lean.elicitations - asked != total + wave:  # the warm-up wave's too
            raise RuntimeError(f"{lean.elicitations - asked:,} elicitations answered for {total + wave:,} calls")
        return {"client": "bench.lean_client", "upstream": upstream["args"][-1], "audit_rows_before": rows,
                "elicitations_answered": lean.elicitations - asked, **found}
    finally:
        await lean.close()


def main() -> None:
    """`python -m bench.scale --only pending|pushed --pending N`: one half of phase 3, its figures as JSON on
    stdout (`pending`: through a 2026-07-28 stdio upstream; `pushed`: pushed by a handshake-era HTTP upstream).
    `--only waves --total N --wave W`: phase 1 alone (completed questions, RSS at each tenth); `--only throughput
    [--per-level N]`: phase 2 alone."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--only", choices=["pending", "pushed", "waves", "throughput"], required=True)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--wave", type=int, default=WAVE)
    parser.add_argument("--per-level", type=int, default=300, help="throughput: calls per level (at least 10x it)")
    parser.add_argument("--sdk-client", action="store_true", help="waves: the mcp SDK's client, not the lean one")
    parser.add_argument("--demo-upstream", action="store_true", help="waves: the demo server, not the lean one")
    parser.add_argument("--audit-store", type=Path, help="waves: the audit store starts as a copy of this SQLite file")
    parser.add_argument("--workdir", type=Path, default=Path("bench/results/work"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_STATE_HOME"] = str(args.workdir / "state")
    with open(args.workdir / "scale.log", "w") as log:
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        if args.only == "throughput":
            found = anyio.run(throughput_phase, (1, 10, 100), args.per_level, log, args.workdir, say)
        elif args.only == "waves":
            waves = functools.partial(waves_phase, sdk_client=args.sdk_client, demo_upstream=args.demo_upstream,
                                      audit_store=args.audit_store)
            found = anyio.run(waves, args.total, args.wave, log, args.workdir, say)
        else:
            phase = pending_phase if args.only == "pending" else pushed_phase
            found = anyio.run(phase, args.pending, log, args.workdir, say)
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
