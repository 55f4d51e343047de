"""Authentication on `/mcp` (`http.auth`): real gateway processes over HTTP, a real JWKS served on
loopback by the test with keys it generates, the `mcp` SDK client of both eras and plain httpx.

Principals: static tokens name theirs; an OAuth access token's is its issuer, client and subject.
The principal is what limits, sealed `requestState` and sessions are tied to.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import PY, Process, free_port, wait_healthy, write_config
from tests.test_broker import Human, accept, text
from tests.test_eras import RawModernClient

pytestmark = pytest.mark.anyio

ALICE = "alice-raaZs5SL2P4-sUE9sCWDNJXKflOpX_UNOBbKeXlL3f0"
BOB = "bob-0whIQdMXx8RH7sPFT3GC_aaPoTrMIjNS1TltP7hq1KY"
TOKENS = [{"token": ALICE, "principal": "alice"}, {"token": BOB, "principal": "bob"}]
CLIENT_MODES = ["legacy", "2026-07-28"]


class Issuer:
    """An OAuth authorization server's signing side: an RSA key, its JWKS served on loopback, tokens minted."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.ec_kid = "test-ec-key"
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()).public_key()))
        body = json.dumps({"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"},
                                    {**ec_jwk, "kid": self.ec_kid, "use": "sig", "alg": "ES256"}]}).encode()
        self.fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                issuer.fetches += 1
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(body if self.path == "/jwks.json" else b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, audience: str, *, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "sub": "user-1", "aud": audience, "iat": now, "exp": now + 300,
                   "client_id": "test-client", "scope": "mcp", **claims}
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    def oauth(self) -> dict[str, Any]:
        return {"issuer": self.url, "jwks_url": f"{self.url}/jwks.json"}


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    server = Issuer()
    yield server
    server.server.shutdown()


def serve(config: Path, *, listen: str = "127.0.0.1", env: dict[str, str] | None = None) -> Process:
    port = free_port()
    argv = [PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"{listen}:{port}"]
    proc = Process(argv, port, env=env)
    wait_healthy(proc.url)
    return proc


@pytest.fixture
def gateway_process() -> Iterator[Any]:
    started: list[Process] = []

    def start(config: Path, **options: Any) -> Process:
        started.append(serve(config, **options))
        return started[-1]

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def shared_upstream(http_upstream: Any) -> dict[str, Any]:
    """One handshake-era HTTP upstream shared by every client, so its call counter sees them all."""
    up = http_upstream("tests.peers.py_server", "--name", "h")
    return {"url": f"{up.url}/mcp", "era": "handshake"}


def client(url: str, token: str, mode: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300))
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, **options)


def www_authenticate(response: httpx2.Response) -> str:
    assert response.status_code == 401, (response.status_code, response.text)
    return response.headers["www-authenticate"]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


# -- refusing ----------------------------------------------------------------------------------------------


async def test_without_a_valid_token_mcp_answers_401_and_says_where_the_metadata_is(
        tmp_path, gateway_process, shared_upstream, issuer):
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"tokens": TOKENS, "oauth": issuer.oauth()}})
    gw = gateway_process(config)
    metadata_url = f"{gw.url}/.well-known/oauth-protected-resource/mcp"
    async with httpx2.AsyncClient(base_url=gw.url) as http:
        for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Bearer not-a-token"},
                        {"Authorization": f"Basic {ALICE}"}, {"Authorization": f"Bearer {ALICE}x"}):
            response = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            challenge = www_authenticate(response)
            assert challenge.startswith("Bearer ")
            assert f'resource_metadata="{metadata_url}"' in challenge
            assert response.json()["error"] == "invalid_token"
        assert (await http.get("/mcp", headers={"accept": "text/event-stream"})).status_code == 401
        assert (await http.get("/healthz")).status_code == 200  # only /mcp is behind http.auth

        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            metadata = (await http.get(path)).json()
            assert metadata == {"resource": f"{gw.url}/mcp", "authorization_servers": [issuer.url],
                                "bearer_methods_supported": ["header"], "resource_name": "elicitgate"}

        ok = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {ALICE}"})
        assert ok.status_code == 200


