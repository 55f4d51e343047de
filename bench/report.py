"""Statistics, targets, and the three outputs: results.json, results.md and PNG plots."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.latency import OPS, Target

PATHS = ("direct", "lean-relay", "lean-work-relay", "bare-relay", "elicitgate", "elicitgate-modern-client", "fastmcp")
PATH_LABELS = {
    "direct": "direct",
    "lean-relay": "lean Python relay (floor)",
    "lean-work-relay": "lean relay + question work",
    "bare-relay": "bare Python relay",
    "elicitgate": "elicitgate",
    "elicitgate-modern-client": "elicitgate, 2026-07-28 client",
    "fastmcp": "FastMCP proxy",
}
TARGETS = {
    "added_pct_of_direct": 25.0,
    "fastmcp_added_ratio": 5.0,
    "lean_floor_added_ratio": 1.5,
    "bytes_per_pending": 10 * 1024,
    "rss_growth_pct": 2.0,
    "ready_s": 0.5,
    "idle_rss_mb": 60.0,
    "throughput_pct_of_direct": 100.0,
    "throughput_concurrency": 100,
}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def thin(trace: list[dict[str, Any]], points: int = 500) -> list[dict[str, Any]]:
    """At most about `points` evenly spaced entries of a trace, the first and last kept."""
    step = max(1, len(trace) // points)
    return trace[::step] if (len(trace) - 1) % step == 0 else [*trace[::step], trace[-1]]


def latency_rows(found: list[Target]) -> list[dict[str, Any]]:
    """One row per target and operation, in ms, with the added latency over the direct row."""
    rows = []
    for target in found:
        for op in OPS:
            samples = target.samples[op]
            row: dict[str, Any] = {
                "transport": target.transport, "era": target.era, "path": target.path, "op": op,
                "client_mode": target.client_mode, "note": target.note, "n": len(samples),
                "error": target.errors.get(op),
            }
            if samples:
                row |= {
                    "p50_ms": round(percentile(samples, 50) * 1000, 3),
                    "p99_ms": round(percentile(samples, 99) * 1000, 3),
                    "round_p50_ms": [round(v * 1000, 3) for v in target.round_p50[op]],
                }
            rows.append(row)
    direct = {(r["transport"], r["era"], r["op"]): r for r in rows if r["path"] == "direct"}
    for row in rows:
        base = direct.get((row["transport"], row["era"], row["op"]))
        if row["path"] != "direct" and base and "p50_ms" in base and "p50_ms" in row:
            row["added_p50_ms"] = round(row["p50_ms"] - base["p50_ms"], 3)
            row["added_pct_of_direct"] = round(100 * row["added_p50_ms"] / base["p50_ms"], 1)
    return rows


def targets_table(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target next to what was measured (goals, not assertions)."""
    checks: list[dict[str, Any]] = []
    rows = results.get("latency", {}).get("rows", [])
    by = {(r["transport"], r["era"], r["path"], r["op"]): r for r in rows}
    for (transport, era, path, op), row in sorted(by.items()):
        if path not in ("elicitgate", "elicitgate-modern-client") or "added_pct_of_direct" not in row:
            continue
        where = f"{op}, {transport}, {era if path == 'elicitgate' else '2026-07-28 client and upstream'}"
        direct = row["p50_ms"] - row["added_p50_ms"]
        measured = f"+{row['added_p50_ms']:.2f} ms = {row['added_pct_of_direct']:.0f}% of {direct:.2f} ms"
        relays = [(name, by.get((transport, era, relay, op))) for relay, name in
                  (("lean-relay", "the lean relay"), ("bare-relay", "a bare relay"))]
        said = [f"{name}: {floor['added_p50_ms']:+.2f} ms = {floor['added_pct_of_direct']:.0f}%"
                for name, floor in relays if floor and "added_p50_ms" in floor]
        if said:  # what a Python process in the middle adds (`bench.lean_relay`, `bench.bare_relay`)
            measured += f" ({'; '.join(said)})"
        checks.append({
            "target": f"gateway-added p50 <= 25% of direct p50 ({where})",
            "measured": measured,
            "met": row["added_pct_of_direct"] <= TARGETS["added_pct_of_direct"],
        })
        lean = by.get((transport, era, "lean-relay", op))
        if lean and "added_p50_ms" in lean:
            times = lean_floor_times(row, lean)
            checks.append({
                "target": f"gateway-added p50 <= {TARGETS['lean_floor_added_ratio']}x the lean relay's ({where})",
                "measured": f"{times} ({row['added_p50_ms']:+.2f} ms against {lean['added_p50_ms']:+.2f} ms)",
                "met": row["added_p50_ms"] <= TARGETS["lean_floor_added_ratio"] * lean["added_p50_ms"]
                if lean["added_p50_ms"] > 0 else None,
            })
        fastmcp = by.get((transport, era, "fastmcp", op)) if path == "elicitgate" else None
        if fastmcp and "added_p50_ms" in fastmcp:
            ratio = fastmcp["added_p50_ms"] / row["added_p50_ms"] if row["added_p50_ms"] > 0 else math.inf
            checks.append({
                "target": f">= 5x lower added latency than FastMCP ({where})",
                "measured": f"{ratio:.1f}x (FastMCP +{fastmcp['added_p50_ms']:.2f} ms)",
                "met": ratio >= TARGETS["fastmcp_added_ratio"],
            })
        elif fastmcp:
            checks.append({"target": f">= 5x lower added latency than FastMCP ({where})",
                           "measured": f"FastMCP failed: {fastmcp.get('error')}", "met": None})
    scale = results.get("scale", {})
    if "pending" in scale:
        per = scale["pending"]["bytes_per_pending"]
        checks.append({"target": "<= 10 KB per pending elicitation",
                       "measured": f"{per / 1024:.1f} KB ({scale['pending']['pending']:,} pending, bridged path)",
                       "met": per <= TARGETS["bytes_per_pending"]})
    if "pending_pushed" in scale:
        per = scale["pending_pushed"]["bytes_per_pending"]
        checks.append({"target": "<= 10 KB per pending elicitation (pushed over HTTP)",
                       "measured": f"{per / 1024:.1f} KB ({scale['pending_pushed']['pending']:,} pending)",
                       "met": per <= TARGETS["bytes_per_pending"]})
    if "waves" in scale:
        waves = scale["waves"]
        # Every question's end is an audit record: a run that dropped some (the writer fell behind, the queue full)
        # held fewer than it should have, and does not meet the target whatever its RSS.
        dropped = sum(waves.get("audit_dropped", {}).values())
        audit = (f", audit records stored {waves['audit_written']:,}, dropped {dropped:,}, queued at most "
                 f"{waves['audit_queued_max']:,}" if "audit_written" in waves else "")
        checks.append({"target": f"RSS within {TARGETS['rss_growth_pct']:g}% of baseline after {waves['total']:,}",
                       "measured": f"{waves['growth_pct']:+.2f}% ({waves['rss_before_kb'] / 1024:.1f} -> "
                                   f"{waves['rss_after_kb'] / 1024:.1f} MiB), broker empty: "
                                   f"{waves['broker_pending_after'] == 0}{audit}",
                       "met": abs(waves["growth_pct"]) <= TARGETS["rss_growth_pct"] and not dropped})
    level = TARGETS["throughput_concurrency"]
    for row in scale.get("throughput", []):
        if row["concurrency"] == level:
            pct = 100 * row["elicitgate"]["per_second"] / row["direct"]["per_second"]
            wanted = TARGETS["throughput_pct_of_direct"]
            checks.append({"target": f"throughput at concurrency {level} >= {wanted:g}% of direct",
                           "measured": f"{row['elicitgate']['per_second']:.0f}/s = {pct:.0f}% of "
                                       f"{row['direct']['per_second']:.0f}/s",
                           "met": pct >= TARGETS["throughput_pct_of_direct"]})
    for row in results.get("load", {}).get("rows", []):
        ratio, zero = row["success_ratio"], row["seconds_to_zero_pending"]
        checks.append({"target": f">= 99.9% of {row['calls']:,} concurrent calls succeed, none crossed, 0 pending "
                                 f"after ({row['scenario']})",
                       "measured": f"{row['succeeded']:,} succeeded ({ratio:.2%}), {row['crossed']} crossed, pending 0 "
                                   + (f"after {zero} s" if zero is not None else "never"),
                       "met": ratio is not None and ratio >= 0.999 and row["crossed"] == 0 and zero is not None})
    startup = results.get("startup")
    if startup:
        checks.append({"target": f"ready (healthz 200) <= {TARGETS['ready_s']:g} s",
                       "measured": f"{startup['ready_s_median']:.2f} s",
                       "met": startup["ready_s_median"] <= TARGETS["ready_s"]})
        idle_mb = startup["gateway_rss_kb_median"] * 1024 / 1e6
        checks.append({"target": f"idle RSS <= {TARGETS['idle_rss_mb']:g} MB",
                       "measured": f"{idle_mb:.1f} MB = {startup['gateway_rss_kb_median'] / 1024:.1f} MiB "
                                   "(gateway process)",
                       "met": idle_mb <= TARGETS["idle_rss_mb"]})
    return checks


