"""Fuzzing (hypothesis): malformed JSON-RPC, odd schemas and odd answers, thrown at both faces of real
gateway processes (streamable HTTP and stdio) and at the broker's checks.

What must hold for every case: no crash, no hang (every request is answered within its timeout), no
traceback to the client, the gateway keeps serving (a real SDK client still works afterwards), and
nothing pending is lost (an elicitation opened before the fuzzing is still there and takes its answer
after it).

CI runs a few thousand cases, derandomized (the same cases on every run). A longer, random run:

    FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/test_fuzz.py -q

(`FUZZ_EXAMPLES` is the number of cases per test; set, the seed is random each run and
hypothesis prints the failing case to reproduce.)
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp.shared.exceptions import MCPError

from elicitgate.elicitation.schema import answer_problems, check_requested_schema
from elicitgate.errors import UPSTREAM_UNAVAILABLE
from tests.conftest import PY, Process, free_port, serve_http, write_config
from tests.hosted_helpers import AUTH, TOKEN, next_pending_sync
from tests.test_hosted_browser import ToolCall, content_of

LONG_RUN = "FUZZ_EXAMPLES" in os.environ
"""CI runs each test's own share of a few thousand cases (about a minute on two busy cores)."""


def fuzz(ci_examples: int) -> Any:
    return settings(
        max_examples=int(os.environ["FUZZ_EXAMPLES"]) if LONG_RUN else ci_examples,
        deadline=None,
        derandomize=not LONG_RUN,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                               HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
TOOLS = ["x__echo", "x__elicit", "x__sample", "x__fail", "x__whoami", "x__stats", "nope", "x__", ""]
METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list",
    "resources/read", "resources/templates/list", "resources/subscribe", "resources/unsubscribe",
    "completion/complete", "logging/setLevel", "server/discover", "subscriptions/listen",
    "elicitation/create", "sampling/createMessage", "notifications/initialized", "notifications/cancelled",
    "notifications/progress", "notifications/roots/list_changed", "notifications/elicitation/complete",
]

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
ids = st.none() | st.integers() | st.text(max_size=6) | st.floats(allow_nan=False) | st.booleans() | json_values

# Forms the broker may be asked to show: mostly near the form-mode subset, sometimes anything.
property_schemas = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "number", "integer", "boolean", "array", "object", "null"]) | scalars},
    optional={
        "minLength": st.integers(-2, 50) | scalars, "maxLength": st.integers(-2, 50) | scalars,
        "minimum": st.integers() | scalars, "maximum": st.integers() | scalars,
        "format": st.sampled_from(["email", "uri", "date", "date-time", "regex"]) | scalars,
        "enum": st.lists(st.text(max_size=6), max_size=3) | json_values,
        "oneOf": st.lists(st.fixed_dictionaries({"const": st.text(max_size=5), "title": st.text(max_size=5)}),
                          max_size=3) | json_values,
        "items": st.fixed_dictionaries({"type": st.just("string"), "enum": st.lists(st.text(max_size=5), max_size=3)})
        | json_values,
        "default": json_values, "title": scalars, "pattern": st.text(max_size=5),
    },
)
schemas = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(st.text(max_size=8), property_schemas, max_size=4)},
        optional={"required": st.lists(st.text(max_size=8), max_size=3) | json_values,
                  "additionalProperties": json_values},
    ),
)

tool_params = st.fixed_dictionaries(
    {"name": st.sampled_from(TOOLS) | st.text(max_size=10)},
    optional={
        "arguments": st.fixed_dictionaries({}, optional={
            "schema": schemas, "message": scalars, "mode": st.sampled_from(["form", "url", "x"]) | scalars,
            "url": st.sampled_from(["https://example.com/a", "javascript:alert(1)", ""]) | scalars,
            "elicitation_id": scalars, "text": scalars, "code": st.integers() | scalars,
            "report_errors": st.booleans(),
        }) | json_values,
        "requestState": st.text(max_size=30) | json_values,
        "inputResponses": json_values,
        "_meta": json_values,
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | st.text(max_size=4) | scalars,
        "id": ids,
        "method": st.sampled_from(METHODS) | st.text(max_size=16) | scalars,
        "params": tool_params | json_values,
        "result": json_values,
        "error": json_values,
    },
)
bodies = st.one_of(messages, json_values, st.lists(messages, max_size=3))


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "/' not in text, text[:2000]