@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_static_tokens_serve_the_sdk_client_of_either_era(tmp_path, shared_upstream, mode):
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"tokens": TOKENS}})
    gw = serve(config)
    try:
        human = Human(accept({"answer": "yes"}))
        async with client(gw.url, ALICE, mode, elicitation_callback=human) as alice:
            assert "h__elicit" in {tool.name for tool in (await alice.list_tools()).tools}
            assert text(await alice.call_tool("h__elicit", {"message": "ok?"})) == {
                "action": "accept", "content": {"answer": "yes"}}
        async with httpx2.AsyncClient() as http:  # static mode has no metadata to point at
            challenge = www_authenticate(await http.post(f"{gw.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS))
            assert "resource_metadata" not in challenge
    finally:
        stderr = gw.stop()
    (event,) = [json.loads(line.split("elicitation.ended ", 1)[1]) for line in stderr.splitlines()
                if "elicitgate.audit: elicitation.ended " in line]
    assert event["state"] == "accepted"
    assert event["principal"] == 'auth:["alice","elicitgate:tokens","alice"]'  # who it belonged to
    assert ALICE not in stderr  # the token itself is never logged


@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_oauth_access_tokens_are_checked_against_the_issuers_keys(tmp_path, gateway_process, shared_upstream,
                                                                        issuer, mode):
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"oauth": issuer.oauth()}})
    gw = gateway_process(config)
    audience = f"{gw.url}/mcp"
    async with client(gw.url, issuer.token(audience), mode) as ok:
        assert "h__echo" in {tool.name for tool in (await ok.list_tools()).tools}
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    refused = {
        "expired": issuer.token(audience, exp=now - 120, iat=now - 600),
        "another audience": issuer.token("https://other.example/mcp"),
        "another issuer": issuer.token(audience, iss="https://evil.example"),
        "another key": issuer.token(audience, key=other_key),
        "no subject": jwt.encode({"iss": issuer.url, "aud": audience, "exp": now + 300}, issuer.key,
                                 algorithm="RS256", headers={"kid": issuer.kid}),
        "unsigned": jwt.encode({"iss": issuer.url, "sub": "u", "aud": audience, "exp": now + 300}, None,
                               algorithm="none", headers={"kid": issuer.kid}),
        "HMAC with the public key": _hs256_with_public_key(issuer, audience),
        "an empty subject": issuer.token(audience, sub=""),
        "an RS256 header naming the EC key": jwt.encode({"iss": issuer.url, "sub": "u", "aud": audience,
                                                         "exp": now + 300}, issuer.key, algorithm="RS256",
                                                        headers={"kid": issuer.ec_kid}),
    }
    async with httpx2.AsyncClient() as http:
        for why, token in refused.items():
            response = await http.post(f"{gw.url}/mcp", json=INITIALIZE,
                                       headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
            assert response.status_code == 401, why


def _hs256_with_public_key(issuer: Issuer, audience: str) -> str:
    import base64
    import hashlib
    import hmac

    from cryptography.hazmat.primitives import serialization

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": issuer.kid}).encode())
    payload = b64(json.dumps({"iss": issuer.url, "sub": "u", "aud": audience, "exp": int(time.time()) + 300}).encode())
    secret = issuer.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


# -- the principal ----------------------------------------------------------------------------------------


async def test_a_request_state_obtained_by_alice_is_refused_for_bob(tmp_path, gateway_process, shared_upstream):
    """Same clientInfo, different tokens: without authentication they would be one principal."""
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"tokens": TOKENS}})
    gw = gateway_process(config)
    raw = RawModernClient(f"{gw.url}/mcp", name="same-client")
    as_alice = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"})
    as_bob = httpx2.AsyncClient(headers={"Authorization": f"Bearer {BOB}"})
    async with as_alice, as_bob, client(gw.url, ALICE, "legacy") as observer:
        first = (await raw.call(as_alice, "h__elicit", {"message": "alice's"}))["result"]
        assert first["resultType"] == "input_required"
        answer = {key: {"action": "accept", "content": {"answer": "bob's"}} for key in first["inputRequests"]}
        calls_before = text(await observer.call_tool("h__stats", {}))["calls"]
        stolen = await raw.call(as_bob, "h__elicit", {"message": "alice's"}, inputResponses=answer,
                                requestState=first["requestState"])
        assert stolen["error"]["code"] == -32602, stolen
        assert stolen["error"]["message"] == "Invalid or expired requestState"
        assert text(await observer.call_tool("h__stats", {}))["calls"] == calls_before  # the upstream never heard
        answer = {key: {"action": "accept", "content": {"answer": "alice's"}} for key in first["inputRequests"]}
        done = await raw.call(as_alice, "h__elicit", {"message": "alice's"}, inputResponses=answer,
                              requestState=first["requestState"])
        assert json.loads(done["result"]["content"][0]["text"]) == {
            "action": "accept", "content": {"answer": "alice's"}
        }


