"""Hardening (issue 11): secrets stay secret. Real gateway processes in front of real SDK peers.

- a stdio upstream gets the SDK's safe default environment plus its own `env`, nothing of the gateway's
- the admin token: empty is off, short is refused, login by POST, sessions, slowed guesses, never logged
- what a human typed is never echoed: error texts name the field and the rule, not the value
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import time

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

from elicitgate.elicitation.broker import ERRORS_META_KEY
from elicitgate.elicitation.schema import answer_problems
from elicitgate.web import admin_auth
from tests.conftest import PEERS, PY, free_port, in_terminal, serve_http, write_config
from tests.hosted_helpers import AUTH, TOKEN, PlainPage, next_pending
from tests.test_broker import Human, form, gateway, stdio_upstream, text

pytestmark = pytest.mark.anyio

TS_SERVER = str(PEERS / "ts" / "elicit_server.mjs")
ADMIN_TOKEN = "admin-CbA1VFdV9SuAbDAnpdFk0bFxP00Kx10PIUJHKqD3Urw"


def gateway_with_env(config, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY, args=["-m", "elicitgate.cli", "serve", "--config", str(config)], env={**os.environ, **env}
    )


# -- environment ------------------------------------------------------------------------------------


@pytest.mark.node
async def test_stdio_upstream_gets_only_the_safe_environment_and_its_own_env(tmp_path):
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the TypeScript SDK peer needs Node.js 20+")
    config = write_config(tmp_path, {
        "with_env": {"command": "node", "args": [TS_SERVER], "env": {"ONLY_MINE": "1"}},
        "plain": {"command": "node", "args": [TS_SERVER]},
    })
    secrets = {"ELICITGATE_ADMIN_TOKEN": ADMIN_TOKEN, "OTHER_SERVICE_API_KEY": "sk-other-service"}
    async with Client(gateway_with_env(config, **secrets), mode="legacy") as client:
        with_env = json.loads((await client.call_tool("with_env__environment", {})).content[0].text)
        plain = json.loads((await client.call_tool("plain__environment", {})).content[0].text)
    safe = set(get_default_environment())
    for names in (with_env, plain):
        assert not set(secrets) & set(names)
        assert "XDG_STATE_HOME" not in names  # set for the gateway by the tests: not a safe default
    assert "ONLY_MINE" in with_env and "ONLY_MINE" not in plain
    # node may add a variable or two of its own; nothing else of the gateway's environment arrives
    assert set(with_env) - {"ONLY_MINE"} <= safe | {"NODE_OPTIONS", "NODE"}


# -- the admin token ---------------------------------------------------------------------------------


def test_empty_admin_token_turns_the_admin_api_and_inbox_off(tmp_path):
    config = write_config(tmp_path, {"x": stdio_upstream()})
    gw = serve_http(config, env={"ELICITGATE_ADMIN_TOKEN": ""})
    try:
        for auth in ("Bearer", "Bearer x"):
            refused = httpx2.get(f"{gw.url}/api/elicitations", headers={"Authorization": auth})
            assert refused.status_code == 404, auth
        assert httpx2.get(f"{gw.url}/inbox").status_code == 404
        assert httpx2.post(f"{gw.url}/inbox", data={"token": ""}).status_code == 404
    finally:
        assert "inbox at" not in gw.stop()


def test_short_admin_token_is_refused_at_start_up_with_a_clear_error(tmp_path):
    config = write_config(tmp_path, {"x": stdio_upstream()})
    done = subprocess.run(
        [PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", "127.0.0.1:1"],
        env={**os.environ, "ELICITGATE_ADMIN_TOKEN": "tooShort-123"}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "admin_token" in done.stderr.lower() and "at least 16 characters" in done.stderr
    assert "Traceback" not in done.stderr and "tooShort-123" not in done.stderr


GUESSABLE = ["aaaaaaaaaaaaaaaa", "0123456789abcdef", "passwordpassword", "change-me-0123456789abcdef"]


@pytest.mark.parametrize("weak", GUESSABLE)
def test_guessable_admin_and_bearer_tokens_are_refused_by_check_config_naming_the_fix(tmp_path, weak):
    """Long enough, but too little entropy (`token_strength`): refused before anything is served."""
    for section in ({"admin_token": weak}, {"http": {"auth": {"tokens": [{"token": weak, "principal": "alice"}]}}}):
        config = write_config(tmp_path, {}, **section)
        done = subprocess.run([PY, "-m", "elicitgate.cli", "check-config", "--config", str(config)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        said = " ".join(done.stderr.split())
        assert "too easy to guess" in said and "at least 128 needed" in said
        assert "python -c 'import secrets; print(secrets.token_urlsafe(32))'" in said
        assert weak not in done.stderr and "Traceback" not in done.stderr
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps([{"token": weak, "principal": "alice"}]))
    config = write_config(tmp_path, {}, http={"auth": {"tokens_file": str(tokens_file)}})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "check-config", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert f"http.auth.tokens_file {tokens_file}: 0.token:" in said and "too easy to guess" in said
    assert weak not in done.stderr


def test_generated_tokens_pass_the_entropy_rule():
    import secrets

    from elicitgate.token_strength import MIN_TOKEN_BITS, estimated_bits, weakness

    assert all(weakness(secrets.token_urlsafe(32)) is None for _ in range(1000))  # the fix the error names
    assert estimated_bits("aaaaaaaaaaaaaaaa") == 0
    assert estimated_bits("ab" * 64) == MIN_TOKEN_BITS  # 1 bit per character
    assert weakness("ab" * 63) is not None


async def test_admin_token_and_page_tokens_never_reach_the_logs(tmp_path):
    # debug: the access log is written only then (and the SDK's debug lines are on too)
    config = write_config(tmp_path, {"x": stdio_upstream()}, admin_token=ADMIN_TOKEN, log_level="debug")
    gw = serve_http(config)
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        async with Client(f"{gw.url}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "x__elicit", {"report_errors": True})
            (item,) = await next_pending(gw.url, token=ADMIN_TOKEN)
            page_token = item["form_url"].rsplit("/", 1)[1]
            async with httpx2.AsyncClient(base_url=gw.url) as http:
                assert (await http.get(f"/e/{page_token}?plain=1")).status_code == 200
                assert (await http.get(f"/inbox?token={ADMIN_TOKEN}")).status_code == 401
                assert (await http.post("/inbox", data={"token": ADMIN_TOKEN})).status_code == 303
                assert (await http.get(f"/api/elicitations/{item['id']}", headers=auth)).status_code == 200
                await http.post(f"/api/elicitations/{item['id']}/cancel", headers=auth)
    finally:
        logs = gw.stop()
    logs = re.sub(r"\x1b\[[0-9;]*m", "", logs)  # uvicorn may colour the request line
    assert '"GET /e/***?*** HTTP/1.1" 200' in logs  # the access log is on, and redacted
    assert '"GET /inbox?*** HTTP/1.1" 401' in logs
    assert ADMIN_TOKEN not in logs and page_token not in logs


async def test_inbox_sessions_rotate_expire_and_are_secure_over_https(monkeypatch):
    monkeypatch.setattr(admin_auth, "SESSION_TTL", 1.0)
    async with gateway({"mcpServers": {"x": stdio_upstream()}, "admin_token": ADMIN_TOKEN}) as gw:
        async with httpx2.AsyncClient(base_url=gw.url) as http:
            first = await http.post("/inbox", data={"token": ADMIN_TOKEN})
            cookie = first.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=1" in cookie
            assert "secure" not in cookie  # plain http: a Secure cookie would never come back
            old = http.cookies[admin_auth.ADMIN_COOKIE]
            again = await http.post("/inbox", data={"token": ADMIN_TOKEN})  # presents the old cookie
            new = again.cookies[admin_auth.ADMIN_COOKIE]
            assert new != old
            http.cookies.clear()

            def with_session(sid: str) -> dict[str, str]:
                return {"Cookie": f"{admin_auth.ADMIN_COOKIE}={sid}"}

            assert (await http.get("/inbox", headers=with_session(old))).status_code == 401
            assert (await http.get("/inbox", headers=with_session(new))).status_code == 200
            await anyio.sleep(1.1)  # the session's lifetime
            assert (await http.get("/inbox", headers=with_session(new))).status_code == 401
            behind_tls = await http.post("/inbox", data={"token": ADMIN_TOKEN}, headers={"X-Forwarded-Proto": "https"})
            assert "; secure" in behind_tls.headers["set-cookie"].lower()


@pytest.mark.parametrize("https", ["x-forwarded-proto", "public_url", None])
async def test_a_hosted_pages_cookies_are_secure_whenever_the_page_is_served_over_https(https):
    cfg: dict[str, object] = {"mcpServers": {"x": stdio_upstream()}, "admin_token": ADMIN_TOKEN}
    if https == "public_url":  # TLS ends at a proxy that says nothing: the configured address says https
        cfg["http"] = {"public_url": "https://gw.example.com", "allowed_hosts": ["127.0.0.1:*", "gw.example.com"]}
    async with gateway(cfg) as gw, Client(f"{gw.url}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
        tg.start_soon(client.call_tool, "x__elicit", {})
        (item,) = await next_pending(gw.url, token=ADMIN_TOKEN)
        headers = {"X-Forwarded-Proto": "https"} if https == "x-forwarded-proto" else {}
        async with httpx2.AsyncClient(base_url=gw.url) as http:
            shown = await http.get(f"/e/{item['form_url'].rsplit('/e/', 1)[1]}", headers=headers)
            cookies = {c.split("=", 1)[0]: c.lower() for c in shown.headers.get_list("set-cookie")}
            assert set(cookies) == {"eg_claim", "eg_csrf"}, cookies
            assert all(("; secure" in c) == (https is not None) for c in cookies.values()), cookies
            await http.post(
                f"/api/elicitations/{item['id']}/cancel", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
            )


async def test_failed_logins_slow_their_address_only(caplog):
    async with gateway({"mcpServers": {"x": stdio_upstream()}, "admin_token": ADMIN_TOKEN}) as gw:
        other = httpx2.AsyncHTTPTransport(local_address="127.0.0.2")
        right = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx2.AsyncClient(base_url=gw.url) as http, \
                httpx2.AsyncClient(base_url=gw.url, transport=other) as neighbour:
            assert (await http.post("/inbox", data={"token": "wrong-guess-000000"})).status_code == 401
            started = time.monotonic()
            slowed = await http.post("/inbox", data={"token": "wrong-guess-000001"})
            assert slowed.status_code == 429 and slowed.headers["retry-after"] == "1"
            api = await http.get("/api/elicitations", headers={"Authorization": "Bearer wrong-guess-000002"})
            assert api.status_code == 429 and api.json()["retryAfterSeconds"] == 1
            assert time.monotonic() - started < 1  # answered at once: nothing waits in the gateway
            assert (await neighbour.post("/inbox", data={"token": "wrong-guess-000003"})).status_code == 401
            assert (await http.get("/healthz")).status_code == 200
            await anyio.sleep(float(slowed.headers["retry-after"]))
            assert (await http.post("/inbox", data={"token": "wrong-guess-000004"})).status_code == 401
            await anyio.sleep(1.0)
            assert (await http.post("/inbox", data={"token": "wrong-guess-000005"})).status_code == 429
            # The right token is never refused: the guesses of others (or earlier ones) lock nobody out.
            assert (await http.post("/inbox", data={"token": ADMIN_TOKEN})).status_code == 303
            assert (await http.get("/api/elicitations", headers=right)).status_code == 200


async def test_many_wrong_tokens_never_lock_out_the_right_one_and_a_new_forwarded_for_starts_no_new_count(tmp_path):
    """From a trusted proxy's address (127.0.0.1, uvicorn's default), the client address is the one
    `X-Forwarded-For` names: a guesser who names a new one each time is still counted at the proxy."""
    gw = serve_http(write_config(tmp_path, {"x": stdio_upstream()}, admin_token=ADMIN_TOKEN))
    try:
        async with httpx2.AsyncClient(base_url=gw.url) as http:
            def via(client: str, token: str) -> dict[str, str]:
                return {"X-Forwarded-For": client, "Authorization": f"Bearer {token}"}

            assert (await http.get("/api/elicitations", headers=via("10.0.0.1", "wrong-guess-0001"))).status_code == 401
            for i in range(2, 12):
                spoofed = await http.get("/api/elicitations", headers=via(f"10.0.0.{i}", f"wrong-guess-{i:04}"))
                assert spoofed.status_code == 429, i
            for client in ("10.0.0.1", "10.0.0.99"):  # the admin, behind the same proxy as the guesser
                assert (await http.get("/api/elicitations", headers=via(client, ADMIN_TOKEN))).status_code == 200
            assert (await http.post("/inbox", data={"token": ADMIN_TOKEN})).status_code == 303
    finally:
        gw.stop()


# -- no echo of what was typed ---------------------------------------------------------------------

MARKER = "hunter2-SECRET-7f3a"
EVERY_KIND = form(
    ["name"],
    name={"type": "string", "minLength": 40},
    code={"type": "string", "maxLength": 3},
    email={"type": "string", "format": "email"},
    site={"type": "string", "format": "uri"},
    day={"type": "string", "format": "date"},
    when={"type": "string", "format": "date-time"},
    age={"type": "integer", "minimum": 0},
    score={"type": "number", "maximum": 1},
    agree={"type": "boolean"},
    colour={"type": "string", "enum": ["red", "green"]},
    size={"type": "string", "oneOf": [{"const": "s", "title": "Small"}]},
    tags={"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1},
    picks={"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}},
)
MARKED = {name: MARKER for name in EVERY_KIND["properties"]} | {
    "tags": [MARKER, MARKER], "picks": [MARKER], "unasked": MARKER,
}


def test_answer_problems_name_field_and_rule_never_the_value():
    problems = answer_problems(EVERY_KIND, MARKED)
    assert MARKER not in json.dumps(problems)
    by_field = {p["property"]: p["message"] for p in problems}
    assert set(EVERY_KIND["properties"]) <= set(by_field)
    assert by_field["name"] == "must be at least 40 characters long"
    assert by_field["code"] == "must be at most 3 characters long"
    assert by_field["email"] == "must be a valid email"
    assert by_field["age"] == "must be a whole number"
    assert by_field["colour"] == "must be one of the offered choices"
    assert by_field[None] == "unexpected field(s): unasked"
    assert answer_problems(EVERY_KIND, {"name": "x" * 40, "unasked": 1}) == [
        {"property": None, "message": "unexpected field(s): unasked"}]


def gateway_logs(caplog: pytest.LogCaptureFixture) -> str:
    """What the gateway logs at its default level, plus all of its own debug lines (the SDK's debug
    lines carry whole messages, the test client's included: `log_level: debug` is for development)."""
    return "\n".join(
        r.getMessage() for r in caplog.records if r.levelno >= logging.INFO or r.name.startswith("elicitgate")
    )


def _no_marker(*texts: object) -> None:
    for text_ in texts:
        assert MARKER not in (text_ if isinstance(text_, str) else json.dumps(text_, default=str))


async def test_typed_value_reaches_neither_the_client_nor_the_upstream_nor_the_logs(caplog):
    caplog.set_level(logging.DEBUG)
    human = Human(types.ElicitResult(action="accept", content=MARKED))
    async with gateway({"mcpServers": {"x": stdio_upstream()}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": EVERY_KIND, "report_errors": True}))
    first, second, third = human.seen
    for again in (second, third):
        assert again.message.startswith("[x] Your previous answer was not accepted (")
        assert "name: must be at least 40 characters long" in again.message
        _no_marker(again.message, again.meta[ERRORS_META_KEY])
    assert {p["property"] for p in result["error"]["data"]["errors"]} >= set(EVERY_KIND["properties"])
    _no_marker(result, gw.gateway.broker.recent[-1])
    _no_marker(gateway_logs(caplog))


async def test_typed_value_is_not_echoed_by_the_admin_api_or_the_hosted_page(caplog):
    caplog.set_level(logging.DEBUG)
    async with gateway({"mcpServers": {"x": stdio_upstream()}, "admin_token": TOKEN}) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "x__elicit", {"schema": EVERY_KIND, "report_errors": True})
            (item,) = await next_pending(gw.url)
            async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
                refused = await http.post(f"/api/elicitations/{item['id']}/answer",
                                          json={"action": "accept", "content": MARKED})
                assert refused.status_code == 422
                _no_marker(refused.text)
                page = PlainPage(http, item["form_url"])
                await page.open()
                typed = {name: MARKER for name in ("name", "code", "email", "site", "day", "age", "score")}
                await page.post("review", **typed)
                assert 'class="eg-error"' in page.html
                # the page may keep what was typed in its inputs; no error text repeats it
                _no_marker(re.sub(r'value="[^"]*"', "", page.html))
                detail = await http.get(f"/api/elicitations/{item['id']}")
                assert detail.json()["errors"]
                _no_marker(detail.text)
                await http.post(f"/api/elicitations/{item['id']}/cancel")
    _no_marker(gateway_logs(caplog))


# -- the terminal inbox shows upstream text literally -------------------------------------------------

HOSTILE_TITLE = "Pick [/] or [link=https://evil.example]here[/link]\x1b[2J"
HOSTILE_MESSAGE = "Deploy [bold]now[/bold]\x1b]0;pwned\x07 [/]"


def test_terminal_inbox_shows_upstream_text_literally_without_control_characters(tmp_path):
    import io

    import pexpect

    from tests.conftest import ROOT
    from tests.test_hosted_browser import ToolCall, content_of

    config = write_config(tmp_path, {"x": stdio_upstream()}, admin_token=ADMIN_TOKEN)
    gw = serve_http(config)
    try:
        schema = {"type": "object", "properties": {"q": {"type": "string", "title": HOSTILE_TITLE}}, "required": ["q"]}
        call = ToolCall(gw.url, "x__elicit", {"schema": schema, "message": HOSTILE_MESSAGE})
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "ELICITGATE_ADMIN_TOKEN": ADMIN_TOKEN}
        env.pop("NO_COLOR", None)
        term = in_terminal(PY, ["-m", "elicitgate.cli", "inbox", "--url", gw.url, "--once"], cwd=str(ROOT),
                             env=env, encoding="utf-8", timeout=90, dimensions=(50, 160))
        term.logfile_read = seen = io.StringIO()
        term.expect(r"Answer which one\?")
        term.sendline("1")
        term.expect(r"Answer, decline or cancel\?")
        term.sendline("answer")
        term.expect("here")  # the field's title, as a prompt
        term.sendline("yes")
        term.expect(r"Submit this answer\?")
        term.sendline("y")
        term.expect("Sent: accepted")
        term.expect(pexpect.EOF)
        assert content_of(call.outcome()) == {"action": "accept", "content": {"q": "yes"}}
    finally:
        gw.stop()
    shown = seen.getvalue()
    assert "Traceback" not in shown
    assert "Pick [/] or [link=https://evil.example]here[/link]" in shown  # literally, markup and all
    assert "Deploy [bold]now[/bold]" in shown
    assert "\x1b]8;" not in shown  # no terminal hyperlink
    assert "\x1b[2J" not in shown and "\x1b]0;" not in shown  # no screen clearing, no window title


# -- start-up and check-config ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n", "0123abcd", "zz" * 32], ids=["empty", "blank", "truncated", "not-hex"])
def test_bad_state_key_file_stops_start_up_with_a_clear_error(tmp_path, content):
    key_file = tmp_path / "state.key"
    key_file.write_text(content)
    config = write_config(tmp_path, {"x": stdio_upstream()}, bridging={"state_key_file": str(key_file)})
    for face in (["--http", f"127.0.0.1:{free_port()}"], ["--stdio"]):
        done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(config), *face],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert str(key_file) in done.stderr and "64 hex digits" in done.stderr
        assert "Traceback" not in done.stderr


