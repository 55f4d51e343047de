"""Hosted elicitation end to end in real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright): one gateway process and one browser for the module; MCP clients call tools from a
background thread while the test drives the pages. Screenshots of the form and the inbox go to
docs/screenshots/ with ELICITGATE_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from mcp import Client
from mcp.client.session import ClientSession

from tests.conftest import PY, ROOT, Process, serve_http
from tests.hosted_helpers import AUTH, TOKEN, next_pending_sync

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# The docs' screenshots are refreshed with ELICITGATE_UPDATE_SCREENSHOTS=1; other runs write them aside.
SHOTS = ROOT / "docs" / "screenshots" if os.environ.get("ELICITGATE_UPDATE_SCREENSHOTS") else Path(
    os.environ.get("TMPDIR", "/tmp")) / "elicitgate-screenshots"

# scripts/test installs Debian's chromium; run by hand without it, these skip (never in CI).
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists() and not os.environ.get("CI"),
                                reason="Debian chromium is not installed (scripts/test installs it)")

UI_READY_TIMEOUT = 4  # seconds; the never-ready guest's test waits this long

EVERYTHING = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2, "description": "As on the booking"},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "site": {"type": "string", "format": "uri", "title": "Website"},
        "day": {"type": "string", "format": "date", "title": "Day"},
        "at": {"type": "string", "format": "date-time", "title": "Arrival"},
        "budget": {"type": "number", "minimum": 10, "maximum": 500, "title": "Budget"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 8, "default": 2, "title": "Guests"},
        "vip": {"type": "boolean", "title": "VIP", "default": False},
        "colour": {"type": "string", "enum": ["red", "green"], "title": "Colour"},
        "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"], "title": "Size"},
        "seat": {"type": "string", "oneOf": [{"const": "in", "title": "Inside"}, {"const": "out", "title": "Terrace"}],
                 "default": "out", "title": "Seating"},
        "extras": {"type": "array", "items": {"type": "string", "enum": ["cake", "wine", "flowers"]},
                   "minItems": 1, "maxItems": 2, "title": "Extras"},
        "diet": {"type": "array", "items": {"anyOf": [{"const": "veg", "title": "Vegetarian"},
                                                      {"const": "gf", "title": "Gluten-free"}]},
                 "default": ["veg"], "title": "Diet"},
    },
    "required": ["name", "email", "day", "guests", "extras"],
}


# -- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    config = tmp_path_factory.mktemp("hosted") / "elicitgate.json"
    config.write_text(json.dumps({
        "mcpServers": {
            "x": {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "x"], "era": "handshake"},
            "demo": {"command": PY, "args": ["-m", "elicitgate.demo.server"], "era": "handshake"},
            "colours": {"command": PY, "args": ["-m", "elicitgate.demo.colour_server"], "era": "handshake"},
        },
        "http": {"ui_ready_timeout": UI_READY_TIMEOUT},
    }))
    proc = serve_http(config, env={"ELICITGATE_ADMIN_TOKEN": TOKEN})
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 900, "height": 1000})
    yield context.new_page()
    context.close()


AXE = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 375, "height": 740}


@pytest.fixture
def checked(browser: Any) -> Iterator[Any]:
    """A page with axe-core in every document it opens (injected by the browser, past the page's CSP)."""
    if not AXE.exists():
        pytest.fail(f"axe-core is not installed: run `cd {AXE.parents[2]} && npm ci` (scripts/test does)")
    context = browser.new_context(viewport={"width": 900, "height": 1000})
    context.add_init_script(path=str(AXE))
    yield context.new_page()
    context.close()


def type_into(field: Any, text: str) -> None:
    """Types as a person does: a real click into the field, select what is there, then key by key.
    (Date and time inputs keep `fill`: Chromium's date widget takes segments in the locale's order.)"""
    field.click()
    field.press("ControlOrMeta+A")
    field.press_sequentially(text)


def axe(page: Any) -> list[dict[str, Any]]:
    """axe-core's WCAG 2.x A/AA and best-practice violations on the page (not inside a guest's frame)."""
    return page.evaluate("""async () => {
        const result = await axe.run(document, {iframes: false, resultTypes: ["violations"],
            runOnly: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]});
        return result.violations.map(v => ({id: v.id, help: v.help, nodes: v.nodes.map(n => n.target.join(" "))}));
    }""")


def focused(page: Any) -> str:
    return page.evaluate("() => { const el = document.activeElement; return el.id || el.name || el.tagName; }")


def tab_to(page: Any, element_id: str, limit: int = 30) -> None:
    for _ in range(limit):
        if focused(page) == element_id:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"#{element_id} is not reachable with the Tab key (stuck at {focused(page)})")


