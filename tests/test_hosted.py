"""Gateway-hosted elicitation over real HTTP, without a browser: the admin API, the inbox login, the
hosted page answered with plain form posts (what a browser without JavaScript sends), URL-mode
conversion for a client that declared only URL, single-use and expiring links, CSRF, `hosting` and
`sensitive_fields: host`. The browser tests (test_hosted_browser.py) cover the same pages in Chromium.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.web.admin_auth import FIRST_DELAY
from tests.hosted_helpers import AUTH, TOKEN, PlainPage, error_next_to, next_pending
from tests.test_broker import Human, form, form_only_capability, gateway, stdio_upstream, text  # noqa: F401

pytestmark = pytest.mark.anyio

ELICITATION_UNDELIVERABLE = -32013
ELICITATION_SENSITIVE_BLOCKED = -32018

BOOKING = form(
    ["email", "guests"],
    email={"type": "string", "format": "email", "title": "Email"},
    guests={"type": "integer", "minimum": 1, "maximum": 8, "default": 2},
    extras={"type": "array", "items": {"type": "string", "enum": ["cake", "wine"]}, "maxItems": 1},
)


def hosted_config(token: str | None = TOKEN, **server: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"mcpServers": {"x": stdio_upstream(**server)}}
    if token is not None:
        cfg["admin_token"] = token
    return cfg


class Call:
    """A tool call running in the background of the test's task group."""

    def __init__(self) -> None:
        self.result: Any = None
        self.error: MCPError | None = None
        self.done = anyio.Event()

    async def run(self, client: Client, tool: str, args: dict[str, Any]) -> None:
        try:
            self.result = await client.call_tool(tool, args)
        except MCPError as exc:
            self.error = exc
        finally:
            self.done.set()

    async def wait(self) -> Any:
        with anyio.fail_after(30):
            await self.done.wait()
        return self.result


# -- the inbox path: a client without elicitation, answered through the admin API ----------------------


async def test_client_without_elicitation_is_answered_through_the_admin_api():
    async with gateway(hosted_config()) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
            (item,) = await next_pending(gw.url)
            assert item["server"] == "x" and item["message"] == "Book a table" and item["mode"] == "form"
            assert item["state"] == "presented" and item["hosted"] == "inbox"
            assert item["source"] == "upstream" and item["gateway_reason"] is None
            assert item["form_url"].startswith(f"{gw.url}/e/") and len(item["form_url"].rsplit("/", 1)[1]) >= 40
            assert item["created_at"].endswith("Z") and item["deadline"] > item["created_at"]
            async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
                detail = (await http.get(f"/api/elicitations/{item['id']}")).json()
                assert detail["requestedSchema"] == BOOKING
                bad = await http.post(f"/api/elicitations/{item['id']}/answer",
                                      json={"action": "accept", "content": {"email": "nope", "guests": 12}})
                assert bad.status_code == 422
                assert {p["property"] for p in bad.json()["errors"]} == {"email", "guests"}
                ok = await http.post(f"/api/elicitations/{item['id']}/answer",
                                     json={"action": "accept", "content": {"email": "ada@example.com", "guests": 4}})
                assert ok.status_code == 200 and ok.json() == {"id": item["id"], "state": "accepted"}
                result = text(await call.wait())
                assert result == {"action": "accept", "content": {"email": "ada@example.com", "guests": 4}}
                late = await http.post(f"/api/elicitations/{item['id']}/answer", json={"action": "decline"})
                assert late.status_code == 409 and late.json()["state"] == "accepted"
                late_cancel = await http.post(f"/api/elicitations/{item['id']}/cancel")
                assert late_cancel.status_code == 409 and late_cancel.json()["state"] == "accepted"
                ended = (await http.get(f"/api/elicitations/{item['id']}")).json()
                assert ended["state"] == "accepted" and ended["responder"] == "hosted_inbox"
                assert ended["source"] == "upstream" and ended["gateway_reason"] is None
                assert (await http.get("/api/elicitations")).json() == {"elicitations": []}
                assert (await http.get(item["form_url"])).status_code == 410  # dead once ended
        assert gw.gateway.broker.hosting.registry.by_id == {}


