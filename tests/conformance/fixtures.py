"""What the conformance server returns and asks for, exactly as the suite's scenario texts specify.

The suite (`@modelcontextprotocol/conformance`, server scenarios) names each tool, prompt and resource
and the shape of its answer; the elicitation schemas are the ones its scenarios check field by field.
The SEP-1036 URL-mode tools follow the suite's next URL-mode scenario (not in the pinned version yet),
for tests/test_conformance_extra.py; `finish_url_elicitation` is ours.
"""

from __future__ import annotations

from typing import Any

IMAGE_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1x1 red pixel."""
AUDIO_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""A minimal WAV file."""

JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"
URL = "https://mcp.example.com/test"
"""Where the URL-mode tools send the user (SEP-1036, named after the suite's next URL-mode scenario)."""

EMPTY_INPUT: dict[str, Any] = {"type": "object", "properties": {}}

TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "test_simple_text": ("Returns simple text content", EMPTY_INPUT),
    "test_image_content": ("Returns image content", EMPTY_INPUT),
    "test_audio_content": ("Returns audio content", EMPTY_INPUT),
    "test_embedded_resource": ("Returns an embedded resource", EMPTY_INPUT),
    "test_multiple_content_types": ("Returns text, image and resource content", EMPTY_INPUT),
    "test_tool_with_logging": ("Sends three log messages while it runs", EMPTY_INPUT),
    "test_tool_with_progress": ("Reports progress 0, 50 and 100 of 100", EMPTY_INPUT),
    "test_error_handling": ("Always returns an error result", EMPTY_INPUT),
    "test_reconnection": ("Closes its SSE stream mid-call, then answers (SEP-1699)", EMPTY_INPUT),
    "test_sampling": (
        "Asks the client for an LLM completion",
        {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
            "required": ["prompt"],
        },
    ),
    "test_elicitation": (
        "Asks the user for a username and an email",
        {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message to show the user"}},
            "required": ["message"],
        },
    ),
    "test_elicitation_sep1034_defaults": ("Elicitation with defaults for every primitive type (SEP-1034)", EMPTY_INPUT),
    "test_elicitation_sep1330_enums": ("Elicitation with all five enum variants (SEP-1330)", EMPTY_INPUT),
    "test_elicitation_sep1036_url": ("A URL-mode elicitation (SEP-1036)", EMPTY_INPUT),
    "test_elicitation_sep1036_error": (
        "Fails with -32042 URLElicitationRequired (SEP-1036)",
        {"type": "object", "properties": {"elicitationId": {"type": "string"}}},
    ),
    "test_elicitation_sep1036_complete": (
        "A URL-mode elicitation, then notifications/elicitation/complete after an accept (SEP-1036)",
        EMPTY_INPUT,
    ),
    "finish_url_elicitation": (
        "Ours: sends notifications/elicitation/complete for an elicitationId (the out-of-band flow ended)",
        {"type": "object", "properties": {"elicitationId": {"type": "string"}}, "required": ["elicitationId"]},
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features (SEP-1613)",
        {
            "$schema": JSON_SCHEMA_2020_12,
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
}

USER_INFO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}
"""`tools-call-elicitation`: the scenario answers `{username, email}`."""

DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}
"""`elicitation-sep1034-defaults`."""

ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}
"""`elicitation-sep1330-enums`."""

ELICITATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "test_elicitation_sep1034_defaults": ("Please review and update the form fields with defaults", DEFAULTS_SCHEMA),
    "test_elicitation_sep1330_enums": ("Please select options from the enum fields", ENUMS_SCHEMA),
}

STATIC_TEXT = "This is the content of the static text resource."
WATCHED_TEXT = "Watched resource content"
RESOURCES: dict[str, tuple[str, str, str]] = {
    "test://static-text": ("static-text", "A static text resource", "text/plain"),
    "test://static-binary": ("static-binary", "A static binary resource (a PNG image)", "image/png"),
    "test://watched-resource": ("watched-resource", "A resource clients can subscribe to", "text/plain"),
}
TEMPLATE = "test://template/{id}/data"
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"

PROMPTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "test_simple_prompt": ("A simple prompt without arguments", []),
    "test_prompt_with_arguments": (
        "A prompt with required arguments",
        [("arg1", "First test argument"), ("arg2", "Second test argument")],
    ),
    "test_prompt_with_embedded_resource": (
        "A prompt that embeds a resource",
        [("resourceUri", "URI of the resource to embed")],
    ),
    "test_prompt_with_image": ("A prompt with image content", []),
}
