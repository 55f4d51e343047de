"""`serve` starts its stdio servers from the file as read, before it imports typer and pydantic to validate it
(`upstreams.prespawn.start_early`, issue 34's start-up); `start` keeps the ones the validated configuration
has, with the same command, and stops the others; an exit before that stops them all. Real `elicitgate serve`
processes in front of shell launchers that say when they ran; in process, `start_early` and `start` alone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elicitgate.config import StdioServer, load_config
from elicitgate.upstreams import prespawn
from tests.conftest import PY, write_config
from tests.test_prespawn import _alive, _launched, _pids


@pytest.fixture(autouse=True)
def _nothing_left_waiting() -> Iterator[None]:
    yield
    prespawn.stop_unclaimed()


MODULES_AT_EARLY_START = """
import json, sys
out = sys.argv.pop(1)
from elicitgate.upstreams import prespawn
start_early = prespawn.start_early
def recording(args):
    start_early(args)
    open(out, "w").write(json.dumps({"modules": sorted(sys.modules), "started": sorted(prespawn._waiting)}))
prespawn.start_early = recording
from elicitgate.cli import app
app(prog_name="elicitgate")
"""
"""`elicitgate ...` that writes the modules imported and the servers started once `start_early` is done."""


def test_serve_starts_its_stdio_servers_before_it_imports_typer_or_pydantic_and_uses_them(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"one": _launched("one", tmp_path), "two": _launched("two", tmp_path)},
                          audit={"enabled": False})
    out = tmp_path / "early.json"
    done = subprocess.run([PY, "-c", MODULES_AT_EARLY_START, str(out), "serve", "--config", str(config)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ready on stdio (one up, two up)" in done.stderr, done.stderr
    early = json.loads(out.read_text())
    assert early["started"] == ["one", "two"]
    assert {"typer", "pydantic", "pydantic_core", "elicitgate.config", "mcp_types"} & set(early["modules"]) == set()
    # The processes started early are the ones that served: no second start; none left running.
    pids = _pids(tmp_path, "one") + _pids(tmp_path, "two")
    assert len(pids) == 2, done.stderr
    assert not any(_alive(pid) for pid in pids)


def test_servers_started_from_a_file_that_turns_out_invalid_are_stopped(tmp_path: Path) -> None:
    """The file parses, its servers start; validation then refuses it (exit 2, the usual message), and the
    servers are stopped on the way out, in the SDK's order (this one ignores its stdin: SIGTERM)."""
    ignores_stdin = f"sleep 60 & echo $! >> {tmp_path / 'one.pids'}; wait"
    config = write_config(tmp_path, {"one": _launched("one", tmp_path, then=ignores_stdin)},
                          elicitation={"default_timout": 5})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "elicitation.default_timout: unknown key" in done.stderr, done.stderr
    pids = _pids(tmp_path, "one")
    assert len(pids) == 2, done.stderr  # the shell and its sleep: started before the file was validated
    assert not any(_alive(pid) for pid in pids)


def test_a_wrong_option_stops_what_was_started(tmp_path: Path) -> None:
    ignores_stdin = f"sleep 60 & echo $! >> {tmp_path / 'one.pids'}; wait"
    config = write_config(tmp_path, {"one": _launched("one", tmp_path, then=ignores_stdin)})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--stdio", "--http",
                           "127.0.0.1:1"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "choose one of --stdio and --http" in done.stderr, done.stderr
    pids = _pids(tmp_path, "one")
    assert len(pids) == 2, done.stderr  # the shell and its sleep: it had time to start (stdin closed, then SIGTERM)
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.parametrize(("args", "path"), [
    (["serve", "--config", "a.json"], "a.json"),
    (["serve", "-c", "a.json", "--http", "127.0.0.1:8000"], "a.json"),
    (["serve", "--http", "127.0.0.1:8000", "--config=a.json", "--log-level", "debug"], "a.json"),
    (["serve", "--stdio", "--log-level=info", "-c", "a.json", "--config", "b.json"], "b.json"),  # the last, as typer
    (["serve", "--http", "--config", "-c", "a.json"], "a.json"),  # `--config` is --http's value
])
def test_the_config_option_is_read_as_the_cli_reads_it(args: list[str], path: str) -> None:
    options = prespawn.serve_options(args[1:])
    assert options is not None and options["--config"] == path


@pytest.mark.parametrize("args", [
    ["serve"], ["serve", "--help"], ["serve", "--config"], ["serve", "-c", "a.json", "--verbose"],
    ["serve", "-ca.json"], ["serve", "-c=a.json"], ["serve", "a.json"], ["serve", "--stdio=yes", "-c", "a.json"],
])
def test_a_command_line_not_surely_serves_starts_nothing_early(args: list[str], tmp_path: Path) -> None:
    options = prespawn.serve_options(args[1:])
    assert options is None or "--config" not in options
    prespawn.start_early([arg.replace("a.json", str(write_config(tmp_path, {"one": _cat()}))) for arg in args], {})
    assert prespawn._waiting == {}  # noqa: SLF001


def _cat(**entry: Any) -> dict[str, Any]:
    return {"command": "sh", "args": ["-c", "cat"], **entry}


