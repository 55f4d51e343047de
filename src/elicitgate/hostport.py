"""`HOST:PORT` as people write it (`127.0.0.1:8080`, `[::1]:8080`, `:8080`), and the URL of such an address."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"


def parse_hostport(value: str, default_host: str = DEFAULT_HOST) -> tuple[str, int]:
    """The host (without IPv6 brackets; `default_host` when empty) and the port.

    Raises `ValueError` naming the expected form when `value` has no `:PORT` or the port is not a number.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or default_host, int(port)


def url_host(host: str) -> str:
    """`host` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def http_url(host: str, port: int | str, scheme: str = "http") -> str:
    return f"{scheme}://{url_host(str(host))}:{port}"
