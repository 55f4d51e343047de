"""A form-mode `requestedSchema` as an HTML form, and submitted form data back as typed content.

Every variant of the form-mode subset has a native control: text inputs typed by `format` (email, url,
date, datetime-local), number inputs with bounds and step, a checkbox for booleans, a select for
single-select enums (labels from `enumNames` or `oneOf` titles), a checkbox group for multi-select
enums. Constraints are HTML attributes too, so a browser checks them before the gateway does; the
gateway's own check (`answer_problems`, the broker's) is the one that counts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from elicitgate.elicitation.sensitive import DEFAULT_WORDS, SensitiveWords, sensitive_fields
from elicitgate.json_shapes import JsonObject, is_array

INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
FIELD_PREFIX = "f."
"""Every schema property's control is named `f.<property>`, so a property called `csrf` or `action` never
meets the page's own fields (which have no dot)."""
PLAIN_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def e(value: Any) -> str:
    return escape(str(value), quote=True)


@dataclass
class Field:
    name: str
    kind: str
    """text, email, url, date, datetime, number, integer, boolean, select, multi"""
    label: str
    description: str = ""
    required: bool = False
    options: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    default: Any = None
    sensitive: bool = False
    attrs: JsonObject = field(default_factory=JsonObject)
    min_items: int | None = None
    max_items: int | None = None
    slug: str = ""
    """What element ids are made of (`f-<slug>`, `err-<slug>`): the name when it is a plain word, else
    the position, so that no property name can break an id or an `aria-describedby` list."""

    @property
    def input_name(self) -> str:
        return FIELD_PREFIX + self.name


def fields_of(schema: Mapping[str, Any], words: SensitiveWords = DEFAULT_WORDS) -> list[Field]:
    """The fields of a `requestedSchema` that passed `check_requested_schema`; those that look secret
    (by `words`, `elicitation.sensitive_words`) are masked."""
    required: set[str] = set(schema.get("required") or [])
    secret = set(sensitive_fields(schema, words))
    properties: Mapping[str, Mapping[str, Any]] = schema.get("properties") or {}
    out: list[Field] = []
    for position, (name, prop) in enumerate(properties.items()):
        kind = prop.get("type")
        f = Field(
            name=name,
            slug=name if PLAIN_ID.fullmatch(name) else str(position),
            kind="text",
            label=str(prop.get("title") or name),
            description=str(prop.get("description") or ""),
            required=name in required,
            default=prop.get("default"),
            sensitive=name in secret,
        )
        if kind == "string" and "enum" in prop:
            values: list[Any] = prop["enum"]
            labels: list[Any] = prop.get("enumNames") or values
            f.kind, f.options = "select", [(str(v), str(label)) for v, label in zip(values, labels, strict=False)]
        elif kind == "string" and "oneOf" in prop:
            variants: list[Mapping[str, Any]] = prop["oneOf"]
            f.kind, f.options = "select", [(str(o["const"]), str(o["title"])) for o in variants]
        elif kind == "string":
            fmt: Any = prop.get("format")
            f.kind = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime"}.get(fmt, "text")
            for key, attr in (("minLength", "minlength"), ("maxLength", "maxlength")):
                if key in prop:
                    f.attrs[attr] = prop[key]
        elif kind in ("number", "integer"):
            f.kind = kind
            for key, attr in (("minimum", "min"), ("maximum", "max")):
                if key in prop:
                    f.attrs[attr] = prop[key]
            f.attrs["step"] = "1" if kind == "integer" else "any"
        elif kind == "boolean":
            f.kind = "boolean"
        elif kind == "array":
            items: Mapping[str, Any] = prop.get("items") or {}
            if "enum" in items:
                choices: list[Any] = items["enum"]
                f.options = [(str(v), str(v)) for v in choices]
            else:
                titled: list[Mapping[str, Any]] = items.get("anyOf") or []
                f.options = [(str(o["const"]), str(o["title"])) for o in titled]
            f.kind, f.min_items, f.max_items = "multi", prop.get("minItems"), prop.get("maxItems")
        out.append(f)
    return out


# -- values -------------------------------------------------------------------------------------------


