"""What is made from JSON-shaped input, kept by that input's JSON: made once per distinct value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

V = TypeVar("V")


class JsonMemo(Generic[V]):
    """`make(value)`, kept by the canonical JSON of `value`: at most `size` kept, the oldest dropped first.

    By default an object's members in another order are the same value (a validator does not care); with
    `ordered` they are another, for what shows that order (a form's fields as the server wrote them). `make` is
    given its own copy, in the caller's order, so a caller changing its value later changes nothing kept. A value
    orjson cannot write (an integer past 64 bits), or whose JSON is longer than `max_key` bytes, is made each time
    and not kept: the memo must not hold what clients make up."""

    def __init__(
        self, make: Callable[[Any], V], *, size: int = 256, max_key: int | None = None, ordered: bool = False
    ) -> None:
        self._make = make
        self._options = 0 if ordered else orjson.OPT_SORT_KEYS
        self._size = size
        self._max_key = max_key
        self._kept: dict[bytes, V] = {}

    def __call__(self, value: Any) -> V:
        try:
            key = orjson.dumps(value, option=self._options)
        except (TypeError, orjson.JSONEncodeError):
            return self._make(value)
        if self._max_key is not None and len(key) > self._max_key:
            return self._make(value)
        if key in self._kept:
            return self._kept[key]
        made = self._make(orjson.loads(orjson.dumps(value) if self._options else key))
        if len(self._kept) >= self._size:
            self._kept.pop(next(iter(self._kept)))
        self._kept[key] = made
        return made
