"""Notices (docs/notify.md) with real parts: the `apprise` library posting `json://` to HTTP receivers this
test starts, a real gateway over HTTP with `mcp` SDK clients, hosted pages answered with plain form posts.

Covered: a hosted question announced (client without forms, no inbox), what a notice never carries, a
failing and a hanging target beside a working one, `always` with the page and the client racing (either
may win; the loser is told), headless clients, `unattended` decline and wait, per-tool rules, check-config
and `doctor --notify`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
from collections import Counter
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from prometheus_client import REGISTRY

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from elicitgate.client_files import parse_jsonc
from elicitgate.config import build_config
from elicitgate.elicitation.notice_rules import rule_for, unattended_for
from elicitgate.errors import ConfigError
from tests.conftest import PY, ROOT, free_port, write_config
from tests.hosted_helpers import TOKEN, PlainPage
from tests.notify_helpers import closed_port_url, link_in, receiver, silent_receiver, text_of
from tests.test_broker import Human, accept, ended, form, gateway, stdio_upstream, text, wait_until
from tests.test_hosted import Call

pytestmark = pytest.mark.anyio

ASK = form(["name"], name={"type": "string", "title": "Name"})
SECRET_DEFAULT = "sk-DEFAULT-0000-secret"
WITH_SECRET = form(
    ["name", "api_key"],
    name={"type": "string", "title": "Name"},
    api_key={"type": "string", "title": "API key", "default": SECRET_DEFAULT},
)


def notify_config(urls: list[str], *, token: str | None = None, server: dict[str, Any] | None = None,
                  **notify: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "mcpServers": {"x": stdio_upstream(**(server or {}))},
        "elicitation": {"notify": {"urls": urls, **notify}},
    }
    if token is not None:
        cfg["admin_token"] = token
    return cfg


def notices(scheme: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("elicitgate_notices_total", {"scheme": scheme, "outcome": outcome}) or 0.0


# -- a hosted question is announced ---------------------------------------------------------------------


async def test_client_without_forms_gets_its_question_announced_and_answered_on_the_page():
    """`hosted` (the default): a client without elicitation, no admin token (no inbox): the notice is the way
    to the page. The notice says who asks and why, until when, and links to the page under public_url."""
    sent_before = notices("json", "sent")
    async with receiver() as got:
        cfg = notify_config([got.url()])
        async with gateway(cfg) as gw:
            async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK, "message": "Who deploys today?"})
                (post,) = await got.wait()
                notice = text_of(post)
                assert "x asks" in post["title"] and "x__elicit" in notice
                assert "Who deploys today?" in notice and "It waits until" in notice
                link = link_in(post)
                assert link.startswith(f"{gw.url}/e/")
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link)
                    assert (await page.open()).status_code == 200
                    assert "Who deploys today?" in page.html and 'id="eg-server">x<' in page.html
                    assert '<code id="eg-tool">x__elicit</code>' in page.html  # and why: the call it is for
                    await page.post("review", name="Ada")
                    done = await page.post("submit")
                    assert done.status_code == 410 and "Your answer was sent." in done.text
                assert text(await call.wait()) == {"action": "accept", "content": {"name": "Ada"}}
        assert notices("json", "sent") == sent_before + 1


async def test_a_notice_never_carries_a_default_a_typed_value_or_the_admin_token():
    async with receiver() as got:
        cfg = notify_config([got.url()], token=TOKEN, remind_every=0.3)
        cfg["elicitation"]["sensitive_fields"] = "host"
        async with gateway(cfg) as gw:
            async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": WITH_SECRET, "message": "Connect"})
                (first,) = await got.wait()
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link_in(first))
                    await page.open()
                    assert SECRET_DEFAULT not in page.html  # a secret's default is not shown to the page either
                    await page.post("review", name="Typed-NAME-value", api_key="Typed-KEY-value")
                    posts = await got.wait(3)  # reminders, sent while the typed values sit in the review
                    await page.post("submit")
                result = text(await call.wait())
                assert result["content"]["name"] == "Typed-NAME-value"
        for post in posts:
            raw = str(post)
            for never in (SECRET_DEFAULT, "Typed-NAME-value", "Typed-KEY-value", TOKEN, "requestState"):
                assert never not in raw, (never, post)
        assert posts[1]["title"].startswith("Reminder: ")


async def test_a_failing_and_a_hanging_target_delay_nothing_and_are_counted(caplog):
    """A refused connection, a 500 and a server that never answers, beside a working receiver: the working one
    gets the notice at once; the others are retried, cut off, counted and logged once each, while the
    question stays open; the person answers and the tool returns."""
    caplog.set_level(logging.WARNING, logger="elicitgate.elicitation.notify")
    failed_before, timed_out_before = notices("json", "failed"), notices("json", "timed_out")
    async with receiver() as got, receiver(status=500) as broken, silent_receiver() as hangs:
        urls = [closed_port_url(), broken.url(), hangs.url, got.url()]
        cfg = notify_config(urls, timeout=2, retries=1)
        async with gateway(cfg) as gw:
            async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                assert notices("json", "timed_out") == timed_out_before  # it did not wait for the hanging one
                # At least: a send an earlier test left in its daemon thread may still be counted meanwhile.
                await wait_until(lambda: notices("json", "failed") >= failed_before + 2
                                 and notices("json", "timed_out") >= timed_out_before + 1, timeout=60)
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link_in(post))
                    await page.open()
                    await page.post("review", name="Ada")
                    await page.post("submit")
                assert text(await call.wait()) == {"action": "accept", "content": {"name": "Ada"}}
        assert len(broken.posts) == 2  # retried once
        assert len(got.posts) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "notice" in r.getMessage()]
    kinds = Counter(m.split(" target ")[1].split(" after")[0] for m in warnings)
    assert kinds >= Counter(["failed", "failed", "timed out"]), warnings
    assert all("after 2 attempts" in m and "127.0.0.1" not in m for m in warnings)  # never the URL


async def test_a_hanging_target_is_cut_off_and_counted_timed_out():
    before = notices("json", "timed_out")
    async with silent_receiver() as hangs:
        cfg = notify_config([hangs.url], timeout=0.5, retries=0, server={"elicitation_timeout": 30})
        async with gateway(cfg) as gw:
            async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                await wait_until(lambda: notices("json", "timed_out") == before + 1, timeout=20)
                (item,) = gw.gateway.broker.pending.values()
                item.stop(item.state.CANCELLED, "test over")
                assert text(await call.wait()) == {"action": "cancel"}


async def test_a_hanging_send_never_holds_the_gateways_exit(tmp_path):
    """`serve --stdio` (the hosted pages on `http.hosted_listen`) with a question announced to a target that
    never answers, and a send timeout far longer than the test: when its client closes stdin the process
    exits at once all the same (uvicorn's signal handling would hide this on `serve --http`)."""
    async with silent_receiver() as hangs:
        path = write_config(tmp_path, {"x": stdio_upstream()}, http={"hosted_listen": f"127.0.0.1:{free_port()}"},
                            elicitation={"notify": {"urls": [hangs.url], "timeout": 600, "retries": 0}})
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x__elicit", "arguments": {}}},
        ]
        async with await anyio.open_process([PY, "-m", "elicitgate.cli", "serve", "--config", str(path)]) as proc:
            assert proc.stdin is not None
            await proc.stdin.send("".join(json.dumps(line) + "\n" for line in lines).encode())
            with anyio.fail_after(60):
                await hangs.connected.wait()
            started = time.monotonic()
            await proc.stdin.aclose()
            with anyio.fail_after(60):
                await proc.wait()
            assert time.monotonic() - started < 20


