"""`sdk_packages.ROWS_BUILT_WHEN_READ`'s way of running a module with a stand-in for the module of its maps' classes,
on modules of the test's own: a module that only puts the classes in read-only maps gets rows built when read; one that
does more with them (a function reading the module at run time, a class kept outside a map, a failure) is reported, so
that its import runs it as it is (another SDK layout never starts with a stand-in's class in use)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType, ModuleType

import pytest

from elicitgate.sdk_packages import _run_with_rows_built_when_read  # pyright: ignore[reportPrivateUsage]

LATER = "eg_rows_later"


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / f"{LATER}.py").write_text("class Model:\n    pass\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [LATER, "eg_rows_maps"]:
        sys.modules.pop(name, None)


def _run(folder: Path, code: str) -> tuple[bool, ModuleType]:
    path = folder / "eg_rows_maps.py"
    path.write_text(textwrap.dedent(code))
    spec = importlib.util.spec_from_file_location("eg_rows_maps", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    return _run_with_rows_built_when_read(spec.loader, module, LATER), module


def test_a_module_that_only_fills_read_only_maps_gets_its_rows_built_when_read(modules: Path):
    done, module = _run(
        modules,
        f"""
        from types import MappingProxyType
        import {LATER} as later
        ROWS = MappingProxyType({{"a": later.Model, "b": int}})
        def pick(key, *, surface=ROWS):
            return surface[key]
        """,
    )
    assert done
    assert LATER not in sys.modules
    assert isinstance(module.ROWS, MappingProxyType) and "a" in module.ROWS and LATER not in sys.modules
    assert module.pick("b") is int and LATER not in sys.modules
    model = module.pick("a")
    assert LATER in sys.modules and model is sys.modules[LATER].Model


@pytest.mark.parametrize(
    "code",
    [
        "import {later} as later\ndef make():\n    return later.Model()\n",  # reads the module at run time
        "import {later} as later\nKINDS = (later.Model,)\n",  # a class kept outside a map
        "from types import MappingProxyType\nimport {later} as later\n"
        "ROWS = MappingProxyType({{'a': (later.Model, 1)}})\n",  # inside a row, not the row itself
        "import {later} as later\nclass Sub(later.Model):\n    pass\n",  # fails with the stand-in
    ],
    ids=["function", "tuple", "nested-row", "subclass"],
)
def test_a_module_that_does_more_with_the_classes_is_reported(modules: Path, code: str):
    done, _ = _run(modules, code.format(later=LATER))
    assert not done
    assert LATER not in sys.modules  # the stand-in is gone; the caller runs the module again as it is
