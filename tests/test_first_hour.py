"""The first hour with elicitgate: errors that point at the fix, and a command line that explains
itself. Every test runs the real `elicitgate` command (or the gateway it starts) against real servers."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, ROOT, Process, free_port, in_terminal

CLI = [PY, "-m", "elicitgate.cli"]


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
    )


def _write(tmp_path: Path, servers: dict, **sections) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers, **sections}))
    return path


def _demo_upstream() -> Process:
    port = free_port()
    return Process([PY, "-m", "elicitgate.demo.server", "--http", f"127.0.0.1:{port}"], port)


# -- the port ---------------------------------------------------------------------------------------


def test_port_in_use_is_said_before_any_upstream_starts(tmp_path):
    marker = tmp_path / "started"
    config = _write(tmp_path, {"marker": {"command": PY, "args": ["-c", f"open({str(marker)!r}, 'w')"]}})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _cli("serve", "--config", str(config), "--http", f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in proc.stderr
    assert f"--http 127.0.0.1:{port + 1}" in proc.stderr
    assert "MCP at" not in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists()  # the upstream was never started


def test_second_demo_prints_no_token_of_its_own():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _cli("demo", "--http", f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert "already in use" in proc.stderr
    assert "token" not in proc.stderr


# -- the terminal inbox -----------------------------------------------------------------------------


def test_inbox_against_nothing_says_what_and_where():
    port = free_port()
    proc = _cli("inbox", "--url", f"http://127.0.0.1:{port}", "--token", "x" * 32)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"no gateway answers at http://127.0.0.1:{port}" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_inbox_against_a_server_that_is_not_a_gateway():
    upstream = _demo_upstream()  # an MCP server, but no admin API
    try:
        proc = _cli("inbox", "--url", upstream.url, "--token", "x" * 32)
    finally:
        upstream.stop()
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "404 Not Found, not the admin API: is it an elicitgate gateway" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# -- upstream failures: the URL and the upstream's own stderr -------------------------------------------


def test_doctor_shows_the_url_and_the_stderr_tail_readable_at_80_columns(tmp_path):
    upstream = _demo_upstream()
    unreachable = free_port()
    config = _write(
        tmp_path,
        {
            "ok": {"url": f"{upstream.url}/mcp"},
            "nomodule": {"command": PY, "args": ["-c", "import no_such_module_here"]},
            "wrongpath": {"url": f"{upstream.url}/nope"},
            "unreachable": {"url": f"http://127.0.0.1:{unreachable}/mcp"},
        },
        upstream_retry={"connect_timeout": 20},
    )
    try:
        proc = _cli("doctor", "--config", str(config), timeout=120)
    finally:
        upstream.stop()
    out = " ".join(proc.stdout.split())  # wrapped at 80 columns
    assert proc.returncode == 1, proc.stderr
    assert "ok (http): up" in out
    assert "nomodule (stdio): down" in out
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in out
    assert f"{upstream.url}/nope: negotiation failed: Not Found" in out
    assert "the URL's path may be wrong" in out
    assert f"http://127.0.0.1:{unreachable}/mcp: HttpConnectError" in out
    assert "\x1b[" not in out  # piped: plain text
    report = proc.stdout.splitlines()[1:]  # after the title, which names the file
    assert max(len(line) for line in report) <= 80, proc.stdout


def test_logs_name_the_stderr_tail_of_a_stdio_server_that_died(tmp_path):
    config = _write(tmp_path, {"nomodule": {"command": PY, "args": ["-c", "import no_such_module_here"]}},
                    upstream_retry={"initial_backoff": 30})
    port = free_port()
    gateway = Process([*CLI, "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"], port)
    err = gateway.stop()
    assert "upstream 'nomodule': negotiation failed: Connection closed" in err
    assert "its stderr ended with: ModuleNotFoundError: No module named 'no_such_module_here'" in err


# -- a client that cannot show forms ------------------------------------------------------------------


@pytest.mark.anyio
async def test_undeliverable_elicitation_says_how_to_get_the_inbox(tmp_path, monkeypatch):
    monkeypatch.delenv("ELICITGATE_ADMIN_TOKEN", raising=False)
    config = _write(tmp_path, {"demo": {"command": PY, "args": ["-m", "elicitgate.demo.server"]}})
    port = free_port()
    gateway = Process([*CLI, "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"], port)
    try:
        async with Client(f"{gateway.url}/mcp", mode="legacy") as client:  # no elicitation capability
            try:
                result = await client.call_tool("demo__confirm", {})
                said = json.dumps(result.model_dump(mode="json"))
            except MCPError as exc:
                said = f"{exc.message} {exc.data}"
    finally:
        gateway.stop()
    assert "ELICITGATE_ADMIN_TOKEN" in said


# -- the walkthrough in a terminal ------------------------------------------------------------------------


def _walkthrough() -> pexpect.spawn:
    child = in_terminal(PY, ["-m", "elicitgate.cli", "demo", "--walkthrough"], cwd=str(ROOT), encoding="utf-8",
                          timeout=90, dimensions=(40, 120), env={**os.environ, "NO_COLOR": "1", "TERM": "dumb"})
    return child


def test_walkthrough_ctrl_c_at_a_prompt_exits_at_once():
    child = _walkthrough()
    child.expect("Your name")
    started = time.monotonic()
    child.sendintr()
    child.expect(pexpect.EOF, timeout=25)
    elapsed = time.monotonic() - started
    child.close()
    assert elapsed < 15  # it used to hang for 30 s; the bound leaves room for a loaded CI machine
    assert child.exitstatus == 130
    assert "Traceback" not in child.before and "interrupted" in child.before


def test_walkthrough_with_three_invalid_answers_says_the_server_gave_up():
    child = _walkthrough()
    child.logfile_read = transcript = io.StringIO()
    seen = []
    for _ in range(20):  # bounded: 3 forms of 4 questions
        index = child.expect([r"\n  Email \([^)]*\): ", r"\n  \w[\w ]* \([^)]*\): ", pexpect.EOF])
        if index == 2:
            break
        seen.append(index)
        child.sendline("not-an-email" if index == 0 else "")
    child.close()
    output = transcript.getvalue()
    assert seen.count(0) == 3
    assert child.exitstatus == 1
    assert "the server gave up after 3 invalid answers (elicitation.max_answer_attempts)" in output
    assert "Traceback" not in output and "ExceptionGroup" not in output


def test_walkthrough_re_asks_with_what_the_person_typed_not_the_samples():
    child = _walkthrough()
    child.logfile_read = transcript = io.StringIO()
    for prompt, typed in (("Your name (Ada)", "Grace"), ("Email (ada.example.com)", "grace.example"),
                          ("Date (2026-12-24)", ""), ("guests (4)", "2")):
        child.expect_exact(prompt)
        child.sendline(typed)
    child.expect_exact("Your previous answer was not accepted (email:")
    for prompt, typed in (("Your name (Grace)", ""), ("Email (grace.example)", "grace@example.com"),
                          ("Date (2026-12-24)", ""), ("guests (2)", "")):
        child.expect_exact(prompt)
        child.sendline(typed)
    child.expect(pexpect.EOF)
    child.close()
    output = " ".join(transcript.getvalue().split())  # the console wraps long lines
    assert child.exitstatus == 0, output
    assert "accepted {'name': 'Grace', 'email': 'grace@example.com', 'date': '2026-12-24', 'guests': 2}" in output
    assert "scripted" not in output  # a person at a terminal types their own


def test_walkthrough_without_a_terminal_says_its_answers_are_scripted():
    done = _cli("demo", "--walkthrough", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "stdin is not a terminal, so the walkthrough plays scripted sample answers" in done.stdout
    assert "run `elicitgate demo --walkthrough` in a terminal to type your own" in done.stdout
    assert "  Email: ada.example.com (scripted)" in done.stdout


# -- the command line ---------------------------------------------------------------------------------


def test_version_and_short_help():
    version = _cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("elicitgate ")
    short = _cli("-h")
    assert short.returncode == 0 and "serve" in short.stdout and "check-config" in short.stdout


@pytest.mark.parametrize("command", ["serve", "doctor", "check-config", "demo", "inbox"])
def test_every_option_has_a_description_and_flags_take_no_value(command):
    proc = _cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "<bool>" not in proc.stdout
    options = proc.stdout.split("Options:")[1]
    entries = re.split(r"\n  (?=-)", "\n" + options)
    for entry in filter(str.strip, entries):
        name, _, description = entry.strip().partition("  ")
        assert description.strip(), f"{command} {name}: no description"


def test_serve_help_names_the_environment_the_admin_token_and_the_docs():
    text = " ".join(_cli("serve", "--help").stdout.split())
    assert "ELICITGATE_ELICITATION__DEFAULT_TIMEOUT" in text
    assert "ELICITGATE_ADMIN_TOKEN" in text
    assert "docs/configuration.md" in text and "docs/clients.md" in text
    assert "--log-level" in text


def test_log_level_option_is_checked(tmp_path):
    config = _write(tmp_path, {"a": {"command": "x"}})
    proc = _cli("serve", "--config", str(config), "--log-level", "loud")
    assert proc.returncode == 2
    assert "expected debug, info, warning or error" in proc.stderr


@pytest.mark.anyio
async def test_serve_stdio_says_ready_once_on_stderr(tmp_path):
    config = _write(tmp_path, {"demo": {"command": PY, "args": ["-m", "elicitgate.demo.server"]}})
    from mcp.client.stdio import StdioServerParameters, stdio_client

    log = tmp_path / "stderr.txt"
    with log.open("w") as errlog:
        params = StdioServerParameters(command=PY, args=["-m", "elicitgate.cli", "serve", "--config", str(config)])
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert (await client.list_tools()).tools
    ready = [line for line in log.read_text().splitlines() if "ready" in line]
    assert ready == ["elicitgate: ready on stdio (demo up)"]


def test_demo_prints_the_inbox_hint_whole_with_the_command_as_it_was_run(tmp_path):
    port = free_port()
    exe = Path(sys.executable).parent / "elicitgate"
    proc = subprocess.Popen([str(exe), "demo", "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "80"}, cwd=tmp_path)
    try:
        lines = []
        for _ in range(50):  # the banner comes first; bounded
            lines.append(proc.stderr.readline())
            if "terminal:" in lines[-1]:
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    hint = lines[-1].strip()
    assert hint.startswith("terminal: ELICITGATE_ADMIN_TOKEN=")
    assert hint.endswith(f"{exe} inbox --url http://127.0.0.1:{port}")  # one line, a command that runs


# -- quiet by default ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_no_line_per_request_by_default(tmp_path):
    upstream = _demo_upstream()
    config = _write(tmp_path, {"demo": {"url": f"{upstream.url}/mcp"}})
    port = free_port()
    gateway = Process([*CLI, "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"], port)
    try:
        async with Client(f"{gateway.url}/mcp", mode="legacy") as client:
            for _ in range(3):
                await client.call_tool("demo__echo", {"text": "hi"})
    finally:
        err = gateway.stop()
        upstream.stop()
    assert "HTTP Request:" not in err  # httpx2's INFO line per upstream request
    assert '"POST /mcp HTTP/1.1"' not in err  # uvicorn's access log


def test_serve_stdio_ctrl_c_exits_cleanly(tmp_path):
    config = _write(tmp_path, {"demo": {"command": PY, "args": ["-m", "elicitgate.demo.server"]}})
    child = in_terminal(PY, ["-m", "elicitgate.cli", "serve", "--config", str(config)], encoding="utf-8",
                          timeout=90, dimensions=(40, 120))
    child.expect("ready on stdio")
    child.sendintr()
    child.expect(pexpect.EOF)  # the spawn's 90 s: stopping the upstream alone may take 8 s (its stop's waits)
    child.close()
    assert "Traceback" not in child.before
    assert child.exitstatus == 130