@pytest.fixture(autouse=True)
def settled(gw: Process) -> Iterator[None]:
    yield
    pending = httpx2.get(f"{gw.url}/api/elicitations", headers=AUTH).json()["elicitations"]
    for item in pending:  # one failed test must not leave the next ones a busy gateway
        httpx2.post(f"{gw.url}/api/elicitations/{item['id']}/cancel", headers=AUTH)
    assert pending == [], pending


class ToolCall(threading.Thread):
    """An MCP client calling one tool from its own thread (and event loop)."""

    def __init__(self, url: str, tool: str, args: dict[str, Any], callback: Any = None) -> None:
        super().__init__(daemon=True)
        self.url, self.tool, self.args, self.callback = url, tool, args, callback
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        async def main() -> None:
            extra = {"elicitation_callback": self.callback} if self.callback else {}
            async with Client(f"{self.url}/mcp", mode="legacy", **extra) as client:
                self.result = await client.call_tool(self.tool, self.args)

        try:
            anyio.run(main)
        except BaseException as exc:  # noqa: BLE001 - reported by outcome()
            self.error = exc

    def outcome(self, timeout: float = 90) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the tool call did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def content_of(result: Any) -> Any:
    assert not result.is_error, result
    return json.loads(result.content[0].text)


def hosted_page_of(gw: Process, call: ToolCall) -> str:
    (item,) = next_pending_sync(gw.url)
    return item["form_url"]


# -- the generated form ----------------------------------------------------------------------------------


def test_every_field_type_inline_error_review_and_submit(gw, page):
    call = ToolCall(gw.url, "x__elicit", {"schema": EVERYTHING, "message": "Tell us about your visit"})
    url = hosted_page_of(gw, call)
    page.goto(url)
    assert page.inner_text("#eg-server") == "x"
    assert page.inner_text("#eg-message") == "Tell us about your visit"
    # Defaults are pre-filled; native inputs per format.
    assert page.input_value("#f-guests") == "2"
    assert page.input_value("#f-seat") == "out"
    assert page.is_checked("#f-diet-0") and not page.is_checked("#f-vip")
    assert [page.get_attribute(f"#f-{n}", "type") for n in ("email", "site", "day", "at", "budget")] == [
        "email", "url", "date", "datetime-local", "number"]

    type_into(page.locator("#f-name"), "Ada")
    type_into(page.locator("#f-email"), "ada-at-example")  # invalid
    type_into(page.locator("#f-site"), "https://ada.example.com")
    page.fill("#f-day", "2026-12-24")
    page.fill("#f-at", "2026-12-24T19:30")
    type_into(page.locator("#f-budget"), "120.5")
    type_into(page.locator("#f-guests"), "4")
    page.check("#f-vip")
    page.select_option("#f-colour", "green")
    page.select_option("#f-size", label="Large")
    page.select_option("#f-seat", label="Inside")
    page.check("#f-extras-0")
    page.check("#f-extras-1")
    page.check("#f-diet-1")
    page.click("#eg-review-btn")
    # Checked in the page: the error sits next to the field, nothing was sent.
    assert "valid email" in page.inner_text("#err-email")
    assert page.get_attribute("#f-email", "aria-invalid") == "true"
    assert page.url == url
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "hosted-form.png"), full_page=True)

    type_into(page.locator("#f-email"), "ada@example.com")
    page.check("#f-extras-2")  # a third extra: over maxItems
    page.click("#eg-review-btn")
    assert "at most 2" in page.inner_text("#err-extras")
    page.uncheck("#f-extras-2")
    page.reload()  # survives a reload: the draft comes back
    assert page.input_value("#f-email") == "ada@example.com" and page.is_checked("#f-extras-1")
    page.click("#eg-review-btn")
    page.wait_for_selector("#eg-review")
    review = page.inner_text("#eg-review")
    assert "ada@example.com" in review and "Large" in review and "Inside" in review and "cake, wine" in review
    page.click("#eg-submit")
    page.wait_for_selector('[data-state="accepted"]')

    assert content_of(call.outcome()) == {"action": "accept", "content": {
        "name": "Ada", "email": "ada@example.com", "site": "https://ada.example.com", "day": "2026-12-24",
        "at": "2026-12-24T19:30:00Z", "budget": 120.5, "guests": 4, "vip": True, "colour": "green", "size": "l",
        "seat": "in", "extras": ["cake", "wine"], "diet": ["veg", "gf"]}}
    page.reload()  # single use: the link is dead now
    assert "This request has ended" in page.inner_text("h1")
    assert page.evaluate("() => document.querySelector('[data-state]').dataset.state") == "accepted"


