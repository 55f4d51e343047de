"""`HOST:PORT` as people write it (`127.0.0.1:8080`, `[::1]:8080`, `:8080`), and the URL of such an address."""

from __future__ import annotations

import socket

DEFAULT_HOST = "127.0.0.1"


def parse_hostport(value: str, default_host: str = DEFAULT_HOST) -> tuple[str, int]:
    """The host (without IPv6 brackets; `default_host` when empty) and the port.

    Raises `ValueError` naming the expected form when `value` has no `:PORT` or the port is not a number.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or default_host, int(port)


def bind_tcp(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` (not listening yet); `OSError` when the address cannot be used.

    The protocol is named: asyncio turns Nagle's algorithm off only on sockets whose `proto` is TCP, and
    accepted sockets inherit it. With `proto` 0 a response written in two parts (headers, then body)
    would wait for the client's delayed ACK, 40 ms per request."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def url_host(host: str) -> str:
    """`host` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def http_url(host: str, port: int | str, scheme: str = "http") -> str:
    return f"{scheme}://{url_host(str(host))}:{port}"
