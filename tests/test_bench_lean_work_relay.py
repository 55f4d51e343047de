"""`bench.lean_work_relay` against elicitgate over stdio: the real SDK client, the demo server behind each.

The relay is the floor for a gateway's work on each elicitation (`bench.floor`), so it must do that work as the
gateway does: the same questions reach the client (the `[server] ` prefix, `_meta`, a re-ask naming the answer's
problems), the same answers reach the server (accepted, declined, cancelled, asked again, refused after the last
attempt), and the same audit records are kept. Nothing the gateway accepts on this path is refused by it.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, gateway_stdio, stdio_server, write_config

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
BOOKING = {
    "name": "Ada",
    "email": "ada@example.com",
    "date": "2026-12-01",
    "guests": 2,
    "seating": "terrace",
    "extras": ["cake"],
    "newsletter": True,
}
SCRIPT: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
    ("confirm", {"question": "Go?"}, [{"action": "accept", "content": {"ok": True}}]),
    ("confirm", {"question": "Really?"}, [{"action": "decline"}]),
    ("confirm", {"question": "Sure?"}, [{"action": "cancel"}]),
    (
        "confirm",
        {"question": "Again?"},
        [{"action": "accept", "content": {"ok": "no"}}, {"action": "accept", "content": {"ok": False}}],
    ),
    ("book_table", {"restaurant": "Chez Floor"}, [{"action": "accept", "content": BOOKING}]),
    ("book_table", {}, [{"action": "accept", "content": {**BOOKING, "guests": 20}}] * 3),
]
"""(tool, arguments, the client's answers in order): each call asks once, and again while an answer does not fit."""


async def _run(server: StdioServerParameters | str, prefix: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """Every call of `SCRIPT` through `server`: the questions the client saw and the results it got."""
    answers: deque[dict[str, Any]] = deque(answer for _, _, script in SCRIPT for answer in script)
    seen: list[dict[str, Any]] = []

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.model_dump(by_alias=True, exclude_none=True))
        return types.ElicitResult.model_validate(answers.popleft())

    results: list[Any] = []
    async with Client(server, mode="legacy", elicitation_callback=answer) as client:
        for tool, arguments, _ in SCRIPT:
            try:
                result = await client.call_tool(prefix + tool, arguments)
            except MCPError as exc:
                results.append(("error", exc.error.model_dump(exclude_none=True)))
            else:
                results.append((result.is_error, [block.model_dump() for block in result.content]))
    assert not answers
    return seen, results


def _audit(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT server, tool, client, request_id, mode, state, reason, source, attempts, responder, content "
            "FROM elicitgate_audit ORDER BY created_at"
        ).fetchall()
    return [(*row[:1], row[1].removeprefix("up__"), *row[2:]) for row in rows]


def _relay(audit_dir: Path, server_module: str) -> StdioServerParameters:
    """`bench.lean_work_relay` in front of the Python module `server_module` over stdio, its audit in `audit_dir`."""
    return StdioServerParameters(
        command=PY,
        args=["-m", "bench.lean_work_relay", "--audit-dir", str(audit_dir), "--", PY, "-m", server_module],
        cwd=str(ROOT),
    )


async def test_the_relay_asks_answers_and_records_as_the_gateway(tmp_path: Path) -> None:
    gateway_audit, relay_audit = tmp_path / "gateway.db", tmp_path / "relay"
    config = write_config(
        tmp_path,
        {"up": stdio_server("elicitgate.demo.server", era="handshake")},
        audit={"url": f"sqlite:///{gateway_audit}"},
    )
    relay = _relay(relay_audit, "elicitgate.demo.server")
    gateway_seen, gateway_results = await _run(gateway_stdio(config), "up__")
    relay_seen, relay_results = await _run(relay, "")

    assert relay_seen == gateway_seen
    assert relay_results == gateway_results
    assert relay_seen[0]["message"] == "[up] Go?" and relay_seen[0]["_meta"] == {"io.elicitgate/server": "up"}
    assert relay_seen[4]["_meta"]["io.elicitgate/previousErrors"]  # the re-ask names the answer's problems
    assert [texts[0]["text"] for _, texts in relay_results[:5]] == [
        "confirm: accepted {'ok': True}",
        "confirm: decline",
        "confirm: cancel",
        "confirm: accepted {'ok': False}",
        f"book_table: accepted {BOOKING}",
    ]
    assert relay_results[5][0] == "error"  # an answer that never fits: refused, the server's error reaches the client
    assert _audit(relay_audit / "audit.db") == _audit(gateway_audit)
    assert [row[5] for row in _audit(relay_audit / "audit.db")] == [
        "accepted",
        "declined",
        "cancelled",
        "accepted",
        "accepted",
        "failed",
    ]


REQUESTS: list[dict[str, Any]] = [
    {},  # the peer's default form
    {"message": "Pick", "schema": {"type": "object", "properties": {"c": {"type": "string", "enum": ["a", "b"]}}}},
    {"schema": {"type": "object", "properties": {"n": {"type": "number", "minimum": 0, "maximum": 1}}}},
    {"schema": {"type": "object", "properties": {"password": {"type": "string"}}}},  # a secret: warned, asked
    {"schema": {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}},
    {"schema": {"type": "object", "properties": {"o": {"type": "object"}}}},  # not a form: refused
    {"schema": {"type": "array"}},
    {"message": 7},
    {"message": "x" * 100_000},
    {"mode": "odd"},
]
"""What the peer's `elicit` asks with: forms of each kind, and requests the gateway refuses."""


async def _asked_through(server: StdioServerParameters | str, prefix: str) -> tuple[list[dict[str, Any]], list[str]]:
    seen: list[dict[str, Any]] = []

    async def decline(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.model_dump(by_alias=True, exclude_none=True))
        return types.ElicitResult(action="decline")

    async with Client(server, mode="legacy", elicitation_callback=decline) as client:
        results = [
            await client.call_tool(f"{prefix}elicit", {**request, "report_errors": True}) for request in REQUESTS
        ]
    return seen, [result.content[0].text for result in results if isinstance(result.content[0], types.TextContent)]


async def test_the_relay_refuses_what_the_gateway_refuses_and_nothing_else(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"up": stdio_server("tests.peers.py_server", era="handshake")}, audit={"enabled": False}
    )
    relay = _relay(tmp_path, "tests.peers.py_server")
    gateway_seen, gateway_results = await _asked_through(gateway_stdio(config), "up__")
    relay_seen, relay_results = await _asked_through(relay, "")

    assert relay_seen == gateway_seen and len(relay_seen) == 5
    assert relay_results == gateway_results and len(relay_results) == len(REQUESTS)
    assert [text == '{"action": "decline"}' for text in relay_results] == [True] * 5 + [False] * 5
