"""What a form-mode `requestedSchema` may be, and whether an answer fits it.

The request check is the spec's restricted subset (flat object, primitive properties, the enum
variants), phrased so each problem names the property and the rule. Answers are checked with
`jsonschema` (Draft 2020-12, the four formats enforced), plus "no keys the form did not ask for".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeGuard

from elicitgate.json_memo import JsonMemo
from elicitgate.json_shapes import JsonObject, is_array, is_mapping

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, FormatChecker

ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated"})
STRING_KEYS = ANNOTATIONS | {"type", "minLength", "maxLength", "format"}
STRING_FORMATS = ("email", "uri", "date", "date-time")
NUMBER_KEYS = ANNOTATIONS | {"type", "minimum", "maximum"}
BOOLEAN_KEYS = ANNOTATIONS | {"type"}
SINGLE_ENUM_KEYS = ANNOTATIONS | {"type", "enum", "enumNames"}
TITLED_SINGLE_KEYS = ANNOTATIONS | {"type", "oneOf"}
MULTI_KEYS = ANNOTATIONS | {"type", "items", "minItems", "maxItems", "uniqueItems"}
TOP_LEVEL_KEYS = frozenset(
    {"type", "properties", "required", "$schema", "title", "description", "additionalProperties"}
)


@dataclass(frozen=True)
class SchemaProblem:
    property: str | None
    rule: str

    def as_dict(self) -> JsonObject:
        return {"property": self.property, "rule": self.rule}

    def __str__(self) -> str:
        return f"{self.property}: {self.rule}" if self.property else self.rule


def check_requested_schema(schema: Any, *, max_properties: int) -> list[SchemaProblem]:
    """Every way `schema` departs from the form-mode subset; empty when it is valid."""
    if not is_mapping(schema):
        return [SchemaProblem(None, "requestedSchema must be an object")]
    problems: list[SchemaProblem] = []
    if schema.get("type") != "object":
        problems.append(SchemaProblem(None, 'requestedSchema.type must be "object"'))
    for key in schema:
        if key not in TOP_LEVEL_KEYS:
            problems.append(SchemaProblem(None, f"requestedSchema keyword {key!r} is not allowed in form mode"))
    if schema.get("additionalProperties") not in (None, False):
        problems.append(SchemaProblem(None, "additionalProperties may only be false"))
    properties = schema.get("properties")
    if not is_mapping(properties):
        problems.append(SchemaProblem(None, "requestedSchema.properties must be an object"))
        return problems
    if len(properties) > max_properties:
        problems.append(SchemaProblem(None, f"at most {max_properties} properties are allowed, got {len(properties)}"))
    required = schema.get("required", [])
    if not _is_str_list(required):
        problems.append(SchemaProblem(None, "required must be a list of property names"))
    else:
        for name in required:
            if name not in properties:
                problems.append(SchemaProblem(name, "listed in required but not defined in properties"))
    for name, prop in properties.items():
        problems += [SchemaProblem(name, rule) for rule in _property_rules(prop)]
    return problems


def _unknown(prop: Mapping[str, Any], allowed: frozenset[str], kind: str) -> list[str]:
    return [f"keyword {key!r} is not allowed on a {kind} field" for key in prop if key not in allowed]


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return is_array(value) and all(isinstance(v, str) for v in value)


def _const_titles(value: object) -> TypeGuard[list[Mapping[str, Any]]]:
    return (
        is_array(value)
        and bool(value)
        and all(is_mapping(v) and isinstance(v.get("const"), str) and isinstance(v.get("title"), str) for v in value)
    )


def _nonneg_int(prop: Mapping[str, Any], key: str) -> list[str]:
    value = prop.get(key)
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return [f"{key} must be a non-negative integer"]
    return []


def _property_rules(prop: Any) -> list[str]:
    if not is_mapping(prop):
        return ["must be an object describing a primitive field"]
    kind = prop.get("type")
    if kind == "string":
        if "enum" in prop:
            rules = _unknown(prop, SINGLE_ENUM_KEYS, "single-select enum")
            enum: list[str] | None = prop["enum"] if _is_str_list(prop["enum"]) and prop["enum"] else None
            if enum is None:  # what follows is only checked against a well-formed enum
                rules.append("enum must be a non-empty list of strings")
                return rules
            names = prop.get("enumNames")
            if names is not None and (not _is_str_list(names) or len(names) != len(enum)):
                rules.append("enumNames must be a list of strings as long as enum")
            if "default" in prop and prop["default"] not in enum:
                rules.append("default must be one of enum")
            return rules
        if "oneOf" in prop:
            rules = _unknown(prop, TITLED_SINGLE_KEYS, "titled single-select enum")
            if not _const_titles(prop["oneOf"]):
                rules.append("oneOf must be a non-empty list of {const: string, title: string}")
            elif "default" in prop and prop["default"] not in [o["const"] for o in prop["oneOf"]]:
                rules.append("default must be one of the oneOf consts")
            return rules
        rules = _unknown(prop, STRING_KEYS, "string")
        if "format" in prop and prop["format"] not in STRING_FORMATS:
            rules.append(f"format must be one of {', '.join(STRING_FORMATS)} (got {prop['format']!r})")
        rules += _nonneg_int(prop, "minLength") + _nonneg_int(prop, "maxLength")
        if "default" in prop and not isinstance(prop["default"], str):
            rules.append("default must be a string")
        return rules
    if kind in ("number", "integer"):
        rules = _unknown(prop, NUMBER_KEYS, kind)
        for key in ("minimum", "maximum", "default"):
            value = prop.get(key)
            if key in prop and (isinstance(value, bool) or not isinstance(value, int | float)):
                rules.append(f"{key} must be a number")
            elif isinstance(value, float) and not math.isfinite(value):
                rules.append(f"{key} must be a finite number (NaN and Infinity are not JSON numbers)")
        default = prop.get("default")
        if kind == "integer" and isinstance(default, float) and not default.is_integer():
            rules.append("default must be an integer")
        return rules
    if kind == "boolean":
        rules = _unknown(prop, BOOLEAN_KEYS, "boolean")
        if "default" in prop and not isinstance(prop["default"], bool):
            rules.append("default must be true or false")
        return rules
    if kind == "array":
        rules = _unknown(prop, MULTI_KEYS, "multi-select enum")
        items = prop.get("items")
        options: list[str] = []
        if is_mapping(items) and items.get("type") == "string" and _is_str_list(items.get("enum")):
            options = items["enum"]
            rules += [f"items keyword {k!r} is not allowed" for k in items if k not in ("type", "enum")]
        elif is_mapping(items) and _const_titles(items.get("anyOf")):
            options = [o["const"] for o in items["anyOf"]]
            rules += [f"items keyword {k!r} is not allowed" for k in items if k not in ("type", "anyOf")]
        else:
            rules.append(
                "arrays are only multi-select enums: items must be {type: string, enum: [...]} "
                "or {anyOf: [{const, title}]}"
            )
        rules += _nonneg_int(prop, "minItems") + _nonneg_int(prop, "maxItems")
        default = prop.get("default")
        if default is not None and (not _is_str_list(default) or any(d not in options for d in default)):
            rules.append("default must be a list of the allowed values")
        return rules
    if kind is None:
        return ["type is missing"]
    return [f"type {kind!r} is not allowed in form mode (string, number, integer, boolean, or array of enum)"]


@cache
def _formats() -> FormatChecker:
    # Imported with the first answer to check: neither start-up nor an idle gateway needs it.
    from jsonschema import FormatChecker

    return FormatChecker(formats=STRING_FORMATS)


def _strict_validator(strict: Mapping[str, Any]) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(strict, format_checker=_formats())


_VALIDATORS = JsonMemo(_strict_validator)
"""Validators by the schema they check: every answer to the same form is checked by the one built for its first
(building one is about half of what checking an answer costs)."""


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """The validator of `schema` closed to other fields (`additionalProperties: false`)."""
    strict = {**schema, "additionalProperties": False}
    strict.pop("$schema", None)
    return _VALIDATORS(strict)


def answer_problems(
    schema: Mapping[str, Any], content: Any, fits: Fits | None | EllipsisType = ...
) -> list[JsonObject]:
    """Validation errors of an accepted answer's `content` against an already-checked schema.

    Each problem names the field and the rule it breaks, never the value: jsonschema's own messages
    quote the value (`'hunter2' is too short`), and these texts travel to the page, the admin API, the
    client's re-ask, the upstream's error and the logs. `fits`: the schema's `plain_check` when the caller has it
    at hand (a form kept by `FormSchemas`), else looked up by the schema's JSON.
    """
    if not is_mapping(content):
        return [{"property": None, "message": "content must be an object"}]
    if fits is ...:
        fits = _FITS(schema)
    if fits is not None and fits(content):
        return []  # the answer fits: jsonschema below only says how one does not
    # NaN satisfies every `minimum` and `maximum` (each comparison is false) and JSON has no such number:
    # written on, it would reach the server as null.
    non_finite = {str(name) for name, value in content.items() if _non_finite(value)}
    validator = _validator(schema)
    problems: list[JsonObject] = []
    # jsonschema's deprecated second overload of iter_errors leaves `instance` unannotated.
    errors = validator.iter_errors(dict(content))  # pyright: ignore[reportUnknownMemberType]
    for error in sorted(errors, key=lambda e: [str(p) for p in e.path]):
        prop = str(error.path[0]) if error.path else None
        if error.validator == "additionalProperties":
            asked: Mapping[str, Any] = schema.get("properties") or {}
            extra = sorted(str(key) for key in content if key not in asked)
            message = f"unexpected field(s): {', '.join(extra)}"
        elif error.validator == "required":
            missing = [name for name in error.validator_value if name not in error.instance]
            prop = missing[0] if missing else prop
            message = "is required"
        else:
            message = _rule_text(str(error.validator), error.validator_value, item=len(error.path) > 1)
        problems.append({"property": prop, "message": message})
    if non_finite:
        problems = [p for p in problems if p["property"] not in non_finite] + [
            {"property": name, "message": NON_FINITE_TEXT} for name in sorted(non_finite)
        ]
    return problems


Fits = Callable[[Mapping[str, Any]], bool]
"""Whether an answer fits a form: true only when jsonschema would find nothing wrong with it."""


def _fits(schema: Any) -> Fits | None:
    """The form-mode subset checked in plain Python, for the answers that fit (nearly all of them): jsonschema's
    walk costs ten times as much. None for a schema with anything this does not know: jsonschema checks those."""
    if not is_mapping(schema) or any(key not in TOP_LEVEL_KEYS for key in schema):
        return None
    properties, required = schema.get("properties"), schema.get("required", [])
    if not is_mapping(properties) or not _is_str_list(required):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, prop in properties.items():
        check = _value_fits(prop) if is_mapping(prop) else None
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def fits(content: Mapping[str, Any]) -> bool:
        for name in needed:  # a loop, not `any` over a generator: three calls less for every answer
            if name not in content:
                return False
        for name, value in content.items():
            check = checks.get(name)
            if check is None or not check(value):
                return False
        return True

    return fits


def _value_fits(prop: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A check of one field's value, exactly as strict as jsonschema's (a bool is no number, 2.0 is an integer,
    NaN fits nothing here so that the caller words it); None for a field it does not know."""
    kind = prop.get("type")
    known = {key for key in prop if key not in ANNOTATIONS}
    if kind == "boolean" and known == {"type"}:
        return lambda value: isinstance(value, bool)
    if kind in ("number", "integer") and known <= {"type", "minimum", "maximum"}:
        low, high = prop.get("minimum"), prop.get("maximum")
        if not all(bound is None or _finite_number(bound) for bound in (low, high)):
            return None
        whole = kind == "integer"

        def number(value: Any) -> bool:
            if not _finite_number(value) or (whole and isinstance(value, float) and not value.is_integer()):
                return False
            return (low is None or value >= low) and (high is None or value <= high)

        return number
    if kind == "string":
        allowed = _string_choices(prop)
        if allowed is not None:
            return lambda value: isinstance(value, str) and value in allowed
        if not known <= {"type", "minLength", "maxLength", "format"} or not _counts(prop, "minLength", "maxLength"):
            return None
        shortest, longest, form = prop.get("minLength", 0), prop.get("maxLength"), prop.get("format")
        if form is not None and form not in STRING_FORMATS:
            return None
        checker = _formats() if form is not None else None

        def string(value: Any) -> bool:
            if not isinstance(value, str) or len(value) < shortest or (longest is not None and len(value) > longest):
                return False
            return checker is None or checker.conforms(value, str(form))  # pyright: ignore[reportUnknownMemberType]

        return string
    if kind == "array" and known <= {"type", "items", "minItems", "maxItems", "uniqueItems"}:
        items = prop.get("items")
        options = _string_choices(items) if is_mapping(items) else None
        if options is None or not _counts(prop, "minItems", "maxItems") or not isinstance(
            prop.get("uniqueItems", False), bool
        ):
            return None
        fewest, most, unique = prop.get("minItems", 0), prop.get("maxItems"), prop.get("uniqueItems") is True

        def choices(value: Any) -> bool:
            if not is_array(value) or len(value) < fewest or (most is not None and len(value) > most):
                return False
            if not all(isinstance(item, str) and item in options for item in value):
                return False
            return not unique or len(set(value)) == len(value)

        return choices
    return None


