"""URL-mode links are checked as a browser would read them, before anything reaches a person.

End to end: real upstreams (the test peer over stdio and HTTP, the TypeScript SDK server), the
gateway over real HTTP, `mcp.Client` of both eras downstream. A refused link goes back to the
upstream as -32602 with `data.rule` and is never shown to the client or put in the inbox. The
policy's own table (`UrlPolicy.check`) is a pure function of the URL plus the machine's resolver.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp import Client
from mcp.shared.exceptions import MCPError

from elicitgate.config import UrlPolicyConfig, build_config
from elicitgate.elicitation.url_policy import UrlPolicy, browser_host, local_upstreams
from tests.conftest import inprocess_gateway
from tests.hosted_helpers import TOKEN, next_pending
from tests.test_broker import Human, accept, gateway, stdio_upstream, text
from tests.test_hosted import Call
from tests.test_typescript import TS_UPSTREAM

pytestmark = pytest.mark.anyio

SPOOF = "https://evil.example\\@bank.example/pay"

REFUSED = [
    (SPOOF, "url has no backslashes"),
    ("https://user:pw@bank.example/", "url has no userinfo"),
    ("https://:pw@bank.example/", "url has no userinfo"),
    ("https://bank.example/\tpay", "url has no control characters or whitespace"),
    ("https://bank.example/ pay", "url has no control characters or whitespace"),
    ("https://bank.example/\u202epay", "url has no control characters or whitespace"),
    ("https://bank.example/" + "a" * 2048, "url is at most 2048 characters"),
    ("javascript:alert(1)", "url must be https"),
    ("data:text/html,hi", "url must be https"),
    ("http://bank.example/pay", "url must be https (http only to loopback from a local upstream)"),
    ("https://10.0.0.8/", "url host must not be a private address"),
    ("https://192.168.1.1/admin", "url host must not be a private address"),
    ("https://169.254.169.254/latest/meta-data/", "url host must not be a metadata address"),
    ("https://[fd00:ec2::254]/", "url host must not be a metadata address"),
    ("https://[::ffff:169.254.169.254]/", "url host must not be a metadata address"),
    ("https://[::ffff:10.1.2.3]/", "url host must not be a private address"),
    ("https://[64:ff9b::a00:1]/", "url host must not be a private address"),
    ("https://[2002:c0a8:101::1]/", "url host must not be a private address"),
    # Every IPv6 form that carries an IPv4 address is checked as that address (elicitation/embedded_ipv4.py).
    ("https://[::127.0.0.1]/", "url host must not be a loopback address"),  # IPv4-compatible
    ("https://[::a9fe:a9fe]/", "url host must not be a metadata address"),
    ("https://[::ffff:0:7f00:1]/", "url host must not be a loopback address"),  # IPv4-translated (RFC 2765)
    ("https://[::ffff:0:a9fe:a9fe]/", "url host must not be a metadata address"),
    ("https://[64:ff9b::7f00:1]/", "url host must not be a loopback address"),  # NAT64, well-known prefix
    ("https://[64:ff9b:1::a9fe:a9fe]/", "url host must not be a metadata address"),  # local-use NAT64, /96
    ("https://[64:ff9b:1:a9fe:a9:fe00::]/", "url host must not be a metadata address"),  # local-use NAT64, /48
    ("https://[64:ff9b:1:7f:0:1::]/", "url host must not be a loopback address"),  # local-use NAT64, /56
    ("https://[64:ff9b:1:0:7f:0:100:0]/", "url host must not be a loopback address"),  # local-use NAT64, /64
    ("https://[2002:a9fe:a9fe::1]/", "url host must not be a metadata address"),  # 6to4
    ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "url host must not be a private address"),  # Teredo
    ("https://0xa9fea9fe/", "url host must not be a metadata address"),  # 169.254.169.254, as browsers read it
    ("https://[fe80::1]/", "url host must not be a link-local address"),
    ("https://224.0.0.251/", "url host must not be a multicast address"),
    ("https://[ff02::1]/", "url host must not be a multicast address"),
    ("https://100.64.0.1/", "url host must not be a private address"),
    ("https://intranet/", "url host must be a public name or address"),
    ("https://printer.local/", "url host must be a public name or address"),
    ("https://db.internal/", "url host must be a public name or address"),
]
LOOPBACK = ["https://127.0.0.1/", "https://127.1/", "https://[::1]/", "http://localhost:8080/cb", "https://[::ffff:7f00:1]/"]


async def check(url: str, *, server: str = "remote", eid: Any = "el-1", **policy: Any) -> str | None:
    """The rule a link breaks for `server` (None: it passes)."""
    try:
        await UrlPolicy(UrlPolicyConfig(**policy), local_servers={"local"}).check(server, url, eid, needs_id=True)
    except MCPError as exc:
        assert exc.error.code == -32602
        return exc.error.data["rule"]
    return None


# -- the policy's table --------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "rule"), REFUSED)
async def test_refused_links(url, rule):
    assert await check(url) == rule


async def test_public_https_links_pass():
    for url in ("https://bank.example/pay?x=1#y", "https://auth.example.com:8443/start", "https://8.8.8.8/",
                "https://[2606:4700::1111]/", "https://xn--bcher-kva.example/", "https://bücher.example/",
                # NAT64 forms of a public IPv4 address (93.184.216.34), at /96 and at the local-use /48
                "https://[64:ff9b::5db8:d822]/", "https://[64:ff9b:1::5db8:d822]/", "https://[64:ff9b:1:5db8:d8:2200::]/"):
        assert await check(url) is None, url


async def test_loopback_only_from_a_local_upstream():
    for url in LOOPBACK:
        assert await check(url, server="local") is None, url
        assert (await check(url)).startswith("url host must not be loopback"), url


async def test_elicitation_ids_are_bounded_and_plain():
    assert await check("https://bank.example/", eid="a" * 256) is None
    assert await check("https://bank.example/", eid="a" * 257) == "elicitationId is at most 256 characters"
    assert await check("https://bank.example/", eid="a\nb") == "elicitationId has no control characters or whitespace"
    assert await check("https://bank.example/", eid=None) == "elicitationId is required"
    assert await check("https://bank.example/", eid=7) == "elicitationId is required"


async def test_hosts_are_checked_after_dns_resolution():
    """The machine's own name resolves (from /etc/hosts) to one of its addresses, which are not public."""
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 443)}
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    rule = await check(f"https://{name}/")
    assert rule is not None and rule.startswith("url host must not be a"), (addresses, rule)
    assert await check(f"https://{name}/", allow_hosts=[name]) is None