# -- the broker's checks ---------------------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


@fuzz(ci_examples=500)
@given(schema=schemas, content=json_values | st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_broker_checks_take_any_schema_and_any_answer_and_never_echo_it(schema, content):
    problems = check_requested_schema(schema, max_properties=64)
    assert all(isinstance(str(p), str) for p in problems)
    if problems:
        return
    found = answer_problems(schema, content)
    assert all(isinstance(p["message"], str) for p in found)
    said = json.dumps(found)
    for typed in _strings(content):
        if len(typed) >= 4 and typed not in json.dumps(schema) and typed not in json.dumps(list(content)):
            assert typed not in said  # the rule is named, never the value


# -- the HTTP face ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def answers_upstream() -> Iterator[Process]:
    """The same server over streamable HTTP, for the fuzzed 2026-07-28 answers: each fuzzed call is a client
    of its own, and a per-client upstream session costs a process on stdio but only a session here."""
    port = free_port()
    proc = Process([PY, "-m", "tests.peers.py_server", "--name", "a", "--http", f"127.0.0.1:{port}"], port)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, answers_upstream: Process) -> Iterator[Process]:
    # `x` takes the fuzzing (`a` the fuzzed input responses); their elicitations are never hosted (a client
    # that cannot show one is refused at once instead of waiting in the inbox). `held` keeps one
    # elicitation waiting in the inbox meanwhile.
    upstream = {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "x"]}
    answers = {"url": f"{answers_upstream.url}/mcp", "era": "handshake", "hosting": "never"}
    config = write_config(tmp_path_factory.mktemp("fuzz"), {"x": {**upstream, "hosting": "never"}, "held": upstream,
                                                             "a": answers},
                          admin_token=TOKEN, elicitation={"default_timeout": 600}, log_level="warning")
    proc = serve_http(config)
    yield proc
    logs = proc.stop()
    assert "Traceback" not in logs, logs[-5000:]  # nothing the fuzzing sent crashed anything inside


@pytest.fixture(scope="module")
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=20) as client:
        yield client


@pytest.fixture(scope="module")
def waiting(gw: Process) -> Iterator[dict[str, Any]]:
    """An elicitation opened before any fuzzing: it must still be pending, and take its answer, after."""
    call = ToolCall(gw.url, "held__elicit", {"message": "before the storm"})
    (item,) = next_pending_sync(gw.url)
    yield item
    with httpx2.Client(base_url=gw.url, headers=AUTH) as http:
        assert http.get(f"/api/elicitations/{item['id']}").json()["state"] == "presented"
        answered = http.post(f"/api/elicitations/{item['id']}/answer",
                             json={"action": "accept", "content": {"answer": "still here"}})
        assert answered.json()["state"] == "accepted", answered.text
    assert content_of(call.outcome()) == {"action": "accept", "content": {"answer": "still here"}}


def _post(http: httpx2.Client, url: str, body: Any, headers: dict[str, str]) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = http.post(url, content=content, headers={"content-type": "application/json",
                                                         "accept": "application/json, text/event-stream", **headers})
    assert response.status_code < 500, response.text
    no_traceback(response.text)
    return response


def _handshake_session(http: httpx2.Client, url: str) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
    response = _post(http, url, init, {})
    headers = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": HANDSHAKE}
    _post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    return headers


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    return [leaf for e in group.exceptions for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]


def _still_serving(gw: Process) -> None:
    assert httpx2.get(f"{gw.url}/healthz").status_code == 200
    assert ToolCall(gw.url, "held__echo", {"text": "alive"}).outcome().content[0].text == "alive"
    # The fuzzed server may have every one of its `max_upstream_sessions` held by fuzzed 2026-07-28
    # calls that asked a question and were never retried (each waits out `bridging.state_ttl`): then the
    # cap must hold and say so at once, naming the limit, rather than hang or crash.
    try:
        assert ToolCall(gw.url, "x__echo", {"text": "alive"}).outcome().content[0].text == "alive"
    except* MCPError as group:  # the call's task groups wrap it
        (exc,) = _leaves(group)
        assert isinstance(exc, MCPError)
        assert exc.error.code == UPSTREAM_UNAVAILABLE and "max_upstream_sessions" in exc.error.message, exc


