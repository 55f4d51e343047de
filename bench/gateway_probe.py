"""`elicitgate serve --config CONFIG` (stdio face) with a probe for the scale bench.

Run: `python -m bench.gateway_probe CONFIG PROBE_FILE`. The gateway is the real one, built and
served as `elicitgate.cli_serve.run_gateway` does for stdio; on SIGUSR1 it writes what the broker holds
(`pending`), the connected clients, the asyncio task count and whether the audit store is open
(`audit_open`; it opens at the first record) as JSON to PROBE_FILE, so the bench
can check that every elicitation it counts is really pending in the broker, and that nothing is
left after the waves. With BENCH_TRACEMALLOC=1 it also traces allocations (slower) and adds the
live Python memory by source file to the probe (`traced`), to see where pending elicitations' bytes go
(by source line with BENCH_TRACEMALLOC_BY=lineno; whole stacks with BENCH_TRACEMALLOC_BY=traceback and
BENCH_TRACEMALLOC_FRAMES=N); with BENCH_TRACEMALLOC_DUMP=1 each SIGUSR1 also dumps the whole snapshot beside
PROBE_FILE (`<probe>.<n>.snap`, n counting from 1) for `tracemalloc.Snapshot.load(...).compare_to(...)`, which is
how growth between two moments is found by stack; with BENCH_MALLOC_TRIM=1 each probe calls glibc's
`malloc_trim(0)` first (what trimming after bursts would give back). Every probe also reports glibc's and
pymalloc's heaps, SQLite's own memory and the audit queue (now and at most since the previous probe); with
BENCH_GC_TYPES=1 the collector's objects by type. SIGUSR2 writes the same without the traced memory (quick).

`python -m bench.gateway_probe CONFIG PROBE_FILE HOST:PORT` serves the HTTP face there instead (as `elicitgate
serve --http` does), with the same probe (`bench.pending_paths`).
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import gc
import json
import os
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import FrameType

import anyio

from elicitgate.audit.record import AuditRecord
from elicitgate.cli_serve import _setup_logging
from elicitgate.config import load_config
from elicitgate.faces.stdio import serve_stdio
from elicitgate.gateway import Gateway
from elicitgate.metrics import AUDIT_DROPPED, AUDIT_WRITTEN


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def malloc_info() -> dict[str, int]:
    """glibc's heap in KiB (`mallinfo2`, every arena): `heap_kb` obtained by brk/mmap'd arenas, `in_use_kb` of it
    handed out, `free_kb` free inside it (held, not returned: fragmentation or reuse to come), `mmapped_kb` in
    chunks of their own. Python's small objects live in pymalloc's 256 KiB arenas, which come from mmap
    directly and are in none of these. Empty where the C library has no mallinfo2 (musl)."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {"heap_kb": info.arena // 1024, "in_use_kb": info.uordblks // 1024, "free_kb": info.fordblks // 1024,
            "mmapped_kb": info.hblkhd // 1024}


def pymalloc_info() -> dict[str, int]:
    """Python's small-object allocator in KiB (from `sys._debugmallocstats`, which writes to fd 2): `arenas_kb` mapped
    (1 MiB arenas), `allocated_kb` in live blocks, `available_kb` in free blocks of pools in use. An arena is
    given back only when all of it is free: arenas well above what is allocated is fragmentation."""
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        lines = out.read().decode(errors="replace").splitlines()
    found: dict[str, int] = {}
    for line in lines:
        name, _, value = line.partition("=")
        number = int(value.strip().replace(",", "") or 0) if value.strip().replace(",", "").isdigit() else None
        if number is None:
            continue
        if name.startswith("# bytes in allocated blocks"):
            found["allocated_kb"] = number // 1024
        elif name.startswith("# bytes in available blocks"):
            found["available_kb"] = number // 1024
        elif name.startswith("Total") and "arenas_kb" not in found:
            found["arenas_kb"] = number // 1024
    return found