def test_only_entries_validation_takes_as_written_start_early(tmp_path: Path) -> None:
    config = write_config(tmp_path, {
        "plain": _cat(env={"KEY": "${HOME}"}),
        "disabled": _cat(enabled=False),
        "http": {"url": "http://127.0.0.1:1/mcp"},
        "typed": _cat(type="stdio", cwd=str(tmp_path)),
        "number_arg": {"command": "sh", "args": ["-c", 1]},
        "number_env": _cat(env={"N": 1}),
        "no_command": {"args": []},
    })
    prespawn.start_early(["serve", "--config", str(config)], {"HOME": "/home/someone"})
    assert sorted(prespawn._waiting) == ["plain", "typed"]  # noqa: SLF001
    assert prespawn._waiting["plain"].spec == ("sh", ("-c", "cat"), (("KEY", "/home/someone"),), None)  # noqa: SLF001


@pytest.mark.parametrize("environ", [{"ELICITGATE_MCP_SERVERS__ONE__ENABLED": "false"}, {"mcpServers": "{}"}])
def test_environment_that_sets_servers_starts_nothing_early(tmp_path: Path, environ: dict[str, str]) -> None:
    config = write_config(tmp_path, {"one": _cat()})
    prespawn.start_early(["serve", "--config", str(config)], environ)
    assert prespawn._waiting == {}  # noqa: SLF001


def test_an_unset_placeholder_or_another_command_starts_nothing_early(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"one": _cat(env={"KEY": "${SURELY_UNSET_HERE}"})})
    prespawn.start_early(["serve", "--config", str(config)], {})
    prespawn.start_early(["doctor", "--config", str(write_config(tmp_path, {"one": _cat()}))], {})
    assert prespawn._waiting == {}  # noqa: SLF001


def test_vs_codes_servers_start_early(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"servers": {"one": _cat()}, "inputs": []}))
    prespawn.start_early(["serve", "--config", str(config)], {})
    assert list(prespawn._waiting) == ["one"]  # noqa: SLF001


def test_start_keeps_what_the_validated_configuration_has_and_stops_the_rest(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"kept": _cat(), "changed": _cat(), "gone": _cat()})
    prespawn.start_early(["serve", "--config", str(config)], {})
    early = dict(prespawn._waiting)  # noqa: SLF001
    prespawn.start({"kept": StdioServer(**_cat()), "changed": StdioServer(command="sh", args=["-c", "cat -u"])})
    assert prespawn._waiting["kept"] is early["kept"]  # noqa: SLF001
    assert prespawn._waiting["changed"] is not early["changed"]  # noqa: SLF001
    assert "gone" not in prespawn._waiting  # noqa: SLF001
    for thread in prespawn._stopping:  # noqa: SLF001
        thread.join(timeout=30)
    assert early["changed"].popen.returncode == 0 and early["gone"].popen.returncode == 0  # stdin closed: cat ends
    assert prespawn._waiting["kept"].popen.poll() is None  # noqa: SLF001


def test_what_starts_early_is_what_the_validated_configuration_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec read from the file is the one `start` compares (placeholders filled alike): the process is kept."""
    monkeypatch.setenv("EARLY_TEST_VALUE", "from-the-environment")
    servers = {"one": _cat(env={"A": "${EARLY_TEST_VALUE}", "B": "x"}, cwd=str(tmp_path), era="handshake",
                           request_timeout=5)}
    config = write_config(tmp_path, servers)
    prespawn.start_early(["serve", "-c", str(config)])
    early = prespawn._waiting["one"]  # noqa: SLF001
    prespawn.start(load_config(config).upstreams())
    assert prespawn._waiting["one"] is early  # noqa: SLF001
    assert dict(early.spec[2]) == {"A": "from-the-environment", "B": "x"}


def test_with_http_the_address_is_bound_first_and_handed_to_the_cli(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"one": _cat()})
    prespawn.start_early(["serve", "--config", str(config), "--http", "127.0.0.1:0"], {})
    sock = prespawn.bound_early("127.0.0.1", 0)
    assert sock is not None and list(prespawn._waiting) == ["one"]  # noqa: SLF001
    sock.close()
    assert prespawn.bound_early("127.0.0.1", 0) is None  # once


def test_an_address_in_use_starts_nothing_early(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"one": _cat()})
    with socket.socket() as taker:
        taker.bind(("127.0.0.1", 0))
        taker.listen()
        prespawn.start_early(["serve", "--config", str(config), "--http", f"127.0.0.1:{taker.getsockname()[1]}"], {})
    assert prespawn._waiting == {}  # noqa: SLF001


def test_a_config_from_a_pipe_is_read_once_by_the_validation(tmp_path: Path) -> None:
    """`--config <(...)`: a pipe gives its text once, so nothing starts early and `serve` reads it as before."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    text = json.dumps({"mcpServers": {"one": _launched("one", tmp_path)}, "audit": {"enabled": False}})

    def write_once() -> None:
        with fifo.open("w") as pipe:
            pipe.write(text)

    writer = threading.Thread(target=write_once, daemon=True)
    writer.start()
    done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(fifo)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    writer.join(timeout=5)
    assert done.returncode == 0 and "ready on stdio (one up)" in done.stderr, done.stderr
