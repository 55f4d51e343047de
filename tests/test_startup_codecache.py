"""Start-up, issue 34: the code libraries generate as they import (dataclasses' methods, typing's forward references,
namedtuples' `__new__`) compiled once and kept for the next start (`elicitgate.codecache`). In this process for what
it builds, and real `elicitgate serve` processes on stdio (a client that closes stdin at once: ready, then out)."""

from __future__ import annotations

import collections
import dataclasses
import marshal
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from elicitgate import codecache
from tests.conftest import PY, write_config


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "cache" / "generated-test.marshal"
    yield path
    codecache.finish()  # whatever a test left installed


def _compiled() -> int:
    state = codecache._state  # pyright: ignore[reportPrivateUsage]
    assert state is not None
    return state.compiled


def _make(suffix: str, future: str = "from __future__ import annotations\n") -> type:
    """A dataclass with forward references in its fields (`future`), made the way a module makes one."""
    namespace: dict[str, object] = {}
    text = (f"{future}import dataclasses, typing\n@dataclasses.dataclass(frozen=True)\nclass Point{suffix}:\n"
            "    x: int\n    y: typing.Optional[int] = None\n")
    # dont_inherit: this module's own `from __future__ import annotations` is not the class's.
    exec(compile(text, "<test>", "exec", dont_inherit=True), namespace)  # noqa: S102 - the test's own class
    return typing.cast("type", namespace[f"Point{suffix}"])


def _hints(made: type) -> dict[str, object]:
    return typing.get_type_hints(made, globalns={"typing": typing})


def test_what_a_start_compiled_is_kept_and_the_next_start_compiles_none_of_it(cache: Path) -> None:
    codecache.install("test", cache)
    made = _make("A")
    hints = _hints(made)
    pair = collections.namedtuple("pair", "left right")
    assert _compiled() > 0
    codecache.finish()
    assert cache.exists() and (cache.stat().st_mode & 0o777) == 0o600

    codecache.install("test", cache)
    again = _make("A")
    assert _hints(again) == hints == {"x": int, "y": typing.Optional[int]}
    pair_again = collections.namedtuple("pair", "left right")
    assert _compiled() == 0
    # What it builds from kept code is what it builds from text: the methods work and say the same.
    assert again(1, 2) == again(1, 2) and again(1) != again(2)
    assert repr(again(1, 2)) == "PointA(x=1, y=2)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        again(1).x = 3  # type: ignore[misc]
    assert pair_again(1, 2) == pair(1, 2) and pair_again(left=1, right=2).right == 2
    codecache.finish()


def test_generated_code_is_compiled_without_the_cache_modules_future_flags(cache: Path) -> None:
    # codecache has `from __future__ import annotations`; the code dataclasses generates must not inherit it (the
    # `__init__` of a class with real annotations has the field types, not their names).
    codecache.install("test", cache)
    made = _make("B", future="")
    assert made.__init__.__annotations__["x"] is int  # type: ignore[misc]
    codecache.finish()
    codecache.install("test", cache)
    assert _make("B", future="").__init__.__annotations__["x"] is int  # type: ignore[misc]
    assert _compiled() == 0


def test_finish_puts_the_modules_own_builtins_back(cache: Path) -> None:
    codecache.install("test", cache)
    assert "exec" in vars(dataclasses) and "compile" in vars(typing) and "eval" in vars(collections)
    codecache.finish()
    assert "exec" not in vars(dataclasses) and "compile" not in vars(typing) and "eval" not in vars(collections)
    codecache.finish()  # a second time: nothing


@pytest.mark.parametrize("content", [b"", b"not marshal", b"\x00\x01\x02\x03garbage", "foreign",
                                     "entries of another shape"])
def test_a_file_of_another_version_or_shape_is_ignored_and_written_again(cache: Path, content: bytes | str) -> None:
    cache.parent.mkdir(parents=True)
    if content == "foreign":
        content = codecache.MAGIC_NUMBER + marshal.dumps({("x", "<string>", "eval"): "not code", "key": 1})
    elif content == "entries of another shape":
        entry = marshal.dumps(("x", "<string>", "eval", "not code"))
        numbers = (1, codecache._crc(("x", "<string>", "eval")), 0, len(entry))  # pyright: ignore[reportPrivateUsage]
        content = codecache.MAGIC_NUMBER + b"".join(n.to_bytes(4, sys.byteorder) for n in numbers) + entry
    assert isinstance(content, bytes)
    cache.write_bytes(content)
    codecache.install("test", cache)
    _make("C")
    assert typing.ForwardRef("x").__forward_code__.co_names == ("x",)  # the entry of another shape's text
    assert _compiled() > 0
    codecache.finish()
    assert cache.read_bytes().startswith(codecache.MAGIC_NUMBER) and cache.read_bytes() != content


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory would be")
    codecache.install("test", blocked / "elicitgate" / "generated.marshal")
    _make("D")
    codecache.finish()
    assert not list(tmp_path.glob("**/*.tmp"))


def test_the_cache_lives_under_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert codecache.cache_file("serve") == (
        tmp_path / "elicitgate" / f"generated-serve.{sys.implementation.cache_tag}.marshal"
    )


def _serve(config: Path, cache_home: Path) -> str:
    done = subprocess.run(
        [PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env={**os.environ, "XDG_CACHE_HOME": str(cache_home)},
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_serve_keeps_the_code_it_generated_by_ready_and_a_second_start_compiles_none(tmp_path: Path) -> None:
    config = write_config(tmp_path, {}, audit={"enabled": False})
    assert "ready on stdio" in _serve(config, tmp_path / "cache")
    kept = tmp_path / "cache" / "elicitgate" / f"generated-serve.{sys.implementation.cache_tag}.marshal"
    assert kept.exists()
    texts = codecache.kept_texts(kept)
    assert any(source.startswith("def __create_fn__") for source, _, mode in texts if mode == "exec")
    assert any(mode == "eval" for _, _, mode in texts)
    written = kept.stat()
    # The second start found every text it generated: nothing compiled, so the file is not written again.
    assert "ready on stdio" in _serve(config, tmp_path / "cache")
    again = kept.stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


def test_what_a_start_did_not_use_stays_kept_for_the_next(cache: Path) -> None:
    # A file that kept only what its last writer used would be written again by every start whose imports differ
    # a little from the last one's, each write costing its memory: the file keeps what it had.
    codecache.install("test", cache)
    _make("E")
    codecache.finish()
    first = set(codecache.kept_texts(cache))
    codecache.install("test", cache)
    collections.namedtuple("other", "a b c d")
    assert _compiled() == 1
    codecache.finish()
    kept = set(codecache.kept_texts(cache))
    assert first < kept and len(kept - first) == 1