def test_without_javascript_the_gateway_check_is_final(gw, browser):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    call = ToolCall(gw.url, "x__elicit", {"schema": EVERYTHING})
    page.goto(hosted_page_of(gw, call))
    type_into(page.locator("#f-name"), "Al")
    type_into(page.locator("#f-email"), "al@example.com")
    page.fill("#f-day", "2026-01-02")
    for i in range(3):
        page.check(f"#f-extras-{i}")
    page.click("#eg-review-btn")  # the browser's own checks pass; the gateway's do not
    assert "must have at most 2 choice(s)" in page.inner_text("#err-extras")
    assert page.is_checked("#f-extras-2")  # what was typed is kept
    page.uncheck("#f-extras-2")
    page.click("#eg-review-btn")
    page.click("#eg-submit")
    assert content_of(call.outcome())["content"]["extras"] == ["cake", "wine"]
    context.close()


AGE = {"type": "object", "properties": {
    "age": {"type": "integer", "minimum": 0, "maximum": 150, "title": "Age"},
    "city": {"type": "string", "title": "City"},
}, "required": ["age"]}


def retype(page: Any, selector: str, text: str) -> None:
    """What a person does: click into the field, select what is there, type over it."""
    page.locator(selector).click()
    page.keyboard.press("Control+A")
    page.keyboard.type(text)


def test_a_real_click_on_review_after_correcting_an_error_reviews(gw, page):
    # The pointer goes down on the button, the field loses focus, and the page must not move under the
    # pointer before it comes up (the error line under the field used to vanish on blur: a lost click).
    call = ToolCall(gw.url, "x__elicit", {"schema": AGE})
    page.goto(hosted_page_of(gw, call))
    retype(page, "#f-age", "200")
    page.locator("#eg-review-btn").click()
    assert page.inner_text("#err-age") == "must be at most 150"
    retype(page, "#f-age", "42")
    page.locator("#eg-review-btn").click()  # real pointer events at the button's place, one click
    page.wait_for_selector("#eg-review")
    page.locator("#eg-submit").click()
    page.wait_for_selector('[data-state="accepted"]')
    assert content_of(call.outcome()) == {"action": "accept", "content": {"age": 42}}