def _string_choices(prop: Mapping[str, Any]) -> frozenset[str] | None:
    """The values a single choice among strings allows (`enum`, or `oneOf` / `anyOf` of distinct `const`s), or
    None when `prop` is not one."""
    known = {key for key in prop if key not in ANNOTATIONS}
    if known == {"type", "enum"} or known == {"type", "enum", "enumNames"} or known == {"enum"}:
        options = prop["enum"]
        if prop.get("type", "string") == "string" and _is_str_list(options):
            return frozenset(options)
        return None
    for key in ("oneOf", "anyOf"):
        if known in ({"type", key}, {key}) and prop.get("type", "string") == "string" and _const_titles(prop[key]):
            consts = [option["const"] for option in prop[key]]
            # oneOf: exactly one must match, so a repeated const would make its value fit none.
            if len(set(consts)) == len(consts) and all(
                {k for k in option if k not in ANNOTATIONS} == {"const"} for option in prop[key]
            ):
                return frozenset(consts)
    return None


def _finite_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)  # math.isfinite fails on an int past a double


def _counts(prop: Mapping[str, Any], *keys: str) -> bool:
    """Each of `keys` that `prop` has is a count (a non-negative integer)."""
    return all(
        key not in prop or (isinstance(prop[key], int) and not isinstance(prop[key], bool) and prop[key] >= 0)
        for key in keys
    )


