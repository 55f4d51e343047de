"""The type checker over src/elicitgate: pyright, configured in pyproject.toml ([tool.pyright]), must report nothing.

pyright is the npm package pinned in tests/types/package-lock.json (scripts/test installs it with `npm ci`).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYRIGHT = ROOT / "tests" / "types" / "node_modules" / "pyright" / "index.js"


@pytest.mark.timeout(960)
def test_pyright_reports_no_error_on_src() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: pyright needs Node.js")
    if not PYRIGHT.is_file():
        pytest.fail(f"pyright not installed: run `cd {PYRIGHT.parent.parent.parent} && npm ci` (scripts/test does)")
    # The interpreter running the tests is the one whose packages (mcp, pydantic, ...) the checker resolves.
    # About 40 s of CPU on an idle 2-core machine; the limit is for a machine busy with other runs.
    run = subprocess.run(
        ["node", str(PYRIGHT), "--outputjson", "--pythonpath", sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"pyright did not report (exit {run.returncode}):\n{run.stdout}\n{run.stderr}")
    problems = [
        f"{d['file'].removeprefix(str(ROOT) + '/')}:{d['range']['start']['line'] + 1}: "
        f"{d['severity']}: {d['message']} ({d.get('rule', '')})"
        for d in report["generalDiagnostics"]
        if d["severity"] in ("error", "warning")
    ]
    assert not problems, f"{len(problems)} type problem(s):\n" + "\n".join(problems)
    assert report["summary"]["filesAnalyzed"] > 0
