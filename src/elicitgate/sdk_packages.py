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
import os
import pkgutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import FunctionType, MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Literal, cast

from elicitgate.json_shapes import JsonObject

if TYPE_CHECKING:
    from importlib.abc import Loader  # importing it imports importlib.resources, tempfile, ...: ~2 MiB

    import pydantic

PACKAGES = ("mcp", "mcp.server", "mcp.client")
"""Parents before children: finding `mcp.server` imports `mcp`, which must be the deferred one."""
OTHER_PACKAGES = ("prometheus_client", "uvicorn")
"""The same for other packages: prometheus_client's `__init__` imports its exposition (an HTTP server, urllib's
client; ~0.9 MiB), which only `/metrics` needs; the gateway's metrics import `prometheus_client.metrics`.
uvicorn's imports `uvicorn.main`, its command line (its reloader and multiprocess supervisors, multiprocessing:
~1.5 MiB), for the two names the gateway reads from it (`PACKAGE_NAMES`)."""
PACKAGE_NAMES: dict[str, dict[str, str]] = {
    "uvicorn": {"Config": "uvicorn.config", "Server": "uvicorn.server", "main": "uvicorn.main", "run": "uvicorn.main"},
}
"""Names of a deferred package's `__init__` read from the submodule that defines them, without running it (the
same objects: uvicorn's `__init__` imports them from there, `Server` through `uvicorn.main`). A name here comes
before a submodule of the same name, as in the package's own `__init__` (`uvicorn.main` is the function)."""


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

ROWS_BUILT_WHEN_READ: dict[str, str] = {"mcp_types.methods": "mcp_types._v2026_07_28"}
"""A module of `SEEDED` and a module of classes its maps hold: the maps' rows of those classes are built (the module
imported) when one of them is first read. `mcp_types.methods` maps each (method, version) to the spec's schema of
that version: a handshake-era peer (`initialize`, every 2025-era version) reads only the rows of
`mcp_types._v2025_11_25`, and `mcp_types._v2026_07_28` (~150 models: ~200 M instructions, a sixth of a demo server's
start-up to its `initialize` answer, issue 34) is imported at the first 2026-07-28 row read (a 2026-07-28 request,
result or notification checked). Each map is still a read-only mapping with the same rows (`_RowsBuiltWhenRead`);
reading all its values reads each row."""

BUILT_WHEN_USED: dict[str, str] = {"mcp_types._wire_base": "WireModel"}
"""A module and its pydantic base class whose models each build their validator at their first use (pydantic's
`defer_build`) rather than as their class is made: `WireModel` is the base of the spec's schemas per protocol version
(`mcp_types._v2025_11_25` and `_v2026_07_28`, ~300 models behind `mcp_types.methods`), of which a gateway or a demo
server checks messages against a few dozen. Issue 34: importing `mcp_types.methods` ~0.24 -> ~0.12 s of CPU (the
gateway's first request, each demo upstream before its first answer); the first check of each model then builds it
(~1 ms), and checks after that cost the same as before."""

BUILT_WHEN_USED_AS_RUN: frozenset[str] = frozenset({
    "mcp_types._types", "mcp_types.jsonrpc", "mcp.shared.auth", "mcp.server.auth.provider",
})
"""Modules whose pydantic models and `TypeAdapter`s, all made as the module runs, each build their validator at their
first use (pydantic's `defer_build`; `_deferred_builds`). `mcp_types._types` is the SDK's version-free models (~190
classes) and its six module-level adapters (every request, result and notification union), `mcp_types.jsonrpc` the
JSON-RPC envelope's adapter, `mcp.shared.auth` and `mcp.server.auth.provider` the OAuth models the HTTP face's bearer
checks import: 65 of the gateway's modules import `mcp_types` at their top, and building them all was ~0.12 s of the
gateway's CPU before ready (issue 34). The first use of each then builds it (a few ms); what they accept, refuse and
write is the same (tests/test_unit_sdk_deferred_builds.py)."""

