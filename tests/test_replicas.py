"""Replicas that act as one gateway (`redis_url`, docs/deploy.md): a real `redis-server` and three real
`elicitgate serve --http` processes with one config, driven by the official SDK client and plain HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from elicitgate.config import load_config
from elicitgate.elicitation.hosted_registry import token_digest
from elicitgate.errors import ConfigError
from tests.conftest import PEERS, PY, free_port, write_config
from tests.hosted_helpers import AUTH, TOKEN, PlainPage, csrf_of, next_pending
from tests.replicas_helpers import (  # noqa: F401
    RedisServer,
    Replicas,
    RoundRobin,
    redis_server,
    replicas,
    running_redis,
)
from tests.test_broker import form, stdio_upstream, text
from tests.test_hosted import Call

pytestmark = [pytest.mark.anyio, pytest.mark.node]  # the shared replicas run a TypeScript SDK server too
TS_UPSTREAM = {"command": "node", "args": [str(PEERS / "ts" / "elicit_server.mjs")]}
MODERN = "2026-07-28"

BOOKING = form(["email"], email={"type": "string", "format": "email", "title": "Email"},
               guests={"type": "integer", "minimum": 1, "maximum": 8, "default": 2})


def inbox_config(tmp_path: Path, **extra: Any) -> Path:
    """`x` a handshake-era server, `m` a 2026-07-28 one (both tests/peers/py_server.py, the SDK's server), `ts`
    the TypeScript SDK's (tests/peers/ts/elicit_server.mjs, written as its examples are)."""
    servers = {"x": stdio_upstream(), "m": stdio_upstream("m", era="modern"), "ts": TS_UPSTREAM}
    return write_config(tmp_path, servers, admin_token=TOKEN, **extra)


class Human:
    """An elicitation callback accepting with `content`; remembers what it was shown."""

    def __init__(self, content: dict[str, Any] | None = None) -> None:
        self.content = content or {"answer": "yes"}
        self.seen: list[Any] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.seen.append(params)
        return types.ElicitResult(action="accept", content=self.content)


@asynccontextmanager
async def balanced_client(urls: list[str], **options: Any) -> AsyncIterator[tuple[Client, RoundRobin]]:
    """The official SDK client (2026-07-28) behind a load balancer without affinity."""
    balancer = RoundRobin(urls)
    async with httpx2.AsyncClient(transport=balancer, timeout=httpx2.Timeout(30, read=120)) as http:
        transport = streamable_http_client(f"{urls[0]}/mcp", http_client=http)
        async with Client(transport, mode=MODERN, **options) as client:
            yield client, balancer


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, Replicas]]:
    """One Redis and three replicas for the tests that leave both running (starting them takes a while)."""
    with running_redis() as server:
        group = Replicas(inbox_config(tmp_path_factory.mktemp("replicas")), server.url)
        try:
            yield server, group
        finally:
            group.stop()


async def test_replicas_share_one_requeststate_key_and_say_so_on_healthz(shared):
    redis_server, group = shared
    async with httpx2.AsyncClient() as http:
        bodies = [(await http.get(f"{url}/healthz")).json() for url in group.urls]
    ids = {body["replica"]["id"] for body in bodies}
    assert len(ids) == 3 and all(body["replica"]["redis"] == "up" for body in bodies)
    with redis_server.client() as r:
        assert len(r.get("elicitgate:state-key")) == 64
        assert r.smembers("elicitgate:replicas") == ids
    # Each replica has its own state directory: no key file was generated, the key came from Redis.
    assert not any((Path(state) / "elicitgate" / "state.key").exists() for state in group.states)