def initial_values(fields: list[Field]) -> JsonObject:
    """Raw form values from the schema's defaults (what a fresh form shows)."""
    values: JsonObject = {}
    for f in fields:
        if f.default is None:
            continue
        values[f.name] = _raw(f, f.default)
    return values


def _raw(f: Field, value: Any) -> Any:
    if f.kind == "multi":
        return [str(v) for v in value] if is_array(value) else []
    if f.kind == "boolean":
        return "on" if value is True else ""
    if f.kind == "datetime" and isinstance(value, str):
        return value[:16]
    if isinstance(value, float) and value.is_integer() and f.kind == "integer":
        return str(int(value))
    return str(value)


def raw_from_content(fields: list[Field], content: Mapping[str, Any]) -> JsonObject:
    return {f.name: _raw(f, content[f.name]) for f in fields if f.name in content}


def raw_from_form(fields: list[Field], form: Any) -> JsonObject:
    """The submitted values as strings (lists for multi-selects), secrets included."""
    values: JsonObject = {}
    for f in fields:
        if f.kind == "multi":
            values[f.name] = [str(v) for v in form.getlist(f.input_name)]
        else:
            values[f.name] = str(form.get(f.input_name, ""))
    return values


def parse(fields: list[Field], values: Mapping[str, Any]) -> tuple[JsonObject, list[JsonObject]]:
    """Typed content from raw values; problems for what cannot even be typed (the schema check follows)."""
    content: JsonObject = {}
    problems: list[JsonObject] = []
    for f in fields:
        raw = values.get(f.name)
        if f.kind == "multi":
            chosen = list(raw or [])
            if chosen or f.required:
                content[f.name] = chosen
            continue
        if f.kind == "boolean":
            content[f.name] = raw == "on"
            continue
        text = str(raw or "").strip() if f.kind not in ("text",) else str(raw or "")
        if text == "":
            continue  # left empty: omitted (the schema check says whether it was required)
        if f.kind in ("number", "integer"):
            try:
                number = float(text)
                if not math.isfinite(number):
                    raise ValueError
            except ValueError:
                problems.append({"property": f.name, "message": "must be a number"})
                continue
            if f.kind == "integer":
                if not number.is_integer():
                    problems.append({"property": f.name, "message": "must be a whole number"})
                    continue
                content[f.name] = int(number)
            else:
                content[f.name] = int(number) if number.is_integer() and "." not in text else number
        elif f.kind == "datetime":
            content[f.name] = _rfc3339(text)
        else:
            content[f.name] = text
    return content, problems


def _rfc3339(text: str) -> str:
    """`datetime-local` gives `YYYY-MM-DDTHH:MM[:SS]` with no zone: the page says it is UTC."""
    if len(text) == 16:
        text += ":00"
    if len(text) == 19 and text[10] == "T":
        text += "Z"
    return text


def display(f: Field, value: Any) -> str:
    """A value as the review step shows it."""
    if f.sensitive and value not in (None, ""):
        return "•" * 8
    if f.kind == "boolean":
        return "yes" if value else "no"
    if f.kind in ("select", "multi"):
        labels = dict(f.options)
        chosen: list[Any] = value if is_array(value) else [value]
        return ", ".join(labels.get(str(v), str(v)) for v in chosen) or "(none)"
    if f.kind == "datetime" and isinstance(value, str):
        return value.replace("T", " ").replace("Z", " UTC")
    return "(empty)" if value in (None, "") else str(value)


# -- HTML ---------------------------------------------------------------------------------------------


def render_fields(fields: list[Field], values: Mapping[str, Any], errors: list[JsonObject]) -> str:
    by_field: dict[str, list[str]] = {}
    general: list[str] = []
    names = {f.name for f in fields}
    for problem in errors:
        prop = problem.get("property")
        (by_field.setdefault(prop, []) if prop in names else general).append(str(problem.get("message", "")))
    parts: list[str] = []
    if general:
        parts.append(
            '<div class="eg-form-errors" role="alert">'
            + "".join(f"<p>{e(message)}</p>" for message in general)
            + "</div>"
        )
    for f in fields:
        parts.append(_render_field(f, values.get(f.name), by_field.get(f.name, [])))
    return "\n".join(parts)