CLASHING = {"type": "object", "properties": {
    "csrf": {"type": "string", "title": "CSRF"},
    "action": {"type": "string", "enum": ["deploy", "rollback"], "title": "Action"},
    "two words": {"type": "string", "title": "Two words", "description": "A name with a space"},
}, "required": ["csrf", "action", "two words"]}


def test_properties_named_like_the_pages_own_fields(gw, page):
    call = ToolCall(gw.url, "x__elicit", {"schema": CLASHING})
    page.goto(hosted_page_of(gw, call))
    type_into(page.get_by_label("CSRF"), "not-a-token")
    page.get_by_label("Action").select_option("rollback")
    words = page.get_by_label("Two words")
    type_into(words, "hello there")
    # An id made from a name with a space would break `aria-describedby`; its hint still describes it.
    assert words.evaluate("el => el.getAttribute('aria-describedby').split(' ').map("
                          "id => document.getElementById(id) !== null)") == [True, True]
    page.reload()  # the draft keeps every field, the page's own csrf is not among them
    assert page.get_by_label("CSRF").input_value() == "not-a-token"
    page.locator("#eg-review-btn").click()
    page.wait_for_selector("#eg-review")
    page.locator("#eg-submit").click()
    page.wait_for_selector('[data-state="accepted"]')
    assert content_of(call.outcome()) == {"action": "accept", "content": {
        "csrf": "not-a-token", "action": "rollback", "two words": "hello there"}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel(gw, page, action):
    call = ToolCall(gw.url, "x__elicit", {"schema": EVERYTHING})
    page.goto(hosted_page_of(gw, call))
    page.click(f"button[value={action}]")  # no review, no field checks
    page.wait_for_selector("[data-state]")
    assert content_of(call.outcome()) == {"action": action}


def test_url_only_client_opens_the_hosted_page(gw, page, monkeypatch):
    original = ClientSession._build_capabilities

    def url_only(self: ClientSession, version: str) -> types.ClientCapabilities:
        caps = original(self, version)
        return caps.model_copy(update={"elicitation": types.ElicitationCapability(url={})})

    monkeypatch.setattr(ClientSession, "_build_capabilities", url_only)
    links: queue.Queue[Any] = queue.Queue()

    async def consent(ctx: Any, params: Any) -> types.ElicitResult:
        links.put(params)
        return types.ElicitResult(action="accept")

    call = ToolCall(gw.url, "demo__book_table", {"restaurant": "Chez Ada"}, callback=consent)
    link = links.get(timeout=90)
    assert isinstance(link, types.ElicitRequestURLParams) and link.url.startswith(f"{gw.url}/e/")
    page.goto(link.url)
    assert "Booking at Chez Ada" in page.inner_text("#eg-message")
    type_into(page.locator("#f-name"), "Ada")
    type_into(page.locator("#f-email"), "ada@example.com")
    page.fill("#f-date", "2026-12-24")
    page.click("#eg-review-btn")
    page.click("#eg-submit")
    page.wait_for_selector('[data-state="accepted"]')
    assert "book_table: accepted {'name': 'Ada', 'email': 'ada@example.com'" in call.outcome().content[0].text


# -- accessible, by keyboard alone, and on a phone ----------------------------------------------------------

KEYBOARD = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Your name", "description": "As on the booking"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150, "title": "Age"},
    "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"], "title": "Size"},
    "extras": {"type": "array", "items": {"type": "string", "enum": ["cake", "wine"]}, "maxItems": 1,
               "title": "Extras"},
    "vip": {"type": "boolean", "title": "VIP"},
}, "required": ["name", "age", "size"]}


