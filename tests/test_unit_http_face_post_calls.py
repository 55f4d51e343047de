"""What `/mcp` decodes of a POST's headers on a session (faces/streamable.py `at_body`, web/guard.py): its session id
alone; the protocol version, `Accept`, `Content-Type`, Host and Origin are read as sent (bytes), their checks kept for
the values a client sends again and again."""

from __future__ import annotations

import asyncio

import pytest

from tests.profiled import python_calls
from tests.test_unit_http_face_callbacks import face, post

pytestmark = pytest.mark.anyio


async def test_a_post_on_a_session_decodes_its_session_id_and_no_other_header() -> None:
    async with face() as connection:
        notification = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, connection.session)
        connection.protocol.data_received(notification)  # the checks' values kept from here on
        await connection.until(lambda: connection.socket.written.count(b"HTTP/1.1 202") == 1)
        with python_calls(c_prefix="c:") as called:
            connection.protocol.data_received(notification)
        await connection.until(lambda: connection.socket.written.count(b"HTTP/1.1 202") == 2)
        await asyncio.sleep(0)
    assert "at_body" in called
    # the method and the path (web/http_protocol.py, as uvicorn's), and the session id (the sessions' key)
    # the method and the path (web/http_protocol.py, as uvicorn's), and the session id (the sessions' key); the
    # Host / Origin guard let the same pair through already (web/guard.py)
    assert called.count("c:decode") == 3, called
