"""`sdk_packages.BUILT_WHEN_USED_AS_RUN`: the SDK's version-free models (`mcp_types._types`), the JSON-RPC envelope's
adapter (`mcp_types.jsonrpc`) and the SDK's OAuth models (`mcp.shared.auth`, `mcp.server.auth.provider`), with their
module-level `TypeAdapter`s, build their validators at first use (issue 34: they were ~0.12 s of the gateway's CPU
before ready); what they accept, refuse and write is the same as when each builds as it is made, and pydantic's own
`ConfigDict`, `TypeAdapter`, `BaseModel.model_config` and `model_rebuild` are back once the modules have run. Fresh
interpreters, one with elicitgate's import hooks, one without."""

from __future__ import annotations

import json
import subprocess
import sys

CHECKS = """
import json, sys
if sys.argv[1] == "hooked":
    import elicitgate  # installs sdk_packages' finder before the SDK is imported
import pydantic
import mcp_types, mcp_types._types as t, mcp_types.jsonrpc as j
from mcp.shared.auth import OAuthMetadata
from mcp.server.auth.provider import AccessToken
adapters = [t.client_request_adapter, t.client_notification_adapter, t.client_result_adapter,
            t.server_request_adapter, t.server_notification_adapter, t.server_result_adapter,
            j.jsonrpc_message_adapter]
built_at_import = {
    "models": [m.__pydantic_complete__ for m in (t.Tool, t.CallToolResult, t.ElicitRequest, t.CallToolRequestParams,
                                                 OAuthMetadata, AccessToken)],
    "adapters": [a.pydantic_complete for a in adapters],
}
restored = [pydantic.ConfigDict is pydantic.config.ConfigDict,
            pydantic.TypeAdapter is pydantic.type_adapter.TypeAdapter,
            type(t.client_request_adapter).__name__, isinstance(t.client_request_adapter, pydantic.TypeAdapter),
            pydantic.BaseModel.model_config, "model_rebuild" in vars(pydantic.BaseModel),
            pydantic.BaseModel.model_rebuild.__func__ is vars(pydantic.BaseModel)["model_rebuild"].__func__]
class Later(pydantic.BaseModel):  # made after: built as it is made, as pydantic's own
    x: "int"
restored.append(Later.__pydantic_complete__)
cases = [
    (0, {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
    (0, {"method": "tools/call", "params": {"arguments": {}}}),
    (0, {"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                             "clientInfo": {"name": "c", "version": "1"}}}),
    (0, {"method": "nope"}),
    (1, {"method": "notifications/cancelled", "params": {"requestId": 3}}),
    (2, {"action": "accept", "content": {"a": 1}}),
    (2, {"action": "maybe"}),
    (3, {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object",
                                                                                        "properties": {}}}}),
    (4, {"method": "notifications/progress", "params": {"progressToken": 1, "progress": 0.5}}),
    (5, {"content": [{"type": "text", "text": "hi"}], "isError": False}),
    (5, {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
    (5, {"content": [{"type": "image"}]}),
    (6, {"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    (6, {"jsonrpc": "2.0", "id": 1, "result": {}}),
    (6, {"jsonrpc": "1.0", "id": 1, "method": "ping"}),
]
outcomes = []
for index, data in cases:
    try:
        value = adapters[index].validate_python(data)
        outcomes.append(["accepted", type(value).__name__,
                         adapters[index].dump_python(value, by_alias=True, exclude_none=True, mode="json")])
    except pydantic.ValidationError as exc:
        outcomes.append([type(exc).__name__, exc.errors(include_url=False)])
made = t.CallToolResult(content=[t.TextContent(type="text", text="x")], is_error=True)
outcomes.append(made.model_dump(by_alias=True, exclude_none=True))
outcomes.append(t.Tool.model_json_schema())
outcomes.append(t.CallToolRequestParams.model_validate({"name": "n", "inputResponses": {"a": {"action": "decline"}}})
                .model_dump(by_alias=True, exclude_none=True))
outcomes.append(AccessToken(token="a", client_id="c", scopes=["s"]).model_dump())
for data in ({"issuer": "https://a.example", "authorization_endpoint": "https://a.example/auth",
              "token_endpoint": "https://a.example/token"}, {"issuer": "not a url"}):
    try:
        outcomes.append(OAuthMetadata.model_validate(data).model_dump(mode="json", exclude_none=True))
    except pydantic.ValidationError as exc:
        outcomes.append(exc.errors(include_url=False))
print(json.dumps({"built_at_import": built_at_import, "restored": restored, "outcomes": outcomes,
                  "built_after": [t.Tool.__pydantic_complete__, t.client_request_adapter.pydantic_complete]},
                 default=str))
"""


def _run(mode: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHECKS, mode], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_version_free_models_and_adapters_build_when_first_used_and_check_exactly_as_before():
    hooked, plain = _run("hooked"), _run("plain")
    assert plain["built_at_import"] == {"models": [True] * 6, "adapters": [True] * 7}
    assert hooked["built_at_import"] == {"models": [False] * 6, "adapters": [False] * 7}
    assert hooked["outcomes"] == plain["outcomes"]
    kinds = {outcome[0] for outcome in hooked["outcomes"][:15]}  # type: ignore[index]
    assert kinds == {"accepted", "ValidationError"}  # both kinds checked
    assert hooked["built_after"] == [True, True]


def test_pydantic_is_its_own_again_once_the_deferred_modules_have_run():
    hooked = _run("hooked")
    assert hooked["restored"] == [True, True, "TypeAdapter", True, {}, True, True, True]
