"""The docs run as written in the README's setup (a clone with `.venv`, not activated unless the
page activates it): every `elicitgate` command line parses with the real CLI, and every client
snippet in docs/clients.md connects to a real gateway in front of the demo server."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from elicitgate.cli import app
from elicitgate.client_files import parse_jsonc
from tests.conftest import PY, ROOT, Process, free_port

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _blocks(page: Path, *languages: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang in languages]


def _command_lines() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in _blocks(page, "bash", "console", ""):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.removeprefix("$ ").strip()
                if re.search(r"(^|&& )(\w+=\S+ )*(\.venv/bin/)?elicitgate \w", line.split("#")[0]):
                    found.append((page.name, line))
    return found


COMMAND_LINES = _command_lines()


def test_the_docs_have_commands_to_check():
    assert len(COMMAND_LINES) >= 6


@pytest.mark.parametrize("page, line", COMMAND_LINES, ids=[f"{p}:{line[:40]}" for p, line in COMMAND_LINES])
def test_every_documented_command_parses_with_the_real_cli(page, line):
    words = shlex.split(line.split(" #")[0], comments=True)
    activated = ". .venv/bin/activate" in line
    while words and ("=" in words[0] and not words[0].startswith("-")):
        words.pop(0)  # VAR=value before the command
    start = next(i for i, w in enumerate(words) if w.endswith("elicitgate"))
    program, args = words[start], words[start + 1 :]
    args = args[: args.index("&&")] if "&&" in args else args
    assert program == ".venv/bin/elicitgate" or activated, f"{page}: {line!r} needs the venv: .venv/bin/elicitgate"
    group = typer.main.get_command(app)
    ctx = group.make_context("elicitgate", [], resilient_parsing=True)
    command = group.get_command(ctx, args[0])
    assert command is not None, f"{page}: {line!r}: no command {args[0]!r}"
    try:
        command.make_context(args[0], list(args[1:]), parent=ctx)
    except Exception as exc:  # the CLI's own usage error, e.g. an option that does not exist
        if type(exc).__name__ != "Exit":
            pytest.fail(f"{page}: {line!r}: {exc}")


def test_no_bare_python_or_elicitgate_without_activation():
    for page in PAGES:
        for block in _blocks(page, "bash", "console", ""):
            for line in block.splitlines():
                line = line.removeprefix("$ ").strip()
                if re.match(r"(\w+=\S+ )*(python|elicitgate) ", line):
                    assert ". .venv/bin/activate" in block, f"{page.name}: {line!r} runs without the venv"


# -- docs/clients.md ---------------------------------------------------------------------------------


def _client_snippets() -> list[tuple[str, dict[str, Any]]]:
    page = ROOT / "docs" / "clients.md"
    snippets = []
    for lang, body in FENCE.findall(page.read_text()):
        if lang == "json":
            data = parse_jsonc(body)
            entry = (data.get("mcpServers") or data.get("servers"))["elicitgate"]
        elif lang == "yaml":
            entry = yaml.safe_load(body)["mcp"]["servers"]["elicitgate"]
        else:
            continue
        snippets.append((body, entry))
    return snippets


SNIPPETS = _client_snippets()


def test_clients_page_has_stdio_and_http_for_each_client():
    assert len(SNIPPETS) >= 8
    assert sum("url" in entry for _, entry in SNIPPETS) >= 3
    assert sum("command" in entry for _, entry in SNIPPETS) >= 5


@pytest.fixture(scope="module")
def demo_servers(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clients") / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"demo": {"command": PY, "args": ["-m", "elicitgate.demo.server"]}}}))
    return path


@pytest.fixture(scope="module")
def http_gateway(demo_servers) -> Any:
    port = free_port()
    argv = [PY, "-m", "elicitgate.cli", "serve", "--config", str(demo_servers), "--http", f"127.0.0.1:{port}"]
    gateway = Process(argv, port)
    yield gateway
    gateway.stop()


def _filled(value: Any, servers: Path, port: int) -> Any:
    """The snippet with the page's placeholders replaced by this machine's paths."""
    text = json.dumps(value)
    text = text.replace("/path/to/elicitgate/.venv/bin/elicitgate", str(Path(sys.executable).parent / "elicitgate"))
    text = text.replace("/path/to/servers.json", str(servers)).replace("127.0.0.1:8808", f"127.0.0.1:{port}")
    return json.loads(text)


@pytest.mark.anyio
@pytest.mark.parametrize("index", range(len(SNIPPETS)))
async def test_each_client_snippet_reaches_the_demo_server_through_the_gateway(index, demo_servers, http_gateway):
    body, entry = SNIPPETS[index]
    entry = _filled(entry, demo_servers, http_gateway.port)
    if entry.get("command") == "npx":  # mcp-remote, from npm: its argument is the gateway's URL
        assert entry["args"][:2] == ["-y", "mcp-remote"]
        target: Any = entry["args"][2]
    elif "command" in entry:
        target = StdioServerParameters(command=entry["command"], args=entry["args"])
    else:
        assert entry.get("type", "http") == "http" and entry.get("transport", "http") == "http", body
        target = entry["url"]
    async with Client(target, mode="legacy") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert "demo__book_table" in tools, body


def test_configuration_page_error_example_is_what_check_config_prints(tmp_path):
    (block,) = _blocks(ROOT / "docs" / "configuration.md", "console")
    lines = block.splitlines()
    assert lines[0] == "$ cat servers.json" and lines[2].startswith("$ .venv/bin/elicitgate check-config")
    (tmp_path / "servers.json").write_text(lines[1])
    args = shlex.split(lines[2].removeprefix("$ .venv/bin/elicitgate "))
    done = subprocess.run([PY, "-m", "elicitgate.cli", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == lines[3:]


def test_configuration_page_vscode_example_checks_with_its_variable(tmp_path):
    (block,) = _blocks(ROOT / "docs" / "configuration.md", "jsonc")
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(block)
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    run = [PY, "-m", "elicitgate.cli", "check-config", "--config", str(path)]
    unset = subprocess.run(run, capture_output=True, text=True, timeout=60, env=env)
    assert unset.returncode == 2 and "set the environment variable GITHUB_TOKEN" in unset.stderr
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, env={**env, "GITHUB_TOKEN": "t"})
    assert done.returncode == 0, done.stderr
    assert "github" in done.stdout