# -- always: the page beside the client, first answer wins ------------------------------------------------


async def test_always_page_answer_wins_over_a_client_that_never_answers():
    human = Human()  # shows the question, never answers
    async with receiver() as got:
        async with gateway(notify_config([got.url()], when="always", after=0)) as gw:
            async with (
                Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
                anyio.create_task_group() as tg,
            ):
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK, "message": "Release?"})
                (post,) = await got.wait()
                with anyio.fail_after(10):
                    await human.asked.wait()  # the client shows it too
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link_in(post))
                    await page.open()
                    await page.post("review", name="From the page")
                    await page.post("submit")
                assert text(await call.wait()) == {"action": "accept", "content": {"name": "From the page"}}
                with anyio.fail_after(10):
                    await human.cancelled.wait()  # its pending elicitation/create: notifications/cancelled
            (summary,) = ended(gw)
            assert summary["state"] == "accepted" and summary["responder"] == "notice_page"


async def test_always_client_answer_wins_and_the_page_says_so():
    noticed = anyio.Event()

    async def answer_after_the_notice(params: Any) -> types.ElicitResult:
        await noticed.wait()
        return accept({"name": "From the client"})

    human = Human(answer_after_the_notice)
    async with receiver() as got:
        async with gateway(notify_config([got.url()], when="always", after=0)) as gw:
            async with (
                Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
                anyio.create_task_group() as tg,
            ):
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link_in(post))
                    assert (await page.open()).status_code == 200
                    noticed.set()
                    assert text(await call.wait()) == {"action": "accept", "content": {"name": "From the client"}}
                    late = await page.open()
                    assert late.status_code == 410
                    assert 'data-by="client"' in late.text and "answered in the MCP client" in late.text
            (summary,) = ended(gw)
            assert summary["responder"] == "client"


