"""Start-up, issue 34: pydantic's plugin loader answered without `importlib.metadata` where no installed distribution
names pydantic in its entry points (`sdk_packages._plugin_entry_points`), and a plugin that is there still loads."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from elicitgate.sdk_packages import _plugin_entry_points  # pyright: ignore[reportPrivateUsage]
from tests.conftest import PY, write_config
from tests.test_startup import DUMP_MODULES


def _plugin_distribution(root: Path) -> Path:
    """A distribution on `root` with a pydantic plugin that writes each model it sees to `$PLUGIN_SAW`."""
    info = root / "seeing_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seeing-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nseeing = seeing_plugin:plugin\n")
    (root / "seeing_plugin.py").write_text(textwrap.dedent("""
        import os

        class Plugin:
            def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, settings):
                with open(os.environ["PLUGIN_SAW"], "a") as out:
                    out.write(schema_type_path.name + "\\n")
                return None, None, None

        plugin = Plugin()
    """))
    return root


def test_with_no_plugin_installed_the_answer_is_importlib_metadatas() -> None:
    assert list(_plugin_entry_points(group="pydantic")) == list(importlib.metadata.entry_points(group="pydantic"))


def test_a_distribution_that_names_pydantic_gets_importlib_metadatas_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(_plugin_distribution(tmp_path)))
    found = list(_plugin_entry_points(group="pydantic"))
    assert [(point.name, point.value) for point in found] == [("seeing", "seeing_plugin:plugin")]


def test_another_selection_gets_importlib_metadatas_answer() -> None:
    assert list(_plugin_entry_points(group="console_scripts")) == list(
        importlib.metadata.entry_points(group="console_scripts")
    )


def test_a_zip_on_the_path_gets_importlib_metadatas_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("zipped_plugin-1.0.dist-info/METADATA",
                     "Metadata-Version: 2.1\nName: zipped-plugin\nVersion: 1.0\n")
        out.writestr("zipped_plugin-1.0.dist-info/entry_points.txt", "[pydantic]\nzipped = zipped_plugin:plugin\n")
    monkeypatch.syspath_prepend(str(archive))
    assert [point.name for point in _plugin_entry_points(group="pydantic")] == ["zipped"]


def test_an_installed_plugin_still_sees_the_models_a_process_importing_elicitgate_builds(tmp_path: Path) -> None:
    saw = tmp_path / "saw.txt"
    script = "import elicitgate, pydantic\nclass Seen(pydantic.BaseModel):\n    x: int\nprint(Seen(x=1).x)\n"
    done = subprocess.run(
        [PY, "-c", script], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PLUGIN_SAW": str(saw),
             "PYTHONPATH": os.pathsep.join([str(_plugin_distribution(tmp_path / "site")), *sys.path])},
    )
    assert done.returncode == 0, done.stderr
    assert "Seen" in saw.read_text().split()


def test_serve_reads_no_distributions_metadata(tmp_path: Path) -> None:
    config = write_config(tmp_path, {}, audit={"enabled": False})
    done = subprocess.run(
        [PY, "-c", DUMP_MODULES, str(tmp_path / "modules.json"), "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0 and "ready on stdio" in done.stderr, done.stderr
    modules = set(json.loads((tmp_path / "modules.json").read_text()))
    assert "pydantic.plugin._loader" in modules
    assert "importlib.metadata" not in modules


def test_pydantic_networks_reads_a_distributions_version_at_its_first_use() -> None:
    # `pydantic.networks` imports `importlib.metadata.version` to check email-validator's version: a stand-in that
    # imports it when called (`sdk_packages.STOOD_IN`), with importlib.metadata's answer.
    script = ("import sys, elicitgate\nfrom pydantic import networks\n"
              "print('importlib.metadata' in sys.modules, networks.version('pydantic'))")
    done = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", importlib.metadata.version("pydantic")]
