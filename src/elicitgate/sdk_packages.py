"""The `mcp` SDK's packages without their eager `__init__`s.

`import mcp.server.connection` runs `mcp/__init__.py` first, and that imports the whole SDK: the
client, `MCPServer` and its tool machinery, the auth handlers, both HTTP transports. That was half of
the gateway's start-up and ~20 MB of its idle memory, for names it never uses. Here `mcp`,
`mcp.server` and `mcp.client` become packages whose submodules import alone; the first read of a
name the real `__init__` would have defined (`mcp.Client`, `from mcp.server import MCPServer`) runs
that `__init__` then, so every name is still there for whoever asks.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from types import ModuleType
from typing import Any

PACKAGES = ("mcp", "mcp.server", "mcp.client")
"""Parents before children: finding `mcp.server` imports `mcp`, which must be the deferred one."""


def defer_sdk_package_inits() -> None:
    """Install the deferred packages, unless the SDK is imported already (then it stays as it is)."""
    if PACKAGES[0] in sys.modules:
        return
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return  # not the SDK layout this was written for: leave the imports alone
        package = importlib.util.module_from_spec(spec)
        submodules = frozenset(info.name for info in pkgutil.iter_modules(spec.submodule_search_locations))
        package.__getattr__ = _loader(package, submodules)  # type: ignore[method-assign]
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)


def _loader(package: ModuleType, submodules: frozenset[str]) -> Any:
    def getattr_(name: str) -> Any:
        """A submodule imports alone; any other name runs the package's own `__init__` once."""
        if name in submodules:
            return importlib.import_module(f"{package.__name__}.{name}")
        del package.__getattr__  # from here on, the package is the SDK's own
        assert package.__spec__ is not None and package.__spec__.loader is not None
        package.__spec__.loader.exec_module(package)
        return getattr(package, name)

    return getattr_
