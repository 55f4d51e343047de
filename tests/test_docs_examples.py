"""The copy-paste examples in docs/ run as written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_example(script: str, mode: str | None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python docs/examples/SCRIPT [MODE]` as the docs say, with this venv's `python` on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, f"docs/examples/{script}", *([mode] if mode else [])]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("mode", [None, "2026-07-28"])
def test_elicitation_example_runs_as_documented(mode):
    done = run_example("client.py", mode)
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


@pytest.mark.parametrize("mode", [None, "2026-07-28"])
def test_gateway_asks_example_runs_as_documented(mode):
    done = run_example("asks_client.py", mode, timeout=90)
    documented = (ROOT / "docs" / "elicitation.md").read_text().split("python docs/examples/asks_client.py\n", 1)[1]
    documented = documented.split("```", 1)[0]
    assert done.stdout == documented
    assert done.stderr.count('"source": "gateway"') == 3  # one audit event per question


def test_operations_example_runs_as_documented(tmp_path):
    """docs/operations.md: metrics while it runs, the audit trail after, JSON log lines without typed values."""
    from tests.conftest import free_port

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "ELICITGATE_HTTP__HOSTED_LISTEN": f"127.0.0.1:{free_port()}"}
    done = subprocess.run([sys.executable, str(ROOT / "docs/examples/operations.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tool: confirm: accepted {'ok': True}" in out and "tool: confirm: decline" in out
    assert 'metric: elicitgate_elicitations_total{mode="form",server="demo",state="accepted"} 1.0' in out
    assert 'metric: elicitgate_elicitations_total{mode="form",server="demo",state="declined"} 1.0' in out
    assert "audit: demo__confirm accepted user accepted" in out
    assert "audit: demo__confirm declined user chose decline" in out
    assert (tmp_path / "elicitgate-audit.db").exists()
    import json

    ended = [json.loads(line) for line in done.stderr.splitlines() if '"elicitation.ended"' in line]
    assert [(e["state"], e["tool"], e["request"]["client"]) for e in ended] == [
        ("accepted", "demo__confirm", "c1"), ("declined", "demo__confirm", "c1")]
    assert [e["request"]["request_id"] for e in ended] == [int(e["request_id"]) for e in ended]


def test_tasks_example_runs_as_documented():
    """docs/tasks.md: a 2026-07-28 client's research task on server-everything, its question answered by
    tasks/update. npx finds the pinned server-everything installed in tests/peers/ts (offline)."""
    peers = ROOT / "tests" / "peers" / "ts"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "npm_config_offline": "true"}
    done = subprocess.run([sys.executable, str(ROOT / "docs/examples/tasks_client.py")], cwd=peers, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    documented = (ROOT / "docs" / "tasks.md").read_text().split("python docs/examples/tasks_client.py\n", 1)[1]
    assert done.stdout == documented.split("```", 1)[0]