async def test_unresolved_names_pass_unless_the_operator_says_otherwise():
    assert await check("https://no-such-host.invalid/") is None
    assert await check("https://no-such-host.invalid/", allow_unresolved=False) == (
        "url host must resolve (url_policy.allow_unresolved)")


async def test_operator_allow_list():
    assert await check("https://sso.corp.example/", allow_hosts=["sso.corp.example"]) is None
    assert await check("https://a.b.corp.example/", allow_hosts=["*.corp.example"]) is None
    assert await check("https://10.20.3.4/", allow_networks=["10.20.0.0/16"]) is None
    assert await check("https://10.21.3.4/", allow_networks=["10.20.0.0/16"]) == (
        "url host must not be a private address"
    )
    # The allow-list exempts from the address checks only.
    assert await check("https://u@sso.corp.example/", allow_hosts=["sso.corp.example"]) == "url has no userinfo"
    assert (await check("http://sso.corp.example/", allow_hosts=["sso.corp.example"])).startswith("url must be https")
    assert await check("https://bank.example/" + "a" * 100, max_url_length=64) == "url is at most 64 characters"


def test_the_host_shown_is_the_one_the_browser_visits():
    assert browser_host(SPOOF) == "evil.example"
    assert browser_host("https://\u0430pple.com/") == "xn--pple-43d.com"  # Cyrillic a: shown as punycode
    assert browser_host("https://0x7f.1/") == "127.0.0.1"
    assert browser_host("not a url") is None


# -- end to end ------------------------------------------------------------------------------------------


@pytest.fixture(params=["stdio", "http"])
def x_upstream(request: pytest.FixtureRequest, http_upstream: Any) -> dict[str, Any]:
    if request.param == "stdio":
        return stdio_upstream()
    up = http_upstream("tests.peers.py_server", "--name", "x")
    return {"url": f"{up.url}/mcp", "era": "handshake"}


