"""`python -m bench [--quick] [--only SECTION ...] [--ref REV] [--publish] [--report-only]`
(usually via `bench/run`)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from bench import audit, configs, hotpath, latency, load, report, scale, startup
from bench.ab import export_src, work_src

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LATEST = ROOT / "bench" / "latest"
README = ROOT / "README.md"
SECTIONS = ("latency", "audit", "scale", "startup", "profile", "load")

MODES: dict[str, dict[str, Any]] = {
    "quick": {"rounds": 3, "batch": 20, "pending": 2_000, "pushed_pending": 300, "total": 5_000, "wave": 10,
              "per_level": 100, "startup_repeats": 2, "profile_calls": 200, "audit_rounds": 3, "audit_batch": 20,
              "load_calls": 100},
    "full": {"rounds": 10, "batch": 50, "pending": 10_000, "pushed_pending": 10_000, "total": 1_000_000, "wave": 100,
             "per_level": 300, "startup_repeats": 5, "profile_calls": 1_000, "audit_rounds": 10, "audit_batch": 50,
             "load_calls": 1_000},
}


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def use_ref(ref: str | None) -> Path:
    """Put `src/` first on every process's path: as committed at `ref` (exported, so the bench measures that
    commit's gateway whatever is uncommitted in the work tree), else the work tree's; compiled either way."""
    src = export_src(ref) if ref else work_src()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return src


def meta(mode: str, ref: str | None) -> dict[str, Any]:
    dirty = [] if ref else [line[3:] for line in _git("status", "--porcelain", "src").splitlines()]
    return {
        "mode": mode,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": _git("rev-parse", "--short", ref or "HEAD"),
        "ref": ref,
        "dirty_src": dirty,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_start": [round(v, 2) for v in os.getloadavg()],
        "limits_raised": ", ".join(f"{k}={v:g}" for k, v in configs.BENCH_LIMITS.items()),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    mode = "quick" if args.quick else "full"
    p = MODES[mode]
    results: dict[str, Any] = {"meta": meta(mode, args.ref), "params": p}
    work = RESULTS / "work"
    # The gateways' state (the audit store, the requestState key) in the bench's work directory: the
    # default one is shared by every gateway run on the machine, whatever its version.
    os.environ["XDG_STATE_HOME"] = str(work / "state")
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "bench.log", "w") as log:
        if "latency" in args.only:
            say(f"latency: {p['rounds']} rounds x {p['batch']} calls per target and operation")
            found = await latency.measure(p["rounds"], p["batch"], log, work)
            results["latency"] = {"rounds": p["rounds"], "batch": p["batch"], "rows": report.latency_rows(found)}
        if "audit" in args.only:
            say(f"audit on vs off: {p['audit_rounds']} rounds x {p['audit_batch']} elicitations per target")
            results["audit"] = await audit.measure(p["audit_rounds"], p["audit_batch"], log, work)
            say(audit.describe(results["audit"]))
        if "scale" in args.only:
            say(f"scale: {p['total']:,} in waves of {p['wave']}, throughput, {p['pending']:,} pending")
            results["scale"] = await scale.run(
                pending=p["pending"], pushed_pending=p["pushed_pending"], total=p["total"], wave=p["wave"],
                levels=(1, 10, 100), per_level=p["per_level"], log=log, workdir=work, progress=say,
            )
        if "startup" in args.only:
            say("start-up")
            results["startup"] = startup.run(p["startup_repeats"], log, work)
        if "profile" in args.only:
            say(f"profile: {p['profile_calls']} elicitations per face under py-spy")
            results["profile"] = await hotpath.run(p["profile_calls"], log, work, RESULTS)
        if "load" in args.only:
            say(f"load: {p['load_calls']:,} concurrent calls with one elicitation each, per client era and upstream")
            results["load"] = load.measure(p["load_calls"], 4, log, work, progress=lambda row: say(load.describe(row)))
    results["targets"] = report.targets_table(results)
    return results


def publish(results: dict[str, Any]) -> None:
    """Copy the report to bench/latest/ (committed) and refresh the README's Performance section."""
    LATEST.mkdir(exist_ok=True)
    for name in ("results.md", "results.json", "latency.png", "scale.png"):
        if (RESULTS / name).exists():
            shutil.copy(RESULTS / name, LATEST / name)
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    text = README.read_text()
    if start not in text:
        return
    m = results["meta"]
    section = (f"{start}\n`bench/run` ({m['mode']} run, {m['date'][:10]}, commit {m['commit']}, {m['cpus']} cores; "
               f"how and what: [bench/README.md](bench/README.md)).\n\n{report.readme_section(results)}{end}")
    head, _, rest = text.partition(start)
    README.write_text(head + section + rest.partition(end)[2])


def write_report(results: dict[str, Any], *, publish_it: bool) -> str:
    if "waves" in results.get("scale", {}):
        results["scale"]["waves"]["trace"] = report.thin(results["scale"]["waves"]["trace"])
    (RESULTS / "results.json").write_text(json.dumps(results, indent=1))
    markdown = report.markdown(results)
    (RESULTS / "results.md").write_text(markdown)
    report.plots(results, RESULTS)
    if publish_it:
        publish(results)
    return markdown


def cli() -> None:
    parser = argparse.ArgumentParser(prog="bench", description="elicitgate vs direct vs the FastMCP proxy")
    parser.add_argument("--quick", action="store_true", help="a short run (a minute or two)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), metavar="SECTION",
                        help=f"run only these sections ({', '.join(SECTIONS)})")
    parser.add_argument("--ref", help="measure src/ as committed at this git revision (default: the work tree)")
    parser.add_argument("--publish", action="store_true",
                        help="copy the report to bench/latest/ and refresh README.md's Performance section")
    parser.add_argument("--report-only", action="store_true",
                        help="measure nothing: render bench/results/results.json again (markdown, plots, --publish)")
    args = parser.parse_args()
    if args.report_only:
        results = json.loads((RESULTS / "results.json").read_text())
        results["targets"] = report.targets_table(results)  # the targets as the report now states them
        print(write_report(results, publish_it=args.publish))
        return
    say(f"measuring src/ at {args.ref or 'the work tree'}: {use_ref(args.ref)}")
    started = time.perf_counter()
    results = anyio.run(main, args)
    results["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    results["meta"]["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    print(write_report(results, publish_it=args.publish))
    say(f"done in {results['meta']['seconds']:.0f} s: {RESULTS}")
    sys.exit(0)


if __name__ == "__main__":
    cli()
