"""Run the conformance server suite against our conformance server directly and through elicitgate,
and print the scenarios whose verdicts differ.

    python -m tests.conformance.run                  # every target, a table, exit 1 on a difference
    python -m tests.conformance.run --markdown       # the table as Markdown (docs/conformance.md)
    python -m tests.conformance.run --keep out/      # keep each scenario's checks.json under out/

Targets (each with its own processes, suites run side by side):
- direct:            the suite -> tests/conformance/server.py over streamable HTTP
- gateway-http:      the suite -> `elicitgate serve --http` -> that server as an HTTP upstream
- gateway-stdio:     the suite -> `elicitgate serve --http` -> that server as a stdio upstream
- gateway-http-2026: as gateway-http, but the upstream leg speaks 2026-07-28 (the gateway bridges the
                     suite's 2025-11-25 to it: input_required rounds, per-request log level,
                     resources/subscribe as subscriptions/listen).
gateway-http and gateway-stdio pin the upstream leg to the handshake era, the era the suite speaks, so
both legs run the same protocol revision as the direct run.
- direct-ts:         the suite -> tests/peers/ts/everything_server.mjs (TypeScript SDK, its examples'
                     style: elicitation and sampling on the standalone GET stream) over streamable HTTP
- gateway-ts:        the suite -> `elicitgate serve --http` -> that TS server as an HTTP upstream, with
                     default settings; compared with direct-ts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from tests.conformance import fixtures as fx
from tests.conformance.suite import Check, Verdict, installed, problems, run_suite, verdict
from tests.conftest import PY, ROOT, Process, free_port, wait_healthy

SERVER_MODULE = "tests.conformance.server"
TS_SERVER = ROOT / "tests" / "peers" / "ts" / "everything_server.mjs"
DIRECT = "direct"
DIRECT_TS = "direct-ts"
COMPARED = ("gateway-http", "gateway-stdio", "gateway-http-2026", "gateway-ts")
INFORMATIONAL: tuple[str, ...] = ()
ELICITATION_SCENARIOS = ("tools-call-elicitation", "elicitation-sep1034-defaults", "elicitation-sep1330-enums")


@dataclass(frozen=True)
class Target:
    name: str
    upstream: str | None
    """None: the suite talks to the server itself; else how the gateway reaches it (http or stdio)."""
    era: str | None = "handshake"
    """The upstream's `era` in the gateway config; None leaves the default."""
    server: str = "py"
    """py: tests/conformance/server.py; ts: tests/peers/ts/everything_server.mjs."""

    @property
    def reference(self) -> str:
        """The direct run whose verdicts this target must equal."""
        return DIRECT_TS if self.server == "ts" else DIRECT


TARGETS = {
    DIRECT: Target(DIRECT, None),
    "gateway-http": Target("gateway-http", "http"),
    "gateway-stdio": Target("gateway-stdio", "stdio"),
    "gateway-http-2026": Target("gateway-http-2026", "http", era="modern"),
    DIRECT_TS: Target(DIRECT_TS, None, server="ts"),
    "gateway-ts": Target("gateway-ts", "http", era=None, server="ts"),
}
REFERENCES = (DIRECT, DIRECT_TS)
STARTING_AT_ONCE = 2
SUITE_TIMEOUT = 240.0
"""Seconds for one target's whole suite: gateway-stdio starts one upstream process per scenario."""
"""Processes started side by side: six targets' servers and gateways all importing at once on a busy
2-core machine missed the 30 s start-up wait."""


@dataclass
class Outcome:
    targets: list[str]
    checks: dict[str, dict[str, list[Check]]] = field(default_factory=dict)
    """target -> scenario -> the suite's checks"""

    def verdict(self, target: str, scenario: str) -> Verdict:
        return verdict(self.checks.get(target, {}).get(scenario, []))

    @property
    def scenarios(self) -> list[str]:
        seen: dict[str, None] = {}
        for target in self.targets:
            seen.update(dict.fromkeys(self.checks.get(target, {})))
        return list(seen)

    def differences(self, target: str) -> list[str]:
        """Scenarios whose verdict through `target` is not the one of its direct run."""
        reference = TARGETS[target].reference
        return [s for s in self.scenarios if self.verdict(target, s) != self.verdict(reference, s)]

    def failures(self) -> list[str]:
        """What makes the run fail: a compared target differing from direct, or an elicitation scenario
        that does not pass through the gateway."""
        found = []
        for target in (t for t in self.targets if t in COMPARED):
            reference = TARGETS[target].reference
            found += [
                f"{target}: {s} is {self.verdict(target, s)}, {reference} {self.verdict(reference, s)}"
                for s in self.differences(target)
            ]
            found += [
                f"{target}: {s} is {self.verdict(target, s)}, not pass"
                for s in ELICITATION_SCENARIOS
                if self.verdict(target, s) != "pass"
            ]
        return found

    def table(self, *, markdown: bool = False) -> str:
        head = ["scenario", *self.targets]
        rows = []
        for scenario in self.scenarios:
            cells = [
                self.verdict(t, scenario)
                + ("" if self.verdict(t, scenario) == self.verdict(TARGETS[t].reference, scenario) else " (differs)")
                for t in self.targets
            ]
            rows.append([scenario, *cells])
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])
        widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in [head, *rows])

    def report(self) -> str:
        lines = [self.table(), ""]
        for target in (t for t in self.targets if t not in REFERENCES):
            differing = self.differences(target)
            reference = TARGETS[target].reference
            note = "" if target in COMPARED else " (informational)"
            lines.append(f"{target}{note}: {len(differing) or 'no'} scenario(s) differ from {reference}")
            for scenario in differing:
                lines.append(
                    f"  {scenario}: {reference} {self.verdict(reference, scenario)}, "
                    f"{target} {self.verdict(target, scenario)}"
                )
                lines += [f"    {p}" for p in problems(self.checks[target].get(scenario, []))]
        return "\n".join(lines)


