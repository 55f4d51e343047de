"""The Host / Origin guard (web/guard.py `HostGuard.refusal`): a (Host, Origin) pair let through once is let through
again with no check of the allow-lists (a client sends the same pair with every request); a refused one is checked,
refused and warned about every time, as before; what is kept is bounded."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from elicitgate.config import HttpFaceConfig
from elicitgate.web import guard
from elicitgate.web.guard import HostGuard, security_settings
from tests.profiled import calls_of


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("not called")


def _scope(host: bytes | None, origin: bytes | None = None) -> dict[str, Any]:
    headers = [(b"host", host)] if host is not None else []
    headers += [(b"origin", origin)] if origin is not None else []
    return {"type": "http", "headers": headers}


def _guard() -> HostGuard:
    return HostGuard(_app, security_settings(HttpFaceConfig()))


def test_a_pair_let_through_once_is_let_through_again_with_no_check() -> None:
    host_guard = _guard()
    first, called = calls_of(lambda: host_guard.refusal(_scope(b"127.0.0.1:8000", b"http://127.0.0.1:8000")))
    assert first is None and "host_allowed" in called
    again, called = calls_of(lambda: host_guard.refusal(_scope(b"127.0.0.1:8000", b"http://127.0.0.1:8000")))
    assert again is None and "host_allowed" not in called and "first" not in called
    other, called = calls_of(lambda: host_guard.refusal(_scope(b"localhost:8000")))  # another pair: checked
    assert other is None and "host_allowed" in called


@pytest.mark.parametrize(
    ("host", "origin", "header"),
    [(b"evil.test", None, b"host"), (None, None, b"host"), (b"127.0.0.1:8000", b"http://evil.test", b"origin")],
)
def test_a_refused_pair_is_refused_and_warned_about_every_time(
    host: bytes | None, origin: bytes | None, header: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    host_guard = _guard()
    for time in range(1, 3):
        with caplog.at_level(logging.WARNING):
            refusal = host_guard.refusal(_scope(host, origin))
        assert refusal is not None and refusal.status_code == 403
        assert header.decode().capitalize().encode() + b" header not allowed" in bytes(refusal.body)
        assert len([r for r in caplog.records if "Invalid" in r.message or "Missing" in r.message]) == time


def test_the_pairs_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "MAX_ADMITTED", 3)
    host_guard = _guard()
    for port in range(10):
        assert host_guard.refusal(_scope(b"127.0.0.1:%d" % port)) is None
        assert len(host_guard._admitted) <= 3  # pyright: ignore[reportPrivateUsage]
