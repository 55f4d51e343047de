"""Unit tests: the form-mode schema subset, answer validation, and spotting secrets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elicitgate.elicitation.schema import answer_problems, check_requested_schema
from elicitgate.elicitation.sensitive import DEFAULT_SENSITIVE_WORDS, sensitive_fields, sensitive_words


def form(**properties: object) -> dict:
    return {"type": "object", "properties": properties}


def problems(schema: object, max_properties: int = 64) -> list[tuple[str | None, str]]:
    return [(p.property, p.rule) for p in check_requested_schema(schema, max_properties=max_properties)]


# -- every form-mode variant is accepted -------------------------------------------------------

VALID_PROPERTIES = {
    "plain_string": {"type": "string"},
    "string_lengths": {"type": "string", "title": "Name", "description": "d", "minLength": 2, "maxLength": 5},
    "email": {"type": "string", "format": "email"},
    "uri": {"type": "string", "format": "uri"},
    "date": {"type": "string", "format": "date"},
    "date_time": {"type": "string", "format": "date-time"},
    "string_default": {"type": "string", "default": "hello"},
    "number": {"type": "number", "minimum": 0.5, "maximum": 10},
    "integer": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
    "boolean": {"type": "boolean", "default": True},
    "untitled_enum": {"type": "string", "enum": ["red", "green"], "default": "red"},
    "legacy_enum_names": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
    "titled_one_of": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
                      "default": "g"},
    "untitled_multi": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1,
                       "maxItems": 2, "default": ["a"]},
    "titled_multi": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
                     "default": ["a", "b"]},
}


@pytest.mark.parametrize("name", sorted(VALID_PROPERTIES))
def test_each_form_variant_is_valid(name: str) -> None:
    assert problems({**form(**{name: VALID_PROPERTIES[name]}), "required": [name]}) == []


def test_all_variants_together_with_top_level_annotations() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "title": "Everything",
        "description": "all the variants",
        "properties": VALID_PROPERTIES,
        "required": ["email", "titled_multi"],
        "additionalProperties": False,
    }
    assert problems(schema) == []


# -- invalid schemas name the property and the rule -------------------------------------------


@pytest.mark.parametrize(
    ("schema", "prop", "rule_part"),
    [
        (form(address={"type": "object", "properties": {"street": {"type": "string"}}}), "address", "type 'object'"),
        (form(people={"type": "array", "items": {"type": "object"}}), "people", "arrays are only multi-select"),
        (form(tags={"type": "array", "items": {"type": "string"}}), "tags", "arrays are only multi-select"),
        (form(secret={"type": "string", "format": "password"}), "secret", "format must be one of"),
        (form(x={"type": "string", "format": "ipv4"}), "x", "'ipv4'"),
        ({**form(a={"type": "string"}), "required": ["a", "b"]}, "b", "listed in required but not defined"),
        (form(a={"title": "no type"}), "a", "type is missing"),
        (form(a={"type": "string", "pattern": "^x$"}), "a", "'pattern' is not allowed"),
        (form(a={"type": "string", "minLength": -1}), "a", "minLength must be a non-negative integer"),
        (form(a={"type": "string", "maxLength": "5"}), "a", "maxLength must be a non-negative integer"),
        (form(a={"type": "string", "default": 3}), "a", "default must be a string"),
        (form(a={"type": "number", "minimum": "0"}), "a", "minimum must be a number"),
        (form(a={"type": "integer", "maximum": True}), "a", "maximum must be a number"),
        (form(a={"type": "integer", "default": 1.5}), "a", "default must be an integer"),
        (form(a={"type": "boolean", "default": "yes"}), "a", "default must be true or false"),
        (form(a={"type": "string", "enum": []}), "a", "enum must be a non-empty list of strings"),
        (form(a={"type": "string", "enum": [1, 2]}), "a", "enum must be a non-empty list of strings"),
        # not a list at all, with a default and names beside it: refused, not a TypeError (found by test_fuzz)
        (form(a={"type": "string", "enum": True, "default": [], "enumNames": ["x"]}), "a",
         "enum must be a non-empty list of strings"),
        (form(a={"type": "string", "enum": "xy", "default": []}), "a", "enum must be a non-empty list of strings"),
        (form(a={"type": "string", "enum": ["x", "y"], "enumNames": ["X"]}), "a", "enumNames must be"),
        (form(a={"type": "string", "enum": ["x"], "default": "z"}), "a", "default must be one of enum"),
        (form(a={"type": "string", "oneOf": [{"const": "x"}]}), "a", "oneOf must be a non-empty list"),
        (form(a={"type": "string", "oneOf": [{"const": "x", "title": "X"}], "default": "y"}), "a",
         "default must be one of the oneOf consts"),
        (form(a={"type": "array", "items": {"type": "string", "enum": ["x"]}, "minItems": -2}), "a",
         "minItems must be a non-negative integer"),
        (form(a={"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": ["q"]}), "a",
         "default must be a list of the allowed values"),
        (form(a={"type": "array", "items": {"type": "string", "enum": ["x"], "minLength": 1}}), "a",
         "items keyword 'minLength' is not allowed"),
        (form(a={"type": "null"}), "a", "type 'null' is not allowed"),
        (form(a="string"), "a", "must be an object describing a primitive field"),
    ],
)
def test_invalid_property_names_property_and_rule(schema: dict, prop: str, rule_part: str) -> None:
    found = problems(schema)
    assert any(p == prop and rule_part in rule for p, rule in found), found


@pytest.mark.parametrize(
    ("schema", "rule_part"),
    [
        ("not a schema", "requestedSchema must be an object"),
        (None, "requestedSchema must be an object"),
        ({"properties": {}}, 'requestedSchema.type must be "object"'),
        ({"type": "object"}, "requestedSchema.properties must be an object"),
        ({"type": "object", "properties": {}, "oneOf": []}, "keyword 'oneOf' is not allowed"),
        ({"type": "object", "properties": {}, "additionalProperties": True}, "additionalProperties may only be false"),
        ({"type": "object", "properties": {}, "required": "a"}, "required must be a list"),
    ],
)
def test_invalid_top_level(schema: object, rule_part: str) -> None:
    found = problems(schema)
    assert any(p is None and rule_part in rule for p, rule in found), found


def test_max_properties() -> None:
    schema = form(**{f"p{i}": {"type": "string"} for i in range(4)})
    assert problems(schema, max_properties=4) == []
    assert any("at most 3 properties" in rule for _, rule in problems(schema, max_properties=3))


def test_every_problem_is_reported_not_just_the_first() -> None:
    schema = {**form(a={"type": "object"}, b={"type": "string", "format": "password"}), "required": ["c"]}
    assert {p for p, _ in problems(schema)} == {"a", "b", "c"}


def test_problem_as_dict_and_str() -> None:
    (problem,) = check_requested_schema(form(a={}), max_properties=64)
    assert problem.as_dict() == {"property": "a", "rule": "type is missing"}
    assert str(problem) == "a: type is missing"


# -- answers --------------------------------------------------------------------------------------

EVERYTHING = {"type": "object", "properties": VALID_PROPERTIES, "required": ["email"]}

GOOD_ANSWER = {
    "plain_string": "anything",
    "string_lengths": "abc",
    "email": "ada@example.com",
    "uri": "https://example.com/a?b=c",
    "date": "2026-12-24",
    "date_time": "2026-12-24T18:30:00Z",
    "string_default": "x",
    "number": 2.5,
    "integer": 4,
    "boolean": False,
    "untitled_enum": "green",
    "legacy_enum_names": "g",
    "titled_one_of": "r",
    "untitled_multi": ["a", "c"],
    "titled_multi": ["b"],
}


def test_good_answer_has_no_problems() -> None:
    assert answer_problems(EVERYTHING, GOOD_ANSWER) == []
    assert answer_problems(EVERYTHING, {"email": "a@b.example"}) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("string_lengths", "a"),
        ("string_lengths", "abcdef"),
        ("email", "not-an-email"),
        ("uri", "not a uri"),
        ("date", "2026-13-45"),
        ("date_time", "tomorrow at noon"),
        ("number", 0.1),
        ("number", 11),
        ("number", "3"),
        ("integer", 2.5),
        ("integer", 10),
        ("boolean", "true"),
        ("untitled_enum", "blue"),
        ("legacy_enum_names", "Red"),
        ("titled_one_of", "Red"),
        ("untitled_multi", ["d"]),
        ("untitled_multi", []),
        ("untitled_multi", ["a", "b", "c"]),
        ("titled_multi", ["A"]),
        ("plain_string", 5),
    ],
)
def test_bad_value_names_its_property(field: str, value: object) -> None:
    found = answer_problems(EVERYTHING, {**GOOD_ANSWER, field: value})
    assert [p["property"] for p in found] == [field], found
    assert found[0]["message"]


def test_missing_required_and_unexpected_fields() -> None:
    found = answer_problems(EVERYTHING, {"plain_string": "x", "nickname": "y"})
    assert {"property": "email", "message": "is required"} in found
    unexpected = [p for p in found if p["message"].startswith("unexpected field")]
    assert len(unexpected) == 1 and "nickname" in unexpected[0]["message"]


def test_content_must_be_an_object() -> None:
    assert answer_problems(EVERYTHING, ["email"]) == [{"property": None, "message": "content must be an object"}]


def test_schema_declaring_dollar_schema_is_still_usable_for_answers() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **form(a={"type": "string"})}
    assert answer_problems(schema, {"a": "x"}) == []
    assert [p["property"] for p in answer_problems(schema, {"a": 1})] == ["a"]


# -- secrets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prop",
    [
        ("password", {"type": "string"}),
        ("Password", {"type": "string"}),
        ("new_password", {"type": "string"}),
        ("passphrase", {"type": "string"}),
        ("apiKey", {"type": "string"}),
        ("api_key", {"type": "string"}),
        ("API-KEY", {"type": "string"}),
        ("accessToken", {"type": "string"}),
        ("client_secret", {"type": "string"}),
        ("cardNumber", {"type": "string"}),
        ("cvv", {"type": "string"}),
        ("ssn", {"type": "string"}),
        ("pin", {"type": "string"}),
        ("privateKey", {"type": "string"}),
        ("credentials", {"type": "string"}),
        ("field1", {"type": "string", "title": "Your password"}),
        ("field2", {"type": "string", "format": "password"}),
        ("field3", {"type": "string", "writeOnly": True}),
    ],
)
def test_sensitive_fields_spotted(prop: tuple[str, dict]) -> None:
    name, schema = prop
    assert sensitive_fields(form(**{name: schema})) == [name]


EVASIONS = [
    ("p\u0430ssword", {"type": "string"}),  # a Cyrillic а
    ("\u03c1assword", {"type": "string"}),  # a Greek ρ
    ("ＰＡＳＳＷＯＲＤ", {"type": "string"}),  # fullwidth (NFKC)
    ("pass\u200bword", {"type": "string"}),  # a zero-width space
    ("passw0rd", {"type": "string"}),
    ("p4ssw0rd", {"type": "string"}),
    ("userpassword", {"type": "string"}),
    ("field", {"type": "string", "title": "Passwort"}),
    ("contrasena", {"type": "string"}),
    ("contraseña", {"type": "string"}),
    ("otp", {"type": "string"}),
    ("mnemonic", {"type": "string"}),
    ("seedPhrase", {"type": "string"}),
    ("motDePasse", {"type": "string"}),
    ("senha", {"type": "string"}),
    ("wachtwoord", {"type": "string"}),
    ("parola", {"type": "string", "title": "Parola d'ordine"}),
    ("cvv2", {"type": "string"}),
    ("iban", {"type": "string"}),
    ("code", {"type": "string", "title": "Code", "description": "The 2FA code from your authenticator app"}),
    ("answer", {"type": "string", "description": "Your bank password, please"}),
]


@pytest.mark.parametrize("prop", EVASIONS, ids=[name for name, _ in EVASIONS])
def test_sensitive_fields_see_through_look_alikes_languages_and_descriptions(prop: tuple[str, dict]) -> None:
    name, schema = prop
    assert sensitive_fields(form(**{name: schema})) == [name]


def test_sensitive_words_are_configurable() -> None:
    customer = form(kundennummer={"type": "string"}, password={"type": "string"})
    assert sensitive_fields(customer) == ["password"]
    assert sensitive_fields(customer, sensitive_words(None, ["Kundennummer"])) == ["kundennummer", "password"]
    assert sensitive_fields(customer, sensitive_words(["kundennummer"])) == ["kundennummer"]  # replaces the list
    assert sensitive_fields(form(k={"type": "string", "title": "Your customer no."}),
                            sensitive_words(["customer no"])) == ["k"]
    assert sensitive_words(None) is sensitive_words(None, [])  # the defaults are compiled once


def test_every_default_sensitive_word_is_spotted_as_a_field_name() -> None:
    for word in DEFAULT_SENSITIVE_WORDS:
        assert sensitive_fields(form(**{word: {"type": "string"}})) == [word], word


@pytest.mark.parametrize(
    "name", ["passage", "compass", "tokenizer", "pinned", "spinach", "username", "email", "secretary", "keynote",
             "shipping", "max_tokens", "opinion", "company", "keyword", "topic", "description", "Pinterest",
             "spinner", "passenger", "bypass_cache", "compassion", "secretariat"]
)
def test_ordinary_fields_not_flagged(name: str) -> None:
    assert sensitive_fields(form(**{name: {"type": "string", "title": name}})) == []


def test_sensitive_fields_lists_only_the_secret_ones_and_tolerates_junk() -> None:
    schema = form(user={"type": "string"}, password={"type": "string"}, token="not a dict")
    assert sensitive_fields(schema) == ["password", "token"]
    assert sensitive_fields(None) == []
    assert sensitive_fields({"type": "object"}) == []
    assert sensitive_fields({"type": "object", "properties": []}) == []


def test_docs_list_the_built_in_sensitive_words() -> None:
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    listed = doc.split("The built-in list (English,", 1)[1].split("**Not promised.**", 1)[0]
    assert re.findall(r"`([^`]+)`", listed) == list(DEFAULT_SENSITIVE_WORDS)


def test_answers_to_one_form_are_checked_by_one_validator_built_for_its_first():
    """Building a jsonschema validator was half of what checking an answer cost; the same form (an equal schema,
    keys in any order) reuses the one built first, and a schema orjson cannot write is still checked."""
    from elicitgate.elicitation.schema import _validator  # pyright: ignore[reportPrivateUsage]

    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 2}}, "required": ["name"]}
    reordered = {"required": ["name"], "properties": {"name": {"minLength": 2, "type": "string"}}, "type": "object"}
    assert _validator(schema) is _validator(reordered)
    assert _validator(schema) is not _validator({**schema, "required": []})
    assert answer_problems(reordered, {"name": "x"}) == answer_problems(schema, {"name": "x"}) != []
    huge = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 2**70}}}
    assert _validator(huge) is not _validator(huge)  # not kept, still built
    assert answer_problems(huge, {"n": 2**71}) and not answer_problems(huge, {"n": 5})


# -- the plain check of answers that fit agrees with jsonschema ---------------------------------

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-12, 12), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "a", "ab", "abcdef", "r", "g", "Red", "ada@example.com", "nope", "2026-12-24",
                     "2026-12-24T18:30:00Z", "https://example.com/a", "not a uri", "2" * 70]),
    st.lists(st.sampled_from(["a", "b", "c", "d", "A", 1]), max_size=4),
)


@settings(max_examples=500, deadline=None)
@given(
    names=st.lists(st.sampled_from(sorted(VALID_PROPERTIES)), min_size=1, max_size=5, unique=True),
    required=st.lists(st.sampled_from(sorted(VALID_PROPERTIES)), max_size=3, unique=True),
    data=st.data(),
)
def test_answers_the_plain_check_lets_through_are_those_jsonschema_finds_nothing_in(
    names: list[str], required: list[str], data: st.DataObject
) -> None:
    """`answer_problems` skips jsonschema for an answer its plain Python check of the form-mode subset passes: that
    check must never pass an answer jsonschema finds something wrong with (nor a NaN), and it passes the good ones."""
    from jsonschema import Draft202012Validator

    from elicitgate.elicitation.schema import _FITS, _formats  # pyright: ignore[reportPrivateUsage]

    properties = {name: VALID_PROPERTIES[name] for name in names}
    schema = {"type": "object", "properties": properties, "required": [r for r in required if r in properties]}
    content: dict[str, Any] = {name: GOOD_ANSWER[name] for name in names if data.draw(st.booleans())}
    # A good answer with one or two values changed: each rule gets its turn at being the only one broken.
    content |= data.draw(st.dictionaries(st.sampled_from([*names, "extra"]), _VALUES, max_size=2))
    fits = _FITS(schema)
    assert fits is not None, "every form-mode variant has a plain check"
    strict = Draft202012Validator({**schema, "additionalProperties": False}, format_checker=_formats())
    finite = all(not (isinstance(v, float) and v != v or v in (float("inf"), float("-inf"))) for v in content.values())
    assert fits(content) == (strict.is_valid(content) and finite), (schema, content)  # pyright: ignore[reportUnknownMemberType]
    if fits(content):
        assert answer_problems(schema, content) == []
    good = {name: GOOD_ANSWER[name] for name in names}
    assert fits(good), (schema, good)


def test_a_schema_beyond_the_plain_check_is_checked_by_jsonschema_alone() -> None:
    from elicitgate.elicitation.schema import _FITS  # pyright: ignore[reportPrivateUsage]

    odd = {"type": "object", "properties": {"n": {"type": "string", "pattern": "^a"}}}
    assert _FITS(odd) is None
    assert [p["property"] for p in answer_problems(odd, {"n": 5})] == ["n"]
    assert _FITS({"type": "object", "properties": {"n": {"type": "string", "minLength": None}}}) is None
