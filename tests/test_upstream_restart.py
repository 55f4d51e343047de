"""An HTTP upstream that goes away and comes back, behind a running gateway: killed by PID (SIGKILL) and
started again on the same port. Health and `elicitgate_upstream_up` follow it within 10 s without traffic,
and each client session's next call after it is back succeeds on a new upstream session."""

from __future__ import annotations

import json
import os
import signal
import time

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.config import HttpServer, build_config
from elicitgate.errors import UPSTREAM_UNAVAILABLE, ConfigError
from tests.audit_helpers import scrape, value
from tests.conftest import PY, ROOT, Process, free_port, inprocess_gateway, serve_http, write_config

pytestmark = pytest.mark.anyio

DOWN_WITHIN = 10.0
"""docs/operations.md: an HTTP upstream that stops answering is shown down within 10 s (default probe)."""


class Upstream:
    """tests/peers/py_server.py over streamable HTTP on a port of its own, killed and restarted on that port."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.argv = [PY, "-m", "tests.peers.py_server", "--name", "h", "--http", f"127.0.0.1:{self.port}", *args]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: Process | None = Process(self.argv, self.port)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.proc.pid, signal.SIGKILL)
        self.process.proc.wait(timeout=10)
        if self.process.proc.stderr is not None:
            self.process.proc.stderr.close()
        self.process = None

    def restart(self) -> None:
        assert self.process is None
        self.process = Process(self.argv, self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def health(url: str) -> tuple[int, float]:
    """`/healthz`'s status and the `elicitgate_upstream_up` of server h."""
    status = httpx2.get(f"{url}/healthz").status_code
    return status, value(scrape(url), "elicitgate_upstream_up", server="h")


async def wait_for(url: str, wanted: tuple[int, float], within: float) -> float:
    """Poll health until it is `wanted`; the seconds that took (failing past `within`)."""
    started = time.monotonic()
    seen = health(url)
    while seen != wanted:
        assert time.monotonic() - started < within, f"still {seen} after {within}s, wanted {wanted}"
        await anyio.sleep(0.1)
        seen = health(url)
    return time.monotonic() - started


@pytest.mark.parametrize("policy", ["per_session", "shared"])
async def test_a_client_session_s_next_call_after_its_upstream_restarted_succeeds(policy: str) -> None:
    upstream = Upstream()
    config = {"mcpServers": {"h": {"url": upstream.url, "era": "handshake", "session_policy": policy}}}
    try:
        async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
            assert text(await client.call_tool("h__echo", {"text": "before"})) == "before"
            upstream.kill()
            upstream.restart()  # back before anything told the gateway: its sessions are unknown there
            assert text(await client.call_tool("h__echo", {"text": "after"})) == "after"
            assert text(await client.call_tool("h__whoami", {})) == "h"
            # The request that met the forgotten session ran once, on the new one.
            assert text(await client.call_tool("h__stats", {})).startswith('{"calls": 2')
    finally:
        upstream.stop()


@pytest.mark.parametrize("policy", ["per_session", "shared"])
async def test_calls_on_their_way_together_after_the_upstream_restarted_all_succeed(policy: str) -> None:
    # Each is refused with its own 404: the first one's must not end the connection under the others (they
    # were taken for lost in the middle, -32012 "went away", though the server had not read them).
    upstream = Upstream()
    config = {"mcpServers": {"h": {"url": upstream.url, "era": "handshake", "session_policy": policy}}}
    try:
        async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
            assert text(await client.call_tool("h__echo", {"text": "before"})) == "before"
            upstream.kill()
            upstream.restart()
            said: list[str] = []

            async def echo(word: str) -> None:
                said.append(text(await client.call_tool("h__echo", {"text": word})))

            async with anyio.create_task_group() as together:
                for word in ("one", "two", "three", "four"):
                    together.start_soon(echo, word)
            assert sorted(said) == ["four", "one", "three", "two"]
            # Each ran once, on the new server.
            assert text(await client.call_tool("h__stats", {})).startswith('{"calls": 4')
    finally:
        upstream.stop()