def sqlite_memory() -> dict[str, int]:
    """SQLite's own heap in KiB (`sqlite3_memory_used` and its high-water mark, every connection of the process:
    page caches, prepared statements, schema), from the library Python's sqlite3 module loaded."""
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        return {}
    lib.sqlite3_memory_used.restype = lib.sqlite3_memory_highwater.restype = ctypes.c_int64
    return {"used_kb": lib.sqlite3_memory_used() // 1024, "highwater_kb": lib.sqlite3_memory_highwater(0) // 1024}


def audit_counts() -> tuple[int, dict[str, int]]:
    """The audit records stored since the gateway started, and those dropped by reason (`queue_full`: the writer fell
    behind; `write_failed`; `stopped`), from the gateway's own counters (`metrics.AUDIT_WRITTEN`, `AUDIT_DROPPED`)."""
    written = sum(int(s.value) for m in AUDIT_WRITTEN.collect() for s in m.samples if s.name.endswith("_total"))
    dropped = {s.labels["reason"]: int(s.value) for m in AUDIT_DROPPED.collect() for s in m.samples
               if s.name.endswith("_total")}
    return written, dropped


def main() -> None:
    config, probe = sys.argv[1], Path(sys.argv[2])
    http = sys.argv[3] if len(sys.argv) > 3 else None
    cfg = load_config(config)
    _setup_logging(cfg.log_level)
    made: list[Gateway] = []
    if http is None:
        made.append(Gateway(cfg, face="stdio"))
    else:  # the CLI builds the gateway itself: keep the one it builds
        init = Gateway.__init__

        def keep(self: Gateway, *args: object, **kwargs: object) -> None:
            init(self, *args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

        Gateway.__init__ = keep  # type: ignore[method-assign]
    if os.environ.get("BENCH_TRACEMALLOC"):
        tracemalloc.start(int(os.environ.get("BENCH_TRACEMALLOC_FRAMES", "1")))
    snapshots: list[tracemalloc.Snapshot] = []
    most_queued = [0]
    if made and made[0].audit is not None:  # the audit queue's high-water mark between probes
        trail = made[0].audit
        record = trail.record

        def counted(entry: AuditRecord) -> None:
            record(entry)
            most_queued[0] = max(most_queued[0], trail._queued)  # pyright: ignore[reportPrivateUsage]

        trail.record = counted  # type: ignore[method-assign]

    batches: list[tuple[float, int, float]] = []
    if os.environ.get("BENCH_AUDIT_BATCHES"):  # each batch the writer stores: when, its records, seconds in `add`
        from elicitgate.audit.store import AuditStore

        add = AuditStore.add

        async def timed(self: AuditStore, batch: list[AuditRecord]) -> None:
            count, start = len(batch), time.monotonic()
            await add(self, batch)
            batches.append((start, count, time.monotonic() - start))

        AuditStore.add = timed  # type: ignore[method-assign, assignment]

    dumps = 0

    def on_probe(signum: int, frame: FrameType | None) -> None:
        nonlocal dumps
        try:
            tasks = len(asyncio.all_tasks())
        except RuntimeError:
            tasks = -1
        if not made:
            return
        gateway = made[0]
        stats = {"pid": os.getpid(), "pending": len(gateway.broker.pending), "peers": len(gateway.peers.connected),
                 "tasks": tasks, "audit_open": gateway.audit is None or gateway.audit.store is not None}
        if gateway.audit is not None:  # records waiting for the writer now, and the most since the previous probe
            stats["audit_queued"] = gateway.audit._queued  # pyright: ignore[reportPrivateUsage]
            stats["audit_queued_max"], most_queued[0] = most_queued[0], 0
            stats["audit_written"], stats["audit_dropped"] = audit_counts()
        if batches:  # since the previous probe: how many, the slowest, and the longest gap between two batches' starts
            gaps = [later[0] - (earlier[0] + earlier[2]) for earlier, later in zip(batches, batches[1:], strict=False)]
            stats["audit_batches"] = {"count": len(batches), "records": sum(b[1] for b in batches),
                                      "slowest_s": sorted((round(b[2], 3) for b in batches), reverse=True)[:5],
                                      "longest_gaps_s": sorted((round(g, 3) for g in gaps), reverse=True)[:5],
                                      "sizes": sorted({b[1] for b in batches})[-5:]}
            batches.clear()
        if tracemalloc.is_tracing() and signum == signal.SIGUSR1:
            by = os.environ.get("BENCH_TRACEMALLOC_BY", "filename")
            snapshot = tracemalloc.take_snapshot()
            if os.environ.get("BENCH_TRACEMALLOC_DUMP"):
                dumps += 1
                snapshot.dump(str(probe.with_suffix(f".{dumps}.snap")))
                stats["snapshot"] = str(probe.with_suffix(f".{dumps}.snap"))
            # The most Python held at once since the previous probe: what in-flight work peaks at between them.
            stats["traced_peak_kb"] = tracemalloc.get_traced_memory()[1] // 1024  # reset as the probe ends
            top = snapshot.statistics(by)
            stats["traced_total_kb"] = sum(stat.size for stat in top) // 1024
            stats["traced"] = [[_where(stat.traceback), stat.size // 1024, stat.count] for stat in top[:40]]
            if snapshots:  # what grew since the previous probe (the pending ones alone, not the heap before)
                grown = [d for d in snapshot.compare_to(snapshots[-1], by) if d.size_diff > 0][:40]
                stats["traced_growth"] = [[_where(d.traceback), d.size_diff, d.count_diff] for d in grown]
            snapshots[:] = [snapshot]
        if os.environ.get("BENCH_MALLOC_TRIM"):  # what glibc would give back if the gateway trimmed after bursts
            stats["trimmed"] = ctypes.CDLL(None).malloc_trim(0)
        stats["malloc"] = malloc_info()
        stats["pymalloc"] = pymalloc_info()
        stats["sqlite"] = sqlite_memory()
        if os.environ.get("BENCH_GC_TYPES"):  # live objects the collector tracks, by type: what a count that grows is
            counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
            stats["gc_types"] = dict(counts.most_common(60))
            stats["gc_objects"] = sum(counts.values())
        tmp = probe.with_suffix(".tmp")
        tmp.write_text(json.dumps(stats))
        tmp.replace(probe)
        if tracemalloc.is_tracing():
            tracemalloc.reset_peak()  # the probe's own objects are freed: the next peak is the gateway's

    signal.signal(signal.SIGUSR1, on_probe)
    signal.signal(signal.SIGUSR2, on_probe)  # the same without the (slow) tracemalloc snapshot
    if http is None:
        anyio.run(serve_stdio, made[0])
    else:
        from elicitgate.cli import run_gateway

        run_gateway(cfg, http)


def _where(traceback: tracemalloc.Traceback) -> str:
    return " < ".join(f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno}" for frame in traceback)


if __name__ == "__main__":
    main()
