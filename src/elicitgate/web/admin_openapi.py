"""The admin API's OpenAPI document (`/api/openapi.json`): every route, its parameters and answers."""

from __future__ import annotations

from elicitgate.audit.record import FIELDS, STATES
from elicitgate.json_shapes import JsonObject

AUDIT_PAGE = 100
AUDIT_MAX = 10_000


def openapi_document() -> JsonObject:
    summary = {
        "type": "object",
        "required": ["id", "server", "message", "mode", "state", "form_url", "created_at", "deadline"],
        "properties": {
            "id": {"type": "string"},
            "server": {"type": "string", "description": "the upstream server that asks"},
            "message": {"type": "string"},
            "mode": {"type": "string", "enum": ["form", "url"]},
            "state": {"type": "string", "enum": ["pending", "presented", "accepted", "declined", "cancelled",
                                                   "timed_out", "failed"]},
            "form_url": {"type": ["string", "null"], "description": "the hosted page; null when a client presents it"},
            "hosted": {"type": ["string", "null"], "enum": ["page", "inbox", None]},
            "created_at": {"type": "string", "format": "date-time"},
            "deadline": {"type": "string", "format": "date-time"},
            "client": {"type": ["string", "null"]},
            "claimed_at": {"type": ["string", "null"], "format": "date-time",
                           "description": "when a browser opened the hosted page (the only one that may answer)"},
            "url": {"type": "string", "description": "URL mode: the page the server wants opened"},
            "source": {"type": "string", "enum": ["upstream", "gateway"],
                       "description": "who asks: the upstream server, or the gateway on its own"},
            "gateway_reason": {"type": ["string", "null"], "enum": ["missing_arguments", "confirmation", None],
                               "description": "why the gateway asks (null when the upstream asks)"},
        },
    }
    detail = {
        "allOf": [
            {"$ref": "#/components/schemas/Elicitation"},
            {
                "type": "object",
                "properties": {
                    "requestedSchema": {"type": ["object", "null"]},
                    "errors": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}},
                    "attempts": {"type": "integer"},
                },
            },
        ]
    }
    error = {"type": "object", "required": ["error"], "properties": {
        "error": {"type": "string"}, "id": {"type": "string"}, "state": {"type": "string"},
        "errors": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}}}}

    def responses(ok: str, *codes: int) -> JsonObject:
        out: JsonObject = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ok}}}}}
        words = {401: "missing or wrong token", 404: "unknown id, or the admin API is off", 503:
                 "the audit store is not open yet (Retry-After)", 409:
                 "the elicitation already ended (its final state is in `state`) or is not hosted",
                 422: "the answer fails the form (`errors`, one per field), the body is malformed, or (audit) "
                      "a filter is"}
        for code in (401, *codes):
            out[str(code)] = {"description": words[code], "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}}
        return out

    id_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    nullable_text = {"type": ["string", "null"]}
    audit_record = {"type": "object", "required": list(FIELDS), "properties": {
        **{name: nullable_text for name in FIELDS},
        "id": {"type": "string"}, "server": {"type": "string"}, "mode": {"type": "string", "enum": ["form", "url"]},
        "state": {"type": "string", "enum": list(STATES)},
        "reason": {**nullable_text, "description": "how it ended; for a refusal: rate_limited, pending_limit, "
                   "invalid_schema, sensitive_blocked, undeliverable, url_refused, origin_unknown, invalid_request"},
        "source": {"type": "string", "enum": ["upstream", "gateway"]},
        "attempts": {"type": "integer", "description": "answers the human gave, re-asks included"},
        "created_at": {"type": "string", "format": "date-time"}, "ended_at": {"type": "string", "format": "date-time"},
        "duration_s": {"type": "number"},
        "content": {"type": ["object", "null"], "description": "the accepted answer (audit.store_content only), "
                    "without fields that look like secrets"},
    }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "elicitgate admin API", "version": "1",
                 "description": "Pending elicitations of the gateway, and answering the hosted ones."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Elicitation": summary,
                "ElicitationDetail": detail,
                "Problem": {"type": "object", "properties": {"property": {"type": ["string", "null"]},
                                                              "message": {"type": "string"}}},
                "Error": error,
                "ElicitResult": {"type": "object", "required": ["action"], "properties": {
                    "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
                    "content": {"type": "object", "description": "with accept on a form: the answers"}}},
                "Outcome": {"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}},
                "Released": {"type": "object", "properties": {"id": {"type": "string"}, "released": {
                    "type": "boolean", "description": "false when no browser had opened the page"}}},
                "List": {"type": "object", "properties": {"elicitations": {
                    "type": "array", "items": {"$ref": "#/components/schemas/Elicitation"}}}},
                "AuditRecord": audit_record,
                "AuditList": {"type": "object", "properties": {"records": {
                    "type": "array", "items": {"$ref": "#/components/schemas/AuditRecord"}}}},
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/api/elicitations": {"get": {
                "summary": "List elicitations",
                "parameters": [{"name": "state", "in": "query", "schema": {
                    "type": "string", "enum": ["pending", "ended", "all"], "default": "pending"}}],
                "responses": responses("#/components/schemas/List"),
            }},
            "/api/audit": {"get": {
                "summary": "The audit trail: one record per elicitation end and per refusal (the newest `limit`, "
                           "oldest first); 404 when the trail is off, 422 for a bad filter",
                "parameters": [
                    {"name": "state", "in": "query", "schema": {"type": "string", "enum": list(STATES)}},
                    {"name": "server", "in": "query", "schema": {"type": "string"}},
                    {"name": "since", "in": "query", "description": "records created at or after (ISO 8601; UTC "
                     "without a zone)", "schema": {"type": "string", "format": "date-time"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": AUDIT_MAX,
                                                                "default": AUDIT_PAGE}},
                ],
                "responses": responses("#/components/schemas/AuditList", 404, 422, 503),
            }},
            "/api/elicitations/events": {"get": {
                "summary": "Server-sent events: `pending` with the full pending list, on connect and on every change",
                "responses": {"200": {"description": "text/event-stream"}},
            }},
            "/api/elicitations/{id}": {"get": {
                "summary": "One elicitation (pending: with its schema; ended: its final summary)",
                "parameters": [id_param],
                "responses": responses("#/components/schemas/ElicitationDetail", 404),
            }},
            "/api/elicitations/{id}/answer": {"post": {
                "summary": "Answer a hosted elicitation; the answer is checked against its form",
                "parameters": [id_param],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/ElicitResult"}}}},
                "responses": responses("#/components/schemas/Outcome", 404, 409, 422),
            }},
            "/api/elicitations/{id}/release": {"post": {
                "summary": "Release a hosted page from the browser that opened it; the next browser to open it gets it",
                "parameters": [id_param],
                "responses": responses("#/components/schemas/Released", 404, 409),
            }},
            "/api/elicitations/{id}/cancel": {"post": {
                "summary": "Cancel a pending elicitation (the server gets {\"action\": \"cancel\"})",
                "parameters": [id_param],
                "responses": responses("#/components/schemas/Outcome", 404, 409),
            }},
        },
    }