def test_keyboard_only_with_labels_errors_described_and_focused_and_no_axe_violations(gw, checked):
    page = checked
    call = ToolCall(gw.url, "x__elicit", {"schema": KEYBOARD, "message": "About you"})
    url = hosted_page_of(gw, call)
    page.goto(url)
    assert axe(page) == []
    for label in ("Your name", "Age", "Size", "VIP", "cake", "wine"):
        assert page.get_by_label(label).count() == 1  # every control has its label
    assert page.get_by_role("group", name="Extras").count() == 1
    assert page.get_attribute("#f-name", "aria-describedby") == "hint-name err-name"

    tab_to(page, "f-name")  # from the top of the page, by keyboard only
    page.keyboard.type("Ada")
    page.keyboard.press("Tab")
    page.keyboard.type("200")
    page.keyboard.press("Tab")
    assert focused(page) == "f-size"
    page.keyboard.press("ArrowDown")  # a closed select changes with the arrow keys
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # cake
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # VIP
    tab_to(page, "eg-review-btn")
    page.keyboard.press("Enter")
    # Checked in the page: the focus moves to the first error, which describes the field.
    page.wait_for_function("() => document.activeElement.id === 'f-age'")
    assert page.get_attribute("#f-age", "aria-invalid") == "true"
    assert "err-age" in page.get_attribute("#f-age", "aria-describedby").split()
    assert page.inner_text("#err-age") == "must be at most 150"
    assert axe(page) == []
    page.keyboard.press("Control+A")
    page.keyboard.type("42")
    page.keyboard.press("Enter")  # Enter in a field submits with the form's first button: Review
    page.wait_for_selector("#eg-review")
    assert axe(page) == []
    assert "Large" in page.inner_text("#eg-review") and "cake" in page.inner_text("#eg-review")
    tab_to(page, "eg-submit")
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-state="accepted"]')
    assert axe(page) == []
    assert content_of(call.outcome()) == {"action": "accept", "content": {
        "name": "Ada", "age": 42, "size": "l", "extras": ["cake"], "vip": True}}


def test_the_gateways_own_errors_get_the_focus(gw, browser):
    context = browser.new_context(java_script_enabled=False)
    call = ToolCall(gw.url, "x__elicit", {"schema": KEYBOARD})
    url = hosted_page_of(gw, call)
    nojs = context.new_page()
    nojs.goto(url)
    type_into(nojs.locator("#f-name"), "Ada")
    type_into(nojs.locator("#f-age"), "20")
    nojs.select_option("#f-size", "s")
    nojs.check("#f-extras-0")
    nojs.check("#f-extras-1")
    nojs.click("#eg-review-btn")  # the browser's own checks pass, the gateway's do not
    assert "must have at most 1 choice(s)" in nojs.inner_text("#err-extras")
    other = browser.new_context(storage_state=context.storage_state())  # the same browser, scripts on
    context.close()
    page = other.new_page()
    page.goto(url)
    page.wait_for_function("() => document.activeElement.id === 'f-extras-0'")
    assert page.is_checked("#f-extras-1")
    page.locator("button[value=decline]").click()
    page.wait_for_selector('[data-state="declined"]')
    assert content_of(call.outcome()) == {"action": "decline"}
    other.close()


def test_phone_width_layout_and_screenshots(gw, browser):
    call = ToolCall(gw.url, "x__elicit", {"schema": KEYBOARD, "message": "About you"})
    url = hosted_page_of(gw, call)
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, has_touch=True)
    context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.goto(url)
    fits = "() => document.documentElement.scrollWidth <= window.innerWidth"
    assert page.evaluate(fits)
    assert axe(page) == []
    page.locator("#f-name").tap()
    page.keyboard.type("Ada")
    retype(page, "#f-age", "200")
    page.locator("#eg-review-btn").tap()
    assert page.inner_text("#err-age") == "must be at most 150"
    page.screenshot(path=str(SHOTS / "hosted-form-phone.png"), full_page=True)
    retype(page, "#f-age", "42")
    page.select_option("#f-size", "l")
    page.locator("#eg-review-btn").tap()
    page.wait_for_selector("#eg-review")
    assert page.evaluate(fits) and axe(page) == []
    page.screenshot(path=str(SHOTS / "hosted-review-phone.png"), full_page=True)
    page.locator("#eg-submit").tap()
    page.wait_for_selector('[data-state="accepted"]')
    assert content_of(call.outcome())["action"] == "accept"
    context.close()


