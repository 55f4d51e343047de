"""Load without leftovers: N concurrent calls with one elicitation each, and what is left pending afterwards.

A real `elicitgate serve --http` in front of the bundled demo server. Each call is its own `mcp.Client`
session (its own connection pool) calling `demo__book_table` with a restaurant unique to it: the question
the gateway relays carries it (`Booking at R<i>: ...`), the client's elicitation callback checks that the
question is its own and answers with a name unique to it (`c<i>`), and the result, which echoes the
answer, must carry that name. A question or a result naming another client is counted as crossed.

Scenarios, {2026-07-28 clients, handshake-era clients} x {shared, per-session upstream}:

- shared: the demo server over stdio spoken to in 2026-07-28 (`era: modern`): one process for every
  client, as a 2026-07-28 upstream always is (its questions come back inside the call's own result);
- per-session: the demo server over streamable HTTP spoken to in the handshake era, `session_policy:
  per_session` (the default): every client session gets its own upstream HTTP session, as a real
  deployment of a pushing server behind an HTTP face would run it (1000 stdio processes on one machine
  would measure the machine). Their opening is paced by `max_opening_sessions` (default 8 at once, each
  one's `connect_timeout` counted from its own start).

The calls are split over `--procs` client processes (asyncio, both cores), all started before the calls
begin. After the last client process has exited, `/metrics` is polled until the gateway's
`elicitgate_elicitations_pending` is 0 (at most `--drain` seconds) and the time that took is reported.
`--vanish` adds a variant per scenario: half the client processes are killed (SIGKILL) while their
questions are open, with `elicitation.abandoned_grace` short; pending must still reach 0.

`--one-client`: the 2026-07-28 calls of a client process share one `mcp.Client` (one connection pool), as a
sessionless app would make them; its callback answers each question for the restaurant the question names.

    python -m bench.load [--calls 1000] [--procs 4] [--only modern-shared ...] [--vanish] [--one-client] [--keep]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import httpx2
import mcp_types as types

from mcp import Client

from bench import configs
from bench.procs import HttpProcess, free_port

TOOL = "demo__book_table"
TARGET = 0.999
SCENARIOS = ("modern-shared", "modern-per-session", "legacy-shared", "legacy-per-session")
GRACE = 2.0
"""`elicitation.abandoned_grace` in the vanish variant (default 20 s): a handshake-era client's question ends
this long after its stream broke."""
DEADLINE = 30.0
"""`elicitation.default_timeout` in the vanish variant (default 300 s): a 2026-07-28 client holds no connection
between its rounds, so the gateway cannot see it go; its question ends at this deadline (docs/reliability.md)."""

LOAD_LIMITS: dict[str, Any] = {
    "http": {"max_sessions": 100_000},
    "per_session_upstream": {"max_upstream_sessions": 100_000},
}
"""Raised on top of `configs.BENCH_LIMITS` (not what is measured): open downstream sessions (default
10,000) and per-client upstream sessions to the HTTP demo server (default 256). `max_opening_sessions`
(the pacing measured) stays at its default."""


# --- the client side: one process runs `count` calls at once ---------------------------------------------


def _answer_for(index: int) -> dict[str, Any]:
    return {"name": f"c{index}", "email": "load@example.com", "date": "2026-07-28", "guests": 2}


async def _one_call(
    url: str, mode: str, index: int, questions: asyncio.Event | None, shared: Client | None = None
) -> dict[str, Any]:
    """One call on its own `Client` session, or on `shared` (one 2026-07-28 `Client` for the process's calls,
    whose callback answers each question for the restaurant it names)."""
    seen: list[str] = []

    async def answer(ctx: Any, params: Any) -> types.ElicitResult:
        seen.append(params.message)
        if questions is not None:  # the vanish variant: hold every question open until the process is killed
            await questions.wait()
        return types.ElicitResult(action="accept", content=_answer_for(index))

    try:
        if shared is not None:
            result = await shared.call_tool(TOOL, {"restaurant": f"R{index}"})
        else:
            async with Client(f"{url}/mcp", mode=mode, elicitation_callback=answer, read_timeout_seconds=600) as client:
                result = await client.call_tool(TOOL, {"restaurant": f"R{index}"})
    except Exception as exc:  # noqa: BLE001 - every failure is counted by its kind
        return {"ok": False, "kind": _kind(exc)}
    text = " ".join(getattr(block, "text", "") for block in result.content)
    # the gateway prefixes the server's name ("[demo] Booking at R7: ..."); a shared client's callback answers
    # for the restaurant in the question, so a crossed question shows as a result naming another client
    crossed = any(re.findall(r"Booking at R(\d+):", message) != [str(index)] for message in seen) or (
        bool(re.search(r"'name': 'c\d+'", text)) and f"'name': 'c{index}'" not in text
    )
    if crossed:
        return {"ok": False, "kind": "crossed", "crossed": True}
    if result.is_error:
        return {"ok": False, "kind": f"tool error: {text[:90]}"}
    if (shared is None and len(seen) != 1) or f"'name': 'c{index}'" not in text:
        return {"ok": False, "kind": f"unexpected ({len(seen)} questions): {text[:90]}"}
    return {"ok": True}


async def _shared_answer_factory(questions: asyncio.Event | None) -> Any:
    async def answer(ctx: Any, params: Any) -> types.ElicitResult:
        if questions is not None:
            await questions.wait()
        named = re.findall(r"Booking at R(\d+):", params.message)
        return types.ElicitResult(action="accept", content=_answer_for(int(named[0]) if named else -1))

    return answer


def _kind(exc: BaseException) -> str:
    """An exception's class and the start of its message; a group by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = re.sub(r"\d+", "N", str(exc))[:90]
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