STOOD_IN: dict[str, dict[str, tuple[str, ...]]] = {
    "mcp.server.lowlevel.server": {
        "mcp.server.auth.routes": (
            "build_resource_metadata_url", "create_auth_routes", "create_protected_resource_routes",
        ),
        "mcp.server.streamable_http": ("EventStore",),
        "mcp.server.streamable_http_manager": ("StreamableHTTPASGIApp", "StreamableHTTPSessionManager"),
        "mcp.server.auth.middleware.auth_context": ("AuthContextMiddleware",),
        "mcp.server.auth.middleware.bearer_auth": ("BearerAuthBackend", "RequireAuthMiddleware"),
        "mcp.server.auth.provider": ("OAuthAuthorizationServerProvider", "TokenVerifier"),
        "mcp.server.auth.settings": ("AuthSettings",),
        "starlette.applications": ("Starlette",),
        "starlette.middleware": ("Middleware",),
        "starlette.middleware.authentication": ("AuthenticationMiddleware",),
        "starlette.routing": ("Mount", "Route"),
        "mcp.server.transport_security": ("TransportSecuritySettings",),
    },
    "mcp.server.stdio": {"mcp.os.win32.utilities": ("rebind_std_handle_to_fd",)},
    "pydantic.plugin._loader": {"importlib.metadata": ("entry_points",)},
    "pydantic.networks": {"importlib.metadata": ("version",)},
}
"""What a module imports at its top for one method it has, per module it imports it from: while it runs, each of
those modules not imported yet is a stand-in holding these names, each a function that imports the real module and
calls the real name (`_later`), and the module's values of `STAND_IN_VALUES`; the real modules stay unimported, and
whoever imports one later gets the real one. `mcp.server.lowlevel.server` uses these names only in
`Server.streamable_http_app` and `Server.session_manager` (the SDK's own HTTP transport, which the gateway's HTTP
face does not use) and in annotations; their modules import the OAuth authorization server's handlers, the
streamable HTTP transport and sse_starlette: ~2 MiB and ~0.1 s of CPU, in the gateway and in each demo upstream.
Issue 34's start-up: also the modules of its app's authentication (the SDK's bearer middleware and OAuth provider
models, `mcp.shared.auth`), its transport security settings (Starlette's requests, http.client, email's parser,
python_multipart) and Starlette's application, routing and middleware: a demo upstream over stdio imports no
Starlette at all (the gateway imports most of them for its own faces first, and keeps those as they are).
`pydantic.plugin._loader` (imported as pydantic builds its first model) reads `importlib.metadata.entry_points` for
pydantic's plugins: `_plugin_entry_points` stands in for it (`LIGHTER`); `pydantic.networks` reads
`importlib.metadata.version` only to check email-validator's version as an email address is first validated."""
STAND_IN_VALUES: dict[str, JsonObject] = {
    "mcp.server.streamable_http_manager": {"DEFAULT_MAX_SESSIONS": 10_000, "DEFAULT_SESSION_IDLE_TIMEOUT": 30 * 60},
    "mcp.server.transport_security": {"DEFAULT_MAX_REQUEST_BODY_SIZE": 4 * 1024 * 1024},
}
"""Constants read by the module stood in for (default arguments): the SDK's values, checked in tests/test_startup.py."""


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
    package.__getattr__ = _loader(package, submodules, PACKAGE_NAMES.get(name, {}))  # type: ignore[method-assign]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)
    return True


def _loader(package: ModuleType, submodules: frozenset[str], names: dict[str, str]) -> Any:
    def getattr_(name: str) -> Any:
        """One of `names` imports its own submodule alone, and so does a submodule; any other name runs the
        package's own `__init__` once."""
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            setattr(package, name, value)  # over the submodule the import just set, as the `__init__` would
            return value
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
        stood_in = STOOD_IN.get(name)
        base = BUILT_WHEN_USED.get(name)
        as_run = name in BUILT_WHEN_USED_AS_RUN
        if seeded is None and stood_in is None and base is None and not as_run:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        # A loader by its methods:
        if seeded is not None:
            spec.loader = cast("Loader", _SeededLoader(spec.loader, seeded))
        elif stood_in is not None:
            spec.loader = cast("Loader", _StandInLoader(spec.loader, stood_in))
        elif base is not None:
            spec.loader = cast("Loader", _BuiltWhenUsedLoader(spec.loader, base))
        else:
            spec.loader = cast("Loader", _BuiltWhenUsedAsRunLoader(spec.loader))
        return spec


