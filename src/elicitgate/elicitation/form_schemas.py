"""Form-mode schemas checked once each: a server asks with the same `requestedSchema` again and again.

Each distinct schema (by its JSON text) is checked once, and every elicitation that asks with it holds
one shared copy instead of its own: a pending elicitation then keeps no schema of its own (about 1 KB
for a one-field form), and a new one skips the checks. Shared copies are never changed in place:
whatever needs a variant (the answer check's `additionalProperties: false`) makes its own. A valid shared copy's
answer check (`plain_check`) is kept with it, found by the copy itself: its answers do not write the schema's JSON
again to look it up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from elicitgate.elicitation.schema import Fits, SchemaProblem, check_requested_schema, plain_check
from elicitgate.elicitation.sensitive import DEFAULT_WORDS, SensitiveWords, sensitive_fields
from elicitgate.wire import codec

KEPT_SCHEMAS = 256
"""Distinct schemas kept; past that the oldest is forgotten (checked again if asked again)."""

KEPT_SCHEMA_BYTES = 8192
"""A larger schema is checked every time and not kept (at most 2 MB of kept schemas, as JSON)."""


@dataclass(frozen=True, slots=True)
class CheckedSchema:
    schema: Any
    """The schema every elicitation that asked with the same JSON shares."""
    size: int
    """Bytes of its compact JSON (`elicitation.max_schema_bytes`)."""
    secrets: tuple[str, ...]
    """Fields that look like they ask for a secret (`sensitive_fields`)."""
    problems: tuple[SchemaProblem, ...]
    """Why it is not a valid form-mode schema; empty when it is."""


class FormSchemas:
    """The schemas checked so far, by their JSON text."""

    def __init__(self, *, max_properties: int, secret_words: SensitiveWords = DEFAULT_WORDS) -> None:
        self._max_properties = max_properties
        self._secret_words = secret_words
        self._known: dict[bytes, CheckedSchema] = {}
        self.plain_checks: dict[int, tuple[Any, Fits | None]] = {}
        """The `plain_check` of each kept valid schema, by the `id` of the copy its elicitations share (kept with it,
        so that no other object has that id while it is here); the caller checks it holds that very copy."""

    def check(self, schema: Any, *, max_bytes: int) -> CheckedSchema:
        """`schema` checked; a schema larger than `max_bytes` comes back with its size only (no other check)."""
        try:
            text = orjson.dumps(schema)  # looked up as it is: a copy of its own size only for a key kept (below)
        except TypeError:  # what orjson cannot write (an integer beyond 64 bits): `codec.dumps` writes it, or refuses
            text = codec.dumps(schema)
        known = self._known.get(text)
        if known is not None:
            return known
        if len(text) > max_bytes:
            return CheckedSchema(schema, len(text), (), ())
        checked = CheckedSchema(
            schema,
            len(text),
            tuple(sensitive_fields(schema, self._secret_words)),
            tuple(check_requested_schema(schema, max_properties=self._max_properties)),
        )
        if len(text) <= KEPT_SCHEMA_BYTES:
            if len(self._known) >= KEPT_SCHEMAS:
                self._forget(self._known.pop(next(iter(self._known))))
            self._known[bytes(memoryview(text))] = checked  # orjson's bytes keep the block written in (`codec.dumps`)
            if not checked.problems:
                self.plain_checks[id(schema)] = (schema, plain_check(schema))
        return checked

    def _forget(self, checked: CheckedSchema) -> None:
        kept = self.plain_checks.get(id(checked.schema))
        if kept is not None and kept[0] is checked.schema:
            del self.plain_checks[id(checked.schema)]

    def __len__(self) -> int:
        return len(self._known)
