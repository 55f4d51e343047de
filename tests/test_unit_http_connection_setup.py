"""A connection's set-up on the HTTP face's protocol (web/http_protocol.py `LimitedHttpTools.connection_made`): the
local and remote addresses read from the transport in one step, uvicorn's for anything but TCP, the scheme from
the transport's TLS context, the coalescing writer's extra info the transport's own, and the one timer it arms
(the head's)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from elicitgate.web.http_protocol import HttpLimits, LimitedHttpTools, limited_protocol
from tests.test_unit_http_protocol import MAX_HEAD, MAX_LINE, Socket

pytestmark = pytest.mark.anyio


class Transport(Socket):
    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__()
        self.info = info

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.info.get(name, default)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("no request is made")


def _connected(info: dict[str, Any]) -> LimitedHttpTools:
    protocol = limited_protocol(HttpLimits(MAX_LINE, MAX_HEAD, 3600, 3600))(
        config=Config(_app, lifespan="off", log_config=None),
        server_state=ServerState(),
        app_state={},
        _loop=asyncio.get_running_loop(),
    )
    protocol.connection_made(Transport(info))
    return protocol


@pytest.mark.parametrize(
    ("info", "server", "client", "scheme"),
    [
        (
            {"sockname": ("127.0.0.1", 8808), "peername": ("127.0.0.1", 50000)},
            ("127.0.0.1", 8808),
            ("127.0.0.1", 50000),
            "http",
        ),
        (
            {"sockname": ("::1", 8808, 0, 0), "peername": ("::1", 50000, 0, 0), "sslcontext": object()},
            ("::1", 8808),
            ("::1", 50000),
            "https",
        ),
        ({"sockname": "/run/gateway.sock", "peername": ""}, ("/run/gateway.sock", None), None, "http"),  # by uvicorn's
    ],
)
async def test_a_connection_s_addresses_and_scheme_are_read_from_its_transport(
    info: dict[str, Any], server: tuple[str, int] | None, client: tuple[str, int] | None, scheme: str
) -> None:
    protocol = _connected(info)
    assert (protocol.server, protocol.client, protocol.scheme) == (server, client, scheme)
    assert protocol.transport.get_extra_info("sockname") == info["sockname"]
    assert protocol.transport.get_extra_info("missing", 7) == 7
    protocol.connection_lost(None)


async def test_a_connection_s_set_up_arms_its_head_timer_only() -> None:
    protocol = _connected({"sockname": ("127.0.0.1", 8808), "peername": ("127.0.0.1", 50000)})
    timers = protocol._head_timer, protocol._body_timer, protocol._linger, protocol.timeout_keep_alive_task  # pyright: ignore[reportPrivateUsage]
    assert timers[0] is not None and timers[1:] == (None, None, None)
    protocol.connection_lost(None)
    assert protocol._head_timer is None and timers[0].cancelled()  # pyright: ignore[reportPrivateUsage]
