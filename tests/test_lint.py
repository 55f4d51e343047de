"""The code's lint (pyproject.toml `[tool.ruff.lint]`): `ruff check` finds nothing in the package, the tests,
the bench and the docs' examples, and a finding is reported (the check can fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).parent / "ruff"
CHECKED = ("src", "tests", "bench", "docs/examples")


def _ruff(cwd: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--config", str(cwd / "pyproject.toml"), *paths],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )


def test_ruff_finds_nothing():
    result = _ruff(ROOT, *CHECKED)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_finding_fails_the_check(tmp_path: Path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "sloppy.py").write_text("import os\nimport sys\n\nprint(sys.argv)\n")
    result = _ruff(tmp_path, "src")
    assert result.returncode != 0
    assert "F401" in result.stdout and "sloppy.py" in result.stdout, result.stdout