# -- drafts and single submission -------------------------------------------------------------------------

DRAFTED = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Name"},
    "guests": {"type": "integer", "minimum": 1, "maximum": 8, "title": "Guests"},
    "extras": {"type": "array", "items": {"type": "string", "enum": ["cake", "wine"]}, "title": "Extras"},
    "api_key": {"type": "string", "title": "API key"},
}, "required": ["name", "api_key"]}


def test_drafts_survive_reload_back_and_a_second_tab_and_the_answer_is_sent_once(gw, page):
    call = ToolCall(gw.url, "x__elicit", {"schema": DRAFTED})
    url = hosted_page_of(gw, call)
    page.goto(url)
    retype(page, "#f-name", "Ada")
    retype(page, "#f-guests", "3")
    page.locator("#f-extras-1").click()
    retype(page, "#f-api_key", "sk-secret")

    def typed(tab: Any) -> tuple[str, str, bool, str]:
        return (tab.input_value("#f-name"), tab.input_value("#f-guests"), tab.is_checked("#f-extras-1"),
                tab.input_value("#f-api_key"))

    page.reload()
    assert typed(page) == ("Ada", "3", True, "")  # never the secret
    page.goto("about:blank")
    page.go_back()
    assert typed(page) == ("Ada", "3", True, "")
    second = page.context.new_page()  # the same browser: the page is still its own
    second.goto(url)
    assert typed(second) == ("Ada", "3", True, "")
    retype(second, "#f-name", "Ada L.")
    page.wait_for_function("() => document.getElementById('f-name').value === 'Ada L.'")  # follows live
    second.close()

    retype(page, "#f-api_key", "sk-secret")
    page.locator("#eg-review-btn").click()
    page.wait_for_selector("#eg-review")
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    page.locator("#eg-submit").dblclick()  # a double click sends the answer once
    page.wait_for_selector('[data-state="accepted"]')
    page.reload()
    page.go_back()
    page.wait_for_selector('[data-state="accepted"]')
    assert posts == [url]
    assert content_of(call.outcome()) == {"action": "accept", "content": {
        "name": "Ada L.", "guests": 3, "extras": ["wine"], "api_key": "sk-secret"}}
    assert page.evaluate("() => Object.keys(localStorage)") == []  # the draft went with the request


# -- rich UI delegation ------------------------------------------------------------------------------


def test_colour_picker_ui_in_a_sandboxed_frame_with_a_rejected_submission(gw, checked):
    page = checked
    call = ToolCall(gw.url, "colours__pick_colour", {"purpose": "the docs"})
    page.goto(hosted_page_of(gw, call))
    assert page.get_attribute("#eg-ui", "sandbox") == "allow-scripts"
    picker = page.frame_locator("#eg-ui")
    picker.locator("body[data-context=ready]").wait_for()
    assert picker.locator("#message").inner_text() == "Pick a colour for the docs"
    type_into(picker.locator("#name"), "A name far longer than twenty characters")
    picker.locator("#choose").click()
    # The gateway refuses it and re-sends the context with the errors; the UI shows them.
    picker.locator("body[data-context=error]").wait_for()
    assert "name" in picker.locator("#error").inner_text()
    assert "must be at most 20 characters long" in page.inner_text("#eg-ui-error")
    assert axe(page) == []  # the host page; the guest's own frame is the server's to make accessible
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "hosted-rich-ui.png"))
    type_into(picker.locator("#name"), "Tomato")
    picker.locator("button[data-colour='#ef4444']").click()
    picker.locator("#choose").click()
    page.wait_for_selector("#eg-ui-review:not([hidden])")
    assert "#ef4444" in page.inner_text("#eg-ui-values") and "Tomato" in page.inner_text("#eg-ui-values")
    page.click("#eg-ui-send")
    page.wait_for_selector('[data-state="accepted"]')
    assert call.outcome().content[0].text == 'pick_colour: {"colour": "#ef4444", "name": "Tomato"}'