async def test_always_with_a_2026_client_its_retry_gets_the_page_answer():
    """The 2026-07-28 client shows the question (its callback runs) and answers only after the page did:
    its retry gets the call's result, which carries the page's answer."""
    page_answered = anyio.Event()

    async def answer_late(params: Any) -> types.ElicitResult:
        await page_answered.wait()
        return accept({"name": "Too late"})

    human = Human(answer_late)
    async with receiver() as got:
        cfg = notify_config([got.url()], when="always", after=0, server={"era": "auto"})
        async with gateway(cfg) as gw:
            async with (
                Client(gw.mcp_url, mode="2026-07-28", elicitation_callback=human) as client,
                anyio.create_task_group() as tg,
            ):
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link_in(post))
                    await page.open()
                    await page.post("review", name="From the page")
                    await page.post("submit")
                await wait_until(lambda: len(ended(gw)) == 1)
                page_answered.set()
                assert text(await call.wait()) == {"action": "accept", "content": {"name": "From the page"}}
            assert ended(gw)[0]["responder"] == "notice_page"


# -- headless clients and unattended questions ------------------------------------------------------------


async def test_headless_client_by_header_never_gets_the_question_the_notice_does():
    human = Human(accept({"name": "never"}))
    async with receiver() as got:
        cfg = notify_config([got.url()])
        cfg["elicitation"]["headless"] = {"headers": {"X-Unattended": "*"}}
        async with gateway(cfg) as gw:
            http = httpx2.AsyncClient(headers={"X-Unattended": "ci"}, timeout=httpx2.Timeout(30, read=300))
            transport = streamable_http_client(gw.mcp_url, http_client=http)
            async with Client(transport, mode="legacy", elicitation_callback=human) as client, \
                    anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                async with httpx2.AsyncClient() as browser:
                    page = PlainPage(browser, link_in(post))
                    await page.open()
                    await page.post("decline")
                assert text(await call.wait()) == {"action": "decline"}
            assert human.seen == []
            assert ended(gw)[0]["responder"] == "hosted_inbox"


async def test_headless_client_by_name_and_a_watched_one_beside_it():
    watched = Human(accept({"name": "watched"}))
    async with receiver() as got:
        cfg = notify_config([got.url()])
        cfg["elicitation"]["headless"] = {"client_names": ["nightly-*"]}
        async with gateway(cfg) as gw:
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=watched) as client:
                assert text(await client.call_tool("x__elicit", {"schema": ASK}))["content"] == {"name": "watched"}
            assert got.posts == []  # a question the client showed: no notice under `hosted`
            headless = Human(accept({"name": "never"}))
            info = types.Implementation(name="nightly-agent", version="1")
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=headless, client_info=info) as client, \
                    anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                async with httpx2.AsyncClient() as browser:
                    page = PlainPage(browser, link_in(post))
                    await page.open()
                    await page.post("cancel")
                assert text(await call.wait()) == {"action": "cancel"}
            assert headless.seen == []