def test_check_config_masks_headers_and_env(tmp_path):
    config = write_config(tmp_path, {
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer sk-header-secret"}},
        "local": {"command": "server", "env": {"API_KEY": "sk-env-secret"}},
    })
    done = subprocess.run([PY, "-m", "elicitgate.cli", "check-config", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Authorization" in done.stdout and "API_KEY" in done.stdout and "https://example.com/mcp" in done.stdout
    assert "sk-header-secret" not in done.stdout and "sk-env-secret" not in done.stdout


# -- logs cannot be forged ------------------------------------------------------------------------------


async def test_upstream_controlled_text_cannot_forge_log_lines(tmp_path):
    forged = "2026-01-01 00:00:00,000 CRITICAL elicitgate: FORGED"
    config = write_config(tmp_path, {"x": stdio_upstream()}, admin_token=ADMIN_TOKEN, log_level="debug")
    gw = serve_http(config)
    try:
        schema = form(**{f"password\n{forged}": {"type": "string"}})
        async with Client(f"{gw.url}/mcp", mode="legacy",
                          elicitation_callback=Human(types.ElicitResult(action="decline"))) as client:
            await client.call_tool("x__elicit", {"schema": schema})  # its field name is logged (a secret asked)
        async with httpx2.AsyncClient(base_url=gw.url) as http:
            await http.get(f"/inbox%0A{forged.replace(' ', '%20')}")  # a path in the access log
    finally:
        logs = gw.stop()
    assert "asks for secrets" in logs and "GET /inbox" in logs
    assert not any(line.startswith(forged) or line.startswith("FORGED") for line in logs.splitlines())
    assert "\\n" + forged in logs  # escaped, on the line that logged it


# -- questions inside a parked call have the call's deadline ---------------------------------------------


@pytest.mark.parametrize("upstream_era", ["handshake", "modern"])
async def test_sampling_inside_a_parked_call_ends_at_the_deadline(upstream_era):
    from tests.test_eras import RawModernClient

    server = {**stdio_upstream(), "era": upstream_era, "elicitation_timeout": 1}
    async with gateway({"mcpServers": {"x": server}}) as gw, httpx2.AsyncClient() as http:
        raw = RawModernClient(gw.mcp_url, capabilities={"sampling": {}, "elicitation": {"form": {}}})
        first = (await raw.call(http, "x__sample", {"prompt": "hi"}))["result"]
        assert first["resultType"] == "input_required"
        assert [q["method"] for q in first["inputRequests"].values()] == ["sampling/createMessage"]
        await anyio.sleep(1.5)  # the client never answers; the question's deadline passes
        retry = await raw.call(http, "x__sample", {"prompt": "hi"}, requestState=first["requestState"],
                               inputResponses={})
        outcome = retry.get("error") or retry["result"]
        assert outcome.get("resultType") != "input_required", outcome  # not asked again: it ended
        assert "did not answer" in json.dumps(outcome)