def test_ui_resource_is_served_sandboxed_and_only_while_open(gw, page):
    call = ToolCall(gw.url, "colours__pick_colour", {})
    url = hosted_page_of(gw, call)
    ui = httpx2.get(f"{url}/ui")
    assert ui.status_code == 200 and "ui/submit-elicitation" in ui.text
    assert "sandbox allow-scripts" in ui.headers["content-security-policy"]
    assert "connect-src 'none'" in ui.headers["content-security-policy"]
    page.goto(url)
    page.click("button[value=decline]")
    assert call.outcome().content[0].text == "pick_colour: decline"
    assert httpx2.get(f"{url}/ui").status_code == 410


ANSWER = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 5}}, "required": ["answer"]}


def test_an_mcp_ui_guest_gets_its_context_once_ready_and_the_ui_options_apply(gw, page):
    ui = {"uri": "ui://tests/mcp-ui", "mode": "modal", "size": {"width": 420}}
    call = ToolCall(gw.url, "x__elicit", {"schema": ANSWER, "message": "Say it briefly", "ui": ui})
    page.goto(hosted_page_of(gw, call))
    guest = page.frame_locator("#eg-ui")
    # It listens only after posting ui-lifecycle-iframe-ready, after its frame loaded: the context
    # arrives then, once.
    guest.locator("body[data-rendered='1']").wait_for()
    assert guest.locator("#message").inner_text() == "Say it briefly"
    frame = page.locator("#eg-ui")
    assert "eg-ui-modal" in frame.get_attribute("class")
    page.wait_for_function("() => document.getElementById('eg-ui').style.height === '300px'")  # ui-size-change
    box = frame.bounding_box()
    assert (round(box["width"]), round(box["height"])) == (420, 300)  # ui.size's width, the guest's height

    guest.locator("#answer").click()
    page.keyboard.type("far too long")
    guest.locator("#send").click()
    guest.locator("body[data-rendered='2']").wait_for()  # the refusal goes back as render data too
    assert "answer" in guest.locator("#error").inner_text()
    type_into(guest.locator("#answer"), "short")
    guest.locator("#send").click()
    page.locator("#eg-ui-send").click()
    page.wait_for_selector('[data-state="accepted"]')
    assert content_of(call.outcome()) == {"action": "accept", "content": {"answer": "short"}}


def test_the_plain_form_when_the_ui_cannot_be_read_or_never_becomes_ready(gw, page):
    call = ToolCall(gw.url, "x__elicit", {"schema": ANSWER, "ui": {"uri": "ui://tests/missing"}})
    page.goto(hosted_page_of(gw, call))
    assert page.locator("#eg-ui").count() == 0 and page.locator("#eg-ui-fallback").is_visible()
    retype(page, "#f-answer", "hi")
    page.locator("#eg-review-btn").click()
    page.locator("#eg-submit").click()
    page.wait_for_selector('[data-state="accepted"]')
    assert content_of(call.outcome()) == {"action": "accept", "content": {"answer": "hi"}}

    call = ToolCall(gw.url, "x__elicit", {"schema": ANSWER, "ui": {"uri": "ui://tests/never-ready"}})
    page.goto(hosted_page_of(gw, call))
    assert page.locator("#eg-ui").count() == 1
    page.wait_for_selector("#eg-ui-fallback", timeout=(UI_READY_TIMEOUT + 10) * 1000)
    assert page.url.endswith("?plain=ui-not-ready")
    retype(page, "#f-answer", "ok")
    page.locator("#eg-review-btn").click()
    page.locator("button[value=edit]").click()  # back from the review: still the plain form
    page.wait_for_selector("#eg-ui-fallback")
    assert page.locator("#eg-ui").count() == 0 and page.input_value("#f-answer") == "ok"
    page.locator("#eg-review-btn").click()
    page.locator("#eg-submit").click()
    page.wait_for_selector('[data-state="accepted"]')
    assert content_of(call.outcome()) == {"action": "accept", "content": {"answer": "ok"}}


