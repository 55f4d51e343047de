"""Start-up, issue 34: what `serve` no longer builds or imports before ready, and that it still does when asked.
Real `elicitgate serve` processes on stdio, with a client that closes stdin at once (up to ready, then out)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import PY, write_config
from tests.test_startup import DUMP_MODULES

BUILT_AT_EXIT = """
import atexit, json, sys
out = sys.argv.pop(1)
def dump():
    import pydantic
    t = sys.modules["mcp_types._types"]
    built = sorted(n for n, v in vars(t).items()
                   if isinstance(v, type) and issubclass(v, pydantic.BaseModel) and v.__pydantic_complete__)
    adapters = sorted(n for n, v in vars(t).items() if isinstance(v, pydantic.TypeAdapter) and v.pydantic_complete)
    open(out, "w").write(json.dumps({"built": built, "adapters": adapters}))
atexit.register(dump)
from elicitgate.cli import app
app(prog_name="elicitgate")
"""
"""`elicitgate ...` that writes which of the SDK's version-free models and adapters were built, as it exits."""


def _serve_stdio(script: str, config: Path, out: Path) -> str:
    done = subprocess.run(
        [PY, "-c", script, str(out), "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_gateway_that_served_nothing_built_none_of_the_sdks_version_free_models(tmp_path):
    config = write_config(tmp_path, {}, audit={"enabled": False})
    stderr = _serve_stdio(BUILT_AT_EXIT, config, tmp_path / "built.json")
    assert "ready on stdio" in stderr
    built = json.loads((tmp_path / "built.json").read_text())
    # The generic bases pydantic completes as their parametrised subclasses are made, and the gateway's own
    # capabilities (made at start); none of the requests, results, notifications, their unions' adapters.
    others = [name for name in built["built"] if name not in {"Request", "PaginatedRequest", "Notification"}
              and not name.endswith(("Capabilities", "Capability"))]
    assert others == [], built
    assert built["adapters"] == []


def test_json_logs_import_their_formatter_and_write_json_lines(tmp_path):
    config = write_config(tmp_path, {}, audit={"enabled": False}, log_format="json")
    stderr = _serve_stdio(DUMP_MODULES, config, tmp_path / "modules.json")
    modules = set(json.loads((tmp_path / "modules.json").read_text()))
    assert "pythonjsonlogger" in modules
    # Said before logging is set up (the "no servers" warning) goes as plain text; the log lines after are JSON.
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    ready = [line for line in lines if "ready on stdio" in line["message"]]
    assert ready and ready[0]["level"] == "INFO" and ready[0]["logger"] == "elicitgate" and "time" in ready[0]


def test_text_logs_do_not_import_the_json_formatter(tmp_path):
    config = write_config(tmp_path, {}, audit={"enabled": False})
    stderr = _serve_stdio(DUMP_MODULES, config, tmp_path / "modules.json")
    assert "ready on stdio" in stderr
    assert "pythonjsonlogger" not in set(json.loads((tmp_path / "modules.json").read_text()))
