"""Installing elicitgate the way the ecosystem does: ranges in pyproject.toml, exact pins in
requirements.lock, and a built wheel that runs from a fresh environment (what `pipx install` and
`uvx` do)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _locked(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==([^ ;]+)", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


def test_pyproject_has_ranges_and_the_lock_pins_every_dependency_within_them():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _locked(ROOT / "requirements.lock")
    declared = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    for spec in declared:
        req = Requirement(spec)
        assert not any(s.operator == "==" for s in req.specifier), f"{spec}: use a compatible range, pin in the lock"
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{req.name} is in pyproject.toml but not in requirements.lock: run scripts/lock"
        assert req.specifier.contains(pins[name]), f"requirements.lock pins {name}=={pins[name]}, outside {spec}"


def test_bench_lock_agrees_with_the_project_lock():
    project, bench = _locked(ROOT / "requirements.lock"), _locked(ROOT / "bench" / "requirements.txt")
    for name, version in bench.items():
        if name in project:
            assert project[name] == version, f"bench/requirements.txt pins {name}=={version}: run scripts/lock"


@pytest.mark.timeout(600)
def test_built_wheel_installs_into_a_fresh_environment_and_runs(tmp_path):
    """Build the wheel, install it (with its locked dependencies) into a new venv as pipx would, and
    run it from outside the source tree: --version, check-config of a real file, the walkthrough."""
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True, timeout=300, capture_output=True,
    )
    (wheel,) = dist.glob("elicitgate-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-c", str(ROOT / "requirements.lock"), str(wheel)],
        check=True, timeout=420, capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    exe = str(venv / "bin" / "elicitgate")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
            stdin=subprocess.DEVNULL,
        )

    version = run("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "elicitgate 0.1.0"

    config = tmp_path / "servers.json"
    demo = {"command": "python3", "args": ["-m", "elicitgate.demo.server"]}
    config.write_text(json.dumps({"mcpServers": {"demo": demo}}))
    checked = run("check-config", "--config", str(config))
    assert checked.returncode == 0, checked.stderr
    assert "demo" in checked.stdout and "elicitgate.demo.server" in checked.stdout

    walked = run("demo", "--walkthrough")
    assert walked.returncode == 0, walked.stderr
    assert "tool result: book_table: accepted" in walked.stdout
