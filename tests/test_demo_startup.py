"""The bundled demo server's start-up (issue 34): over stdio, as a gateway starts it, it imports only what serving
needs before it answers. A real `python -m elicitgate.demo.server` process, driven by the `mcp` SDK's client over
stdio; what it imported is read from the process itself when it exits."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mcp import Client, StdioServerParameters

from tests.conftest import PY

DUMP_MODULES = """
import atexit, json, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
runpy.run_module("elicitgate.demo.server", run_name="__main__", alter_sys=True)
"""
"""`python -m elicitgate.demo.server ...` that writes the names of every module it imported to a file as it exits."""

NOT_ON_STDIO = {"argparse", "mcp.os.win32.utilities"}
"""The command line's parser, which a demo server started without options (stdio, as a gateway starts it) does not
need; the SDK's Windows process helpers, which `mcp.server.stdio` imports for Windows only
(`sdk_packages.STOOD_IN`)."""
MODERN_SCHEMAS = "mcp_types._v2026_07_28"
"""The spec's 2026-07-28 schemas: checked against only by a 2026-07-28 peer (`sdk_packages.ROWS_BUILT_WHEN_READ`)."""


def _demo(out: Path) -> StdioServerParameters:
    # The whole environment (the SDK's client passes only a few variables by default): the same `elicitgate`.
    return StdioServerParameters(command=PY, args=["-c", DUMP_MODULES, str(out)], env=dict(os.environ))


def _texts(result: object) -> list[str | None]:
    return [getattr(part, "text", None) for part in getattr(result, "content", [])]


@pytest.mark.anyio
async def test_the_demo_server_on_stdio_serves_without_argparse_or_the_windows_helpers(tmp_path: Path):
    out = tmp_path / "modules.json"
    async with Client(_demo(out), mode="legacy") as client:
        assert _texts(await client.call_tool("echo", {"text": "hi"})) == ["hi"]
    modules = set(json.loads(out.read_text()))
    assert "mcp.server.stdio" in modules
    assert not NOT_ON_STDIO & modules, NOT_ON_STDIO & modules


@pytest.mark.anyio
async def test_the_demo_server_builds_the_2026_schemas_for_a_2026_client_only(tmp_path: Path):
    """A handshake-era client's requests and the demo's answers are checked against the 2025-11-25 schemas alone; a
    2026-07-28 client's against the 2026-07-28 ones, built at its first request, and served as before."""
    legacy, modern = tmp_path / "legacy.json", tmp_path / "modern.json"
    async with Client(_demo(legacy), mode="legacy") as client:
        assert [tool.name for tool in (await client.list_tools()).tools][:1] == ["book_table"]
        assert _texts(await client.call_tool("echo", {"text": "old"})) == ["old"]
    async with Client(_demo(modern), mode="2026-07-28") as client:
        assert _texts(await client.call_tool("echo", {"text": "new"})) == ["new"]
    assert MODERN_SCHEMAS not in set(json.loads(legacy.read_text()))
    assert MODERN_SCHEMAS in set(json.loads(modern.read_text()))


def test_the_demo_servers_options_are_still_read():
    """With options the command line is argparse's as before: `--help`, and an unknown option refused."""
    shown = subprocess.run([PY, "-m", "elicitgate.demo.server", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "--http HOST:PORT" in shown.stdout and "serve streamable HTTP instead of stdio" in shown.stdout
    refused = subprocess.run([PY, "-m", "elicitgate.demo.server", "--nope"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "unrecognized arguments: --nope" in refused.stderr