async def test_a_call_while_the_upstream_is_down_fails_clearly_and_the_next_one_after_it_is_back_works() -> None:
    upstream = Upstream()
    config = {"mcpServers": {"h": {"url": upstream.url, "era": "handshake"}},
              "upstream_retry": {"initial_backoff": 30, "max_backoff": 60}}
    try:
        async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
            assert text(await client.call_tool("h__echo", {"text": "before"})) == "before"
            upstream.kill()
            for _ in range(2):  # on the client's session, then (the link knows) without one
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("h__echo", {"text": "down"})
                error = caught.value.error
                assert (error.code, error.message) == (UPSTREAM_UNAVAILABLE, "upstream 'h' is not available")
                assert "ConnectError" in error.data["reason"], error.data
            upstream.restart()
            # Not at the end of a backoff of 30 s: the call itself has the link try again.
            with anyio.fail_after(20):
                assert text(await client.call_tool("h__echo", {"text": "after"})) == "after"
    finally:
        upstream.stop()


async def test_an_upstream_killed_while_idle_is_shown_down_within_10_s_and_up_after_it_restarts(tmp_path) -> None:
    upstream = Upstream()
    gateway = serve_http(write_config(tmp_path, {"h": {"url": upstream.url, "era": "handshake"}}))
    try:
        assert health(gateway.url) == (200, 1.0)
        upstream.kill()
        await wait_for(gateway.url, (503, 0.0), within=DOWN_WITHIN)
        assert httpx2.get(f"{gateway.url}/healthz").json()["upstreams"]["h"]["state"] == "down"
        upstream.restart()
        await wait_for(gateway.url, (200, 1.0), within=30)
    finally:
        gateway.stop()
        upstream.stop()


async def test_an_upstream_that_hangs_is_shown_down_within_its_probe_interval_and_timeout(tmp_path) -> None:
    upstream = Upstream()
    config = {"h": {"url": upstream.url, "era": "handshake", "probe_interval": 1, "probe_timeout": 1}}
    gateway = serve_http(write_config(tmp_path, config))
    assert upstream.process is not None
    try:
        assert health(gateway.url) == (200, 1.0)
        os.kill(upstream.process.proc.pid, signal.SIGSTOP)  # its port still takes connections; nothing answers
        await wait_for(gateway.url, (503, 0.0), within=DOWN_WITHIN)
        os.kill(upstream.process.proc.pid, signal.SIGCONT)
        await wait_for(gateway.url, (200, 1.0), within=30)
    finally:
        os.kill(upstream.process.proc.pid, signal.SIGCONT)
        gateway.stop()
        upstream.stop()


async def test_a_client_s_resource_subscription_is_renewed_on_its_new_upstream_session() -> None:
    upstream = Upstream()
    config = {"mcpServers": {"h": {"url": upstream.url, "era": "handshake"}}}
    try:
        async with inprocess_gateway(config) as gw, Client(gw.mcp_url, mode="legacy") as client:
            await client.subscribe_resource("mem://h/note")
            assert text(await client.call_tool("h__subscribed", {})) == '["mem://h/note"]'
            upstream.kill()
            upstream.restart()
            assert text(await client.call_tool("h__subscribed", {})) == '["mem://h/note"]'
    finally:
        upstream.stop()


def test_the_documented_probe_and_pacing_keys_validate_and_bad_values_are_named() -> None:
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page[page.index("## When an upstream goes away"):]
    start = section.index("```json") + len("```json")
    example = json.loads(section[start:section.index("```", start)])
    files = build_config(example, "docs/operations.md").mcp_servers["files"]
    assert isinstance(files, HttpServer)
    assert (files.probe_interval, files.probe_timeout, files.max_opening_sessions) == (5, 4, 8)
    for key, bad in (("probe_interval", 0), ("probe_timeout", -1), ("max_opening_sessions", 0)):
        with pytest.raises(ConfigError) as caught:
            build_config({"mcpServers": {"files": {"url": "http://127.0.0.1:1/mcp", key: bad}}}, "test")
        assert f"mcpServers.files.{key}" in str(caught.value), str(caught.value)
