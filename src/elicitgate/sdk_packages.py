"""The `mcp` SDK's packages (and prometheus_client's) without their eager `__init__`s.

`import mcp.server.connection` runs `mcp/__init__.py` first, and that imports the whole SDK: the
client, `MCPServer` and its tool machinery, the auth handlers, both HTTP transports. That was half of
the gateway's start-up and ~20 MB of its idle memory, for names it never uses. Here `mcp`,
`mcp.server` and `mcp.client` become packages whose submodules import alone; the first read of a
name the real `__init__` would have defined (`mcp.Client`, `from mcp.server import MCPServer`) runs
that `__init__` then, so every name is still there for whoever asks.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import pkgutil
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, cast

from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from importlib.abc import Loader  # importing it imports importlib.resources, tempfile, ...: ~2 MiB

PACKAGES = ("mcp", "mcp.server", "mcp.client")
"""Parents before children: finding `mcp.server` imports `mcp`, which must be the deferred one."""
OTHER_PACKAGES = ("prometheus_client",)
"""The same for other packages: prometheus_client's `__init__` imports its exposition (an HTTP server, urllib's
client; ~0.9 MiB), which only `/metrics` needs; the gateway's metrics import `prometheus_client.metrics`."""


_CACHEABLE = ("prompts/list", "resources/list", "resources/read", "resources/templates/list", "server/discover",
              "tools/list")
SEEDED: dict[str, JsonObject] = {
    "mcp_types.methods": {
        "CacheableMethod": Literal[_CACHEABLE],
        "CACHEABLE_METHODS": frozenset(_CACHEABLE),
        "INPUT_REQUIRED_METHODS": frozenset({"tools/call", "prompts/get", "resources/read"}),
    },
}
"""Modules run at the first read of a name they define other than the few seeded here (the SDK's own values,
checked against them in tests/test_startup.py). `mcp_types.methods` is the spec's schemas per protocol version
(`mcp_types._v2025_11_25` and `_v2026_07_28`, pydantic models built as they import: ~0.3 s of CPU and ~6 MiB),
which the SDK's server modules import at their top for the names seeded here, and which nothing needs until the
first request is checked."""


def defer_sdk_package_inits() -> None:
    """Install the deferred packages, unless the SDK is imported already (then it stays as it is)."""
    for name in OTHER_PACKAGES:
        if name not in sys.modules:
            _defer_package(name)
    if PACKAGES[0] in sys.modules:
        return
    if not any(isinstance(finder, _SeededFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SeededFinder())
    for name in PACKAGES:
        if not _defer_package(name):
            return  # not the SDK layout this was written for: leave the imports alone


def _defer_package(name: str) -> bool:
    """`name` as a package whose submodules import alone; False (nothing done) when it is no package."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)
    submodules = frozenset(info.name for info in pkgutil.iter_modules(spec.submodule_search_locations))
    package.__getattr__ = _loader(package, submodules)  # type: ignore[method-assign]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)
    return True


def _loader(package: ModuleType, submodules: frozenset[str]) -> Any:
    def getattr_(name: str) -> Any:
        """A submodule imports alone; any other name runs the package's own `__init__` once."""
        if name in submodules:
            return importlib.import_module(f"{package.__name__}.{name}")
        del package.__getattr__  # from here on, the package is its own
        assert package.__spec__ is not None and package.__spec__.loader is not None
        package.__spec__.loader.exec_module(package)
        return getattr(package, name)

    return getattr_


class _SeededFinder:
    """Finds a module of `SEEDED` when something first imports it, as the import system would, and makes it hold
    its seeded names alone until another of its names is read (`_SeededLoader`).

    A finder rather than the module made at once: finding `mcp_types.methods` imports `mcp_types`, the SDK's
    version-free models (~0.2 s of CPU), and `import elicitgate` must not, so that `serve` reads its configuration
    and starts its stdio servers first (`upstreams.prespawn`)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        seeded = SEEDED.get(name)
        if seeded is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = cast("Loader", _SeededLoader(spec.loader, seeded))  # a loader by its methods
        return spec


class _SeededLoader:
    """The module's own loader, run at the first read of a name other than its seeded ones."""

    def __init__(self, loader: Loader, seeded: JsonObject) -> None:
        self._loader = loader
        self._seeded = seeded

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)  # get_source, get_filename, ...: the module's own loader answers

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # the usual module object

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__.update(self._seeded)
        loader = self._loader

        def getattr_(attr: str) -> Any:
            # The import system's own questions (`__path__`: is it a package?) are not the module's names;
            # `__all__` is (`from mcp_types.methods import *`, as `mcp.types.methods` does, must see them all).
            if attr.startswith("__") and attr != "__all__":
                raise AttributeError(attr)
            del module.__getattr__
            loader.exec_module(module)
            return getattr(module, attr)

        module.__getattr__ = getattr_  # type: ignore[method-assign]
