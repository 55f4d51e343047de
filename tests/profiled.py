"""The functions a piece of code calls, by name, for the tests that pin what a hot path does (`sys.setprofile`)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def collector_held() -> Iterator[None]:
    """The cyclic garbage collector held off for the block. Enter it before `sys.setprofile` and leave it after: a
    collection landing in a profiled block runs finalizers (weakref callbacks, `__del__`) whose calls are not the code
    under test's, so a count taken on a busy run would differ from a quiet one's."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@contextmanager
def python_calls(*, c_prefix: str | None = None) -> Iterator[list[str]]:
    """The Python functions the block entered, in order (`sys.setprofile`'s `call`); with `c_prefix`, the C functions
    too, by name after that prefix. The context manager's own way out (`__exit__`, the generator) is left out."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)
        elif c_prefix is not None and event == "c_call":
            called.append(f"{c_prefix}{getattr(arg, '__name__', arg)}")

    with collector_held():
        sys.setprofile(profile)
        try:
            yield called
        finally:
            sys.setprofile(None)
            del called[len(called) - 1 - called[::-1].index("__exit__") :]


def calls_of(run: Callable[[], T], *, c_calls: bool = False) -> tuple[T, list[str]]:
    """What `run` returns, and the functions it called, by name, in order, `run` itself left out; with `c_calls`, the
    built-ins too (`sys.setprofile` itself left out)."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)
        elif c_calls and event == "c_call":
            called.append(getattr(arg, "__name__", "?"))

    with collector_held():
        sys.setprofile(profile)
        try:
            result = run()
        finally:
            sys.setprofile(None)
    return result, called[1:-1] if c_calls else called[1:]