async def _client_process(url: str, mode: str, first: int, count: int, hold: bool, one_client: bool) -> None:
    questions = asyncio.Event() if hold else None
    if not one_client:
        print("ready", flush=True)
        sys.stdin.readline()  # the parent starts every process's calls at once
        results = await asyncio.gather(*(_one_call(url, mode, first + i, questions) for i in range(count)))
        print(json.dumps(results), flush=True)
        return
    callback = await _shared_answer_factory(questions)
    async with Client(f"{url}/mcp", mode=mode, elicitation_callback=callback, read_timeout_seconds=600) as client:
        print("ready", flush=True)
        sys.stdin.readline()
        results = await asyncio.gather(*(_one_call(url, mode, first + i, questions, client) for i in range(count)))
    print(json.dumps(results), flush=True)


# --- the parent: gateway, upstream, client processes, the drain ------------------------------------------


def _metrics(url: str) -> tuple[float, dict[str, float]]:
    """The gateway's pending elicitations (all servers) and its ended ones by state."""
    text = httpx2.get(f"{url}/metrics", timeout=10).text
    pending = 0.0
    states: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("elicitgate_elicitations_pending{"):
            pending += float(line.rsplit(" ", 1)[1])
        elif line.startswith("elicitgate_elicitations_total{"):
            state = re.search(r'state="([^"]+)"', line)
            if state:
                states[state.group(1)] += float(line.rsplit(" ", 1)[1])
    return pending, dict(states)


def _config(scenario: str, upstream_url: str | None, vanish: bool) -> dict[str, Any]:
    if upstream_url is None:
        server = configs.stdio_upstream("modern")
    else:
        server = {**configs.http_upstream(f"{upstream_url}/mcp", "handshake"), "session_policy": "per_session",
                  **LOAD_LIMITS["per_session_upstream"]}
    config = configs.gateway_config({"demo": server})
    config["http"] = dict(LOAD_LIMITS["http"])
    if vanish:
        config["elicitation"]["abandoned_grace"] = GRACE
        config["elicitation"]["default_timeout"] = DEADLINE
    return config


def _split(calls: int, procs: int) -> list[tuple[int, int]]:
    size, extra = divmod(calls, procs)
    spans, first = [], 0
    for p in range(procs):
        count = size + (1 if p < extra else 0)
        if count:
            spans.append((first, count))
        first += count
    return spans