class _AroundLoader:
    """A module's own loader, wrapped: it answers everything (`get_source`, `get_filename`, ...) but `exec_module`,
    which each subclass runs its own way around it."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # the usual module object


class _SeededLoader(_AroundLoader):
    """The module's own loader, run at the first read of a name other than its seeded ones."""

    def __init__(self, loader: Loader, seeded: JsonObject) -> None:
        super().__init__(loader)
        self._seeded = seeded

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__.update(self._seeded)
        loader = self._loader

        def getattr_(attr: str) -> Any:
            # The import system's own questions (`__path__`: is it a package?) are not the module's names;
            # `__all__` is (`from mcp_types.methods import *`, as `mcp.types.methods` does, must see them all).
            if attr.startswith("__") and attr != "__all__":
                raise AttributeError(attr)
            del module.__getattr__
            later = ROWS_BUILT_WHEN_READ.get(module.__name__)
            if later is None or later in sys.modules:
                loader.exec_module(module)
            elif not _run_with_rows_built_when_read(loader, module, later):
                importlib.import_module(later)  # another SDK layout: the module as it is, its classes built now
                loader.exec_module(module)
            return getattr(module, attr)

        module.__getattr__ = getattr_  # type: ignore[method-assign]


class _ClassWhenRead:
    """A class of module `module` not imported yet, as a row of a map holds it until the row is read."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __repr__(self) -> str:
        return f"<{self.module}.{self.name}, imported when read>"

    def real(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)


class _RowsBuiltWhenRead(Mapping[object, object]):
    """A map's rows, each `_ClassWhenRead` replaced by its class when first read (`ROWS_BUILT_WHEN_READ`)."""

    def __init__(self, rows: dict[object, object]) -> None:
        self._rows = rows

    def __getitem__(self, key: object) -> object:
        value = self._rows[key]
        if isinstance(value, _ClassWhenRead):
            value = self._rows[key] = value.real()
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._rows  # a row's presence, without building it

    def __iter__(self) -> Iterator[object]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return repr(self._rows)

    # What a read-only view of a dict offers besides reading (`copy`, `|`): a dict of every row.
    def copy(self) -> dict[object, object]:
        return dict(self.items())

    def __or__(self, other: Mapping[object, object]) -> dict[object, object]:
        return {**self, **other}

    def __ror__(self, other: Mapping[object, object]) -> dict[object, object]:
        return {**other, **self}


def _run_with_rows_built_when_read(loader: Loader, module: ModuleType, later: str) -> bool:
    """`module` run while `later` is a stand-in whose every name is a `_ClassWhenRead`; then each of its read-only
    maps holding one reads its rows through `_RowsBuiltWhenRead`, as do its functions' defaults (`surface=...`).
    False when the module did more with the stand-in's classes than put them in its read-only maps (it raised, or
    one is left anywhere else among its names): the caller runs it again as it is."""
    stand_in = ModuleType(later, f"Stands in for {later} while {module.__name__} imports (sdk_packages).")

    def class_when_read(name: str) -> _ClassWhenRead:
        if name.startswith("__"):
            raise AttributeError(name)
        return _ClassWhenRead(later, name)

    stand_in.__getattr__ = class_when_read  # type: ignore[method-assign]
    sys.modules[later] = stand_in
    try:
        loader.exec_module(module)
    except Exception:
        return False
    finally:
        if sys.modules.get(later) is stand_in:
            del sys.modules[later]
    if _holds_stand_ins(module, stand_in):
        return False
    replaced: dict[int, MappingProxyType[object, object]] = {}
    for name, value in list(vars(module).items()):
        if isinstance(value, MappingProxyType):
            proxy = cast("MappingProxyType[object, object]", value)
            rows = dict(proxy)
            if any(isinstance(row, _ClassWhenRead) for row in rows.values()):
                replaced[id(proxy)] = MappingProxyType(_RowsBuiltWhenRead(rows))
                setattr(module, name, replaced[id(proxy)])
    for value in vars(module).values():
        if isinstance(value, FunctionType) and value.__module__ == module.__name__:
            if value.__defaults__:
                value.__defaults__ = tuple(replaced.get(id(default), default) for default in value.__defaults__)
            if value.__kwdefaults__:
                value.__kwdefaults__ = {key: replaced.get(id(default), default)
                                        for key, default in value.__kwdefaults__.items()}
    return True


