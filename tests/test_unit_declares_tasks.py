"""Which client capabilities declare the 2026-07-28 tasks extension."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from elicitgate.capabilities import TASKS_EXTENSION, declares_tasks, knows_tasks


@pytest.mark.parametrize(("capabilities", "declared"), [
    ({}, False),
    ({"extensions": None}, False),
    ({"extensions": []}, False),
    ({"extensions": [TASKS_EXTENSION]}, False),
    ({"extensions": {}}, False),
    ({"extensions": {"io.example/other": {}}}, False),
    ({"extensions": {TASKS_EXTENSION: {}}}, True),
    ({"extensions": MappingProxyType({TASKS_EXTENSION: {}})}, True),
])
def test_only_a_mapping_naming_the_extension_declares_it(capabilities: dict[str, Any], declared: bool):
    assert declares_tasks(capabilities) is declared


def test_a_2025_tasks_capability_or_the_extension_knows_tasks():
    assert knows_tasks({"tasks": {}})
    assert knows_tasks({"extensions": {TASKS_EXTENSION: {}}})
    assert not knows_tasks({"extensions": None})
