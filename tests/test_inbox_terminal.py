"""`elicitgate inbox` in a real terminal (a pty, driven with pexpect) against a real gateway process:
it waits live for an elicitation, lists it, asks the form's fields at prompts, gets the gateway's
refusal of an invalid value, asks again, reviews, submits; the tool call gets the answer."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx2
import pexpect
import pytest

from tests.conftest import PY, ROOT, Process, in_terminal, serve_http
from tests.hosted_helpers import AUTH, TOKEN
from tests.test_hosted_browser import ToolCall, content_of

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 8, "default": 2, "title": "Guests"},
        "vip": {"type": "boolean", "title": "VIP"},
        "seat": {"type": "string", "oneOf": [{"const": "in", "title": "Inside"}, {"const": "out", "title": "Terrace"}],
                 "title": "Seating"},
        "extras": {"type": "array", "items": {"type": "string", "enum": ["cake", "wine"]}, "title": "Extras"},
    },
    "required": ["name", "email", "guests"],
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    config = tmp_path_factory.mktemp("inbox") / "elicitgate.json"
    config.write_text(json.dumps({"mcpServers": {
        "x": {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "x"], "era": "handshake"}}}))
    proc = serve_http(config, env={"ELICITGATE_ADMIN_TOKEN": TOKEN})
    yield proc
    proc.stop()


def inbox(gw: Process, *args: str, token: str | None = TOKEN) -> Any:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "160"}
    env.pop("ELICITGATE_ADMIN_TOKEN", None)
    if token is not None:
        env["ELICITGATE_ADMIN_TOKEN"] = token
    return in_terminal(PY, ["-m", "elicitgate.cli", "inbox", "--url", gw.url, *args], cwd=str(ROOT), env=env,
                         encoding="utf-8", timeout=90, dimensions=(50, 160))  # per expect: generous, for a busy machine


def test_terminal_inbox_answers_a_form_at_prompts(gw):
    term = inbox(gw)
    term.expect("Waiting for elicitations")  # nothing yet: it waits on the live event stream
    call = ToolCall(gw.url, "x__elicit", {"schema": SCHEMA, "message": "Book a table"})
    term.expect("Pending elicitations")
    term.expect("Book a table")
    term.expect(r"Answer which one\?")
    term.sendline("1")
    term.expect("x.* asks")
    term.expect(r"Answer, decline or cancel\?")
    term.sendline("")  # answer (the default)
    term.expect(r"Name \*")
    term.sendline("Ada")
    term.expect(r"Email \* \(email\)")
    term.sendline("ada-at-example")  # the gateway will refuse this
    term.expect(r"Guests \*")
    term.sendline("")  # keeps the default 2
    term.expect("VIP")
    term.sendline("y")
    term.expect("Terrace")
    term.expect(r"Seating \(number\)")
    term.sendline("2")
    term.expect(r"Extras \(numbers, comma-separated\)")
    term.sendline("1,2")
    term.expect("Review")
    term.expect(r"Submit this answer\?")
    term.sendline("y")
    term.expect("The gateway did not accept the answer")
    term.expect("email: must be a valid email")
    term.expect(r"Answer, decline or cancel\?")
    term.sendline("answer")
    term.expect(r"Name \*")
    term.sendline("")  # what was typed is the default now
    term.expect(r"Email \* \(email\)")
    term.sendline("ada@example.com")
    for _ in range(4):  # guests, vip, seating, extras: keep
        term.expect(r"\):|\]:|\? ")
        term.sendline("")
    term.expect(r"Submit this answer\?")
    term.sendline("y")
    term.expect("Sent: accepted")
    assert content_of(call.outcome()) == {"action": "accept", "content": {
        "name": "Ada", "email": "ada@example.com", "guests": 2, "vip": True, "seat": "out", "extras": ["cake", "wine"]}}
    term.expect("Waiting for elicitations")
    term.sendcontrol("c")
    term.expect(pexpect.EOF)


def test_terminal_inbox_declines_and_needs_a_token(gw):
    call = ToolCall(gw.url, "x__elicit", {"message": "Deploy?"})
    term = inbox(gw, "--once")
    term.expect("Deploy")
    term.expect(r"Answer which one\?")
    term.sendline("1")
    term.expect(r"Answer, decline or cancel\?")
    term.sendline("decline")
    term.expect("Sent: declined")
    term.expect(pexpect.EOF)
    assert content_of(call.outcome()) == {"action": "decline"}
    assert httpx2.get(f"{gw.url}/api/elicitations", headers=AUTH).json() == {"elicitations": []}

    no_token = inbox(gw, token=None)
    no_token.expect("needs the admin token")
    no_token.expect(pexpect.EOF)
    no_token.close()
    assert no_token.exitstatus == 2
    wrong = inbox(gw, token="wrong")
    wrong.expect("missing or wrong admin token")
    wrong.expect(pexpect.EOF)

