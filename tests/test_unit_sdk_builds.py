"""`sdk_packages.BUILT_WHEN_USED`: the spec's per-version schema models build their validators at first use (issue 34:
their import is the gateway's first request and each demo upstream's start-up); what they accept and refuse is the
same as when each builds as its class is made. Fresh interpreters, one with elicitgate's import hooks, one without."""

from __future__ import annotations

import json
import subprocess
import sys

CHECKS = """
import json, sys
if sys.argv[1] == "hooked":
    import elicitgate  # installs sdk_packages' finder before the SDK is imported
from mcp_types import methods
import mcp_types._v2025_11_25 as v2025, mcp_types._v2026_07_28 as v2026
built_at_import = [v2025.CallToolRequest.__pydantic_complete__, v2026.CallToolRequest.__pydantic_complete__]
cases = [
    ("initialize", "2025-11-25", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                                  "clientInfo": {"name": "c", "version": "1"}}),
    ("initialize", "2025-11-25", {"protocolVersion": "2025-11-25", "capabilities": {}}),
    ("tools/call", "2025-11-25", {"name": "echo", "arguments": {"text": "hi"}}),
    ("tools/call", "2025-11-25", {"arguments": {}}),
    ("tools/call", "2026-07-28", {"name": "echo", "arguments": {}, "_meta": {"progressToken": 1}}),
    ("tools/call", "2026-07-28", {"name": 3}),
    ("tools/list", "2026-07-28", {"cursor": None}),
]
outcomes = []
for method, version, params in cases:
    try:
        methods.validate_client_request(method, version, params)
        outcomes.append("accepted")
    except Exception as exc:
        outcomes.append([type(exc).__name__, getattr(exc, "errors", lambda **_: str(exc))(include_url=False)])
print(json.dumps({"built_at_import": built_at_import, "outcomes": outcomes,
                  "built_after": [v2025.CallToolRequest.__pydantic_complete__]}, default=str))
"""


def _run(mode: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHECKS, mode], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_spec_models_build_when_first_used_and_check_exactly_as_before():
    hooked, plain = _run("hooked"), _run("plain")
    assert plain["built_at_import"] == [True, True]
    assert hooked["built_at_import"] == [False, False]
    assert hooked["outcomes"] == plain["outcomes"]
    assert "accepted" in hooked["outcomes"] and any(o != "accepted" for o in hooked["outcomes"])  # both kinds checked
    assert hooked["built_after"] == [True]