async def test_a_session_opened_by_alice_is_refused_for_bob(tmp_path, gateway_process, shared_upstream):
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"tokens": TOKENS}})
    gw = gateway_process(config)
    async with httpx2.AsyncClient(base_url=gw.url, headers=MCP_HEADERS) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers={"Authorization": f"Bearer {ALICE}"})
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        hijack = await http.post("/mcp", json=listing, headers={"Authorization": f"Bearer {BOB}",
                                                                "mcp-session-id": session,
                                                                "mcp-protocol-version": "2025-11-25"})
        assert hijack.status_code in (403, 404), hijack.text
        assert "h__echo" not in hijack.text


async def test_rate_and_pending_limits_are_per_principal_not_per_session(tmp_path, gateway_process, shared_upstream):
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"tokens": TOKENS}},
                          elicitation={"rate_limit_burst": 1, "rate_limit_per_minute": 0.01})
    gw = gateway_process(config)
    human = Human(accept({"answer": "ok"}))
    args = {"message": "once", "report_errors": True}
    async with client(gw.url, ALICE, "legacy", elicitation_callback=human) as first_session:
        assert text(await first_session.call_tool("h__elicit", args))["action"] == "accept"
    async with client(gw.url, ALICE, "legacy", elicitation_callback=human) as second_session:
        limited = text(await second_session.call_tool("h__elicit", args))
        assert limited["error"]["code"] == -32015, limited
    async with client(gw.url, ALICE, "2026-07-28", elicitation_callback=human) as modern_alice:
        with pytest.raises(Exception) as caught:
            await modern_alice.call_tool("h__elicit", {"message": "once"})
        assert "rate limit" in str(caught.value)
    async with client(gw.url, BOB, "legacy", elicitation_callback=human) as bob:
        assert text(await bob.call_tool("h__elicit", args))["action"] == "accept"


# -- configuration -----------------------------------------------------------------------------------------


async def test_tokens_from_the_environment_and_from_a_file(tmp_path, gateway_process, shared_upstream):
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps([{"token": BOB, "principal": "bob"}]))
    config = write_config(tmp_path, {"h": shared_upstream}, http={"auth": {"tokens_file": str(tokens_file)}})
    env = {"ELICITGATE_HTTP__AUTH__TOKENS": json.dumps([{"token": ALICE, "principal": "alice"}])}
    env["ELICITGATE_HTTP__AUTH__TOKENS_FILE"] = str(tokens_file)
    gw = gateway_process(config, env=env)
    async with httpx2.AsyncClient(base_url=gw.url, headers=MCP_HEADERS) as http:
        for token in (ALICE, BOB):
            auth = {"Authorization": f"Bearer {token}"}
            assert (await http.post("/mcp", json=INITIALIZE, headers=auth)).status_code == 200
        made_up = {"Authorization": "Bearer " + "x" * 30}
        assert (await http.post("/mcp", json=INITIALIZE, headers=made_up)).status_code == 401


def test_a_broken_tokens_file_is_a_clear_start_up_error(tmp_path):
    import subprocess

    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps([{"token": "short", "principal": "alice"}]))
    config = write_config(tmp_path, {}, http={"auth": {"tokens_file": str(tokens_file)}})
    done = subprocess.run([PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http",
                           f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"http.auth.tokens_file {tokens_file}: 0.token:" in " ".join(done.stderr.split())
    assert "short" not in done.stderr  # never the token itself


@pytest.mark.parametrize(("listen", "auth", "warned"), [("0.0.0.0", False, True), ("0.0.0.0", True, False),
                                                        ("127.0.0.1", False, False)])
def test_start_up_warns_when_mcp_is_exposed_without_authentication(tmp_path, listen, auth, warned):
    http = {"allowed_hosts": ["127.0.0.1:*"]}
    if auth:
        http["auth"] = {"tokens": TOKENS}
    proc = serve(write_config(tmp_path, {}, http=http), listen=listen)
    stderr = proc.stop()
    assert ("without authentication" in stderr) is warned, stderr


def test_the_documented_configuration_runs(tmp_path, gateway_process, shared_upstream):
    doc = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    example = json.loads(doc.split("## Authentication on /mcp", 1)[1].split("```json", 1)[1].split("```", 1)[0])
    token = example["http"]["auth"]["tokens"][0]["token"]
    example["mcpServers"] = {"h": shared_upstream}
    path = tmp_path / "elicitgate.json"
    path.write_text(json.dumps(example))
    gw = gateway_process(path)
    with httpx2.Client(base_url=gw.url, headers=MCP_HEADERS) as http:
        assert http.post("/mcp", json=INITIALIZE).status_code == 401
        assert http.post("/mcp", json=INITIALIZE, headers={"Authorization": f"Bearer {token}"}).status_code == 200