@fuzz(ci_examples=250)
@given(body=bodies | st.binary(max_size=64))
def test_http_face_handshake_session_survives_malformed_jsonrpc(gw, http, waiting, body):
    session = _SESSION.get(gw.url) or _SESSION.setdefault(gw.url, _handshake_session(http, f"{gw.url}/mcp"))
    _post(http, f"{gw.url}/mcp", body, session)


_SESSION: dict[str, dict[str, str]] = {}


@fuzz(ci_examples=250)
@given(body=bodies, capabilities=st.sampled_from([{}, {"elicitation": {"form": {}}}, {"sampling": {}}]) | json_values)
def test_http_face_stateless_requests_survive_malformed_jsonrpc(gw, http, waiting, body, capabilities):
    """2026-07-28 requests carry their envelope in `_meta`: fuzzed around a well-formed one."""
    if isinstance(body, dict) and isinstance(body.get("params"), dict):
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": capabilities}
        given_meta = body["params"].get("_meta")
        extra = given_meta if isinstance(given_meta, dict) else {}
        body = {**body, "params": {**body["params"], "_meta": {**meta, **extra}}}
    method = body.get("method") if isinstance(body, dict) and isinstance(body.get("method"), str) else ""
    method = method if method.isascii() and method.isprintable() else "tools/call"
    _post(http, f"{gw.url}/mcp", body, {"mcp-protocol-version": MODERN, "mcp-method": method})


@fuzz(ci_examples=150)
@given(answer=json_values | st.fixed_dictionaries({"action": st.sampled_from(["accept"]) | scalars},
                                                   optional={"content": json_values}))
def test_odd_answers_through_the_admin_api_leave_the_elicitation_pending(gw, http, waiting, answer):
    if isinstance(answer, dict) and answer.get("action") in ("decline", "cancel"):
        return  # valid answers: they would end it
    if isinstance(answer, dict) and isinstance(answer.get("content"), dict) and \
            set(answer["content"]) == {"answer"} and isinstance(answer["content"]["answer"], str):
        return  # a valid accept (the form asks for one string, `answer`)
    response = http.post(f"{gw.url}/api/elicitations/{waiting['id']}/answer", json=answer, headers=AUTH)
    assert response.status_code == 422, response.text
    no_traceback(response.text)


@fuzz(ci_examples=60)
@given(responses=json_values | st.dictionaries(st.sampled_from(["q1", "q2", "x"]), json_values, max_size=2))
def test_odd_input_responses_from_a_modern_client_are_refused_or_asked_again(gw, http, waiting, responses):
    chain = _CHAIN.setdefault("state", None)
    if chain is None:
        first = _modern_call(http, gw, None, None)
        chain = first.get("result", {}).get("requestState")
    reply = _modern_call(http, gw, chain, responses)
    result = reply.get("result") or {}
    _CHAIN["state"] = result.get("requestState") if result.get("resultType") == "input_required" else None
    assert "result" in reply or isinstance(reply.get("error", {}).get("code"), int), reply


_CHAIN: dict[str, Any] = {}


def _modern_call(http: httpx2.Client, gw: Process, state: str | None, responses: Any) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "fuzz-answers", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    params: dict[str, Any] = {"name": "a__elicit", "arguments": {"message": "fuzz"}, "_meta": meta}
    if state is not None:
        params |= {"requestState": state, "inputResponses": responses}
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "tools/call", "params": params}
    response = _post(http, f"{gw.url}/mcp", body, {"mcp-protocol-version": MODERN, "mcp-method": "tools/call",
                                                   "mcp-name": "a__elicit"})
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        return [m for m in found if "id" in m][-1]
    return response.json()