def _attrs(attrs: Mapping[str, Any]) -> str:
    return "".join(f' {k}="{e(v)}"' if v is not True else f" {k}" for k, v in attrs.items() if v is not None)


def _render_field(f: Field, value: Any, errors: list[str]) -> str:
    fid = f"f-{f.slug}"
    err_id = f"err-{f.slug}"
    invalid = bool(errors)
    described = [err_id]
    hint = ""
    if f.description:
        hint = f'<p class="eg-hint" id="hint-{e(f.slug)}">{e(f.description)}</p>'
        described.insert(0, f"hint-{f.slug}")
    common: JsonObject = {
        "id": fid,
        "name": f.input_name,
        "aria-describedby": " ".join(described),
        "aria-invalid": "true" if invalid else None,
    }
    required_mark = ' <span class="eg-req" aria-hidden="true">*</span>' if f.required else ""
    label = f'<label for="{e(fid)}">{e(f.label)}{required_mark}</label>'
    error_html = (
        f'<p class="eg-error" id="{e(err_id)}" data-for="{e(f.name)}" role="status">'
        + e("; ".join(errors))
        + "</p>"
    )
    if f.kind == "boolean":
        checked = value == "on"
        control = f'<input type="checkbox"{_attrs({**common, "value": "on", "checked": checked or None})}>'
        body = f'<div class="eg-check">{control} {label}</div>'
        return f'<div class="eg-field" data-kind="boolean" data-name="{e(f.name)}">{body}{hint}{error_html}</div>'
    if f.kind == "select":
        opts: list[str] = []
        if not f.required or value in (None, ""):
            opts.append('<option value="">— choose —</option>')
        for v, text in f.options:
            selected = " selected" if value == v else ""
            opts.append(f'<option value="{e(v)}"{selected}>{e(text)}</option>')
        control = f'<select{_attrs({**common, "required": f.required or None})}>{"".join(opts)}</select>'
        return (
            f'<div class="eg-field" data-kind="select" data-name="{e(f.name)}">{label}{hint}{control}{error_html}</div>'
        )
    if f.kind == "multi":
        chosen = set(value or [])
        boxes: list[str] = []
        for i, (v, text) in enumerate(f.options):
            box_id = f"{fid}-{i}"
            checked = " checked" if v in chosen else ""
            boxes.append(
                f'<label class="eg-option" for="{e(box_id)}"><input type="checkbox" id="{e(box_id)}" '
                f'name="{e(f.input_name)}" value="{e(v)}"{checked}> {e(text)}</label>'
            )
        limits: list[str] = []
        if f.min_items:
            limits.append(f"at least {f.min_items}")
        if f.max_items is not None:
            limits.append(f"at most {f.max_items}")
        limit_text = f' <span class="eg-limits">(choose {" and ".join(limits)})</span>' if limits else ""
        data = _attrs({"data-min-items": f.min_items, "data-max-items": f.max_items})
        legend = f"<legend>{e(f.label)}{required_mark}{limit_text}</legend>"
        aria_invalid = ' aria-invalid="true"' if invalid else ""
        return (
            f'<fieldset class="eg-field" data-kind="multi" data-name="{e(f.name)}"{data} '
            f'aria-describedby="{e(" ".join(described))}"{aria_invalid}>'
            f'{legend}{hint}<div class="eg-options">{"".join(boxes)}</div>{error_html}</fieldset>'
        )
    if f.kind in ("number", "integer"):
        input_type = "number"
    elif f.kind == "datetime":
        input_type = "datetime-local"
    elif f.kind == "text" and f.sensitive:
        input_type = "password"
    else:
        input_type = {"email": "email", "url": "url", "date": "date"}.get(f.kind, "text")
    shown = "" if (f.sensitive or value is None) else value
    extra = {"required": f.required or None, **f.attrs}
    if input_type == "password":
        extra["autocomplete"] = "off"
    control = f'<input type="{input_type}"{_attrs({**common, **extra, "value": shown})}>'
    suffix = ' <span class="eg-limits">(UTC)</span>' if f.kind == "datetime" else ""
    return (
        f'<div class="eg-field" data-kind="{e(f.kind)}" data-name="{e(f.name)}">{label}{suffix}{hint}'
        f"{control}{error_html}</div>"
    )
