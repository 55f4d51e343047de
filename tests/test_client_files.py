"""Existing desktop-client config files work as they are (docs/configuration.md, "Your client's
file"): Claude Desktop's with its app settings, Cursor's and VS Code's JSONC, VS Code's `servers`
and `inputs`, `${VAR}` placeholders; and the mistakes people make get an answer naming the fix."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from elicitgate.config import load_config
from elicitgate.errors import ConfigError
from tests.conftest import PY, ROOT, Process, free_port

TS_SERVER = str(ROOT / "tests" / "peers" / "ts" / "elicit_server.mjs")


def _write(tmp_path: Path, text: str, name: str = "servers.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "elicitgate.cli", *args], capture_output=True, text=True, timeout=60,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
    )


CLAUDE_DESKTOP = """{
  "globalShortcut": "Ctrl+Space",
  "preferences": {"menuBarEnabled": false},
  "mcpServers": {
    "demo": {"command": "python3", "args": ["-m", "elicitgate.demo.server"]}
  }
}"""


def test_claude_desktop_file_with_app_settings_loads_with_one_warning(tmp_path):
    warnings: list[str] = []
    cfg = load_config(_write(tmp_path, CLAUDE_DESKTOP), warn=warnings.append)
    assert list(cfg.mcp_servers) == ["demo"]
    assert len(warnings) == 1 and "globalShortcut, preferences" in warnings[0]


def test_typos_in_our_own_sections_are_still_refused_with_a_suggestion(tmp_path):
    path = _write(tmp_path, json.dumps({"mcpServers": {"a": {"command": "x", "requst_timeout": 3}},
                                        "elicitaton": {"default_timeout": 5}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path, warn=lambda _: None)
    text = caught.value.render()
    assert "mcpServers.a.requst_timeout: unknown key (did you mean request_timeout?)" in text
    assert "elicitaton: unknown key (did you mean elicitation?)" in text


def test_jsonc_comments_and_trailing_commas_are_accepted(tmp_path):
    path = _write(tmp_path, """// Cursor's ~/.cursor/mcp.json
{
  "mcpServers": {
    /* a block comment */
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp",],},
    "web": {"url": "https://example.com/mcp//path"}, // a URL keeps its slashes
  },
}""")
    cfg = load_config(path)
    assert cfg.mcp_servers["files"].args[-1] == "/tmp"
    assert cfg.mcp_servers["web"].url == "https://example.com/mcp//path"


def test_placeholders_are_filled_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TICKETS_TOKEN", "s3cret")
    path = _write(tmp_path, json.dumps({"mcpServers": {"tickets": {
        "url": "https://tickets.example.com/mcp",
        "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}", "X-Tenant": "${TENANT:-acme}"},
    }}}))
    headers = load_config(path).mcp_servers["tickets"].headers
    assert headers == {"Authorization": "Bearer s3cret", "X-Tenant": "acme"}


def test_an_unset_placeholder_is_an_error_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("TICKETS_TOKEN", raising=False)
    path = _write(tmp_path, json.dumps({"mcpServers": {"tickets": {
        "url": "https://tickets.example.com/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}}}}))
    proc = _cli("check-config", "--config", str(path))
    assert proc.returncode == 2
    assert "mcpServers.tickets.headers.Authorization: ${TICKETS_TOKEN} is not set in the environment" in proc.stderr


def test_command_and_url_together_say_use_either(tmp_path):
    path = _write(tmp_path, json.dumps({"mcpServers": {"a": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}}))
    with pytest.raises(ConfigError, match="mcpServers.a: use either command .* or url"):
        load_config(path)


def test_vscode_input_without_its_variable_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    path = _write(tmp_path, json.dumps({
        "inputs": [{"type": "promptString", "id": "github-token", "password": True}],
        "servers": {"gh": {"type": "http", "url": "https://api.example.com/mcp",
                           "headers": {"Authorization": "Bearer ${input:github-token}"}}},
    }))
    with pytest.raises(
        ConfigError, match=r"\$\{input:github-token\} is a VS Code prompt.*set the environment variable GITHUB_TOKEN"
    ):
        load_config(path)


@pytest.mark.node
@pytest.mark.anyio
async def test_vscode_mcp_json_runs_as_it_is(tmp_path):
    """A VS Code `.vscode/mcp.json` (JSONC, `servers`, `inputs`, `${input:}` and `${env:}`) in front of
    the SDK's demo server over HTTP and the TypeScript SDK server over stdio."""
    port = free_port()
    upstream = Process([PY, "-m", "elicitgate.demo.server", "--http", f"127.0.0.1:{port}"], port)
    try:
        path = _write(tmp_path, """{
  // VS Code asks for these when it starts a server; the gateway reads DEMO_PORT and API_KEY
  "inputs": [
    {"type": "promptString", "id": "demo-port", "description": "Demo port"},
    {"type": "promptString", "id": "api-key", "password": true},
  ],
  "servers": {
    "demo": {"type": "http", "url": "http://127.0.0.1:${input:demo-port}/mcp"},
    "ts": {"type": "stdio", "command": "${env:NODE_BIN}", "args": ["${TS_SERVER}"],
           "env": {"FROM_VSCODE": "${input:api-key}"}},
  },
}""", name="mcp.json")
        env = {**os.environ, "DEMO_PORT": str(port), "API_KEY": "k", "NODE_BIN": "node", "TS_SERVER": TS_SERVER}
        gateway = StdioServerParameters(command=PY, args=["-m", "elicitgate.cli", "serve", "-c", str(path)], env=env)
        async with Client(gateway, mode="legacy") as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"demo__book_table", "ts__environment"} <= tools
            names = json.loads((await client.call_tool("ts__environment", {})).content[0].text)
            assert "FROM_VSCODE" in names
    finally:
        upstream.stop()


def test_environment_variable_with_a_bad_value_is_named(tmp_path):
    path = _write(tmp_path, json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    proc = _cli("check-config", "--config", str(path), env={"ELICITGATE_LOG_LEVEL": "loud"})
    assert proc.returncode == 2
    assert "ELICITGATE_LOG_LEVEL (environment): Input should be" in proc.stderr


def test_misspelt_environment_variable_is_warned_about(tmp_path):
    path = _write(tmp_path, json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    proc = _cli("check-config", "--config", str(path), env={"ELICITGATE_ADMIN_TOKN": "x" * 32})
    assert proc.returncode == 0, proc.stderr
    assert "ELICITGATE_ADMIN_TOKN is not a setting and is ignored (did you mean ELICITGATE_ADMIN_TOKEN?)" in proc.stderr


@pytest.mark.parametrize("servers, said", [
    ({}, "no servers"), ({"a": {"command": "x", "enabled": False}}, "only disabled servers"),
])
def test_no_servers_is_said(tmp_path, servers, said):
    path = _write(tmp_path, json.dumps({"mcpServers": servers}))
    proc = _cli("check-config", "--config", str(path))
    assert proc.returncode == 1
    assert f"{path} has {said}" in proc.stderr.replace("\n", "")