_FITS = JsonMemo(_fits)
"""The plain check of each form, built once (the answers to one form are checked again and again)."""


def plain_check(schema: Any) -> Fits | None:
    """Whether an answer fits `schema`, checked in plain Python (None: jsonschema checks its answers); one per
    distinct form (`_FITS`)."""
    return _FITS(schema)


NON_FINITE_TEXT = "must be a finite number (NaN and Infinity are not JSON numbers)"


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    return is_array(value) and any(isinstance(v, float) and not math.isfinite(v) for v in value)


_TYPE_WORDS = {"string": "text", "integer": "a whole number", "number": "a number", "boolean": "true or false",
               "array": "a list", "object": "an object"}


def _rule_text(rule: str, value: Any, *, item: bool) -> str:
    """The rule an answer broke, in words, from the schema's side only."""
    prefix = "each choice must" if item else "must"
    if rule == "type":
        kinds: list[Any] = value if is_array(value) else [value]
        return f"{prefix} be " + " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
    texts = {
        "minLength": f"{prefix} be at least {value} characters long",
        "maxLength": f"{prefix} be at most {value} characters long",
        "format": f"{prefix} be a valid {value}",
        "minimum": f"{prefix} be at least {value}",
        "maximum": f"{prefix} be at most {value}",
        "enum": f"{prefix} be one of the offered choices",
        "const": f"{prefix} be one of the offered choices",
        "oneOf": f"{prefix} be one of the offered choices",
        "anyOf": f"{prefix} be one of the offered choices",
        "minItems": f"{prefix} have at least {value} choice(s)",
        "maxItems": f"{prefix} have at most {value} choice(s)",
        "uniqueItems": f"{prefix} not repeat a choice",
    }
    return texts.get(rule, f"{prefix} satisfy the {rule!r} rule")