def _holds_stand_ins(module: ModuleType, stand_in: ModuleType) -> bool:
    """`module` keeps a `_ClassWhenRead` other than as a value of a read-only map's row, or a function of its reads the
    stand-in module by a name at run time: what `_RowsBuiltWhenRead` would not replace."""
    bound = {name for name, value in vars(module).items() if value is stand_in}

    def kept(value: object, depth: int) -> bool:
        if isinstance(value, _ClassWhenRead):
            return True
        if depth == 0:
            return False
        if isinstance(value, Mapping):
            rows = cast("Mapping[object, object]", value)
            return any(kept(key, depth - 1) or kept(row, depth - 1) for key, row in rows.items())
        if isinstance(value, list | tuple | set | frozenset):
            return any(kept(item, depth - 1) for item in cast("Iterable[object]", value))
        return False

    for value in vars(module).values():
        if isinstance(value, FunctionType) and bound & set(value.__code__.co_names):
            return True
        if isinstance(value, MappingProxyType):
            rows = cast("MappingProxyType[object, object]", value)
            if any(kept(key, 2) or (not isinstance(row, _ClassWhenRead) and kept(row, 2)) for key, row in rows.items()):
                return True
        elif kept(value, 2):
            return True
    return False


class _BuiltWhenUsedLoader(_AroundLoader):
    """The module's own loader; then its base class `base` gets `defer_build`, which the models made from it after
    inherit (`BUILT_WHEN_USED`). A base that is not a pydantic model (another SDK layout) is left as it is."""

    def __init__(self, loader: Loader, base: str) -> None:
        super().__init__(loader)
        self._base = base

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        config = getattr(getattr(module, self._base, None), "model_config", None)
        if isinstance(config, dict):
            cast("dict[str, object]", config)["defer_build"] = True


class _BuiltWhenUsedAsRunLoader(_AroundLoader):
    """The module's own loader, run with pydantic's models and adapters built at first use
    (`BUILT_WHEN_USED_AS_RUN`)."""

    def exec_module(self, module: ModuleType) -> None:
        restore = _deferred_builds()
        try:
            self._loader.exec_module(module)
        finally:
            restore()


def _deferred_builds() -> Callable[[], None]:
    """For the module that imports them now (`from pydantic import ...` reads them as it runs): `pydantic.ConfigDict`
    and `pydantic.TypeAdapter` with `defer_build` on, `BaseModel`'s own config with it too (for models that set none),
    and `model_rebuild` leaving a deferred model to its first use (where pydantic resolves its names from the module,
    as the rebuild would have). Returns what puts pydantic's own back."""
    import pydantic

    base = pydantic.BaseModel
    real_config, real_adapter, real_base_config = pydantic.ConfigDict, pydantic.TypeAdapter, base.model_config
    real_rebuild: Any = vars(base)["model_rebuild"]
    had = {name: name in vars(pydantic) for name in ("ConfigDict", "TypeAdapter")}

    def rebuild(cls: type[pydantic.BaseModel], *, force: bool = False, **options: Any) -> bool | None:
        if not force and not options and cls.model_config.get("defer_build"):
            return None
        return real_rebuild.__func__(cls, force=force, **options)

    patched: Any = pydantic
    patched.ConfigDict = _deferring_config
    patched.TypeAdapter = _DeferredAdapters(real_adapter)
    base.model_config = {**real_base_config, "defer_build": True}
    setattr(base, "model_rebuild", classmethod(rebuild))  # noqa: B010 - a class attribute, put back by `restore`

    def restore() -> None:
        base.model_config = real_base_config
        setattr(base, "model_rebuild", real_rebuild)  # noqa: B010
        for name, real in (("ConfigDict", real_config), ("TypeAdapter", real_adapter)):
            if had[name]:
                setattr(pydantic, name, real)
            else:
                delattr(pydantic, name)  # pydantic's own lazy `__getattr__` answers again

    return restore


def _deferring_config(**settings: Any) -> dict[str, Any]:
    """`pydantic.ConfigDict(...)` (a TypedDict: the call makes a plain dict), with `defer_build`."""
    return {**settings, "defer_build": True}


