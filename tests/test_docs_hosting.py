"""docs/hosting.md's example runs as written: a form-less client over stdio, answered by the operator
through the side web server's admin API."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_hosting_example_runs_as_documented():
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "ELICITGATE_ADMIN_TOKEN": "h_S5Wl9J3N1dnuhsRY59GShwdWvbMizqN27djbMR6pM"}
    done = subprocess.run([sys.executable, "docs/examples/hosted_client.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "pending: [demo] Booking at Chez Ada: who, when, how many?" in done.stdout
    assert "page: http://127.0.0.1:8810/e/…" in done.stdout
    assert "refused: 422 ['email']" in done.stdout
    assert "answered: accepted" in done.stdout
    assert "demo__book_table: book_table: accepted {'name': 'Ada', 'email': 'ada@example.com'" in done.stdout
    assert '"responder": "hosted_inbox"' in done.stderr  # the audit event names who presented it
