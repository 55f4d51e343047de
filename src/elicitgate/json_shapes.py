"""Narrowing parsed JSON (typed `Any`) to the shapes the code reads, without casts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

JsonObject = dict[str, Any]
"""A parsed JSON object: its keys are strings, its values any JSON. (`contracts` and `capabilities`, below
this module, spell it `dict[str, Any]`.)"""


def is_object(value: object) -> TypeGuard[JsonObject]:
    """Whether `value` is a parsed JSON object (a dict; JSON only has string keys)."""
    return isinstance(value, dict)


def is_array(value: object) -> TypeGuard[list[Any]]:
    """Whether `value` is a parsed JSON array."""
    return isinstance(value, list)


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether `value` is a JSON object, or any mapping standing for one. A dict and None are looked at first: the
    ABC's check runs a Python frame (`ABCMeta.__instancecheck__`) for every value, and the hot path asks it of dicts
    and of fields that are absent (`params.get("_meta")`)."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))