async def test_operator_cancel_reaches_the_upstream_as_cancel():
    async with gateway(hosted_config()) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {})
            (item,) = await next_pending(gw.url)
            async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
                cancelled = await http.post(f"/api/elicitations/{item['id']}/cancel")
                assert cancelled.json() == {"id": item["id"], "state": "cancelled"}
            assert text(await call.wait()) == {"action": "cancel"}


async def test_admin_api_and_inbox_need_the_token_and_are_off_without_one():
    async with gateway(hosted_config()) as gw, httpx2.AsyncClient(base_url=gw.url) as http:
        assert (await http.get("/api/elicitations")).status_code == 401
        assert (await http.post("/api/elicitations/x/cancel")).status_code == 401
        assert (await http.get("/inbox")).status_code == 401
        assert (await http.get(f"/inbox?token={TOKEN}")).status_code == 401  # no login by URL
        wrong = await http.get("/api/elicitations", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
        await anyio.sleep(float(FIRST_DELAY))  # a wrong token slows the next attempt (test_security.py)
        login = await http.post("/inbox", data={"token": TOKEN})
        assert login.status_code == 303 and login.headers["location"] == "/inbox"
        assert "samesite=strict" in login.headers["set-cookie"].lower()
        inbox = await http.get("/inbox")
        assert inbox.status_code == 200 and "Nothing is waiting" in inbox.text
        csp = inbox.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        assert "http" not in csp  # nothing from another origin, no CDN
        for src in re.findall(r'(?:src|href)="([^"]+)"', inbox.text):
            assert src.startswith("/"), src  # every asset served by the gateway itself
        assert (await http.get("/api/elicitations")).status_code == 200  # the inbox's session reads
        assert (await http.post("/api/elicitations/x/cancel")).status_code == 401  # but never writes
        spec = (await http.get("/api/openapi.json")).json()
        assert spec["openapi"].startswith("3.1")
        assert {"/api/elicitations", "/api/elicitations/{id}", "/api/elicitations/{id}/answer",
                "/api/elicitations/{id}/cancel"} <= set(spec["paths"])

    async with gateway(hosted_config(token=None)) as gw, httpx2.AsyncClient(base_url=gw.url) as http:
        assert (await http.get("/api/elicitations", headers=AUTH)).status_code == 404
        assert (await http.get("/inbox")).status_code == 404
        async with Client(gw.mcp_url, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:  # nowhere to host it: refused at once, as before
                await client.call_tool("x__elicit", {})
            assert caught.value.error.code == ELICITATION_UNDELIVERABLE


async def test_hosting_never_keeps_the_gateway_out():
    async with gateway(hosted_config(hosting="never")) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__elicit", {})
            assert caught.value.error.code == ELICITATION_UNDELIVERABLE


# -- the hosted page: URL-mode conversion, plain form posts ---------------------------------------------


async def test_url_only_client_gets_a_link_and_the_page_brings_the_answer(form_only_capability):
    form_only_capability(types.ElicitationCapability(url={}))
    completed = anyio.Event()
    completes: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completes.append(message.params.elicitation_id)
            completed.set()

    human = Human(types.ElicitResult(action="accept"))  # consents to open the link
    async with gateway(hosted_config(token=None)) as gw:
        async with (
            Client(gw.mcp_url, mode="legacy", elicitation_callback=human, message_handler=on_message) as client,
            anyio.create_task_group() as tg,
        ):
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
            with anyio.fail_after(30):
                await human.asked.wait()
            (link,) = human.seen
            assert isinstance(link, types.ElicitRequestURLParams)  # never the form itself
            assert link.url.startswith(f"{gw.url}/e/") and link.message.startswith("[x] Book a table")
            assert link.elicitation_id.startswith("elicitgate-")
            async with httpx2.AsyncClient() as http:
                page = PlainPage(http, link.url)
                shown = await page.open()
                assert shown.status_code == 200
                assert shown.headers["content-security-policy"].startswith("default-src 'none'")
                assert "Book a table" in page.html and 'id="eg-server">x<' in page.html
                assert 'type="email"' in page.html and 'value="2"' in page.html  # native input, default filled

                # CSRF: a post without the page's token (or without its cookie) is refused.
                forged = await http.post(link.url, data={"action": "decline", "csrf": "forged"})
                assert forged.status_code == 403
                async with httpx2.AsyncClient() as stranger:
                    no_cookie = await stranger.post(link.url, data={"action": "decline", "csrf": csrf_of_page(page)})
                    assert no_cookie.status_code == 403

                # Server-side check (no JavaScript here): errors next to the fields, values kept.
                await page.post("review", email="ada-at-example", guests="9", extras=["cake", "wine"])
                assert error_next_to(page.html, "email") == "must be a valid email"
                assert error_next_to(page.html, "guests") == "must be at most 8"  # the rule, not the value
                assert error_next_to(page.html, "extras") == "must have at most 1 choice(s)"
                assert 'value="ada-at-example"' in page.html
                reloaded = await page.open()  # survives a reload: same errors, same values
                assert error_next_to(reloaded.text, "email") == "must be a valid email"

                await page.post("review", email="ada@example.com", guests="3", extras=["wine"])
                assert "Review your answer" in page.html and "ada@example.com" in page.html
                await page.post("edit")
                assert 'value="ada@example.com"' in page.html
                await page.post("review", email="ada@example.com", guests="3", extras=["wine"])
                done = await page.post("submit")
                assert done.status_code == 410 and 'data-state="accepted"' in page.html  # after a redirect

                result = text(await call.wait())
                assert result == {"action": "accept", "content": {"email": "ada@example.com", "guests": 3,
                                                                  "extras": ["wine"]}}
                with anyio.fail_after(30):
                    await completed.wait()
                assert completes == [link.elicitation_id]

                # Single use: the link is dead, for reading and for answering.
                again = await page.open()
                assert again.status_code == 410 and 'data-state="accepted"' in again.text
                replay = await http.post(link.url, data={"action": "decline", "csrf": "x"})
                assert replay.status_code == 410
        (summary,) = [s for s in gw.gateway.broker.recent]
        assert summary["responder"] == "hosted_page" and summary["state"] == "accepted"


def csrf_of_page(page: PlainPage) -> str:
    from tests.hosted_helpers import csrf_of

    return csrf_of(page.html)


async def test_url_only_client_declining_the_link_declines(form_only_capability):
    form_only_capability(types.ElicitationCapability(url={}))
    async with gateway(hosted_config(token=None)) as gw:
        human = Human(types.ElicitResult(action="decline"))
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            assert text(await client.call_tool("x__elicit", {})) == {"action": "decline"}
        assert gw.gateway.broker.hosting.registry.by_id == {}


async def test_decline_and_cancel_on_the_page(form_only_capability):
    form_only_capability(types.ElicitationCapability(url={}))
    async with gateway(hosted_config(token=None)) as gw:
        for action in ("decline", "cancel"):
            human = Human(types.ElicitResult(action="accept"))
            async with (
                Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
                anyio.create_task_group() as tg,
            ):
                call = Call()
                tg.start_soon(call.run, client, "x__elicit", {})
                with anyio.fail_after(30):
                    await human.asked.wait()
                async with httpx2.AsyncClient() as http:
                    page = PlainPage(http, human.seen[0].url)
                    await page.open()
                    await page.post(action)
                    assert f'data-state="{"declined" if action == "decline" else "cancelled"}"' in page.html
                assert text(await call.wait()) == {"action": action}


async def test_expired_link_is_refused(form_only_capability):
    form_only_capability(types.ElicitationCapability(url={}))
    async with gateway(hosted_config(token=None, elicitation_timeout=0.5)) as gw:
        human = Human(types.ElicitResult(action="accept"))
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"report_errors": True}))
            assert result["error"]["code"] == -32016  # timed out
        async with httpx2.AsyncClient() as http:
            page = await http.get(human.seen[0].url)
            assert page.status_code == 410 and 'data-state="timed_out"' in page.text
            assert (await http.get(f"{gw.url}/e/not-a-real-token")).status_code == 404


