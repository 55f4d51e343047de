"""A held POST's connection (`wire.http_client`) keeps no copy of the peer's and our address: asyncio's socket
transport reads both into its extra info as it is made, ~0.3 KB for as long as the connection is open (a pushed
question's whole wait, `bench.scale --only pushed`). The socket itself stays (TCP_NODELAY is set through it)."""

from __future__ import annotations

import asyncio

import pytest

from elicitgate.wire.http_client import HttpClient
from tests.test_wire_http_client import (  # pyright: ignore[reportPrivateUsage]
    _answering,
    _get,
    _server,
)

pytestmark = pytest.mark.anyio


async def test_a_connection_holds_no_address_of_its_own_but_its_socket() -> None:
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")) as server:
        client = HttpClient()
        try:
            response, body = await _get(client, server.url())
            assert (response.status, body) == (200, b"{}")
            (connection,) = client._open  # pyright: ignore[reportPrivateUsage]
            transport = connection.transport
            assert isinstance(transport, asyncio.Transport)
            assert transport.get_extra_info("peername") is None
            assert transport.get_extra_info("sockname") is None
            assert transport.get_extra_info("socket") is not None
        finally:
            await client.aclose()
