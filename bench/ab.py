"""Before / after, side by side: `python -m bench.ab [--base REF] [--rounds N] [--batch N] [--startup N] [--http]
[--ops elicit]`.

Two stdio gateways run at once, one on `src/` as committed at `--base` (default `main`) and one on
the work tree, in front of the same kind of stdio upstreams (with `--http`: one demo server over
streamable HTTP that both gateways and the direct client share), beside the demo server called directly;
the latency rounds interleave all of them (`bench.latency.interleave`), so machine load lands on
both alike. Prints p50 per target and operation, and each gateway's CPU time per call served (from
`/proc`, less sensitive to other work on the machine than wall time; each row is a gateway process
of its own, so each has its own figure, half elicit and half echo calls; `--ops elicit` or `--ops echo` makes
only one kind, for its CPU per call alone). With `--startup N`: N
interleaved start-ups of each (`serve --http`, two stdio upstreams, as `bench.startup`, each running the demo
server of the same tree; with `--lean-upstreams`, `bench.lean_server`, so that "ready" is the gateway's own): seconds
to `/healthz` 200, the gateway's CPU seconds by then and its upstreams', its RSS one second later. Asserts nothing.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio

from bench import configs, latency
from bench.procs import children, cmdline, cpu_seconds, pin_to_one_core, stdio_transport

ROOT = Path(__file__).resolve().parent.parent


def export_src(ref: str) -> Path:
    """`src/` as committed at `ref`, exported under bench/results/src/ and compiled (see `compiled`)."""
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    target = ROOT / "bench" / "results" / "src" / sha
    if not target.exists():
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return compiled(target / "src")


def work_src() -> Path:
    """The work tree's `src/`, compiled."""
    return compiled(ROOT / "src")


def sources_to_compare(base: str | None, work: Path | None = None) -> dict[str, Path]:
    """The `src/` trees to compare, by label: "base" (`base`, a git ref, exported) first when there is one, then
    "work" (`work`, or the work tree's)."""
    found = {} if base is None else {"base": export_src(base)}
    found["work"] = work if work is not None else work_src()
    return found


def compiled(src: Path) -> Path:
    """`src` with its bytecode written, as an installed package has it: without it every process the bench starts
    compiles each module from source (~0.3 s of CPU and ~1 MiB more at start), and does so on every start where
    PYTHONDONTWRITEBYTECODE is set."""
    compileall.compile_dir(src, quiet=1, workers=1)
    return src


def gateway_pid(marker: str) -> int:
    for pid in children(os.getpid()):
        if marker in " ".join(cmdline(pid)):
            return pid
    raise LookupError(marker)


def startup(args: argparse.Namespace) -> None:
    import statistics
    import time

    from bench.procs import HttpProcess, free_port, rss_kb

    work = ROOT / "bench" / "results" / "ab"
    sources = {"base": export_src(args.base), "work": work_src()}
    upstream = ({"command": configs.PY, "args": ["-m", "bench.lean_server"], "era": "handshake"}
                if args.lean_upstreams else configs.stdio_upstream("auto"))
    servers = {"one": upstream, "two": upstream}
    runs: dict[str, list[tuple[float, float, float, float]]] = {label: [] for label in sources}
    pythonpath = os.environ.get("PYTHONPATH")
    with open(ROOT / "bench" / "results" / "ab.log", "w") as log:
        for _ in range(args.startup):
            for label, src in sources.items():
                # The gateway starts its stdio servers with only the SDK's few inherited variables (no PYTHONPATH):
                # the tree to run goes in each server's own `env`, or both sides' upstreams run the venv's tree.
                own_tree = {"PYTHONPATH": os.pathsep.join(filter(None, [str(src), pythonpath]))}
                own = {name: {**server, "env": own_tree} for name, server in servers.items()}
                gateway = configs.gateway_config(own, steady=False)
                config = configs.write_config(work, f"ab-startup-{label}", gateway)
                port = free_port()
                argv = [configs.PY, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); "
                        "from elicitgate.cli import app; app()", "serve", "--config", str(config),
                        "--http", f"127.0.0.1:{port}"]
                # The upstreams (the demo server, a module of the same tree) run that tree too.
                os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), pythonpath]))
                try:
                    with HttpProcess(argv, port, log, ready_path="/healthz") as gw:
                        cpu = cpu_seconds(gw.pid)
                        upstreams = sum(cpu_seconds(pid) for pid in children(gw.pid))
                        time.sleep(1.0)
                        runs[label].append((gw.ready_after, cpu, upstreams, rss_kb(gw.pid) / 1024))
                finally:
                    if pythonpath is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = pythonpath
    for label, found in runs.items():
        ready, cpu, upstreams, rss = (statistics.median(r[i] for r in found) for i in range(4))
        spread = ", ".join(f"{name} {min(r[i] for r in found):.2f}-{max(r[i] for r in found):.2f}"
                           for i, name in enumerate(("ready", "gateway CPU", "upstreams' CPU", "RSS")))
        print(f"{label}: ready {ready:.2f} s, gateway CPU by then {cpu:.2f} s (its upstreams' {upstreams:.2f} s), "
              f"idle RSS {rss:.1f} MiB (median of {len(found)}; ranges: {spread})")