# -- secrets: sensitive_fields host ------------------------------------------------------------------


SECRET_FORM = form(["user", "api_key"], user={"type": "string"}, api_key={"type": "string", "title": "API key"})


async def test_sensitive_fields_host_keeps_the_secret_away_from_a_form_capable_client():
    human = Human(types.ElicitResult(action="accept"))  # form + url: would happily take the form itself
    cfg = {**hosted_config(token=None), "elicitation": {"sensitive_fields": "host"}}
    async with gateway(cfg) as gw:
        async with (
            Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
            anyio.create_task_group() as tg,
        ):
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": SECRET_FORM})
            with anyio.fail_after(30):
                await human.asked.wait()
            (link,) = human.seen
            assert isinstance(link, types.ElicitRequestURLParams)
            async with httpx2.AsyncClient() as http:
                page = PlainPage(http, link.url)
                await page.open()
                assert 'type="password"' in page.html
                await page.post("review", user="ada", api_key="sk-secret-1")
                assert "sk-secret-1" not in page.html  # the review masks it
                await page.post("submit")
            assert text(await call.wait())["content"] == {"user": "ada", "api_key": "sk-secret-1"}
            # A plain form still goes to the client.
            human._answer = types.ElicitResult(action="accept", content={"answer": "direct"})
            assert text(await client.call_tool("x__elicit", {}))["content"] == {"answer": "direct"}
            assert isinstance(human.seen[-1], types.ElicitRequestFormParams)