async def test_headless_principal_of_http_auth_and_another_principal_beside_it():
    """`principals`: a static token's principal; the same gateway's other token is an ordinary client."""
    ci_token = "ci-9so0G9792wVNUsRfetz4v7hkU4xsmWOlPlL--B7jRp4"
    person_token = "person-XAvc5KbJpV8y3TUSS-7qirex1nWv0zAEug-cnygBah8"
    async with receiver() as got:
        cfg = notify_config([got.url()])
        cfg["elicitation"]["headless"] = {"principals": ["ci-runner"]}
        cfg["http"] = {"auth": {"tokens": [{"token": ci_token, "principal": "ci-runner"},
                                           {"token": person_token, "principal": "ada"}]}}
        async with gateway(cfg) as gw:

            def as_principal(token: str, human: Human) -> Client:
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                          timeout=httpx2.Timeout(30, read=300))
                return Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy",
                              elicitation_callback=human)

            person = Human(accept({"name": "Ada"}))
            async with as_principal(person_token, person) as client:
                assert text(await client.call_tool("x__elicit", {"schema": ASK}))["content"] == {"name": "Ada"}
            ci = Human(accept({"name": "never"}))
            async with as_principal(ci_token, ci) as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                async with httpx2.AsyncClient() as browser:
                    page = PlainPage(browser, link_in(post))
                    await page.open()
                    await page.post("review", name="From the phone")
                    await page.post("submit")
                assert text(await call.wait())["content"] == {"name": "From the phone"}
            assert ci.seen == [] and len(person.seen) == 1


async def test_unattended_decline_declines_at_the_deadline():
    human = Human()  # never answers
    cfg = {"mcpServers": {"x": stdio_upstream(elicitation_timeout=0.5, unattended="decline")}}
    async with gateway(cfg) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            assert text(await client.call_tool("x__elicit", {"schema": ASK})) == {"action": "decline"}
            with anyio.fail_after(10):
                await human.cancelled.wait()
        (summary,) = ended(gw)
        assert summary["state"] == "timed_out" and summary["responder"] == "unattended"


async def test_unattended_cancel_is_the_default_and_keeps_todays_timeout():
    human = Human()
    cfg = {"mcpServers": {"x": stdio_upstream(elicitation_timeout=0.5)}}
    async with gateway(cfg) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": ASK, "report_errors": True}))
            assert result["error"]["code"] == -32016
        assert ended(gw)[0]["responder"] == "client"


async def test_unattended_wait_keeps_the_question_open_on_its_page_only():
    """At the deadline the client's request is let go (notifications/cancelled), the question now waits on
    its page, a notice says so, and the page's answer reaches the upstream."""
    human = Human()
    async with receiver() as got:
        cfg = notify_config([got.url()], server={"elicitation_timeout": 0.5, "unattended": "wait"})
        async with gateway(cfg) as gw:
            async with (
                Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
                anyio.create_task_group() as tg,
            ):
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK})
                (post,) = await got.wait()
                with anyio.fail_after(10):
                    await human.cancelled.wait()
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, link_in(post))
                    await page.open()
                    await page.post("review", name="Later")
                    await page.post("submit")
                assert text(await call.wait()) == {"action": "accept", "content": {"name": "Later"}}
            (summary,) = ended(gw)
            assert summary["state"] == "accepted" and summary["responder"] == "notice_page"


# -- rules, check-config, doctor ---------------------------------------------------------------------------


