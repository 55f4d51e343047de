"""`FormSchemas`: each distinct form schema checked once, and shared by every elicitation that asks with it."""

from __future__ import annotations

import json

from elicitgate.elicitation import form_schemas
from elicitgate.elicitation.form_schemas import FormSchemas

ONE_FIELD = '{"type":"object","properties":{"ok":{"type":"boolean","title":"Yes?"}},"required":["ok"]}'


def test_the_same_schema_asked_again_is_the_first_ones_object() -> None:
    schemas = FormSchemas(max_properties=64)
    first, again = (schemas.check(json.loads(ONE_FIELD), max_bytes=65536) for _ in range(2))
    assert again is first and again.schema is first.schema
    assert (first.size, first.secrets, first.problems) == (len(ONE_FIELD), (), ())
    other = schemas.check(json.loads(ONE_FIELD.replace("Yes?", "Sure?")), max_bytes=65536)
    assert other.schema is not first.schema and len(schemas) == 2


def test_secrets_and_problems_are_found_once_and_kept() -> None:
    schemas = FormSchemas(max_properties=64)
    schema = {"type": "object", "properties": {"password": {"type": "string"}, "where": {"type": "object"}}}
    checked = schemas.check(schema, max_bytes=65536)
    assert checked.secrets == ("password",)
    assert [p.property for p in checked.problems] == ["where"]
    assert schemas.check(json.loads(json.dumps(schema)), max_bytes=65536) is checked


def test_a_schema_over_the_limit_is_measured_not_checked_nor_kept() -> None:
    schemas = FormSchemas(max_properties=64)
    checked = schemas.check(json.loads(ONE_FIELD), max_bytes=10)
    assert (checked.size, checked.problems, len(schemas)) == (len(ONE_FIELD), (), 0)
    wide = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(400)}}
    assert schemas.check(wide, max_bytes=65536).size > form_schemas.KEPT_SCHEMA_BYTES
    assert len(schemas) == 0  # checked (too many properties), but too large to keep


def test_past_the_limit_the_oldest_schema_is_forgotten() -> None:
    schemas = FormSchemas(max_properties=64)
    first = schemas.check({"type": "object", "title": "0"}, max_bytes=65536)
    for i in range(1, form_schemas.KEPT_SCHEMAS + 1):
        schemas.check({"type": "object", "title": str(i)}, max_bytes=65536)
    assert len(schemas) == form_schemas.KEPT_SCHEMAS
    assert schemas.check({"type": "object", "title": "0"}, max_bytes=65536) is not first