async def test_an_admin_api_answer_posted_to_another_replica_reaches_the_call(shared):
    a, b, c = shared[1].urls
    async with Client(f"{a}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
        call = Call()
        tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
        (item,) = await next_pending(b)  # B's live updates include A's elicitation
        assert item["server"] == "x" and item["message"] == "Book a table" and item["hosted"] == "inbox"
        assert item["form_url"].startswith(f"{a}/e/")
        async with httpx2.AsyncClient(headers=AUTH) as http:
            listed = (await http.get(f"{c}/api/elicitations")).json()["elicitations"]
            assert [i["id"] for i in listed] == [item["id"]] and "token_digest" not in listed[0]
            detail = (await http.get(f"{c}/api/elicitations/{item['id']}")).json()
            assert detail["requestedSchema"] == BOOKING
            bad = await http.post(f"{b}/api/elicitations/{item['id']}/answer",
                                  json={"action": "accept", "content": {"email": "nope"}})
            assert bad.status_code == 422 and [p["property"] for p in bad.json()["errors"]] == ["email"]
            ok = await http.post(f"{b}/api/elicitations/{item['id']}/answer",
                                 json={"action": "accept", "content": {"email": "ada@example.com", "guests": 4}})
            assert ok.status_code == 200 and ok.json() == {"id": item["id"], "state": "accepted"}
            assert text(await call.wait()) == {"action": "accept", "content": {"email": "ada@example.com", "guests": 4}}
            late = await http.post(f"{c}/api/elicitations/{item['id']}/answer", json={"action": "decline"})
            assert late.status_code == 409 and late.json()["state"] == "accepted"  # A's own answer, via C
            assert (await http.get(f"{b}/api/elicitations")).json() == {"elicitations": []}


async def test_a_hosted_page_opened_on_other_replicas_answers_the_call(shared):
    a, b, c = shared[1].urls
    async with Client(f"{a}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
        call = Call()
        tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
        (item,) = await next_pending(c)
        token_path = "/e/" + item["form_url"].rsplit("/e/", 1)[1]
        async with httpx2.AsyncClient() as http:
            page = PlainPage(http, f"{b}{token_path}")  # the browser reaches B (its claim cookie is A's)
            assert (await page.open()).status_code == 200 and "Book a table" in page.html
            page.url = f"{c}{token_path}"  # the next request lands on C
            await page.post("review", email="ada@example.com", guests="3")
            assert "Review your answer" in page.html
            page.url = f"{b}{token_path}"
            done = await page.post("submit")
            assert done.status_code == 410 and 'data-state="accepted"' in page.html
            assert text(await call.wait()) == {"action": "accept", "content": {"email": "ada@example.com", "guests": 3}}
            assert (await http.get(f"{c}{token_path}")).status_code == 410  # ended, as A says


async def test_the_rich_ui_bridge_answers_through_other_replicas(shared):
    """host-ui.js posts to `/e/<token>/ui-answer` with the page's CSRF value in `X-Elicitgate-CSRF`."""
    a, b, c = shared[1].urls
    async with Client(f"{a}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
        call = Call()
        tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
        (item,) = await next_pending(b)
        token_path = "/e/" + item["form_url"].rsplit("/e/", 1)[1]
        async with httpx2.AsyncClient() as http:
            page = PlainPage(http, f"{b}{token_path}")
            assert (await page.open()).status_code == 200
            csrf = {"X-Elicitgate-CSRF": csrf_of(page.html)}
            checked = await http.post(f"{c}{token_path}/ui-answer", headers=csrf,
                                      json={"action": "accept", "content": {"email": "ada@example.com", "guests": 2}})
            assert checked.status_code == 200 and checked.json()["ok"] is True, checked.text
            sent = await http.post(f"{b}{token_path}/ui-answer", headers=csrf, json={"step": "submit"})
            assert sent.json() == {"ended": True, "state": "accepted"}
        assert text(await call.wait()) == {"action": "accept", "content": {"email": "ada@example.com", "guests": 2}}


class RedisReader:
    """Whoever can read Redis: every message on every channel (PSUBSCRIBE *) and, at `look()`, every key."""

    def __init__(self, server: RedisServer) -> None:
        self.client = server.client()
        self.seen: list[str] = []
        self.listening = threading.Event()
        self._stop = False

    def listen(self) -> None:
        with self.client.pubsub() as pubsub:
            pubsub.psubscribe("*")
            self.listening.set()
            while not self._stop:
                if (message := pubsub.get_message(timeout=0.1)) is not None:
                    self.seen.append(f"{message['channel']} {message['data']}")

    def look(self) -> None:
        for key in self.client.keys("*"):
            kind = self.client.type(key)
            value = {"string": self.client.get, "hash": self.client.hgetall, "set": self.client.smembers}[kind](key)
            self.seen.append(f"{key} {value}")

    def stop(self) -> None:
        self._stop = True

    def text(self) -> str:
        return "\n".join(self.seen)


async def test_whoever_reads_redis_gets_no_page_token_admin_token_or_cookie(shared):
    """A page answered on other replicas, an inbox login there, the admin API answering through another
    replica: Redis carries digests, a sealed link and what the owner needs, never a secret."""
    redis_server, group = shared
    a, b, c = group.urls
    reader = RedisReader(redis_server)
    async with anyio.create_task_group() as watching:
        watching.start_soon(anyio.to_thread.run_sync, reader.listen)
        try:
            assert await anyio.to_thread.run_sync(reader.listening.wait, 30)
            async with Client(f"{a}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
                (item,) = await next_pending(b)
                assert item["form_url"].startswith(f"{a}/e/")  # B's operator still gets A's link
                token = item["form_url"].rsplit("/e/", 1)[1]
                async with httpx2.AsyncClient() as http:
                    assert (await http.post(f"{b}/inbox", data={"token": TOKEN})).status_code == 303
                    session = http.cookies["eg_admin"]  # path /: the browser sends it to the pages too
                    page = PlainPage(http, f"{b}/e/{token}")
                    assert (await page.open()).status_code == 200 and "Book a table" in page.html
                    claim = http.cookies["eg_claim"]
                    reader.look()
                    page.url = f"{c}/e/{token}"
                    await page.post("review", email="ada@example.com", guests="3")
                    assert "Review your answer" in page.html
                    done = await page.post("submit")
                    assert done.status_code == 410 and 'data-state="accepted"' in page.html
                assert text(await call.wait()) == {
                    "action": "accept", "content": {"email": "ada@example.com", "guests": 3}
                }

                second = Call()
                tg.start_soon(second.run, client, "x__elicit", {"schema": BOOKING, "message": "Book again"})
                (other,) = await next_pending(c)
                other_token = other["form_url"].rsplit("/e/", 1)[1]
                async with httpx2.AsyncClient(headers=AUTH) as http:
                    detail = (await http.get(f"{b}/api/elicitations/{other['id']}")).json()
                    assert detail["form_url"] == other["form_url"]  # the owner's answer, its link put back on B
                    reader.look()
                    ok = await http.post(f"{c}/api/elicitations/{other['id']}/answer",
                                         json={"action": "accept", "content": {"email": "bo@example.com", "guests": 2}})
                    assert ok.json() == {"id": other["id"], "state": "accepted"}
                await second.wait()
        finally:
            reader.stop()  # its thread ends within a tenth of a second
    seen = reader.text()
    assert token_digest(token) in seen and '"op": "http"' in seen  # it did read the board and the forwarding
    for secret in (token, other_token, TOKEN, claim, session):
        assert secret not in seen


async def test_the_operator_cancels_on_another_replica(shared):
    a, b, _ = shared[1].urls
    async with Client(f"{a}/mcp", mode="legacy") as client, anyio.create_task_group() as tg:
        call = Call()
        tg.start_soon(call.run, client, "x__elicit", {})
        (item,) = await next_pending(b)
        async with httpx2.AsyncClient(headers=AUTH) as http:
            cancelled = await http.post(f"{b}/api/elicitations/{item['id']}/cancel")
            assert cancelled.json() == {"id": item["id"], "state": "cancelled"}
        assert text(await call.wait()) == {"action": "cancel"}


# -- 2026-07-28 retries on another replica -------------------------------------------------------------


@pytest.mark.parametrize(("tool", "content"), [
    ("x__elicit", {"answer": "yes"}), ("m__elicit", {"answer": "yes"}), ("ts__ask_form", {"name": "Ada", "age": 36}),
], ids=["handshake-upstream", "modern-upstream", "typescript-upstream"])
async def test_a_retry_sent_to_another_replica_completes_the_call(shared, tool, content):
    human = Human(content)
    async with balanced_client(shared[1].urls, elicitation_callback=human) as (client, balancer):
        result = await client.call_tool(tool, {})
    assert text(result) == {"action": "accept", "content": content}
    assert len(human.seen) == 1
    (first, first_params), (retry, retry_params) = balancer.calls("tools/call")
    assert first != retry and "requestState" not in first_params
    assert retry_params["inputResponses"] and retry_params["requestState"]


async def test_a_url_mode_retry_on_another_replica_waits_for_the_completion_on_the_calls_replica(shared):
    """The handshake-era server's `notifications/elicitation/complete` reaches the call's replica; the retry
    that landed elsewhere returns once it did (well before `bridging.url_complete_wait`, 60 s)."""
    accepted: list[Any] = []

    async def human(ctx: Any, params: Any) -> types.ElicitResult:
        accepted.append(params)
        return types.ElicitResult(action="accept")

    args = {"mode": "url", "complete": True, "elicitation_id": "flow-7", "url": "https://example.com/pay"}
    async with balanced_client(shared[1].urls, elicitation_callback=human) as (client, balancer):
        with anyio.fail_after(30):
            assert text(await client.call_tool("x__elicit", args)) == {"action": "accept"}
    assert accepted[0].url == "https://example.com/pay"
    (first, _), (retry, _) = balancer.calls("tools/call")
    assert first != retry


async def test_a_stale_retry_on_another_replica_is_refused_as_on_the_first(shared):
    """The round's requestState is single-use wherever the retry lands."""
    human = Human()
    async with balanced_client(shared[1].urls, elicitation_callback=human) as (client, balancer):
        await client.call_tool("x__elicit", {})
    body, headers = balancer.replay("tools/call", 1)
    async with httpx2.AsyncClient() as http:
        for url in shared[1].urls:
            replay = await http.post(f"{url}/mcp", json=body, headers=headers)
            error = replay.json()["error"]
            assert error["code"] == -32602 and error["message"] == "Invalid or expired requestState", error


# -- the config key -------------------------------------------------------------------------------------


def test_redis_url_comes_from_the_environment_and_is_checked(tmp_path, monkeypatch):
    path = write_config(tmp_path, {})
    assert load_config(path).redis_url is None  # unset: everything stays in the process
    monkeypatch.setenv("ELICITGATE_REDIS_URL", "redis://:secret@127.0.0.1:6399/2")
    assert load_config(path).redis_url.get_secret_value() == "redis://:secret@127.0.0.1:6399/2"
    assert "secret" not in repr(load_config(path))
    monkeypatch.setenv("ELICITGATE_REDIS_URL", "http://127.0.0.1:6379")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert "ELICITGATE_REDIS_URL (environment): Value error, must start with redis://" in refused.value.render()


def test_start_up_without_reachable_redis_stops_with_a_clear_error(tmp_path):
    port = free_port()  # nothing listens there
    done = subprocess.run(
        [PY, "-m", "elicitgate.cli", "serve", "--config", str(write_config(tmp_path, {})), "--http",
         f"127.0.0.1:{free_port()}"],
        env={**os.environ, "ELICITGATE_REDIS_URL": f"redis://127.0.0.1:{port}/0"},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert f"Redis at 127.0.0.1:{port}/0 is unreachable" in done.stderr and "Traceback" not in done.stderr


# -- limits over all replicas ---------------------------------------------------------------------------

ALICE = "alice-raaZs5SL2P4-sUE9sCWDNJXKflOpX_UNOBbKeXlL3f0"


@asynccontextmanager
async def alice(url: str, **options: Any) -> AsyncIterator[Client]:
    """A handshake-era client (the official SDK) authenticated as principal `alice`."""
    headers = {"Authorization": f"Bearer {ALICE}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy", **options) as client:
            yield client


async def test_rate_limits_and_pending_limits_count_over_all_replicas(tmp_path, redis_server, replicas):
    config = inbox_config(
        tmp_path, http={"auth": {"tokens": [{"token": ALICE, "principal": "alice"}]}},
        elicitation={"rate_limit_burst": 2, "rate_limit_per_minute": 0.01, "max_pending_per_session": 1},
    )
    a, b = replicas(config, redis_server.url, count=2).urls
    async with alice(a) as on_a, alice(b, elicitation_callback=Human()) as on_b, anyio.create_task_group() as tg:
        held = Call()  # alice's first elicitation waits in A's inbox (her client there has no forms)
        tg.start_soon(held.run, on_a, "x__elicit", {})
        (item,) = await next_pending(b)
        refused = text(await on_b.call_tool("x__elicit", {"report_errors": True}))["error"]
        assert refused["code"] == -32014 and refused["data"]["limit"] == "max_pending_per_session"
        assert "elicitation.max_pending_per_session" in refused["data"]["fix"]  # one share across replicas
        async with httpx2.AsyncClient(headers=AUTH) as http:
            assert (await http.post(f"{b}/api/elicitations/{item['id']}/cancel")).json()["state"] == "cancelled"
        assert text(await held.wait()) == {"action": "cancel"}
        # The burst of 2 is alice's over both replicas: one taken on A, one now on B, none left on A.
        assert text(await on_b.call_tool("x__elicit", {})) == {"action": "accept", "content": {"answer": "yes"}}
        limited = text(await on_a.call_tool("x__elicit", {"report_errors": True}))["error"]
        assert limited["code"] == -32015 and limited["data"]["limit"] == "rate_limit_per_minute"
        assert limited["data"]["retryAfterSeconds"] > 0


# -- a replica that dies, Redis that goes away ------------------------------------------------------------


async def pending_until(url: str, condition: Any) -> list[dict[str, Any]]:
    """Read the admin API's live updates on `url` until the pending list satisfies `condition`."""
    async with httpx2.AsyncClient(base_url=url, headers=AUTH) as http:
        async with http.stream("GET", "/api/elicitations/events", timeout=httpx2.Timeout(10, read=30)) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:") and condition(items := json.loads(line[5:])):
                    return items
    raise AssertionError("event stream ended")


async def test_a_replica_killed_while_holding_parked_calls(tmp_path, redis_server, replicas):
    group = replicas(inbox_config(tmp_path), redis_server.url, count=2)
    a, b = group.urls
    answered = anyio.Event()
    killed = anyio.Event()

    async def human(ctx: Any, params: Any) -> types.ElicitResult:
        answered.set()
        await killed.wait()  # the person answers after A died; the retry goes to B
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async with (
        balanced_client([a], elicitation_callback=human) as (client, balancer),
        Client(f"{a}/mcp", mode="legacy") as inbox_client,
        anyio.create_task_group() as tg,
    ):
        parked, held = Call(), Call()
        tg.start_soon(parked.run, client, "m__elicit", {})  # parked on A, waiting for the retry
        tg.start_soon(held.run, inbox_client, "x__elicit", {})  # waits in A's inbox
        items = await next_pending(b, count=2)  # the parked call's question (its client's) and the inbox's
        (item,) = [i for i in items if i["hosted"] == "inbox"]
        with anyio.fail_after(30):
            await answered.wait()
        with redis_server.client() as r:
            victim = r.get(f"elicitgate:el:{item['id']}")
        group.kill(0)
        balancer.targets = [httpx2.URL(b)]  # the load balancer's health check took A out
        with anyio.fail_after(15):  # a clear error within seconds, never a hang (a busy machine: seconds more)
            killed.set()
            await parked.wait()
            async with httpx2.AsyncClient(headers=AUTH) as http:
                answer = await http.post(f"{b}/api/elicitations/{item['id']}/answer", json={"action": "decline"})
                page = await http.get(f"{b}/e/{item['form_url'].rsplit('/e/', 1)[1]}")
        with anyio.fail_after(30):  # A's entries leave B's list with A's lease (3 s), on a busy machine
            await pending_until(b, lambda items: items == [])
        assert parked.error is not None and parked.error.error.code == -32008, parked.error
        assert parked.error.error.data["replica"] == victim
        assert "replica that held this call stopped" in parked.error.error.message
        assert answer.status_code == 410 and answer.json()["replica"] == victim
        assert page.status_code == 410 and "stopped" in page.text
        tg.cancel_scope.cancel()  # the inbox client's call died with A
    # B keeps serving, and A's keys are gone from Redis.
    async with balanced_client([b], elicitation_callback=Human()) as (client, _):
        assert text(await client.call_tool("m__elicit", {})) == {"action": "accept", "content": {"answer": "yes"}}
    with redis_server.client() as r, anyio.fail_after(30):  # its keys lapse with their TTLs (3 s)
        while r.exists(f"elicitgate:lease:{victim}", f"elicitgate:pending:{victim}", f"elicitgate:open:{victim}"):
            await anyio.sleep(0.1)
        async with httpx2.AsyncClient(headers=AUTH) as http:
            await http.get(f"{b}/api/elicitations")  # a listing drops it from the set of replicas
        assert victim not in r.smembers("elicitgate:replicas")


async def test_a_replica_serves_alone_while_redis_is_away_and_is_reached_again_after_an_empty_restart(
    tmp_path, redis_server, replicas
):
    a, b = replicas(inbox_config(tmp_path), redis_server.url, count=2).urls
    where = f"127.0.0.1:{redis_server.port}/0"
    async with (
        httpx2.AsyncClient(headers=AUTH) as http,
        Client(f"{a}/mcp", mode="legacy") as inbox_client,  # no forms: its questions wait in A's inbox
        Client(f"{a}/mcp", mode="legacy", elicitation_callback=Human()) as client,
        anyio.create_task_group() as tg,
    ):
        before, during = Call(), Call()
        tg.start_soon(before.run, inbox_client, "x__elicit", {"schema": BOOKING, "message": "Asked before"})
        (first,) = await next_pending(b)  # on the board while Redis was there
        with redis_server.client() as r:
            state_key = r.get("elicitgate:state-key")
        a_id = (await http.get(f"{a}/healthz")).json()["replica"]["id"]
        redis_server.stop()
        for url in (a, b):
            await until_redis(http, url, "unreachable")
        health = await http.get(f"{a}/healthz")
        assert health.status_code == 200 and health.json()["replica"]["unreachable_for"] >= 0
        assert f'elicitgate_redis_up{{redis="{where}"}} 0.0' in (await http.get(f"{a}/metrics")).text
        with anyio.fail_after(30):  # A's own client is asked and answers, limits counted on A
            assert text(await client.call_tool("x__elicit", {})) == {"action": "accept", "content": {"answer": "yes"}}
        tg.start_soon(during.run, inbox_client, "x__elicit", {"schema": BOOKING, "message": "Asked while away"})
        with anyio.fail_after(30):  # A's inbox lists its own
            items = await pending_until(a, lambda items: len(items) == 2)
        (second,) = [i for i in items if i["message"] == "Asked while away"]
        # What needs the other replica says Redis is away (not "no such elicitation").
        listed = await http.get(f"{b}/api/elicitations")
        assert listed.status_code == 503 and f"Redis at {where} is unreachable" in listed.json()["error"]
        answer = await http.post(f"{b}/api/elicitations/{first['id']}/answer", json={"action": "decline"})
        assert answer.status_code == 503 and f"Redis at {where} is unreachable" in answer.json()["error"]

        redis_server.start()  # empty: no persistence
        for url in (a, b):  # a replica says "up" once it published its state again
            await until_redis(http, url, "up")
        assert f'elicitgate_redis_up{{redis="{where}"}} 1.0' in (await http.get(f"{a}/metrics")).text
        with redis_server.client() as r:
            assert r.get("elicitgate:state-key") == state_key  # a replica started now takes the same key
            assert r.hget(f"elicitgate:open:{a_id}", "") == "2"  # A's pending count for the shared limits
        listed = (await http.get(f"{b}/api/elicitations")).json()["elicitations"]
        assert sorted(i["id"] for i in listed) == sorted([first["id"], second["id"]])  # B lists A's again
        ok = await http.post(f"{b}/api/elicitations/{first['id']}/answer",
                             json={"action": "accept", "content": {"email": "ada@example.com", "guests": 2}})
        assert ok.status_code == 200 and ok.json() == {"id": first["id"], "state": "accepted"}
        assert text(await before.wait()) == {"action": "accept", "content": {"email": "ada@example.com", "guests": 2}}
        async with httpx2.AsyncClient() as browser:  # the page of the question asked while away, through B
            page = PlainPage(browser, f"{b}/e/{second['form_url'].rsplit('/e/', 1)[1]}")
            assert (await page.open()).status_code == 200 and "Asked while away" in page.html
            assert "Review your answer" in (await page.post("review", email="bob@example.com", guests="3")).text
            done = await page.post("submit")
            assert done.status_code == 410 and 'data-state="accepted"' in page.html, page.html
        assert text(await during.wait()) == {"action": "accept", "content": {"email": "bob@example.com", "guests": 3}}
    async with balanced_client([a, b], elicitation_callback=Human()) as (modern, _):
        assert text(await modern.call_tool("x__elicit", {})) == {"action": "accept", "content": {"answer": "yes"}}


async def test_a_redis_that_stops_answering_holds_a_new_elicitation_up_for_seconds_only(
    tmp_path, redis_server, replicas
):
    group = replicas(inbox_config(tmp_path), redis_server.url, count=1)
    (a,) = group.urls
    async with Client(f"{a}/mcp", mode="legacy", elicitation_callback=Human()) as client:
        redis_server.pause()
        try:
            with anyio.fail_after(60):  # a bound against a hang; which wait let it through is read below
                assert text(await client.call_tool("x__elicit", {})) == {
                    "action": "accept", "content": {"answer": "yes"}
                }
            async with httpx2.AsyncClient() as http:
                await until_redis(http, a, "unreachable")  # the socket timeout finds it out
        finally:
            redis_server.resume()
    # The admission gave up on Redis after its own 2 s (cluster.limits.ADMIT_WAIT), not the 10 s socket timeout.
    assert "Redis did not answer an admission within 2.0 s" in group.procs[0].stop()


async def until_redis(http: httpx2.AsyncClient, url: str, state: str) -> None:
    """/healthz says whether the replica reaches Redis (it tries every second)."""
    with anyio.fail_after(20):
        while (await http.get(f"{url}/healthz")).json()["replica"]["redis"] != state:
            await anyio.sleep(0.1)


def test_the_container_setting_refuses_an_open_mcp_on_a_public_address(tmp_path):
    """The Dockerfile serves on 0.0.0.0 with ELICITGATE_HTTP__REQUIRE_AUTH=true: no http.auth, no start."""
    done = subprocess.run(
        [PY, "-m", "elicitgate.cli", "serve", "--config", str(write_config(tmp_path, {})), "--http",
         f"0.0.0.0:{free_port()}"],
        env={**os.environ, "ELICITGATE_HTTP__REQUIRE_AUTH": "true"}, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "without authentication" in done.stderr and "http.require_auth is on" in done.stderr
