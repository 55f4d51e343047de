"""TLS to the gateway's HTTP upstreams (`wire.http_client`, asyncio's ssl), on real sockets: an https upstream
(the official `mcp` SDK's server under uvicorn with TLS) is reached through a gateway that trusts its certificate
authority by `SSL_CERT_FILE`, and refused, saying why, by a wire that does not. The client's own cases (timeouts,
framing, keep-alive, limits, backpressure) are in tests/test_wire_http_client.py.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcp import Client

from elicitgate.errors import HttpConnectError
from elicitgate.wire.http import HttpWire
from tests.conftest import PY, Process, free_port, write_config

pytestmark = pytest.mark.anyio


def _certificates(where: Path) -> tuple[Path, Path, Path]:
    """A certificate authority and a server certificate for 127.0.0.1 that it signed: (ca, cert, key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "elicitgate test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = where / "ca.pem", where / "server.pem", where / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture
def https_upstream(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """tests/peers/py_server.py served over https by uvicorn: (its /mcp URL, the CA file that trusts it)."""
    ca, cert, key = _certificates(tmp_path)
    port = free_port()
    code = (
        "import uvicorn\nfrom tests.peers.py_server import build\n"
        f"uvicorn.run(build().streamable_http_app(host='127.0.0.1'), host='127.0.0.1', port={port}, "
        f"ssl_certfile={str(cert)!r}, ssl_keyfile={str(key)!r}, log_level='warning')"
    )
    server = Process([PY, "-c", code], port)
    try:
        yield f"https://127.0.0.1:{port}/mcp", ca
    finally:
        server.stop()


async def test_an_https_upstream_is_reached_through_the_certificate_authority_ssl_cert_file_names(
    https_upstream: tuple[str, Path], tmp_path: Path, http_gateway: Any
) -> None:
    url, ca = https_upstream
    config = write_config(tmp_path, {"tls": {"url": url, "era": "handshake"}})
    gateway = http_gateway(config, {"SSL_CERT_FILE": str(ca)})

    async def answer(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "over tls"})

    async with Client(f"{gateway.url}/mcp", mode="legacy", elicitation_callback=answer) as client:
        echoed = await client.call_tool("tls__echo", {"text": "hello"})
        assert isinstance(echoed.content[0], types.TextContent) and echoed.content[0].text == "hello"
        asked = await client.call_tool("tls__elicit", {})
        assert isinstance(asked.content[0], types.TextContent)
        assert json.loads(asked.content[0].text) == {"action": "accept", "content": {"answer": "over tls"}}


async def test_an_https_upstream_whose_certificate_is_not_trusted_is_refused_saying_why(
    https_upstream: tuple[str, Path],
) -> None:
    url, _ = https_upstream
    wire = HttpWire(url)
    messages = wire.messages()
    try:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        with pytest.raises(HttpConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await asyncio.wait_for(anext(messages), 10)
    finally:
        await wire.aclose()