def _ms(row: dict[str, Any] | None, key: str) -> str:
    if row is None:
        return ""
    if row.get("error"):
        return "fails"
    value = row.get(key)
    return "" if value is None else f"{value:.2f}"


def lean_floor_times(row: dict[str, Any], lean: dict[str, Any]) -> str:
    """What `row` adds as a multiple of what the lean relay adds on the same row (`bench.lean_relay`,
    `bench.lean_http_relay`); a floor at or below zero (within the noise) has no multiple."""
    if lean["added_p50_ms"] <= 0:
        return "no multiple"
    return f"{row['added_p50_ms'] / lean['added_p50_ms']:.1f}x"


def _times_lean(row: dict[str, Any] | None, lean: dict[str, Any] | None) -> str:
    if row is None or lean is None or "added_p50_ms" not in row or "added_p50_ms" not in lean:
        return ""
    return lean_floor_times(row, lean) if lean["added_p50_ms"] > 0 else "n/a"


def _added(row: dict[str, Any] | None) -> str:
    if row is None or "added_p50_ms" not in row:
        return ""
    return f"{row['added_p50_ms']:+.2f} ({row['added_pct_of_direct']:.0f}%)"


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        f"# elicitgate bench ({meta['mode']}, {meta['date']})",
        "",
        f"Commit {meta['commit']}{' (src as given by --ref ' + meta['ref'] + ')' if meta.get('ref') else ''}"
        f"{'; uncommitted changes in src: ' + ', '.join(meta['dirty_src']) if meta.get('dirty_src') else ''}; "
        f"{meta['cpus']} cores, Python {meta['python']}, load average (1/5/15 min) {meta.get('loadavg_start')} at the "
        f"start and {meta.get('loadavg_end')} at the end (other work on the machine shows here). "
        f"Limits raised for the bench: {meta['limits_raised']}.",
        "",
    ]
    latency = results.get("latency")
    if latency:
        lines += [
            f"## Round-trip latency (ms; {latency['rounds']} interleaved rounds x {latency['batch']} sequential calls)",
            "",
            "`elicit`: a tool call that does one form elicitation, answered at once; `echo`: a plain tool call. "
            "Added = p50 minus the direct p50 of the same transport, era and operation.",
            "",
            "| transport | era | path | elicit p50 | elicit p99 | elicit added | elicit added x lean floor | "
            "echo p50 | echo p99 | echo added | echo added x lean floor |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        rows = {(r["transport"], r["era"], r["path"], r["op"]): r for r in latency["rows"]}
        failures = []
        for transport in ("stdio", "http"):
            for era in ("handshake", "2026-07-28"):
                for path in PATHS:
                    el, ec = rows.get((transport, era, path, "elicit")), rows.get((transport, era, path, "echo"))
                    if el is None and ec is None:
                        continue
                    lean_el, lean_ec = (None, None) if path == "lean-relay" else (
                        rows.get((transport, era, "lean-relay", "elicit")),
                        rows.get((transport, era, "lean-relay", "echo")),
                    )
                    lines.append(
                        f"| {transport} | {era} | {PATH_LABELS[path]} | {_ms(el, 'p50_ms')} | {_ms(el, 'p99_ms')} | "
                        f"{_added(el)} | {_times_lean(el, lean_el)} | {_ms(ec, 'p50_ms')} | {_ms(ec, 'p99_ms')} | "
                        f"{_added(ec)} | {_times_lean(ec, lean_ec)} |"
                    )
                    for row in (el, ec):
                        if row and row.get("error"):
                            failures.append(f"- {transport}, {era}, {PATH_LABELS[path]}, `{row['op']}`: {row['error']}")
        lines += ["", "The 2026-07-28 `elicitgate` row is a handshake-era client in front of a 2026-07-28 upstream "
                      "(the gateway answers `input_required` through its broker); its added latency is against a "
                      "2026-07-28 client calling the upstream directly. Both relays parse and re-serialise every "
                      "message between client and server and do nothing else. The lean relay is the floor, about the "
                      "least a Python process in the middle adds: asyncio Protocols and orjson, over stdio on pipes "
                      "(`bench/lean_relay.py`), over HTTP with httptools both ways and pooled keep-alive upstream "
                      "connections (`bench/lean_http_relay.py`); \"x lean floor\" is a row's added divided by the "
                      "lean relay's on the same row, n/a where the lean relay's is at or below zero (target for "
                      f"elicitgate: at most {TARGETS['lean_floor_added_ratio']}x). The bare relay is the same job on "
                      "the gateway's libraries: asyncio streams and `json` over stdio (`bench/bare_relay.py`), uvicorn "
                      "and httpx2 over HTTP (`bench/bare_http_relay.py`). The lean relay + question work (stdio, "
                      "handshake era: `bench/lean_work_relay.py`) is the lean relay plus the work elicitgate's broker "
                      "does for each elicitation, by elicitgate's own functions (checks, limits, the prefixed request "
                      "under its own id, the answer's check, the end's metrics, log line and audit record): what "
                      "elicitgate adds beyond it is plumbing. Over HTTP both relays pass the server's SSE "
                      "answers through as they come, where elicitgate's face answers JSON when it can, so elicitgate "
                      "may add less on a row.", ""]
        if failures:
            lines += ["What did not work:", "", *failures, ""]
    scale = results.get("scale")
    if scale:
        waves = scale["waves"]
        lines += [
            "## Scale (one gateway process)",
            "",
            f"- {waves['total']:,} elicitations completed in waves of {waves['wave']} over stdio "
            f"({waves['per_second']:.0f}/s): gateway RSS {waves['rss_before_kb'] / 1024:.1f} -> "
            f"{waves['rss_after_kb'] / 1024:.1f} MiB ({waves['growth_pct']:+.2f}%), broker pending after: "
            f"{waves['broker_pending_after']}, asyncio tasks {waves['tasks_before']} -> {waves['tasks_after']}"
            + (f"; from the first tenth on {waves['growth_after_first_tenth_pct']:+.2f}%; client "
               f"{waves['client']}, upstream {waves['upstream']}" if "client" in waves else "")
            + (f"; audit records stored {waves['audit_written']:,}, dropped "
               f"{sum(waves['audit_dropped'].values()):,}, queued at most {waves['audit_queued_max']:,}"
               if "audit_written" in waves else "") + ".",
        ]
        for key in ("pending", "pending_pushed"):
            if key in scale:
                p = scale[key]
                lines.append(
                    f"- {p['pending']:,} pending at once ({p['setup']}): broker held {p['broker_pending_during']:,}; "
                    f"gateway RSS {p['rss_before_kb'] / 1024:.1f} -> {p['rss_during_kb'] / 1024:.1f} MiB = "
                    f"**{p['bytes_per_pending'] / 1024:.1f} KB per pending elicitation**; all pending after "
                    f"{p['seconds_to_all_pending']:.1f} s; broker pending after release: {p['broker_pending_after']}."
                )
        rounds = scale["throughput"][0].get("rounds", 1) if scale["throughput"] else 1
        lines += ["", f"Throughput: the median of {rounds} runs per target, direct and elicitgate alternating."
                  if rounds > 1 else "Throughput: one run per target.",
                  "", "| concurrency | elicitgate /s | elicitgate p50 ms | direct /s | direct p50 ms |",
                  "|---:|---:|---:|---:|---:|"]
        for row in scale["throughput"]:
            g, d = row["elicitgate"], row["direct"]
            lines.append(f"| {row['concurrency']} | {g['per_second']:.0f} | {g['p50_ms']:.1f} | "
                         f"{d['per_second']:.0f} | {d['p50_ms']:.1f} |")
        lines.append("")
    startup = results.get("startup")
    if startup:
        lines += [
            "## Start-up",
            "",
            f"{startup['upstreams']}, median of {startup['repeats']}: listening after "
            f"{startup['listening_s_median']:.2f} s, ready (healthz 200) after {startup['ready_s_median']:.2f} s; "
            f"idle RSS {startup['gateway_rss_kb_median'] / 1024:.1f} MiB for the gateway "
            f"(+ {startup['upstreams_rss_kb_median'] / 1024:.1f} MiB for its two upstream processes).",
            "",
        ]
        if lean := startup.get("lean"):
            lines += [
                f"With {lean['upstreams']} instead (the gateway's own start-up), median of {lean['repeats']}: ready "
                f"after {lean['ready_s_median']:.2f} s, gateway CPU by then {lean['gateway_cpu_s_median']:.2f} s; "
                f"idle RSS {lean['gateway_rss_kb_median'] / 1024:.1f} MiB.",
                "",
            ]
    if results.get("audit"):
        from bench.audit import describe

        lines += ["## Audit trail on vs off", "", "```", describe(results["audit"]), "```", ""]
    if results.get("load"):
        from bench.load import describe_all

        lines += ["## Load without leftovers", "", "```", describe_all(results["load"]), "```", ""]
    lines += ["## Targets (goals, not assertions)", "", "| target | measured | met |", "|---|---|---|"]
    for check in results["targets"]:
        met = "n/a" if check["met"] is None else ("yes" if check["met"] else "no")
        lines.append(f"| {check['target']} | {check['measured']} | {met} |")
    profile = results.get("profile")
    if profile:
        lines += ["", "## Profile (py-spy, gateway process, sequential elicitations)", ""]
        for face, summary in profile.items():
            if "error" in summary:
                lines.append(f"- {face}: {summary['error']}")
                continue
            layers = ", ".join(f"{name} {pct}%" for name, pct in summary["layers_inclusive_pct"])
            functions = ", ".join(f"`{name}` {pct}%" for name, pct in summary["self_by_function_pct"][:6])
            lines.append(f"- {face} face: {summary.get('cpu_ms_per_call', '?')} ms of gateway CPU per elicitation "
                         f"round trip ({summary['samples']} samples). By layer (inclusive): {layers}. "
                         f"Top self time: {functions}.")
    return "\n".join(lines) + "\n"


def readme_section(results: dict[str, Any]) -> str:
    """The README's short version: the latency table, the scale and start-up lines, the targets, the plots."""
    full = markdown(results)
    keep = [part for part in full.split("\n## ")[1:] if part.startswith(("Round-trip", "Scale", "Start-up", "Targets"))]
    body = "\n".join("### " + part.replace("\n\nWhat did not work:", "\n\nWhat did not work:") for part in keep)
    missed = [c["target"] for c in results["targets"] if c["met"] is False]
    met = [c["target"] for c in results["targets"] if c["met"]]
    return (f"{body}\n![latency](bench/latest/latency.png)\n\n![scale](bench/latest/scale.png)\n\n"
            f"Targets met: {len(met)} of {len(met) + len(missed)} (the full report: "
            "[bench/latest/results.md](bench/latest/results.md); "
            "what dominates: [bench/README.md](bench/README.md)).\n")


def plots(results: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    latency = results.get("latency")
    if latency:
        rows = {(r["transport"], r["era"], r["path"], r["op"]): r for r in latency["rows"]}
        groups = [(t, e) for t in ("stdio", "http") for e in ("handshake", "2026-07-28")]
        paths = ("direct", "elicitgate", "fastmcp")
        colors = {"direct": "#888888", "elicitgate": "#1f77b4", "fastmcp": "#d62728"}
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, op in zip(axes, OPS, strict=True):
            width = 0.27
            for i, path in enumerate(paths):
                xs, p50s, p99s, failed = [], [], [], []
                for g, (transport, era) in enumerate(groups):
                    row = rows.get((transport, era, path, op))
                    x = g + (i - 1) * width
                    if row and "p50_ms" in row:
                        xs.append(x)
                        p50s.append(row["p50_ms"])
                        p99s.append(row["p99_ms"] - row["p50_ms"])
                    else:
                        failed.append(x)
                ax.bar(xs, p50s, width, yerr=[[0] * len(p99s), p99s], capsize=3, color=colors[path],
                       label=PATH_LABELS[path])
                for x in failed:
                    ax.text(x, 0.03, "fails", rotation=90, ha="center", va="bottom", fontsize=8, color=colors[path],
                            transform=ax.get_xaxis_transform())
            ax.set_xticks(range(len(groups)), [f"{t}\n{e}" for t, e in groups])
            ax.set_ylabel("ms (bar: p50, whisker: p99)")
            ax.set_title(f"{op}: tool call round trip")
            ax.set_yscale("log")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=110)
        plt.close(fig)
        written.append("latency.png")
    scale = results.get("scale")
    if scale:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
        trace = scale["waves"]["trace"]
        left.plot([p["completed"] for p in trace], [p["rss_kb"] / 1024 for p in trace], color="#1f77b4")
        base = scale["waves"]["rss_before_kb"] / 1024
        left.axhline(base * 1.05, color="#d62728", linestyle="--", linewidth=1, label="baseline + 5%")
        left.set_xlabel("elicitations completed")
        left.set_ylabel("gateway RSS (MiB)")
        left.set_ylim(0, max(base * 1.2, max(p["rss_kb"] for p in trace) / 1024 * 1.1))
        left.set_title("RSS over the waves (no leak: flat)")
        left.legend(fontsize=8)
        levels = [row["concurrency"] for row in scale["throughput"]]
        for name, color in (("direct", "#888888"), ("elicitgate", "#1f77b4")):
            right.plot(levels, [row[name]["per_second"] for row in scale["throughput"]], marker="o", color=color,
                       label=name)
        right.set_xscale("log")
        right.set_xlabel("concurrent calls")
        right.set_ylabel("elicitation round trips / s")
        right.set_title("throughput over stdio")
        right.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "scale.png", dpi=110)
        plt.close(fig)
        written.append("scale.png")
    return written
