"""Bytecode for the source that libraries write and compile as they import, kept between starts like `__pycache__`.

Importing what `serve` runs on makes ~2,000 small programs at run time and compiles each: `dataclasses` writes the
`__init__`, `__repr__` and `__eq__` of every dataclass and `exec`s them, `typing` compiles each string annotation
pydantic reads (a `ForwardRef`), `collections.namedtuple` its `__new__`. Parsing and compiling them was ~19% of the
instructions the gateway executed before `/healthz` answered 200 (issue 34), and the same ~970 texts come back at
every start. `install` makes those three modules compile through `_compiled`, which keeps each code object by its
text, starting from the ones the last start kept (a file under `$XDG_CACHE_HOME/elicitgate`); `finish` (once the
gateway is ready) writes the file again if something new was compiled, and puts the modules' own functions back.

A code object compiled from the same text, file name and mode, with no inherited `__future__` flags (as those
modules compile), is the one they would have made: what they build from it is the same. The file holds this
interpreter's bytecode (`importlib.util.MAGIC_NUMBER` first); one of another version, unreadable or of another
shape is ignored, as a stale `.pyc` is. Only the standard library is imported here.
"""

from __future__ import annotations

import array
import bisect
import builtins
import contextlib
import itertools
import marshal
import os
import sys
import zlib
from collections.abc import Callable
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, BinaryIO, cast

Key = tuple[str, str, str]
"""Source text, file name, mode."""

SHADOWED: dict[str, tuple[str, str]] = {"dataclasses": ("exec", "exec"), "typing": ("compile", "eval"),
                                        "collections": ("eval", "eval")}
"""Module: the builtin it calls on generated text (looked up in its globals first, where `install` puts ours) and the
compile mode of that text."""

_state: _Cache | None = None


class _Cache:
    """The file read as one buffer, its entries looked up in place: an entry becomes objects only as it is used, so
    that start-up allocates what it would have allocated compiling (the idle gateway's memory stays as it was).

    The file: `MAGIC_NUMBER`, the number of entries N, then N sorted keys (`_crc` of each text with its file name and
    mode), N offsets and N lengths (native unsigned 32-bit integers), then the entries: `marshal` of (text, file name,
    mode, code). A key is a checksum, so an entry is used only if its text, file name and mode are the ones asked."""

    def __init__(self, path: Path | None, data: bytes) -> None:
        self.path = path
        self.crcs, self.offsets, self.lengths, self.entries = _index(data)
        self.used = bytearray(len(self.crcs))
        """Which of the file's entries this process used: the ones written back."""
        self.fresh: dict[Key, CodeType] = {}
        """What this process compiled (not in the file)."""
        self.compiled = 0
        self.shared: dict[Key, CodeType] = {}
        """The code of each forward reference's text, for the next of the same text (typing keeps it in each)."""
        self.modules: list[ModuleType] = []

    def code(self, source: str, filename: str, mode: str) -> CodeType:
        key = (source, filename, mode)
        found = self.shared.get(key)
        if found is not None:
            return found
        found = self._kept(key, _crc(key)) or self.fresh.get(key)
        if found is None:
            # dont_inherit: as compiled by the shadowed module, which has no `__future__` imports (this one does).
            found = builtins.compile(source, filename, mode, dont_inherit=True)
            self.compiled += 1
            self.fresh[key] = found
        if mode == "eval":
            self.shared[key] = found
        return found

    def _kept(self, key: Key, crc: int) -> CodeType | None:
        at = bisect.bisect_left(self.crcs, crc)
        while at < len(self.crcs) and self.crcs[at] == crc:
            start = self.offsets[at]
            try:
                entry: object = marshal.loads(self.entries[start:start + self.lengths[at]])
            except (EOFError, ValueError, TypeError):
                entry = None
            if isinstance(entry, tuple):
                fields = cast("tuple[object, ...]", entry)
                if len(fields) == 4 and fields[:3] == key and isinstance(code := fields[3], CodeType):
                    self.used[at] = 1
                    return code
            at += 1
        return None

    def write(self, out: BinaryIO) -> None:
        """The file again: what it held and what this process compiled (only the entries this process used where
        that would be more than `MAX_ENTRIES`), each kept entry copied as it is, one at a time."""
        keep_all = len(self.crcs) + len(self.fresh) <= MAX_ENTRIES
        rows: list[tuple[int, int | bytes]] = [(self.crcs[at], at) for at in range(len(self.crcs))
                                               if keep_all or self.used[at]]
        rows += [(_crc(key), marshal.dumps((*key, code))) for key, code in self.fresh.items()]
        rows.sort(key=lambda row: row[0])
        lengths = [self.lengths[entry] if isinstance(entry, int) else len(entry) for _, entry in rows]
        offsets = list(itertools.accumulate(lengths, initial=0))[:-1]
        out.write(MAGIC_NUMBER)
        out.write(array.array("I", [len(rows), *(crc for crc, _ in rows), *offsets, *lengths]).tobytes())
        for _, entry in rows:
            if isinstance(entry, int):
                start = self.offsets[entry]
                out.write(self.entries[start:start + self.lengths[entry]])
            else:
                out.write(entry)