async def test_elicitation_create_with_a_refused_link_never_reaches_the_client(x_upstream):
    human = Human(accept({}))
    async with gateway({"mcpServers": {"x": x_upstream}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            for url, rule in [(SPOOF, "url has no backslashes"), ("https://user@bank.example/", "url has no userinfo"),
                              ("https://[::ffff:a9fe:a9fe]/", "url host must not be a metadata address")]:
                got = text(await client.call_tool("x__elicit", {"mode": "url", "url": url, "report_errors": True}))
                assert got["error"]["code"] == -32602, url
                assert got["error"]["data"]["rule"] == rule
                assert got["error"]["data"]["server"] == "x"
            long_id = {
                "mode": "url", "url": "https://bank.example/", "elicitation_id": "e" * 300, "report_errors": True
            }
            got = text(await client.call_tool("x__elicit", long_id))
            assert got["error"]["data"]["rule"] == "elicitationId is at most 256 characters"
            assert human.seen == []
            ok = text(await client.call_tool("x__elicit", {"mode": "url", "url": "https://bank.example/pay"}))
            assert ok == {"action": "accept"}
            assert [p.url for p in human.seen] == ["https://bank.example/pay"]
        assert [s["state"] for s in gw.gateway.broker.recent] == ["accepted"]  # refused ones never started


async def test_a_local_upstream_may_link_to_loopback_over_http(http_upstream):
    up = http_upstream("tests.peers.py_server", "--name", "h")
    human = Human(accept({}))
    servers = {"local": stdio_upstream("local"), "h": {"url": f"{up.url}/mcp", "era": "handshake"}}
    async with gateway({"mcpServers": servers}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            for server in servers:
                args = {"mode": "url", "url": "http://localhost:8976/callback", "report_errors": True}
                assert text(await client.call_tool(f"{server}__elicit", args)) == {"action": "accept"}
    assert [p.url for p in human.seen] == ["http://localhost:8976/callback"] * 2


def test_which_upstreams_are_local():
    servers = {"stdio": stdio_upstream(), "loop": {"url": "http://127.0.0.1:9/mcp"}, "v6": {"url": "http://[::1]:9/mcp"},
               "name": {"url": "http://localhost:9/mcp"}, "remote": {"url": "https://mcp.example.com/mcp"},
               "spoof": {"url": "http://127.0.0.1.example.com/mcp"}}
    assert local_upstreams(build_config({"mcpServers": servers}, "test").upstreams()) == {"stdio", "loop", "v6", "name"}


async def test_url_elicitation_required_with_a_refused_link_is_not_relayed(x_upstream):
    async with gateway({"mcpServers": {"x": x_upstream}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=Human()) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__url_required", {"elicitation_id": "auth-9", "url": SPOOF})
            assert caught.value.error.code == -32602
            assert caught.value.error.data["rule"] == "url has no backslashes"
            assert gw.gateway.broker.url_route("x", "auth-9", pop=False) is None
            with pytest.raises(MCPError) as caught:
                await client.call_tool("x__url_required", {"elicitation_id": "auth-10"})
            assert caught.value.error.code == -32042


@pytest.mark.parametrize(("client_mode", "upstream_era"), [("2026-07-28", "modern"), ("2026-07-28", "handshake"),
                                                           ("legacy", "modern")])
async def test_input_requests_of_either_era_are_checked_too(client_mode, upstream_era):
    human = Human(accept({}))
    cfg = {"mcpServers": {"x": {**stdio_upstream(), "era": upstream_era}}}
    async with inprocess_gateway(cfg) as gw:
        async with Client(gw.mcp_url, mode=client_mode, elicitation_callback=human) as client:
            if upstream_era == "modern":  # no request to refuse: the call that carried the input request fails
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("x__elicit", {"mode": "url", "url": SPOOF})
                error = caught.value.error
                assert (error.code, error.data["rule"]) == (-32602, "url has no backslashes")
            else:
                got = text(await client.call_tool("x__elicit", {"mode": "url", "url": SPOOF, "report_errors": True}))
                assert got["error"]["data"]["rule"] == "url has no backslashes"
            assert human.seen == []
        assert list(gw.gateway.broker.recent) == []


async def test_the_typescript_sdk_servers_link_is_checked():
    human = Human(accept({}))
    async with gateway({"mcpServers": {"ts": TS_UPSTREAM}}) as gw:
        async with Client(gw.mcp_url, mode="legacy", elicitation_callback=human) as client:
            result = await client.call_tool("ts__ask_url", {"url": "https://10.0.0.1/login"})
            assert result.is_error
            assert result.content[0].text == "MCP error -32602: url host is a private address"
            assert human.seen == []


async def test_the_hosted_page_shows_the_host_the_browser_visits():
    homograph = "https://\u0430pple.com/signin"
    cfg = {"mcpServers": {"x": stdio_upstream()}, "admin_token": TOKEN}
    async with gateway(cfg) as gw:
        async with Client(gw.mcp_url, mode="legacy") as client, anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, client, "x__elicit", {"mode": "url", "url": homograph})
            (item,) = await next_pending(gw.url)
            async with httpx2.AsyncClient() as http:
                page = (await http.get(item["form_url"])).text
            assert '<strong class="eg-host">xn--pple-43d.com</strong>' in page
            async with httpx2.AsyncClient(base_url=gw.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                await http.post(f"/api/elicitations/{item['id']}/cancel")
            assert text(await call.wait()) == {"action": "cancel"}


async def test_the_documented_allow_list_example():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    section = doc.split("## URL-mode links", 1)[1]
    example = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    cfg = build_config(example, "docs/security.md")
    policy = UrlPolicy(cfg.elicitation.url_policy, local_upstreams(cfg.upstreams()))

    async def rule(url: str) -> str | None:
        try:
            await policy.check("crm", url, "el-1")
        except MCPError as exc:
            return exc.error.data["rule"]
        return None

    assert await rule("https://sso.corp.example/login") is None
    assert await rule("https://x.auth.corp.example/login") is None
    assert await rule("https://10.20.3.4/consent") is None
    assert await rule("https://10.21.3.4/") == "url host must not be a private address"
    assert (await rule("http://sso.corp.example/")).startswith("url must be https")
