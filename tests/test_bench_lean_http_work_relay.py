"""`bench.lean_http_work_relay` against elicitgate over streamable HTTP: the real SDK client, the demo server (and the
Python test peer) on HTTP behind each. As over stdio (tests/test_bench_lean_work_relay.py): the same questions reach
the client, the same answers the server, the same audit records are kept, and what the gateway refuses is refused
with the same errors, nothing else."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import PY, Process, write_config
from tests.test_bench_lean_work_relay import BOOKING, REQUESTS, ROOT, _asked_through, _audit, _run

pytestmark = pytest.mark.anyio


def _relay(upstream: str, audit_dir: Path) -> Process:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return Process.on_free_port(
        lambda port: [
            PY,
            "-m",
            "bench.lean_http_work_relay",
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            upstream,
            "--audit-dir",
            str(audit_dir),
        ],
        env=env,
    )


async def test_over_http_the_relay_asks_answers_and_records_as_the_gateway(
    tmp_path: Path, http_upstream: Callable[..., Process], http_gateway: Callable[..., Process]
) -> None:
    upstream = f"{http_upstream('elicitgate.demo.server').url}/mcp"
    gateway_audit, relay_audit = tmp_path / "gateway.db", tmp_path / "relay"
    relay_audit.mkdir()
    config = write_config(
        tmp_path, {"up": {"url": upstream, "era": "handshake"}}, audit={"url": f"sqlite:///{gateway_audit}"}
    )
    gateway, relay = http_gateway(config), _relay(upstream, relay_audit)
    try:
        gateway_seen, gateway_results = await _run(f"{gateway.url}/mcp", "up__")
        relay_seen, relay_results = await _run(f"{relay.url}/mcp", "")
    finally:  # each stores what its audit trail has queued as it stops
        gateway.stop()
        relay.stop()

    assert relay_seen == gateway_seen
    assert relay_results == gateway_results
    assert relay_seen[0]["message"] == "[up] Go?" and relay_seen[0]["_meta"] == {"io.elicitgate/server": "up"}
    assert relay_seen[4]["_meta"]["io.elicitgate/previousErrors"]
    assert relay_results[4][1][0]["text"] == f"book_table: accepted {BOOKING}" and relay_results[5][0] == "error"
    assert _audit(relay_audit / "audit.db") == _audit(gateway_audit)


async def test_over_http_the_relay_refuses_what_the_gateway_refuses_and_nothing_else(
    tmp_path: Path, http_upstream: Callable[..., Process], http_gateway: Callable[..., Process]
) -> None:
    upstream = f"{http_upstream('tests.peers.py_server').url}/mcp"
    config = write_config(tmp_path, {"up": {"url": upstream, "era": "handshake"}}, audit={"enabled": False})
    gateway, relay = http_gateway(config), _relay(upstream, tmp_path)
    try:
        gateway_seen, gateway_texts = await _asked_through(f"{gateway.url}/mcp", "up__")
        relay_seen, relay_texts = await _asked_through(f"{relay.url}/mcp", "")
    finally:
        relay.stop()

    assert relay_seen == gateway_seen and len(relay_seen) == 5
    assert relay_texts == gateway_texts and len(relay_texts) == len(REQUESTS)