async def main(args: argparse.Namespace) -> None:
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    log = open(ROOT / "bench" / "results" / "ab.log", "w")  # noqa: SIM115 - lives for the run
    if not args.http:
        direct = configs.demo_argv()
        servers = {"hs": configs.stdio_upstream("handshake"), "modern": configs.stdio_upstream("modern")}
        await compare(args, servers, "stdio", lambda: stdio_transport(direct, log), log)
        return
    from bench.procs import HttpProcess, free_port

    port = free_port()
    with HttpProcess(configs.demo_argv(f"127.0.0.1:{port}"), port, log) as upstream:
        url = f"{upstream.url}/mcp"
        servers = {"hs": configs.http_upstream(url, "handshake"), "modern": configs.http_upstream(url, "modern")}
        await compare(args, servers, "http", lambda: url, log)


async def compare(
    args: argparse.Namespace, servers: dict[str, dict[str, Any]], upstream: str, direct: Callable[[], Any],
    log: IO[str],
) -> None:
    """Both gateways (stdio faces) in front of `servers`, and the demo server itself through `direct`
    (a `mcp.Client` target); `upstream` names how the gateways reach it in the rows."""
    work = ROOT / "bench" / "results" / "ab"
    base_src = export_src(args.base)
    found: list[latency.Target] = []
    for era, mode in (("handshake", "legacy"), ("2026-07-28", "2026-07-28")):
        found.append(latency.Target(upstream, era, "direct", mode, direct))
    rows = (("handshake", "", "legacy", "hs__"), ("2026-07-28", "", "legacy", "modern__"),
            ("2026-07-28", "-modern-client", "2026-07-28", "modern__"))
    for label, src in (("base", base_src), ("work", work_src())):
        for era, suffix, mode, prefix in rows:
            # A config file of its own per row: its gateway process is found by name, for its CPU.
            name = f"ab-{label}{suffix}-{prefix.strip('_')}"
            config = configs.write_config(work, name, configs.gateway_config(servers, src=src))
            argv = [configs.PY, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); "
                    "from elicitgate.cli import app; app()", "serve", "--config", str(config)]

            def make(argv: list[str] = argv) -> object:
                return stdio_transport(argv, log)

            found.append(latency.Target(upstream, era, label + suffix, mode, make, prefix=prefix, note=name))
    cpu: dict[str, float] = {}

    async def run() -> None:
        from contextlib import AsyncExitStack

        async with AsyncExitStack() as stack:
            clients = await latency.open_all(stack, found)
            pids = {t.note: [p for p in children(os.getpid()) if f"{t.note}.json" in " ".join(cmdline(p))]
                    for t in found if t.note}
            start = {name: sum(cpu_seconds(p) for p in ps) for name, ps in pids.items()}
            await latency.run_rounds(found, clients, args.rounds, args.batch, seed=6, ops=args.ops)
            for t in found:
                if t.note:
                    calls = sum(len(t.samples[op]) for op in latency.OPS)
                    used = sum(cpu_seconds(p) for p in pids[t.note]) - start[t.note]
                    cpu[t.note] = used / max(calls, 1) * 1000

    await run()
    print(f"upstreams over {upstream}; p50 in ms")
    print(f"{'era':<11} {'path':<26} {'elicit p50':>10} {'echo p50':>9} {'CPU/call':>9}")
    for t in found:
        p50 = {op: sorted(t.samples[op])[len(t.samples[op]) // 2] * 1000 if t.samples[op] else float("nan")
               for op in latency.OPS}
        err = f"  {t.errors}" if t.errors else ""
        used = f"{cpu[t.note]:>9.2f}" if t.note in cpu else f"{'':>9}"
        print(f"{t.era:<11} {t.path:<26} {p50['elicit']:>10.2f} {p50['echo']:>9.2f} {used}{err}")
    for label in ("base", "work"):
        mine = [t for t in found if t.path.startswith(label) and t.note in cpu]
        calls = sum(len(t.samples[op]) for t in mine for op in latency.OPS)
        total = sum(cpu[t.note] * sum(len(t.samples[op]) for op in latency.OPS) for t in mine)
        print(f"gateway CPU per call ({label}, all rows): {total / max(calls, 1):.2f} ms")


if __name__ == "__main__":
    # Each run its own gateway state (audit store, requestState key): the default is shared machine-wide.
    os.environ["XDG_STATE_HOME"] = str(ROOT / "bench" / "results" / "ab" / "state" / str(os.getpid()))
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="main")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--startup", type=int, default=0)
    parser.add_argument("--lean-upstreams", action="store_true",
                        help="with --startup: bench.lean_server as the two upstreams (the gateway's own start-up)")
    parser.add_argument("--ops", type=lambda text: tuple(text.split(",")), default=latency.OPS,
                        help="the calls made, comma-separated (elicit,echo): CPU per call of one kind alone")
    parser.add_argument("--http", action="store_true", help="the upstreams are the demo server over streamable HTTP")
    parser.add_argument("--pin", action="store_true",
                        help="every process on one core (steadier p50s, see procs.pin_to_one_core)")
    parsed = parser.parse_args()
    if parsed.pin:
        pin_to_one_core()
    if parsed.startup:
        startup(parsed)
    else:
        anyio.run(main, parsed)
    sys.exit(0)