def test_json_nested_too_deep_is_refused_by_every_http_endpoint_that_reads_json(gw, http, waiting):
    """Python's `json` ends in RecursionError on it (a 500 and a traceback where a handler did not expect it)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    for headers in ({"mcp-protocol-version": MODERN, "mcp-method": "tools/call"}, {}):
        answer = _post(http, f"{gw.url}/mcp", deep, headers)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700, answer.text
    admin = _post(http, f"{gw.url}/api/elicitations/{waiting['id']}/answer", deep, AUTH)
    assert admin.status_code == 422, admin.text
    page = _post(http, f"{waiting['form_url']}/ui-answer", deep, {})
    assert page.status_code == 403 and page.json() == {"error": "bad request"}, page.text


def test_http_gateway_still_serves_after_the_fuzzing(gw, waiting):
    _still_serving(gw)


# -- the stdio face --------------------------------------------------------------------------------------


class StdioGateway:
    """`elicitgate serve --stdio` driven line by line; a reader thread collects what it writes."""

    def __init__(self, config: str) -> None:
        self.stderr = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([PY, "-m", "elicitgate.cli", "serve", "--config", config],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer_to(self, id_: str, timeout: float = 20) -> dict[str, Any]:
        """Read until the response to `id_`; every line on the way must be JSON-RPC, not a traceback."""
        while True:
            line = self.lines.get(timeout=timeout)  # queue.Empty: the gateway hung
            no_traceback(line)
            message = json.loads(line)
            if message.get("id") == id_ and ("result" in message or "error" in message):
                return message

    def initialize(self) -> None:
        """The handshake, as a client starts its session."""
        self.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}))
        assert "result" in self.answer_to("init", timeout=60)
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def stop(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.seek(0)
        return self.stderr.read()


@pytest.fixture(scope="module")
def stdio_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioGateway]:
    config = write_config(tmp_path_factory.mktemp("fuzz-stdio"), {
        "x": {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "x"]},
    }, log_level="warning")
    gateway = StdioGateway(str(config))
    gateway.initialize()
    yield gateway
    probe = f"probe-{uuid.uuid4()}"
    gateway.send(json.dumps({"jsonrpc": "2.0", "id": probe, "method": "tools/call",
                             "params": {"name": "x__echo", "arguments": {"text": "alive"}}}))
    assert gateway.answer_to(probe)["result"]["content"][0]["text"] == "alive"  # still serving
    assert gateway.proc.poll() is None
    logs = gateway.stop()
    assert "Traceback" not in logs, logs[-5000:]


@fuzz(ci_examples=600)
@given(body=bodies | st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40))
def test_stdio_face_survives_malformed_jsonrpc(stdio_gw, body):
    stdio_gw.send(body if isinstance(body, str) else json.dumps(body))
    probe = f"probe-{uuid.uuid4()}"
    stdio_gw.send(json.dumps({"jsonrpc": "2.0", "id": probe, "method": "ping"}))
    assert "result" in stdio_gw.answer_to(probe)  # answered: nothing hangs behind a bad message


def test_a_notification_named_like_a_request_with_a_bad_request_state_is_dropped_quietly(tmp_path):
    """Found by the fuzzer above: the SDK's requestState boundary also ran for notifications, so `tools/call`
    without an id but with a malformed `requestState` raised inside the gateway (an ERROR with a traceback)."""
    config = write_config(tmp_path, {"x": {"command": PY, "args": ["-m", "tests.peers.py_server", "--name", "x"]}},
                          log_level="warning")
    gateway = StdioGateway(str(config))
    try:
        gateway.initialize()
        gateway.send(json.dumps({"jsonrpc": "2.0", "method": "tools/call",
                                 "params": {"name": "x__echo", "requestState": "not sealed"}}))
        gateway.send(json.dumps({"jsonrpc": "2.0", "id": "probe", "method": "tools/call",
                                 "params": {"name": "x__echo", "arguments": {"text": "alive"}}}))
        assert gateway.answer_to("probe")["result"]["content"][0]["text"] == "alive"
    finally:
        logs = gateway.stop()
    assert "Traceback" not in logs and "ERROR" not in logs, logs[-3000:]