async def test_sensitive_fields_host_without_a_way_to_host_refuses(form_only_capability):
    form_only_capability(types.ElicitationCapability(form={}))
    cfg = {**hosted_config(token=None), "elicitation": {"sensitive_fields": "host"}}
    human = Human(types.ElicitResult(action="accept", content={"user": "u", "api_key": "k"}))
    async with gateway(cfg) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = text(await client.call_tool("x__elicit", {"schema": SECRET_FORM, "report_errors": True}))
    assert result["error"]["code"] == ELICITATION_SENSITIVE_BLOCKED
    assert result["error"]["data"]["fields"] == ["api_key"]
    assert human.seen == []


async def test_openapi_document_describes_every_route_and_is_valid_json():
    from elicitgate.web.admin_openapi import openapi_document

    doc = json.loads(json.dumps(openapi_document()))
    answer = doc["paths"]["/api/elicitations/{id}/answer"]["post"]
    assert set(answer["responses"]) == {"200", "401", "404", "409", "422"}


async def test_hosting_always_sends_even_a_form_capable_client_to_the_page():
    human = Human(types.ElicitResult(action="accept"))  # declares form and url
    async with gateway(hosted_config(token=None, hosting="always")) as gw:
        async with (
            Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
            anyio.create_task_group() as tg,
        ):
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {})
            with anyio.fail_after(30):
                await human.asked.wait()
            assert isinstance(human.seen[0], types.ElicitRequestURLParams)
            async with httpx2.AsyncClient() as http:
                page = PlainPage(http, human.seen[0].url)
                await page.open()
                await page.post("review", answer="through the page")
                await page.post("submit")
            assert text(await call.wait()) == {"action": "accept", "content": {"answer": "through the page"}}


# -- 2026-07-28 clients: the same hosting, reached through input_required rounds ------------------------


