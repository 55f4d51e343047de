"""The config file: formats, defaults, environment overrides, and errors a person can act on."""

import json
import subprocess

import pytest

from elicitgate.config import HttpServer, StdioServer, load_config
from elicitgate.errors import ConfigError
from tests.conftest import PY


def _write(tmp_path, text, name="elicitgate.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_desktop_client_json_loads_with_defaults(tmp_path):
    path = _write(tmp_path, json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files"], "env": {"A": "1"}, "cwd": "/tmp"},
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }}))
    cfg = load_config(path)
    files, remote, legacy = (cfg.mcp_servers[n] for n in ("files", "remote", "legacy"))
    assert isinstance(files, StdioServer) and files.args == ["-y", "server-files"] and files.cwd == "/tmp"
    assert isinstance(remote, HttpServer) and remote.transport == "http" and remote.headers["Authorization"]
    assert isinstance(legacy, HttpServer) and legacy.transport == "sse"
    assert cfg.elicitation.default_timeout == 300
    assert cfg.namespacing.separator == "__" and cfg.namespacing.prefix_single_server is True
    assert files.request_timeout == 60 and files.era == "auto" and files.enabled


def test_yaml_is_accepted(tmp_path):
    path = _write(tmp_path, "mcpServers:\n  a:\n    command: echo\nelicitation:\n  default_timeout: 12\n",
                  name="gw.yaml")
    cfg = load_config(path)
    assert cfg.mcp_servers["a"].command == "echo"
    assert cfg.elicitation.default_timeout == 12


def test_environment_overrides_the_file(tmp_path, monkeypatch):
    elicitation = {"default_timeout": 12, "max_answer_attempts": 2}
    path = _write(tmp_path, json.dumps({"mcpServers": {}, "elicitation": elicitation}))
    monkeypatch.setenv("ELICITGATE_ELICITATION__DEFAULT_TIMEOUT", "45")
    monkeypatch.setenv("ELICITGATE_LOG_LEVEL", "debug")
    cfg = load_config(path)
    assert cfg.elicitation.default_timeout == 45
    assert cfg.elicitation.max_answer_attempts == 2  # the file's other keys in the section survive
    assert cfg.log_level == "debug"


BAD_CONFIGS = {
    "unknown key": ({"mcpServers": {"a": {"comand": "x"}}}, "mcpServers.a.comand: unknown key"),
    "missing command": ({"mcpServers": {"a": {"args": ["x"]}}}, "mcpServers.a.command: required key is missing"),
    "wrong type": ({"mcpServers": {"a": {"command": "x", "request_timeout": "soon"}}},
                   "mcpServers.a.request_timeout: "),
    "bad url": ({"mcpServers": {"a": {"url": "ftp://host/mcp"}}}, "mcpServers.a.url: "),
    "unknown section": ({"mcpServers": {}, "elicitations": {}}, "elicitations: unknown key"),
    "bad policy value": ({"elicitation": {"sensitive_fields": "maybe"}}, "elicitation.sensitive_fields: "),
    "separator in a name": ({"mcpServers": {"a__b": {"command": "x"}}}, "namespace separator"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_names_the_key_path_and_problem(tmp_path, case):
    data, expected = BAD_CONFIGS[case]
    path = _write(tmp_path, json.dumps(data))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in caught.value.render()
    assert expected in caught.value.render()


def test_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, '{"mcpServers": {\n  "a": {"command": "x" "args": []}\n}}')
    with pytest.raises(ConfigError, match=r"not valid JSON: .* at line 2"):
        load_config(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.json")


def test_malformed_environment_value_is_a_config_error(tmp_path, monkeypatch):
    path = _write(tmp_path, json.dumps({"mcpServers": {}}))
    monkeypatch.setenv("ELICITGATE_ELICITATION__DEFAULT_TIMEOUT", "-1")
    with pytest.raises(ConfigError, match=r"ELICITGATE_ELICITATION__DEFAULT_TIMEOUT \(environment\): "):
        load_config(path)


@pytest.mark.parametrize("command", ["serve", "check-config", "doctor"])
def test_cli_stops_with_exit_2_and_no_traceback(tmp_path, command):
    path = _write(tmp_path, json.dumps({"mcpServers": {"a": {"comand": "x"}, "b": {"url": 3}}}))
    proc = subprocess.run([PY, "-m", "elicitgate.cli", command, "--config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr.replace("\n", "")
    assert "mcpServers.a.comand: unknown key" in proc.stderr
    assert "mcpServers.b.url" in proc.stderr