# -- the inbox -----------------------------------------------------------------------------------------


def test_inbox_lists_pending_elicitations_live(gw, page):
    page.goto(f"{gw.url}/inbox#token={TOKEN}")  # the demo's link: the fragment never reaches a server
    page.wait_for_selector("#eg-inbox")
    assert page.url == f"{gw.url}/inbox"  # logged in by POST, the token left the address bar
    page.wait_for_selector("#eg-empty:not([hidden])")
    first = ToolCall(gw.url, "demo__book_table", {"restaurant": "Chez Ada"})
    page.wait_for_selector("tr[data-id]")  # arrives live, no reload
    second = ToolCall(gw.url, "x__elicit", {"message": "Approve the deployment of v2.3 to production?"})
    page.wait_for_selector("tr[data-id]:nth-child(2)")
    rows = page.inner_text("#eg-rows")
    assert "demo" in rows and "Booking at Chez Ada" in rows and "Approve the deployment" in rows
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "inbox.png"))

    page.click("tr[data-id]:first-child a.eg-answer")
    page.click("button[value=decline]")
    page.wait_for_selector('[data-state="declined"]')
    assert first.outcome().content[0].text == "book_table: decline"
    page.go_back()
    page.go_back()
    page.wait_for_function("() => document.querySelectorAll('tr[data-id]').length === 1")
    (item,) = httpx2.get(f"{gw.url}/api/elicitations", headers=AUTH).json()["elicitations"]
    assert httpx2.post(f"{gw.url}/api/elicitations/{item['id']}/cancel", headers=AUTH).json()["state"] == "cancelled"
    assert content_of(second.outcome()) == {"action": "cancel"}
    page.wait_for_selector("#eg-empty:not([hidden])")




def open_inbox(page: Any, gw: Process) -> None:
    page.goto(f"{gw.url}/inbox#token={TOKEN}")
    page.wait_for_selector("#eg-inbox")


def test_the_page_is_the_first_browsers_and_the_operator_can_release_it(gw, browser, page):
    operator_context = browser.new_context()
    operator_context.add_init_script(path=str(AXE))
    operator = operator_context.new_page()
    open_inbox(operator, gw)
    call = ToolCall(gw.url, "x__elicit", {"schema": AGE, "message": "How old are you?"})
    url = hosted_page_of(gw, call)
    operator.wait_for_selector("tr[data-id] a.eg-answer")
    assert operator.locator(".eg-release").count() == 0  # nobody opened it yet
    page.goto(url)
    retype(page, "#f-age", "42")
    operator.wait_for_selector("tr[data-id] .eg-release")  # live: someone has opened it
    other = browser.new_context()  # another browser: its own cookies
    other.add_init_script(path=str(AXE))
    elsewhere = other.new_page()
    elsewhere.goto(url)
    assert "Opened in another browser" in elsewhere.inner_text("#eg-elsewhere")
    assert axe(elsewhere) == []
    assert "How old are you?" in elsewhere.inner_text("#eg-message")
    assert elsewhere.locator("input, button").count() == 0  # read-only: nothing to type, nothing to press

    assert axe(operator) == []
    operator.locator("tr[data-id] .eg-release button").click()  # the form inbox.js drew
    operator.wait_for_selector("tr[data-id] a.eg-answer")
    assert operator.locator(".eg-release").count() == 0
    operator_context.close()

    elsewhere.reload()  # the next browser to open it gets it
    elsewhere.locator("button[value=decline]").click()
    elsewhere.wait_for_selector('[data-state="declined"]')
    assert content_of(call.outcome()) == {"action": "decline"}
    other.close()