async def test_a_2026_client_without_elicitation_is_answered_through_the_admin_api():
    async with gateway(hosted_config()) as gw:
        async with Client(gw.mcp_url, mode="2026-07-28") as client, anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
            (item,) = await next_pending(gw.url)
            assert item["hosted"] == "inbox"
            async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
                ok = await http.post(f"/api/elicitations/{item['id']}/answer",
                                     json={"action": "accept", "content": {"email": "ada@example.com", "guests": 3}})
                assert ok.status_code == 200
            result = text(await call.wait())
            assert result == {"action": "accept", "content": {"email": "ada@example.com", "guests": 3}}
        assert gw.gateway.rounds.parked == {}


async def test_a_2026_url_only_client_gets_the_page_link_as_an_input_request(form_only_capability):
    form_only_capability(types.ElicitationCapability(url={}))
    human = Human(types.ElicitResult(action="accept"))  # consents to open the link
    async with gateway(hosted_config()) as gw:
        async with Client(gw.mcp_url, mode="2026-07-28", elicitation_callback=human) as client, \
                anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
            with anyio.fail_after(30):
                await human.asked.wait()
            (link,) = human.seen
            assert isinstance(link, types.ElicitRequestURLParams)  # never the form itself
            assert link.url.startswith(f"{gw.url}/e/") and link.elicitation_id is None
            (item,) = await next_pending(gw.url)
            async with httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as http:
                ok = await http.post(f"/api/elicitations/{item['id']}/answer",
                                     json={"action": "accept", "content": {"email": "ada@example.com", "guests": 2}})
                assert ok.status_code == 200
            result = text(await call.wait())
            assert result == {"action": "accept", "content": {"email": "ada@example.com", "guests": 2}}
        assert gw.gateway.rounds.parked == {}


# -- the page belongs to the first browser that opens it ---------------------------------------------------


async def test_the_page_belongs_to_the_first_browser_until_the_operator_releases_it(form_only_capability):
    form_only_capability(types.ElicitationCapability(url={}))
    human = Human(types.ElicitResult(action="accept"))
    async with gateway(hosted_config()) as gw:
        async with (
            Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client,
            anyio.create_task_group() as tg,
        ):
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"schema": BOOKING, "message": "Book a table"})
            with anyio.fail_after(30):
                await human.asked.wait()
            url = human.seen[0].url
            async with (
                httpx2.AsyncClient() as person,
                httpx2.AsyncClient() as client_side,  # the party that got the link too
                httpx2.AsyncClient(base_url=gw.url, headers=AUTH) as operator,
            ):
                # A prefetch or a HEAD claims nothing.
                assert (await client_side.get(url, headers={"Sec-Purpose": "prefetch"})).status_code == 503
                assert (await client_side.head(url)).status_code == 503
                mine = PlainPage(person, url)
                assert (await mine.open()).status_code == 200
                assert "claimed_at" in (await operator.get("/api/elicitations")).json()["elicitations"][0]
                await mine.post("review", email="ada@example.com", guests="3")

                theirs = PlainPage(client_side, url)
                shown = await theirs.open()
                assert shown.status_code == 409 and "Opened in another browser" in theirs.html
                assert "ada@example.com" not in theirs.html and 'name="csrf"' not in theirs.html
                # Not even with the claimant's CSRF token (the cookie that binds the page is not theirs).
                forged = await client_side.post(url, data={"action": "decline", "csrf": csrf_of_page(mine)})
                assert forged.status_code == 403

                (item,) = (await operator.get("/api/elicitations")).json()["elicitations"]
                assert item["claimed_at"] is not None
                released = await operator.post(f"/api/elicitations/{item['id']}/release")
                assert released.json() == {"id": item["id"], "released": True}
                assert (await theirs.open()).status_code == 200  # the next browser to open it gets it
                assert "ada@example.com" not in theirs.html  # what the first one typed is not handed on
                assert (await mine.open()).status_code == 409  # and the first one has lost it
                await theirs.post("decline")
                assert 'data-state="declined"' in theirs.html
            assert text(await call.wait()) == {"action": "decline"}