class _DeferredAdapters:
    """`pydantic.TypeAdapter` as a module calls it (`TypeAdapter(X)`, `TypeAdapter[X](X)`): pydantic's own adapter,
    with `defer_build` in its config."""

    def __init__(self, real: type[pydantic.TypeAdapter[Any]]) -> None:
        self._real = real

    def __getitem__(self, item: object) -> _DeferredAdapters:
        return self

    def __call__(self, type_: Any, *, config: dict[str, Any] | None = None, _parent_depth: int = 2,
                 module: str | None = None) -> pydantic.TypeAdapter[Any]:
        # One frame deeper than pydantic counts: the namespace it reads is still the calling module's.
        return self._real(type_, config=cast("pydantic.ConfigDict", {**(config or {}), "defer_build": True}),
                          _parent_depth=_parent_depth + 1, module=module)


class _StandInLoader(_AroundLoader):
    """The module's own loader, run while the modules of `STOOD_IN` it would import for names it seldom uses are
    stand-ins (those imported already stay as they are)."""

    def __init__(self, loader: Loader, stood_in: dict[str, tuple[str, ...]]) -> None:
        super().__init__(loader)
        self._stood_in = stood_in

    def exec_module(self, module: ModuleType) -> None:
        stand_ins: dict[str, ModuleType] = {}
        for name, names in self._stood_in.items():
            if name in sys.modules:
                continue
            stand_in = ModuleType(name, f"Stands in for {name} while {module.__name__} imports (sdk_packages).")
            stand_in.__dict__.update(STAND_IN_VALUES.get(name, {}))
            for attr in names:
                setattr(stand_in, attr, LIGHTER.get(f"{name}.{attr}") or _later(name, attr))
            stand_in.__getattr__ = _the_real_one(stand_in)  # type: ignore[method-assign]
            stand_ins[name] = sys.modules[name] = stand_in
        try:
            self._loader.exec_module(module)
        finally:
            for name, stand_in in stand_ins.items():
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]


def _later(module: str, name: str) -> Any:
    """`module.name` called at its first use: a function that imports `module` then and calls its `name`."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    return call


def _the_real_one(stand_in: ModuleType) -> Any:
    """Another name read from a stand-in (an SDK that imports more of it than `STOOD_IN` says): the real module's,
    which replaces the stand-in in `sys.modules` from then on."""

    def getattr_(attr: str) -> Any:
        if attr.startswith("__") and attr != "__all__":
            raise AttributeError(attr)
        if sys.modules.get(stand_in.__name__) is stand_in:
            del sys.modules[stand_in.__name__]
        return getattr(importlib.import_module(stand_in.__name__), attr)

    return getattr_


def _plugin_entry_points(**selection: str) -> Iterable[object]:
    """`importlib.metadata.entry_points(**selection)` as `pydantic.plugin._loader` calls it (`group="pydantic"`: its
    plugins), answered without importing `importlib.metadata` where no distribution on `sys.path` names pydantic in
    its entry points: none then. Importing it (email's parser, zipfile, csv) and reading every distribution's entry
    points was ~90 M instructions, 5% of the gateway's start-up (issue 34). Anything else (another selection, a
    distribution that mentions pydantic, a zip or egg on the path, a finder of distributions other than the standard
    one) gets `importlib.metadata`'s own answer."""
    if selection != {"group": "pydantic"} or not _no_entry_points_mention(b"pydantic"):
        from importlib.metadata import entry_points

        return entry_points(**selection)
    return ()


def _no_entry_points_mention(word: bytes) -> bool:
    """Whether no distribution `importlib.metadata` would find (the `.dist-info` and `.egg-info` directories of each
    `sys.path` entry, as its `PathFinder` lists them) has `word` in its entry_points.txt; False whenever it could find
    them elsewhere."""
    if any(hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
           for finder in sys.meta_path):
        return False
    for entry in sys.path:
        root = entry or "."
        try:
            with os.scandir(root) as listing:
                names = [item.name for item in listing]
        except NotADirectoryError:
            return False  # a zip file on the path: its distributions are read from inside it
        except OSError:
            continue  # a path entry that does not exist holds nothing
        for name in names:
            low = name.lower()
            if low.endswith(".egg"):
                return False
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(root, name, "entry_points.txt"), "rb") as text:
                    if word in text.read():
                        return False
            except OSError:
                continue  # none (or a single-file .egg-info): no entry points
    return True


LIGHTER: dict[str, Callable[..., Any]] = {"importlib.metadata.entry_points": _plugin_entry_points}
"""Stand-ins that answer a name of `STOOD_IN` themselves (by module and name) rather than importing the real one."""
