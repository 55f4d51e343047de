"""Hardening (issue 11): secrets stay secret. Real gateway processes in front of real SDK peers.

- a stdio upstream gets the SDK's safe default environment plus its own `env`, nothing of the gateway's
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

from tests.conftest import PEERS, PY, write_config

pytestmark = pytest.mark.anyio

TS_SERVER = str(PEERS / "ts" / "elicit_server.mjs")
ADMIN_TOKEN = "admin-token-0123456789abcdef"


def gateway_with_env(config, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY, args=["-m", "elicitgate.cli", "serve", "--config", str(config)], env={**os.environ, **env}
    )


# -- environment ------------------------------------------------------------------------------------


@pytest.mark.node
async def test_stdio_upstream_gets_only_the_safe_environment_and_its_own_env(tmp_path):
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the TypeScript SDK peer needs Node.js 20+")
    config = write_config(tmp_path, {
        "with_env": {"command": "node", "args": [TS_SERVER], "env": {"ONLY_MINE": "1"}},
        "plain": {"command": "node", "args": [TS_SERVER]},
    })
    secrets = {"ELICITGATE_ADMIN_TOKEN": ADMIN_TOKEN, "OTHER_SERVICE_API_KEY": "sk-other-service"}
    async with Client(gateway_with_env(config, **secrets), mode="legacy") as client:
        with_env = json.loads((await client.call_tool("with_env__environment", {})).content[0].text)
        plain = json.loads((await client.call_tool("plain__environment", {})).content[0].text)
    safe = set(get_default_environment())
    for names in (with_env, plain):
        assert not set(secrets) & set(names)
        assert "XDG_STATE_HOME" not in names  # set for the gateway by the tests: not a safe default
    assert "ONLY_MINE" in with_env and "ONLY_MINE" not in plain
    # node may add a variable or two of its own; nothing else of the gateway's environment arrives
    assert set(with_env) - {"ONLY_MINE"} <= safe | {"NODE_OPTIONS", "NODE"}
