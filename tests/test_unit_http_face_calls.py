"""What the HTTP face and the endpoint call for each connection and each request they serve: no `typing.cast` (a Python
call that does nothing at run time) and no ABC `isinstance` (a Python frame, `ABCMeta.__instancecheck__`) on a
connection's set-up and tear-down or as a request's handler task is made; a connection's addresses as uvicorn's
`get_local_addr` / `get_remote_addr` give them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.utils import get_local_addr, get_remote_addr
from uvicorn.server import ServerState

from elicitgate.web.http_protocol import HttpLimits, _addresses, limited_protocol  # pyright: ignore[reportPrivateUsage]
from elicitgate.wire.base import Inbound
from elicitgate.wire.endpoint import Endpoint
from elicitgate.wire.memory import memory_wires
from tests.profiled import python_calls
from tests.test_unit_http_protocol import Socket


class Addressed(Socket):
    def __init__(self, sockname: Any, peername: Any) -> None:
        super().__init__()
        self.info = {"sockname": sockname, "peername": peername}

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.info.get(name, default)


@pytest.mark.parametrize(
    ("sockname", "peername", "expected"),
    [
        (("127.0.0.1", 8000), ("127.0.0.1", 50000), (("127.0.0.1", 8000), ("127.0.0.1", 50000))),
        (("::1", 8000, 0, 0), ("::1", 50000, 0, 0), (("::1", 8000), ("::1", 50000))),  # as uvicorn's socket's
        ("/tmp/gateway.sock", "", (("/tmp/gateway.sock", None), None)),
        (None, None, (None, None)),
        (["10.0.0.1", 80], ["10.0.0.2", 81], (("10.0.0.1", 80), ("10.0.0.2", 81))),
        (("127.0.0.1",), ("127.0.0.1", "80"), (None, ("127.0.0.1", 80))),
    ],
)
def test_a_connection_s_addresses_are_uvicorn_s(sockname: Any, peername: Any, expected: Any) -> None:
    transport = Addressed(sockname, peername)
    assert _addresses(transport) == expected
    if len(sockname or ()) == 2 and type(sockname) is tuple:
        assert expected == (get_local_addr(transport), get_remote_addr(transport))


def test_a_connection_s_set_up_and_tear_down_call_no_cast_and_no_abc_check() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("no request on this connection")

    async def main() -> list[str]:
        config = uvicorn.Config(app, lifespan="off", log_level="warning", http=limited_protocol(HttpLimits()))
        config.load()
        state = ServerState()
        loop = asyncio.get_running_loop()
        config.http_protocol_class(config=config, server_state=state, app_state={}, _loop=loop)  # the shared part
        with python_calls(c_prefix="c:") as called:
            protocol = config.http_protocol_class(config=config, server_state=state, app_state={}, _loop=loop)
            protocol.connection_made(Addressed(("127.0.0.1", 8000), ("127.0.0.1", 50000)))
            protocol.eof_received()
            protocol.connection_lost(None)
        return called

    called = asyncio.run(main())
    assert "connection_made" in called and "connection_lost" in called
    assert "cast" not in called and "__instancecheck__" not in called
    assert "asgi_version" not in called, "the config's property read once per server, not per connection"


def test_a_request_s_handler_task_is_made_with_no_abc_check() -> None:
    async def main() -> list[str]:
        ours, theirs = memory_wires()
        endpoint = Endpoint(ours, "the client", serving=True)
        answered = asyncio.Event()

        async def on_request(inbound: Inbound, method: str, params: Any) -> Any:
            answered.set()
            return {}

        made: list[list[str]] = []
        handler_task: Callable[..., Any] = endpoint._handler_task  # pyright: ignore[reportPrivateUsage]

        def watched(*args: Any) -> Any:
            with python_calls(c_prefix="c:") as called:
                task = handler_task(*args)
            made.append(called)
            return task

        endpoint._handler_task = watched  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        async with asyncio.timeout(30):
            runner = asyncio.create_task(endpoint.run(on_request, _no_notify))
            await theirs.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})
            await answered.wait()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        return made[0]

    called = asyncio.run(main())
    assert "c:run" in called and any(name.endswith("create_task") for name in called)
    assert "__instancecheck__" not in called


async def _no_notify(inbound: Inbound, method: str, params: Any) -> None:
    return None
