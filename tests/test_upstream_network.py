"""The network layer under the gateway's HTTP upstream connections (`wire.network.AsyncioBackend`,
httpcore2's pool on asyncio's own transports), on real sockets:

- an https upstream (the official `mcp` SDK's server under uvicorn with TLS) is reached through a gateway
  that trusts its certificate authority by `SSL_CERT_FILE`, and refused, saying why, by a wire that does not;
- reads and writes keep httpcore2's promises: a timeout is `ReadTimeout` / `WriteTimeout`, a refused
  connection `ConnectError`, the end of the stream `b""`;
- a response larger than the read buffer's bound arrives whole (reading pauses and resumes);
- a kept-alive connection that the server closed while idle is not reused, and one that is still open is,
  with a descriptor past 1023 too (`select` refuses those: a gateway holding a thousand connections has them).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import resource
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpcore2
import httpx2
import mcp_types as types
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcp import Client

from elicitgate import sdk
from elicitgate.wire.http import UPSTREAM_HTTP_LIMITS as LIMITS
from elicitgate.wire.http import HttpWire
from elicitgate.wire.network import HIGH_WATER, AsyncioBackend
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
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await asyncio.wait_for(anext(messages), 10)
    finally:
        await wire.aclose()


@asynccontextmanager
async def _tcp_server(on_connection: Any) -> AsyncIterator[int]:
    """A TCP server on a free port; each connection is served by `on_connection(reader, writer)`, and what is
    still serving when the block ends is stopped."""
    serving: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        serving.add(task)
        try:
            await on_connection(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)


async def test_a_read_past_its_timeout_is_a_read_timeout_and_the_end_of_the_stream_is_empty() -> None:
    closing = asyncio.Event()

    async def silent_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await closing.wait()

    async with _tcp_server(silent_then_close) as port:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        try:
            with pytest.raises(httpcore2.ReadTimeout):
                await stream.read(1024, timeout=0.05)
            closing.set()
            assert await asyncio.wait_for(stream.read(1024, timeout=5), 10) == b""
            assert stream.get_extra_info("is_readable") is True
        finally:
            await stream.aclose()


async def test_a_refused_connection_is_a_connect_error() -> None:
    with pytest.raises(httpcore2.ConnectError):
        await AsyncioBackend().connect_tcp("127.0.0.1", free_port(), timeout=5)


async def test_a_write_the_server_does_not_take_is_a_write_timeout() -> None:
    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with _tcp_server(never_reads) as port:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        try:
            with pytest.raises(httpcore2.WriteTimeout):
                for _ in range(1000):  # until the socket's buffers are full
                    await stream.write(b"x" * 1024 * 1024, timeout=0.2)
        finally:
            await stream.aclose()


async def test_a_response_larger_than_the_read_buffer_arrives_whole() -> None:
    body = bytes(range(256)) * (HIGH_WATER * 8 // 256)

    async def big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    transport = sdk.http_transport(LIMITS, AsyncioBackend())
    async with _tcp_server(big) as port, httpx2.AsyncClient(transport=transport) as client:
        async with client.stream("GET", f"http://127.0.0.1:{port}/") as response:
            received = bytearray()
            async for chunk in response.aiter_raw():
                received += chunk
                await asyncio.sleep(0)  # read more slowly than the server writes
        assert bytes(received) == body


async def test_a_kept_alive_connection_the_server_closed_while_idle_is_not_reused() -> None:
    connections = 0
    closed = asyncio.Event()

    async def one_answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok")
        await writer.drain()
        writer.close()  # the server's keep-alive timeout, at once
        await writer.wait_closed()
        closed.set()

    async with _tcp_server(one_answer_then_close) as port, httpx2.AsyncClient(
        transport=sdk.http_transport(LIMITS, AsyncioBackend())
    ) as client:
        for _ in range(3):
            closed.clear()
            response = await client.get(f"http://127.0.0.1:{port}/")
            assert response.text == "ok"
            await asyncio.wait_for(closed.wait(), 10)  # the pooled connection is idle and closed by now
        assert connections == 3


@pytest.fixture
def high_descriptors() -> Iterator[None]:
    """Every descriptor below 1100 taken, so the next sockets get numbers past `select`'s 1023."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))
    taken: list[int] = []
    try:
        while not taken or taken[-1] < 1100:
            taken.append(os.open(os.devnull, os.O_RDONLY))
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_kept_alive_connection_is_reused_when_its_descriptor_is_past_1023(high_descriptors: None) -> None:
    connections = 0

    async def keeps_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while not reader.at_eof():
            try:
                await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # the client closed its connection
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    async with _tcp_server(keeps_alive) as port, httpx2.AsyncClient(
        transport=sdk.http_transport(LIMITS, AsyncioBackend())
    ) as client:
        for _ in range(3):
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
        assert connections == 1