def _env() -> dict[str, str]:
    """`python -m tests.conformance.server` must import from the checkout wherever it is started."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([path, str(ROOT)]) if path else str(ROOT)}


def _start_server(target: Target, folder: Path) -> Process:
    port = free_port()
    if target.server == "ts":
        fixtures = str(write_ts_fixtures(folder))
        return Process(["node", str(TS_SERVER), "--fixtures", fixtures, "--http", str(port)], port)
    return Process([PY, "-m", SERVER_MODULE, "--http", f"127.0.0.1:{port}"], port, env=_env())


def write_ts_fixtures(folder: Path) -> Path:
    """tests/conformance/fixtures.py as the JSON the TypeScript server reads."""
    path = folder / "ts-fixtures.json"
    path.write_text(json.dumps({
        "tools": {k: v for k, v in fx.TOOLS.items() if "sep1036" not in k and k != "finish_url_elicitation"},
        "userInfoSchema": fx.USER_INFO_SCHEMA,
        "elicitations": fx.ELICITATIONS,
        "resources": fx.RESOURCES,
        "template": fx.TEMPLATE,
        "templateParts": [fx.TEMPLATE_PREFIX, fx.TEMPLATE_SUFFIX],
        "staticText": fx.STATIC_TEXT,
        "watchedText": fx.WATCHED_TEXT,
        "prompts": fx.PROMPTS,
        "image": fx.IMAGE_PNG,
        "audio": fx.AUDIO_WAV,
    }))
    return path


def _gateway_config(target: Target, server: Process | None, folder: Path) -> Path:
    if target.upstream == "http":
        assert server is not None
        upstream: dict[str, Any] = {"url": f"{server.url}/mcp"}
    else:
        upstream = {"command": PY, "args": ["-m", SERVER_MODULE], "cwd": str(ROOT), "env": _env()}
    if target.era is not None:
        upstream["era"] = target.era
    config = {
        "mcpServers": {"conformance": upstream},
        "namespacing": {"prefix_single_server": False},  # the suite calls the tools by their own names
        "log_level": "warning",  # stderr is read only at the end: keep it small
    }
    path = folder / f"{target.name}.json"
    path.write_text(json.dumps(config))
    return path


def _start_gateway(config: Path) -> Process:
    port = free_port()
    gateway = Process(
        [PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"], port, env=_env()
    )
    try:
        wait_healthy(gateway.url)
    except BaseException:
        print(gateway.stop(), file=sys.stderr)  # why its upstream never came up
        raise
    return gateway


async def compare(targets: list[str], output: Path) -> Outcome:
    """Start what each target needs, run the suite against all of them side by side, stop everything."""
    started: list[Process] = []
    urls: dict[str, str] = {}

    starting = anyio.CapacityLimiter(STARTING_AT_ONCE)

    async def prepare(target: Target) -> None:
        server = None
        if target.upstream != "stdio":
            server = await anyio.to_thread.run_sync(_start_server, target, output, limiter=starting)
            started.append(server)
        if target.upstream is None:
            assert server is not None
            urls[target.name] = f"{server.url}/mcp"
            return
        config = _gateway_config(target, server, output)
        gateway = await anyio.to_thread.run_sync(_start_gateway, config, limiter=starting)
        started.append(gateway)
        urls[target.name] = f"{gateway.url}/mcp"

    outcome = Outcome(targets)

    async def run(name: str) -> None:
        outcome.checks[name] = await run_suite(urls[name], output / name, timeout=SUITE_TIMEOUT)

    output.mkdir(parents=True, exist_ok=True)
    try:
        async with anyio.create_task_group() as tg:
            for name in targets:
                tg.start_soon(prepare, TARGETS[name])
        async with anyio.create_task_group() as tg:
            for name in targets:
                tg.start_soon(run, name)
    finally:
        for proc in started:
            proc.stop()
    return outcome


def with_references(targets: list[str]) -> list[str]:
    """The direct runs `targets` are compared with, first, then the targets."""
    references = [r for r in REFERENCES if any(TARGETS[t].reference == r for t in targets)]
    return [*references, *(t for t in targets if t not in references)]


def main() -> None:
    parser = argparse.ArgumentParser(description="conformance suite: direct vs through elicitgate")
    parser.add_argument("--targets", nargs="+", choices=[t for t in TARGETS if t not in REFERENCES],
                        default=[*COMPARED, *INFORMATIONAL])
    parser.add_argument("--keep", type=Path, help="keep each scenario's checks.json under this folder")
    parser.add_argument("--markdown", action="store_true", help="print the verdict table as Markdown")
    args = parser.parse_args()
    reason = installed()
    if reason:
        sys.exit(reason)
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        outcome = anyio.run(compare, with_references(args.targets), args.keep or Path(scratch))
    print(outcome.table(markdown=True) if args.markdown else outcome.report())
    failures = outcome.failures()
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
