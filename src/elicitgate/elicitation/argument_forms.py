"""Forms the gateway builds itself: missing tool or prompt arguments as form fields, and the arguments
of a call shown for confirmation with their secrets masked.

Pure functions over what upstreams list (`inputSchema`, `PromptArgument`); `router.asks` decides when
to use them. Every form leaves here checked against the form-mode subset, or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from elicitgate.elicitation.schema import (
    BOOLEAN_KEYS,
    MULTI_KEYS,
    NUMBER_KEYS,
    SINGLE_ENUM_KEYS,
    STRING_FORMATS,
    STRING_KEYS,
    TITLED_SINGLE_KEYS,
    check_requested_schema,
)
from elicitgate.elicitation.sensitive import DEFAULT_WORDS, SensitiveWords, secret_name, sensitive_fields
from elicitgate.json_shapes import JsonObject, is_array, is_mapping

MASK = "•••"
MAX_SHOWN_VALUE = 200
"""Characters of one argument's value shown in a confirmation before it is cut."""


def missing_arguments_form(
    input_schema: Any, missing: Sequence[str], *, max_properties: int
) -> JsonObject | None:
    """A `requestedSchema` asking exactly for `missing` (all required), each field copied from the tool's
    `inputSchema`; None when one of them cannot be a form field."""
    schema: Mapping[str, Any] = input_schema if is_mapping(input_schema) else {}
    properties = schema.get("properties")
    if not is_mapping(properties):
        return None
    defs: JsonObject = {}
    for key in ("definitions", "$defs"):
        if is_mapping(found := schema.get(key)):
            defs.update(found)
    fields: JsonObject = {}
    for name in missing:
        field = form_field(properties.get(name), defs)
        if field is None:
            return None
        fields[name] = field
    return _checked({"type": "object", "properties": fields, "required": list(missing)}, max_properties)


def prompt_arguments_form(
    arguments: Sequence[Mapping[str, Any]],
    missing: Sequence[str],
    choices: Mapping[str, list[str]],
    *,
    max_properties: int,
) -> JsonObject | None:
    """A `requestedSchema` of string fields for a prompt's missing arguments; `choices` (from the server's
    completions) turn a field into a single-select enum."""
    by_name = {a.get("name"): a for a in arguments}
    fields: JsonObject = {}
    for name in missing:
        argument = by_name.get(name) or {}
        field: JsonObject = {"type": "string"}
        for key in ("title", "description"):
            if isinstance(argument.get(key), str):
                field[key] = argument[key]
        if choices.get(name):
            field["enum"] = list(dict.fromkeys(choices[name]))
        fields[name] = field
    return _checked({"type": "object", "properties": fields, "required": list(missing)}, max_properties)


def form_field(prop: Any, defs: Mapping[str, Any]) -> JsonObject | None:
    """One `inputSchema` property as a form-mode field (its constraints kept where form mode has them),
    or None when a person cannot type it into a form (objects, free arrays, unions, numeric enums)."""
    prop = _resolved(prop, defs)
    if prop is None:
        return None
    kind = prop.get("type")
    if "enum" in prop:
        if kind not in (None, "string") or not prop["enum"] or not all(isinstance(v, str) for v in prop["enum"]):
            return None
        return _pick({**prop, "type": "string"}, SINGLE_ENUM_KEYS)
    if kind == "string" and "oneOf" in prop:
        return _pick(prop, TITLED_SINGLE_KEYS)
    if kind == "string":
        field = _pick(prop, STRING_KEYS)
        if field.get("format") not in (None, *STRING_FORMATS):
            del field["format"]  # a format forms cannot check (uuid, hostname): the upstream still does
        return field
    if kind in ("number", "integer"):
        return _pick(prop, NUMBER_KEYS)
    if kind == "boolean":
        return _pick(prop, BOOLEAN_KEYS)
    if kind == "array":
        items = _resolved(prop.get("items"), defs)
        if items is None:
            return None
        return _pick({**prop, "items": items}, MULTI_KEYS)  # only enum arrays pass the check
    return None


def _resolved(prop: Any, defs: Mapping[str, Any]) -> JsonObject | None:
    """Follow one local `$ref`, and read `Optional[X]` (`anyOf: [X, null]`, `type: [x, "null"]`) as X."""
    if not is_mapping(prop):
        return None
    if isinstance(ref := prop.get("$ref"), str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if not is_mapping(target):
            return None
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    variants = prop.get("anyOf")
    if is_array(variants):
        real = [v for v in variants if not (is_mapping(v) and v.get("type") == "null")]
        if len(real) != 1:
            return None
        inner = _resolved(real[0], defs)
        if inner is None:
            return None
        prop = {**inner, **{k: v for k, v in prop.items() if k != "anyOf"}}
    kind = prop.get("type")
    if is_array(kind):
        real_kinds = [k for k in kind if k != "null"]
        if len(real_kinds) != 1:
            return None
        prop = {**prop, "type": real_kinds[0]}
    return dict(prop)


def _pick(prop: Mapping[str, Any], allowed: frozenset[str]) -> JsonObject:
    keep = {"examples", "$comment", "deprecated"}  # annotations a form has no use for
    return {k: v for k, v in prop.items() if k in allowed and k not in keep}


def _checked(schema: JsonObject, max_properties: int) -> JsonObject | None:
    return None if check_requested_schema(schema, max_properties=max_properties) else schema


def confirmation_form() -> JsonObject:
    """A confirmation asks nothing: accept goes on, decline or cancel stops the call."""
    return {"type": "object", "properties": {}}


def shown_arguments(arguments: Mapping[str, Any], input_schema: Any, words: SensitiveWords = DEFAULT_WORDS) -> str:
    """The call's arguments for a person to read: secrets masked (by the schema's secret fields and by
    name, at any depth), long values cut."""
    secret = set(sensitive_fields(input_schema, words))
    parts: list[str] = []
    for name, value in arguments.items():
        shown = MASK if name in secret or secret_name(name, words=words) else _masked(value, words)
        text = json.dumps(shown, ensure_ascii=False)
        if len(text) > MAX_SHOWN_VALUE:
            text = text[: MAX_SHOWN_VALUE - 1] + "…"
        parts.append(f"{name}={text}")
    return ", ".join(parts) if parts else "(no arguments)"


def _masked(value: Any, words: SensitiveWords) -> Any:
    if is_mapping(value):
        return {k: MASK if secret_name(k, words=words) else _masked(v, words) for k, v in value.items()}
    if is_array(value):
        return [_masked(v, words) for v in value]
    return value
