"""`HOST:PORT` as the CLI, the config (`http.hosted_listen`) and the demo servers read it."""

from __future__ import annotations

import pytest

from elicitgate.hostport import http_url, parse_hostport


@pytest.mark.parametrize(("value", "expected"), [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)),
    ("[::1]:8080", ("::1", 8080)),
    (":8080", ("127.0.0.1", 8080)),
    ("0.0.0.0:1", ("0.0.0.0", 1)),
])
def test_host_and_port(value, expected):
    assert parse_hostport(value) == expected


@pytest.mark.parametrize("value", ["8080", "localhost", "host:", "host:80a", "[::1]"])
def test_anything_else_names_the_expected_form(value):
    with pytest.raises(ValueError, match=r"expected HOST:PORT, got " + repr(value).replace("[", r"\[")):
        parse_hostport(value)


def test_an_ipv6_host_is_bracketed_in_a_url():
    assert http_url("::1", 8080) == "http://[::1]:8080"
    assert http_url("127.0.0.1", 80, "https") == "https://127.0.0.1:80"
