"""Spotting form fields that ask for secrets, which the spec says must not travel in form mode."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from elicitgate.json_shapes import is_mapping

_SECRET_NAME = re.compile(
    r"(?<![a-z0-9])(pass(word|wd|phrase)?|pwd|secret|token|api[_ -]?key|apikey|access[_ -]?key|private[_ -]?key|"
    r"credentials?|card[_ -]?(number|no)|cc[_ -]?num|cvv|cvc|ssn|pin)(?![a-z0-9])"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def sensitive_fields(schema: Any) -> list[str]:
    """Names of properties that look like they ask for a secret (by name, title or format)."""
    properties = schema.get("properties") if is_mapping(schema) else None
    if not is_mapping(properties):
        return []
    found: list[str] = []
    for name, given in properties.items():
        prop: Mapping[str, Any] = given if is_mapping(given) else {}
        secret_format = prop.get("format") == "password" or prop.get("writeOnly") is True
        if secret_format or secret_name(name, prop.get("title", "")):
            found.append(str(name))
    return found


def secret_name(*names: Any) -> bool:
    """Whether a field or argument called this (name, title, ...) looks like it holds a secret."""
    text = _CAMEL.sub("_", " ".join(str(n) for n in names)).lower()
    return _SECRET_NAME.search(text) is not None
