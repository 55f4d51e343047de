"""The hosting choice (elicitation/hosting.py) in memory: who presents an elicitation, per server policy, mode,
secrets, the client's modes and whether the inbox is on. The broker acts on these answers (docs/hosting.md)."""

from dataclasses import dataclass
from typing import Any

import pytest
from mcp_types import ClientCapabilities

from elicitgate.config import build_config
from elicitgate.elicitation.hosting import Hosting

TOKEN = "an-admin-BIzh9k0GVI3OwY_8dzS8i6x6URX8UFz5H2jPHaFcAR0"
BOTH = frozenset({"form", "url"})
FORM = frozenset({"form"})
URL = frozenset({"url"})
NONE: frozenset[str] = frozenset()


@dataclass
class Asker:
    """What the hosting choice reads of the call that asks: the modes its client declared."""

    modes: frozenset[str]


@dataclass
class Client:
    """What the hosting reads of a client (`DownstreamPeer`): what it declared."""

    capabilities: ClientCapabilities


def declaring(modes: frozenset[str]) -> Client:
    declared = {"elicitation": {mode: {} for mode in modes}} if modes else {}
    return Client(ClientCapabilities.model_validate(declared))


def hosting(policy: str | None, *, inbox: bool) -> Hosting:
    server: dict[str, Any] = {"command": "true"}
    if policy is not None:
        server["hosting"] = policy
    data: dict[str, Any] = {"mcpServers": {"s": server}}
    if inbox:
        data["admin_token"] = TOKEN
    return Hosting(build_config(data, "test", environ={}), links={})


def chosen(h: Hosting, mode: str, modes: frozenset[str], secrets: bool = False, server: str = "s") -> str:
    responder = h.responder_for(server, Asker(modes), mode, secrets=secrets)
    if responder is None:
        return "client"
    return {id(h.page): "page", id(h.inbox): "inbox"}[id(responder)]


@pytest.mark.parametrize(
    ("mode", "modes", "secrets", "inbox", "expected"),
    [
        # auto, form: the client presents what it can, unless the form asks for a secret
        ("form", BOTH, False, True, "client"),
        ("form", FORM, False, True, "client"),
        ("form", BOTH, True, True, "page"),  # the secret goes to the gateway's page, the client gets a URL
        ("form", FORM, True, True, "inbox"),  # no URL mode to send the page: the inbox
        ("form", FORM, True, False, "client"),  # nobody can host it: the broker refuses (-32018)
        ("form", URL, False, False, "page"),  # a URL-only client gets the page for a form
        ("form", NONE, False, True, "inbox"),
        ("form", NONE, False, False, "client"),  # nobody can: the broker refuses (-32013)
        # auto, url: the client opens it when it can, else the inbox lists the link
        ("url", BOTH, False, True, "client"),
        ("url", URL, False, False, "client"),
        ("url", FORM, False, True, "inbox"),
        ("url", FORM, False, False, "client"),
    ],
)
def test_auto_hosts_what_the_client_cannot_present_and_secrets(
    mode: str, modes: frozenset[str], secrets: bool, inbox: bool, expected: str
) -> None:
    assert chosen(hosting(None, inbox=inbox), mode, modes, secrets) == expected
    assert chosen(hosting("auto", inbox=inbox), mode, modes, secrets) == expected


@pytest.mark.parametrize(
    ("modes", "inbox", "expected"), [(BOTH, True, "page"), (FORM, True, "inbox"), (FORM, False, "client")]
)
def test_always_hosts_every_form(modes: frozenset[str], inbox: bool, expected: str) -> None:
    assert chosen(hosting("always", inbox=inbox), "form", modes) == expected


def test_always_leaves_url_mode_to_a_client_that_has_it() -> None:
    h = hosting("always", inbox=True)
    assert chosen(h, "url", BOTH) == "client"
    assert chosen(h, "url", FORM) == "inbox"


@pytest.mark.parametrize("mode", ["form", "url"])
@pytest.mark.parametrize("modes", [BOTH, FORM, URL, NONE])
@pytest.mark.parametrize("secrets", [False, True])
def test_never_hosts_anything(mode: str, modes: frozenset[str], secrets: bool) -> None:
    assert chosen(hosting("never", inbox=True), mode, modes, secrets) == "client"


def test_a_server_the_config_does_not_name_is_never_hosted() -> None:
    h = hosting("always", inbox=True)
    assert h.policy("unknown") == "never"
    assert chosen(h, "form", NONE, secrets=True, server="unknown") == "client"


def test_the_reason_nobody_can_host_names_the_fix() -> None:
    reason = hosting("never", inbox=False).unavailable_reason("s", Asker(FORM), "form")
    assert reason == "hosting is 'never' for server 's'"
    reason = hosting("auto", inbox=False).unavailable_reason("s", Asker(FORM), "url")
    assert "ELICITGATE_ADMIN_TOKEN" in reason and "docs/hosting.md" in reason


@pytest.mark.parametrize(
    ("policy", "modes", "inbox", "expected"),
    [
        ("auto", BOTH, True, BOTH),
        ("auto", FORM, True, BOTH),  # the inbox takes URL-mode links too
        ("auto", URL, False, FORM),  # the page hosts forms for a URL-capable client
        ("auto", FORM, False, NONE),
        ("never", BOTH, True, NONE),
    ],
)
def test_modes_the_gateway_adds_for_a_client(
    policy: str, modes: frozenset[str], inbox: bool, expected: frozenset[str]
) -> None:
    assert hosting(policy, inbox=inbox).modes_for("s", declaring(modes)) == expected  # type: ignore[arg-type]


def test_page_and_inbox_urls_follow_the_address_learned_from_the_first_request() -> None:
    h = hosting("auto", inbox=True)
    assert h.inbox_url() == "/inbox"
    h.learn_base_url({"server": ("::1", 8123), "scheme": "https"})
    assert h.inbox_url() == "https://[::1]:8123/inbox"
    h.learn_base_url({"server": ("127.0.0.1", 9), "scheme": "http"})
    assert h.base_url == "https://[::1]:8123"  # the first one stays