MAX_ENTRIES = 20_000
"""Entries a file keeps at most: past that (texts of older library versions pile up), only those last used."""
_WORD = array.array("I").itemsize
_EMPTY = memoryview(b"").cast("I")


def _crc(key: Key) -> int:
    source, filename, mode = key
    return zlib.crc32(f"{mode}\0{filename}\0{source}".encode(errors="surrogatepass"))


def _index(data: bytes) -> tuple[memoryview, memoryview, memoryview, memoryview]:
    """The keys, offsets, lengths and entries of a file's content; all empty where it is not one this would write."""
    empty = (_EMPTY, _EMPTY, _EMPTY, memoryview(b""))
    if not data.startswith(MAGIC_NUMBER) or len(data) < len(MAGIC_NUMBER) + _WORD:
        return empty
    view = memoryview(data)[len(MAGIC_NUMBER):]
    count = int.from_bytes(view[:_WORD], sys.byteorder)
    table = (1 + 3 * count) * _WORD
    if len(view) < table:
        return empty
    numbers = view[_WORD:table].cast("I")
    crcs, offsets, lengths = numbers[:count], numbers[count:2 * count], numbers[2 * count:]
    entries = view[table:]
    if any(offsets[at] + lengths[at] > len(entries) for at in range(count)) or list(crcs) != sorted(crcs):
        return empty
    return crcs, offsets, lengths, entries


def cache_file(program: str) -> Path | None:
    """Where `program`'s generated bytecode is kept (None: no home to keep it in)."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:
            return None
    return Path(base) / "elicitgate" / f"generated-{program}.{sys.implementation.cache_tag}.marshal"


def install(program: str, path: Path | None = None) -> None:
    """From now on `dataclasses`, `typing` and `collections` compile generated text through the cache of `program`
    (read from `path`, default `cache_file(program)`). Once per process; `finish` ends it."""
    global _state
    if _state is not None:
        return
    path = cache_file(program) if path is None else path
    _state = _Cache(path, _read(path) if path is not None else b"")
    import dataclasses  # noqa: F401 # pyright: ignore[reportUnusedImport] - imported here to be shadowed

    for name, (builtin, mode) in SHADOWED.items():
        module = sys.modules.get(name)
        if module is None or builtin in vars(module):
            continue  # a module that defines the name itself is not the one this was written for
        setattr(module, builtin, _shadow(builtin, mode))
        _state.modules.append(module)


def finish() -> None:
    """The modules compile on their own again; the file is written again with what was compiled (not found there),
    if anything was. Nothing when `install` did not run."""
    global _state
    state, _state = _state, None
    if state is None:
        return
    for module in state.modules:
        with contextlib.suppress(AttributeError):
            delattr(module, SHADOWED[module.__name__][0])
    if state.compiled and state.path is not None:
        _write(state.path, state.write)


def _shadow(builtin: str, mode: str) -> Callable[..., Any]:
    real = getattr(builtins, builtin)
    if builtin == "compile":

        def compile_(source: Any, filename: Any, mode_: str, flags: int = 0, dont_inherit: bool = False,
                     optimize: int = -1, **more: Any) -> Any:
            state = _state
            if state is None or not isinstance(source, str) or not isinstance(filename, str) or flags or more \
                    or optimize != -1:
                return real(source, filename, mode_, flags, True, optimize, **more)
            return state.code(source, filename, mode_)

        return compile_

    def run(source: Any, globals_: dict[str, Any] | None = None, locals_: Any = None, /, **more: Any) -> Any:
        # Without globals the builtin would run in the caller's namespace: given here, as it would have found it.
        caller = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
        globals_ = caller.f_globals if globals_ is None else globals_
        if locals_ is None and globals_ is caller.f_globals:
            locals_ = caller.f_locals
        state = _state
        if state is not None and isinstance(source, str) and not more:
            source = state.code(source, "<string>", mode)
        return real(source, globals_, locals_, **more)

    return run


def kept_texts(path: Path) -> list[Key]:
    """The texts (with their file name and mode) a cache file holds code for, in its order."""
    _, offsets, lengths, entries = _index(_read(path))
    return [marshal.loads(entries[start:start + length])[:3] for start, length in zip(offsets, lengths, strict=True)]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _write(path: Path, content: Callable[[BinaryIO], None]) -> None:
    """Atomically (another process may be reading or writing it); where it cannot be written, not at all."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            content(out)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
