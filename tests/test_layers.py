"""The package's layers (pyproject.toml `[tool.importlinter]`, README's Layout): `lint-imports` keeps
every contract, and a contract broken on purpose is reported (the check can fail)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path, src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--config", str(cwd / "pyproject.toml")],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


def test_every_import_points_down_and_no_package_has_a_cycle():
    result = _lint(ROOT, ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _with_contracts_importing(tmp_path: Path, line: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over a copy of the package whose contracts.py ends with `line`."""
    shutil.copytree(ROOT / "src" / "elicitgate", tmp_path / "src" / "elicitgate",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    contracts = tmp_path / "src" / "elicitgate" / "contracts.py"
    contracts.write_text(contracts.read_text() + line)
    return _lint(tmp_path, tmp_path / "src")


def test_an_upward_import_breaks_the_layers(tmp_path: Path):
    result = _with_contracts_importing(tmp_path, "\nfrom elicitgate.gateway import Gateway  # noqa: E402\n")
    assert result.returncode != 0
    assert "elicitgate.contracts -> elicitgate.gateway" in result.stdout, result.stdout


def test_an_upward_import_for_type_checking_only_breaks_the_layers_too(tmp_path: Path):
    """An annotation that points up is a dependency that points up: `exclude_type_checking_imports` stays off,
    so the contracts hold for what pyright reads as well as for what runs."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert tomllib.load(f)["tool"]["importlinter"]["exclude_type_checking_imports"] is False
    line = "\nif TYPE_CHECKING:  # noqa: E402, F821\n    from elicitgate.elicitation.model import Elicitation\n"
    result = _with_contracts_importing(tmp_path, "\nfrom typing import TYPE_CHECKING  # noqa: E402" + line)
    assert result.returncode != 0
    assert "elicitgate.contracts -> elicitgate.elicitation.model" in result.stdout, result.stdout


def _private_imports(source: str) -> list[str]:
    """The modules `source` imports whose dotted name has a private part (`mcp.shared._httpx_utils`), other
    than the package's own."""
    import ast

    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [name for name in names if not name.startswith("elicitgate")
                  and any(part.startswith("_") and not part.startswith("__") for part in name.split(".")[1:])]
    return found


def test_only_the_adapter_reaches_past_the_libraries_public_surface():
    """`_compat.py` is the one module that imports a library's private modules or reads private members (`noqa:
    SLF001`): an SDK upgrade that moves one has one place to mend."""
    offenders = {}
    for path in sorted((ROOT / "src" / "elicitgate").rglob("*.py")):
        if path.name == "_compat.py" and path.parent.name == "elicitgate":
            continue
        source = path.read_text()
        found = _private_imports(source) + (["noqa: SLF001"] if "SLF001" in source else [])
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}
    assert _private_imports("from mcp.shared._httpx_utils import MCP_DEFAULT_TIMEOUT\n")  # the check can fail