def _run_clients(
    url: str, mode: str, calls: int, procs: int, vanish: bool, log: IO[str], one_client: bool = False
) -> dict[str, Any]:
    spans = _split(calls, procs)
    killed = set(range(0, len(spans), 2)) if vanish else set()  # every other process: about half the calls
    children = []
    for p, (first, count) in enumerate(spans):
        argv = [configs.PY, "-m", "bench.load", "--client", url, "--mode", mode, "--first", str(first),
                "--count", str(count), *(["--hold"] if p in killed else []), *(["--one-client"] if one_client else [])]
        children.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True))
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes: list[dict[str, Any]] = []
    if killed:
        # killed once the gateway holds a question for each of their calls (or after 120 s)
        held = sum(spans[p][1] for p in killed)
        deadline = time.perf_counter() + 120
        while _metrics(url)[0] < held and time.perf_counter() < deadline:
            time.sleep(0.2)
        for p in killed:
            children[p].send_signal(signal.SIGKILL)
            outcomes += [{"ok": False, "kind": "killed (vanish variant)"}] * spans[p][1]
    for p, child in enumerate(children):
        out, _ = child.communicate()
        if p in killed:
            continue
        lines = [line for line in out.splitlines() if line.startswith("[")]
        if child.returncode != 0 or not lines:
            outcomes += [{"ok": False, "kind": f"client process exited {child.returncode}"}] * spans[p][1]
        else:
            outcomes += json.loads(lines[-1])
    killed_calls = sum(spans[p][1] for p in killed)
    return {"outcomes": outcomes, "seconds": time.perf_counter() - start, "killed_calls": killed_calls}


def _drain(url: str, bound: float) -> tuple[float, float | None]:
    """Poll until nothing is pending: (pending at the first look, seconds it took to reach 0 or None)."""
    start = time.perf_counter()
    first, _ = _metrics(url)
    pending = first
    while pending > 0 and time.perf_counter() - start < bound:
        time.sleep(0.1)
        pending, _ = _metrics(url)
    return first, (round(time.perf_counter() - start, 2) if pending == 0 else None)


def run_scenario(
    scenario: str, calls: int, procs: int, vanish: bool, drain: float, work: Path, log: IO[str],
    one_client: bool = False,
) -> dict[str, Any]:
    mode = "2026-07-28" if scenario.startswith("modern") else "legacy"
    per_session = scenario.endswith("per-session")
    one_client = one_client and mode == "2026-07-28"
    name = scenario + ("-one-client" if one_client else "") + ("-vanish" if vanish else "")
    saved_state = os.environ.get("XDG_STATE_HOME")
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as state:
        os.environ["XDG_STATE_HOME"] = state  # a fresh audit store and requestState key per scenario
        upstream = None
        if per_session:
            upstream_port = free_port()
            upstream = HttpProcess(configs.demo_argv(f"127.0.0.1:{upstream_port}"), upstream_port, log)
        try:
            config = configs.write_config(work, name, _config(scenario, upstream.url if upstream else None, vanish))
            port = free_port()
            with HttpProcess(configs.gateway_argv(config, f"127.0.0.1:{port}"), port, log, ready_path="/healthz") as gw:
                ran = _run_clients(gw.url, mode, calls, procs, vanish, log, one_client)
                pending_at_end, to_zero = _drain(gw.url, drain)
                _, states = _metrics(gw.url)
        finally:
            if upstream is not None:
                upstream.stop()
            if saved_state is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = saved_state
    outcomes = ran["outcomes"]
    kinds = Counter(o["kind"] for o in outcomes if not o["ok"])
    succeeded = sum(1 for o in outcomes if o["ok"])
    measured = calls - ran["killed_calls"]
    return {
        "scenario": name, "client_era": mode, "upstream": "per-session HTTP (handshake)" if per_session else
        "shared stdio (2026-07-28)", "calls": calls, "succeeded": succeeded, "failed": dict(kinds.most_common()),
        "crossed": sum(1 for o in outcomes if o.get("crossed")),
        "success_ratio": round(succeeded / measured, 5) if measured else None, "killed_calls": ran["killed_calls"],
        "seconds": round(ran["seconds"], 1), "pending_after_last_client": pending_at_end,
        "seconds_to_zero_pending": to_zero, "ended_by_state": states,
    }


