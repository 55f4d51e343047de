"""`serve` runs without typer when typer would take its command line as it is (`cli_serve.serve_at_once`, issue 34's
start-up); any other command line goes to typer, which says what is wrong as before. Real `elicitgate` processes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PY, Process, free_port, wait_healthy, write_config
from tests.test_startup import DUMP_MODULES

CLI_FRAMEWORK = {"typer", "typer.main", "typer._click"}


def _elicitgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "elicitgate.cli", *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("options", [["--config"], ["-c"], ["--config="]])
def test_serve_with_a_plain_command_line_imports_no_typer_and_applies_its_options(tmp_path, options):
    config = write_config(tmp_path, {}, audit={"enabled": False})
    out = tmp_path / "modules.json"
    given = [options[0] + str(config)] if options[0].endswith("=") else [*options, str(config)]
    done = subprocess.run([PY, "-c", DUMP_MODULES, str(out), "serve", *given, "--stdio", "--log-level", "debug"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ready on stdio (no servers)" in done.stderr
    assert "has no servers" in done.stderr  # the warning typer's command gave
    assert "DEBUG" in done.stderr  # --log-level applied
    modules = set(json.loads(out.read_text()))
    assert "elicitgate.gateway" in modules and modules & CLI_FRAMEWORK == set()


def test_an_invalid_file_exits_2_with_its_problems_without_typer(tmp_path):
    config = write_config(tmp_path, {}, elicitation={"default_timout": 5})
    out = tmp_path / "modules.json"
    done = subprocess.run([PY, "-c", DUMP_MODULES, str(out), "serve", "--config", str(config)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "elicitation.default_timout: unknown key" in done.stderr, done.stderr
    assert set(json.loads(out.read_text())) & CLI_FRAMEWORK == set()


@pytest.mark.parametrize(("args", "said"), [
    (["--log-level", "loud"], "Invalid value for --log-level: expected debug, info, warning or error, got 'loud'"),
    (["--http"], "Option '--http' requires an argument"),
    (["--http", "nowhere"], "Invalid value"),
    (["--http", "127.0.0.1:1", "--stdio"], "choose one of --stdio and --http"),
    (["--verbose"], "No such option: --verbose"),
])
def test_a_command_line_typer_would_refuse_is_left_to_typer(tmp_path, args, said):
    config = write_config(tmp_path, {}, audit={"enabled": False})
    done = _elicitgate("serve", "--config", str(config), *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Error:" in done.stderr, done.stderr  # said by typer


def test_serve_help_is_typers(tmp_path: Path):
    done = _elicitgate("serve", "--help")
    assert done.returncode == 0 and "Run the gateway in front of the servers in FILE." in done.stdout


def test_an_interrupted_http_face_exits_130_quietly_as_under_typer(tmp_path):
    """uvicorn stops on SIGINT, then raises it again: typer ended that with 130 and no word, and so does serve now."""
    config = write_config(tmp_path, {}, audit={"enabled": False})
    port = free_port()
    gateway = Process([PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"],
                      port, as_at_a_terminal=True)  # a suite started in the background has SIGINT ignored below it
    try:
        wait_healthy(gateway.url)
        gateway.proc.send_signal(signal.SIGINT)
        _, err = gateway.proc.communicate(timeout=60)
    finally:
        if gateway.proc.poll() is None:
            gateway.proc.kill()
            gateway.proc.communicate()
    assert gateway.proc.returncode == 130, err
    assert "Aborted" not in err and "Traceback" not in err, err
