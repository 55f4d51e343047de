"""The copy-paste examples in docs/ run as written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("mode", [None, "2026-07-28"])
def test_elicitation_example_runs_as_documented(mode):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, "docs/examples/client.py", *([mode] if mode else [])]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "asked: [demo] Booking at Chez Ada" in done.stdout
    assert "asked: [modern] Booking at Chez Ada" in done.stdout
    for tool in ("demo__book_table", "modern__book_table"):
        assert f"{tool}: book_table: accepted {{'name': 'Ada'" in done.stdout
    assert '"state": "accepted"' in done.stderr  # the audit event, one per elicitation


def test_readme_demo_walkthrough_shows_validation_and_result():
    """`elicitgate demo --walkthrough` (the README's first look) re-asks an invalid email, then books."""
    done = subprocess.run(
        [sys.executable, "-m", "elicitgate.cli", "demo", "--walkthrough"],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "[demo] Booking at Chez Demo" in done.stdout
    assert "Your previous answer was not accepted (email:" in done.stdout
    assert "tool result: book_table: accepted {'name': 'Ada', 'email': 'ada@example.com'" in done.stdout