async def test_one_tool_pages_and_another_of_the_same_server_does_not():
    noticed = anyio.Event()

    async def answer_once_noticed(params: Any) -> types.ElicitResult:
        await noticed.wait()
        return accept({"name": "Ada"})

    async with receiver() as got:
        server = {"per_tool": {"elicit": {"notify": {"when": "always", "after": 0}}}}
        async with gateway(notify_config([got.url()], server=server)) as gw:
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=Human(answer_once_noticed)) as client, \
                    anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK, "message": "Deploy?"})
                (post,) = await got.wait()
                assert "x__elicit" in post["title"]
                noticed.set()
                await call.wait()
            quiet = Human(accept({"name": "Ada"}))
            async with Client(gw.mcp_url, mode="legacy", elicitation_callback=quiet) as client:
                await client.call_tool("x__elicit_twice", {"schema": ASK})
            assert len(quiet.seen) == 2 and len(got.posts) == 1


def test_per_server_and_per_tool_rules_override_the_gateway_wide_ones():
    cfg = build_config({
        "elicitation": {"notify": {"urls": ["json://127.0.0.1:1/a"], "after": 30}, "unattended": "decline"},
        "mcpServers": {
            "ops": {"command": "x", "notify": {"when": "always"}, "unattended": "wait",
                    "per_tool": {"deploy": {"notify": {"after": 0, "urls": ["ntfy://pager"]}},
                                 "search": {"notify": {"when": "never"}, "unattended": "cancel"}}},
            "docs": {"command": "x"},
        },
    }, "test")
    deploy = rule_for(cfg, "ops", "ops__deploy")
    assert (deploy.when, deploy.after, deploy.urls) == ("always", 0, ("ntfy://pager",))
    assert not rule_for(cfg, "ops", "ops__search").on
    other = rule_for(cfg, "ops", "ops__list")
    assert (other.when, other.after, other.urls) == ("always", 30, ("json://127.0.0.1:1/a",))
    assert rule_for(cfg, "docs", None).when == "hosted"
    assert unattended_for(cfg, "ops", "ops__search") == "cancel"
    assert unattended_for(cfg, "ops", "ops__deploy") == "wait"
    assert unattended_for(cfg, "docs", "docs__x") == "decline"


def test_what_marks_a_client_headless():
    from elicitgate.config import HeadlessConfig
    from elicitgate.elicitation.headless import header_matches, principal_names

    config = HeadlessConfig(headers={"X-Elicitgate-Headless": "*", "X-Runner": "ci"})
    assert header_matches(config, {"x-elicitgate-headless": ""})  # any value, names in any case
    assert header_matches(config, {"x-runner": "ci"}) and not header_matches(config, {"x-runner": "laptop"})
    assert not header_matches(config, {"authorization": "Bearer x"})
    assert principal_names('auth:["ci-runner","elicitgate:static","ci-runner"]') == {"ci-runner"}
    assert principal_names('auth:["client-7","https://issuer.example","user-42"]') == {"client-7", "user-42"}
    assert principal_names(None) == set() and principal_names("auth:not json") == set()


def test_an_invalid_apprise_url_is_refused_naming_the_target(tmp_path):
    with pytest.raises(ConfigError) as caught:
        build_config({"elicitation": {"notify": {"urls": ["ntfy://ok-topic", "slakc://T/B/C"]}}}, "test")
    (problem,) = caught.value.problems
    assert problem.startswith("elicitation.notify.urls:") and "target 2 (slakc://...)" in problem
    assert "T/B/C" not in problem  # the rest of a URL may be a token
    path = write_config(tmp_path, {"x": {"command": "x", "per_tool": {"deploy": {"notify": {"urls": ["nope"]}}}}})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "check-config", "--config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "mcpServers.x.per_tool.deploy.notify.urls" in done.stderr + done.stdout
    assert "target 1" in done.stderr + done.stdout
    secret_url = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#ops"
    path = write_config(tmp_path, {"x": {"command": "x", "notify": {"urls": [secret_url]}}})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "check-config", "--config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "notice target mcpServers.x.notify.urls[1]: slack://..." in done.stdout
    assert "TIiajkdnlazkcOXrIdevi7FQ" not in done.stdout + done.stderr  # the server's line leaves `notify` out too


