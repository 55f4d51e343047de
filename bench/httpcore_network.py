"""httpcore2's network layer on asyncio's own transports: what the gateway's connections to its streamable HTTP
upstreams ran on before its own client (`elicitgate.wire.http_client`), kept for `bench.bare_http_relay`, the
relay on uvicorn and httpx2.

httpcore2's default backend reaches the network through anyio: each read and each write of a connection
is an anyio stream call under a `fail_after` cancel scope, and the socket's reading is resumed before and
paused after every read (an `epoll_ctl` each). Here a connection is an asyncio `Protocol`: what arrives
waits in a buffer, a read takes it or waits on one future, and a timeout is one timer. Reading pauses only
when the buffer holds `HIGH_WATER` bytes that nobody reads. What each of httpcore2's calls promises (its
exceptions, `b""` at the end, the `get_extra_info` keys it asks for) is the anyio backend's.
"""

from __future__ import annotations

import asyncio
import functools
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any, cast

import httpcore2
import httpx2

HIGH_WATER = 256 * 1024
"""Bytes received and not yet read past which the connection stops reading from its socket."""

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
"""httpcore2's `SOCKET_OPTION`: the arguments of one `setsockopt`."""


class _Wakeup:
    """One task waiting for something the protocol's callbacks see happen."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[bool] | None = None

    def wake(self) -> None:
        _settle(self._waiter, True)

    async def wait(self, timeout: float | None) -> bool:
        """Whether it was woken (False: `timeout` seconds passed first)."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _settle, waiter, False) if timeout is not None else None
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


def _settle(waiter: asyncio.Future[bool] | None, woken: bool) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(woken)


class _Connection(asyncio.Protocol):
    """The transport's side: the bytes received, whether the stream ended, and who waits for what."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received = bytearray()
        self.ended = False
        self.error: Exception | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.readable = _Wakeup()
        """Woken when bytes arrive or the stream ends."""
        self.drained = _Wakeup()
        """Woken when the transport takes writes again, or the connection is lost."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received += data
        if len(self.received) >= HIGH_WATER and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self.readable.wake()

    def eof_received(self) -> bool:
        self.ended = True
        self.readable.wake()
        return False  # the transport closes itself: nothing more is written on a connection the server ended

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        self.writing_paused = False
        self.readable.wake()
        self.drained.wake()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.drained.wake()


class AsyncioStream(httpcore2.AsyncNetworkStream):
    """One connection, plain or TLS."""

    def __init__(self, transport: asyncio.Transport, connection: _Connection) -> None:
        self._transport = transport
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        connection = self._connection
        if not connection.received and not connection.ended and not await connection.readable.wait(timeout):
            raise httpcore2.ReadTimeout(f"no data for {timeout} s")
        received = connection.received
        if received:
            if len(received) <= max_bytes:
                data = bytes(received)
                received.clear()
            else:
                data = bytes(received[:max_bytes])
                del received[:max_bytes]
            if connection.reading_paused and len(received) < HIGH_WATER // 2:
                connection.reading_paused = False
                self._transport.resume_reading()
            return data
        if connection.error is not None:
            raise httpcore2.ReadError(str(connection.error) or type(connection.error).__name__)
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        connection = self._connection
        if self._transport.is_closing():
            raise httpcore2.WriteError(str(connection.error) if connection.error else "the connection is closed")
        self._transport.write(buffer)
        if connection.writing_paused:
            if not await connection.drained.wait(timeout):
                raise httpcore2.WriteTimeout(f"the server took no data for {timeout} s")
            if connection.error is not None:
                raise httpcore2.WriteError(str(connection.error) or type(connection.error).__name__)

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._connection, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.close()
            raise httpcore2.ConnectTimeout(f"no TLS handshake within {timeout} s") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore2.ConnectError(str(exc)) from exc
        if transport is None:  # the connection closed during the handshake
            raise httpcore2.ConnectError("the connection closed during the TLS handshake")
        self._connection.transport = transport
        return AsyncioStream(transport, self._connection)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # An idle connection that is readable was closed by the server (or sent what it should not
            # have): the pool does not reuse it. What the loop has not read yet is in the socket.
            connection = self._connection
            return bool(connection.received) or connection.ended or _socket_readable(self._transport)
        key = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername", "socket": "socket"}
        return self._transport.get_extra_info(key[info]) if info in key else None


def _socket_readable(transport: asyncio.Transport) -> bool:
    """Whether the socket has bytes (or its end) the loop has not read yet; `poll`, as httpcore2 does:
    `select` refuses a descriptor past 1023, which a gateway holding a thousand connections has."""
    sock = transport.get_extra_info("socket")
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # Windows: no poll, and no limit on the descriptor either
    return bool(readable)


class AsyncioBackend(httpcore2.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_connection(
                    _Connection, host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from None
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        _set_options(transport, [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), *(socket_options or ())])
        return AsyncioStream(transport, connection)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_unix_connection(_Connection, path)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"no connection to {path} within {timeout} s") from None
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        _set_options(transport, socket_options or ())
        return AsyncioStream(transport, connection)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _set_options(transport: asyncio.Transport, options: Iterable[SocketOption]) -> None:
    sock = transport.get_extra_info("socket")
    for option in options:
        sock.setsockopt(*option)


def http_transport(limits: httpx2.Limits, network: httpcore2.AsyncNetworkBackend) -> httpx2.AsyncHTTPTransport:
    """httpx2's transport on a connection pool that reaches the network through `network`: httpx2 takes no
    network backend, its connection pool (httpcore2's, public) does. TLS is httpx2's default context (the
    system's certificate authorities, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), built once for the process:
    building it reads the certificate store, ~16 ms with the event loop stopped."""
    tls = _default_tls()
    transport = httpx2.AsyncHTTPTransport(verify=tls, limits=limits)
    transport._pool = httpcore2.AsyncConnectionPool(  # noqa: SLF001
        ssl_context=tls,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=network,
    )
    return transport


@functools.cache
def _default_tls() -> ssl.SSLContext:
    return httpx2.create_ssl_context()