def describe(row: dict[str, Any]) -> str:
    ratio = row["success_ratio"]
    verdict = "n/a" if ratio is None else ("meets" if ratio >= TARGET else "BELOW") + f" the {TARGET:.1%} target"
    killed = f", {row['killed_calls']} killed on purpose (not counted in the ratio)" if row["killed_calls"] else ""
    lines = [
        f"{row['scenario']}: {row['client_era']} clients, {row['upstream']} upstream",
        f"  calls {row['calls']}, succeeded {row['succeeded']}{killed}, crossed {row['crossed']}, "
        f"in {row['seconds']} s",
        f"  success ratio {ratio} ({verdict})",
    ]
    lines += [f"  failed {count}: {kind}" for kind, count in row["failed"].items() if not kind.startswith("killed")]
    zero = row["seconds_to_zero_pending"]
    lines.append(f"  pending after the last client was gone: {row['pending_after_last_client']:g}, reached 0 "
                 + (f"after {zero} s" if zero is not None else "NEVER within the bound"))
    lines.append("  ended by state: " + ", ".join(f"{k} {v:g}" for k, v in sorted(row["ended_by_state"].items())))
    return "\n".join(lines)


def limits_line(vanish: bool) -> str:
    raised = {**{f"elicitation.{k}": v for k, v in configs.BENCH_LIMITS.items()},
              "http.max_sessions": 100_000,
              "mcpServers.demo.max_upstream_sessions (per-session)": 100_000}
    text = "limits raised (not measured): " + ", ".join(f"{k}={v:g}" for k, v in raised.items())
    text += "; max_opening_sessions and connect_timeout at their defaults (8, 20 s)"
    return text + (f"; vanish variant: elicitation.abandoned_grace={GRACE:g}, elicitation.default_timeout={DEADLINE:g}"
                   if vanish else "")


def measure(
    calls: int, procs: int, log: IO[str], work: Path, *, scenarios: Sequence[str] = SCENARIOS, vanish: bool = False,
    drain: float = 120.0, progress: Callable[[dict[str, Any]], None] | None = None, one_client: bool = False,
) -> dict[str, Any]:
    """Every scenario (and its vanish variant if asked), one after another; `progress` gets each row."""
    rows = []
    for scenario in scenarios:
        for vanished in (False, True) if vanish else (False,):
            row = run_scenario(scenario, calls, procs, vanished, drain + (DEADLINE if vanished else 0), work, log,
                               one_client)
            rows.append(row)
            if progress is not None:
                progress(row)
    return {"calls": calls, "procs": procs, "limits": limits_line(vanish), "rows": rows}


def describe_all(results: dict[str, Any]) -> str:
    head = (f"{results['calls']} concurrent calls per scenario over {results['procs']} client processes; "
            f"{results['limits']}")
    return "\n".join([head, *(describe(row) for row in results["rows"])])


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=4, help="client processes the calls are split over")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--vanish", action="store_true", help="also the variant where half the clients are killed")
    parser.add_argument("--drain", type=float, default=120.0, help="at most this many seconds waiting for pending 0")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (bench.log, configs)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-client", action="store_true",
                        help="2026-07-28 clients: one Client per client process, shared by its calls (one pool)")
    args = parser.parse_args()
    if args.client:
        asyncio.run(_client_process(args.client, args.mode, args.first, args.count, args.hold, args.one_client))
        return
    root = Path(__file__).resolve().parent.parent
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    print(f"load: {args.calls} concurrent calls per scenario over {args.procs} client processes; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    print(limits_line(args.vanish), flush=True)
    work = tempfile.mkdtemp(prefix="elicitgate-bench-load-")
    try:
        with open(Path(work) / "bench.log", "w") as log:
            results = measure(args.calls, args.procs, log, Path(work), scenarios=args.only, vanish=args.vanish,
                              drain=args.drain, progress=lambda row: print(describe(row), flush=True),
                              one_client=args.one_client)
    finally:
        if args.keep:
            print(f"every process's stderr: {Path(work) / 'bench.log'}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