async def test_doctor_notify_sends_a_test_notice_to_each_target(tmp_path):
    async with receiver() as got:
        path = write_config(
            tmp_path, {"x": stdio_upstream()},
            elicitation={"notify": {"urls": [got.url(), closed_port_url()], "retries": 0}},
        )
        done = await anyio.run_process([PY, "-m", "elicitgate.cli", "doctor", "--notify", "--config", str(path)],
                                       check=False, env={**os.environ, "COLUMNS": "200"})
        out = done.stdout.decode()
        assert "elicitation.notify.urls[1] (json://...): sent" in out
        assert "elicitation.notify.urls[2] (json://...): failed" in out
        assert done.returncode == 1
        (post,) = got.posts
        assert "test notice" in text_of(post)



# -- docs/notify.md ----------------------------------------------------------------------------------------

NOTIFY_PAGE = ROOT / "docs" / "notify.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def doc_configs() -> list[dict[str, Any]]:
    return [parse_jsonc(body) for lang, body in FENCE.findall(NOTIFY_PAGE.read_text()) if lang == "json"]


def test_every_config_on_the_notify_page_is_valid():
    configs = doc_configs()
    assert len(configs) == 3
    for cfg in configs:
        build_config(cfg, "docs/notify.md")


async def test_the_ntfy_example_announces_a_hosted_question_with_a_link_under_public_url():
    """The page's ntfy example as written, but for its server (a test one) and its topic, which goes to a
    local receiver speaking ntfy's JSON publishing API (`ntfy://HOST:PORT/TOPIC`, a server of one's own)."""
    cfg = doc_configs()[0]
    public_url = cfg["http"]["public_url"]
    async with receiver() as got:
        cfg["mcpServers"] = {"x": stdio_upstream()}
        cfg["elicitation"]["notify"]["urls"] = [f"ntfy://127.0.0.1:{got.port}/elicitgate-ada-7f3a9c2e"]
        async with gateway(cfg) as gw:
            async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": ASK, "message": "Deploy 4.2.0?"})
                (post,) = await got.wait()
                assert post["topic"] == "elicitgate-ada-7f3a9c2e" and "Deploy 4.2.0?" in post["message"]
                link = link_in(post)
                assert link.startswith(f"{public_url}/e/")
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, gw.url + link.removeprefix(public_url))  # the proxy's part, here
                    opened = await page.open()
                    # The page's cookies are Secure (public_url is https): the browser behind the TLS proxy sends
                    # them back, so this client, speaking plain HTTP to the gateway, does too.
                    for name, value in opened.cookies.items():
                        http.cookies.set(name, value)
                    await page.post("decline")
                assert text(await call.wait()) == {"action": "decline"}


# -- the person's view, in Chromium ------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


@pytest.mark.skipif(not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
                    reason="Debian chromium is not installed (scripts/test installs it)")
async def test_on_a_phone_the_page_a_notice_links_to_says_the_client_answered_first():
    """Chromium at phone width opens the notice's link while the client also shows the question; the client
    answers first; the open page, reloaded, says plainly that the question was answered in the client."""
    from playwright.async_api import async_playwright

    from tests.test_hosted_browser import CHROMIUM_ARGS, PHONE

    client_may_answer = anyio.Event()

    async def answer_when_told(params: Any) -> types.ElicitResult:
        await client_may_answer.wait()
        return accept({"name": "From the client"})

    human = Human(answer_when_told)
    async with receiver() as got, async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            async with gateway(notify_config([got.url()], when="always", after=0)) as gw:
                async with (
                    Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
                    anyio.create_task_group() as tg,
                ):
                    call = Call()
                    tg.start_soon(call.run, client, "x__elicit", {"schema": ASK, "message": "Ship it?"})
                    (post,) = await got.wait()
                    context = await chromium.new_context(viewport=PHONE)
                    page = await context.new_page()
                    await page.goto(link_in(post))
                    assert await page.text_content("#eg-message") == "Ship it?"
                    assert await page.text_content("#eg-server") == "x"
                    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
                    client_may_answer.set()
                    assert text(await call.wait())["content"] == {"name": "From the client"}
                    await page.reload()
                    said = await page.text_content(".eg-state")
                    assert said is not None and "answered in the MCP client" in said
                    assert await page.get_attribute(".eg-state", "data-by") == "client"
                    await context.close()
        finally:
            await chromium.close()
