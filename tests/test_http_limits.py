"""What a client may send the gateway's HTTP servers, and for how long (issue 31; web/http_protocol.py,
web/body_limit.py): a head over `http.max_header_bytes` gets 431 (a request line over
`http.max_request_line_bytes` 414) as soon as that much has arrived, and costs no more memory than that; a head
or a body that trickles in is cut with 408 after `http.head_timeout` / `http.body_timeout` while other requests
are served; a body over `http.max_body_bytes` gets 413. Each against a real gateway process, on the HTTP face
(`serve --http`) and on the hosted pages' server of the stdio face (`http.hosted_listen`), with raw sockets on
the client's side."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.conftest import PY, free_port, serve_http, write_config

pytestmark = pytest.mark.anyio

ADMIN = "http-limits-D612soWo6BAH_4l-ehVTVd-6fHEj6iFwcmg4HL_gbGY"
HEAD_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
MAX_BODY = 4096
LIMITS = {"head_timeout": HEAD_TIMEOUT, "body_timeout": BODY_TIMEOUT, "max_body_bytes": MAX_BODY}
WAIT = 60  # an upper bound on any one answer, for a loaded machine
EARLY = 0.9  # a timer may fire a few ms early (uvloop's are in whole milliseconds), and clocks are read apart


@dataclass
class Server:
    """One of the gateway's HTTP servers: where it listens and the process that serves it."""

    kind: str
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def host(self) -> bytes:
        return f"127.0.0.1:{self.port}".encode()


@contextlib.contextmanager
def _face(tmp_path: Path) -> Iterator[Server]:
    config = write_config(tmp_path, {}, http=LIMITS, audit={"enabled": False})
    proc = serve_http(config, env={"ELICITGATE_ADMIN_TOKEN": ADMIN})
    try:
        yield Server("face", proc.port, proc.proc.pid)
    finally:
        proc.stop()


@contextlib.contextmanager
def _hosted(tmp_path: Path) -> Iterator[Server]:
    """`serve --stdio` with `http.hosted_listen`: its stdin stays open (no client yet) while the test runs."""
    port = free_port()
    config = write_config(tmp_path, {}, http={**LIMITS, "hosted_listen": f"127.0.0.1:{port}"}, audit={"enabled": False})
    proc = subprocess.Popen([PY, "-m", "elicitgate.cli", "serve", "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "ELICITGATE_ADMIN_TOKEN": ADMIN}, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, f"the hosted pages' server did not listen on {port}"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        yield Server("hosted", port, proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the stdio face ends with its input
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(params=["face", "hosted"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    with (_face if request.param == "face" else _hosted)(tmp_path) as started:
        yield started


# -- a raw HTTP client -------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """One response with a Content-Length, as it comes."""
    status_line = await reader.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(int(status_line.split()[1]), headers, body)


async def closed_by_server(reader: asyncio.StreamReader) -> None:
    """Return once the server has closed the connection (what else comes is dropped)."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionResetError:
        pass


@pytest.fixture
async def connections() -> AsyncIterator[Any]:
    """`await connect(server)`: a raw connection, closed at the end of the test."""
    opened: list[asyncio.StreamWriter] = []

    async def connect(server: Server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        opened.append(writer)
        return reader, writer

    yield connect
    for writer in opened:
        writer.close()


def head(server: Server, method: str = "GET", path: str = "/metrics", *extra: bytes) -> bytes:
    return b"\r\n".join([f"{method} {path} HTTP/1.1".encode(), b"Host: " + server.host, *extra, b""]) + b"\r\n"


async def healthy(server: Server) -> None:
    """A plain request beside the others: answered."""
    async with httpx2.AsyncClient(base_url=server.url, timeout=WAIT) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200 and b"elicitgate" in response.content


def peak_memory(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


# -- heads -------------------------------------------------------------------------------------------------


async def test_a_head_over_max_header_bytes_gets_431_before_the_rest_of_it_arrives(server, connections):
    reader, writer = await connections(server)
    # 40 KiB of header and no end of the head: the server answers without waiting for one.
    writer.write(head(server)[:-2] + b"X-Big: " + b"a" * 40 * 1024)
    async with asyncio.timeout(WAIT):
        answer = await read_answer(reader)
        await closed_by_server(reader)
    assert answer.status == 431 and answer.headers["connection"] == "close"
    assert answer.body == (
        b"Request Header Fields Too Large: the request head is over http.max_header_bytes (32768 bytes)\n"
    )
    # A head just under the limit is served.
    reader, writer = await connections(server)
    writer.write(head(server, "GET", "/metrics", b"X-Big: " + b"a" * (32 * 1024 - 200)))
    async with asyncio.timeout(WAIT):
        assert (await read_answer(reader)).status == 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak memory from /proc")
async def test_a_20_mb_header_is_refused_without_being_held_in_memory(server, connections):
    """It cost 76 MB of memory (httptools joins a header's pieces), and seconds of CPU that stalled every other
    request. Now the server answers after 32 KiB and drops what still comes; a request beside it is served."""
    before = peak_memory(server.pid)
    reader, writer = await connections(server)
    writer.write(head(server)[:-2] + b"Authorization: Bearer ")

    async def send_20_mb() -> None:
        chunk = b"a" * 1024 * 1024
        try:
            for _ in range(20):
                writer.write(chunk)
                await writer.drain()
            writer.write(b"\r\n\r\n")  # the end of the head, which the server no longer waits for
            await writer.drain()
        except ConnectionError:
            pass  # the server closed first

    sending = asyncio.create_task(send_20_mb())
    async with asyncio.timeout(WAIT):
        answer = await read_answer(reader)
        await healthy(server)
        await sending
        await closed_by_server(reader)
    assert peak_memory(server.pid) - before < 16 * 1024 * 1024
    assert answer.status == 431


async def test_a_request_line_over_max_request_line_bytes_gets_414(server, connections):
    reader, writer = await connections(server)
    writer.write(b"GET /metrics?" + b"q" * 9000)  # no end of the line yet
    async with asyncio.timeout(WAIT):
        answer = await read_answer(reader)
        await closed_by_server(reader)
    assert answer.status == 414
    assert answer.body == b"URI Too Long: the request line is over http.max_request_line_bytes (8192 bytes)\n"


async def test_trickling_heads_are_cut_after_head_timeout_while_other_requests_are_served(server, connections):
    """Slowloris: connections that send their head a byte at a time were held open as long as they liked."""
    request = head(server)

    async def trickle() -> tuple[float, Answer]:
        reader, writer = await connections(server)
        started = time.monotonic()
        answered = asyncio.create_task(read_answer(reader))
        for byte in request[:-1]:  # never the last byte
            if answered.done():
                break
            writer.write(bytes([byte]))
            await asyncio.wait([answered], timeout=0.2)  # the attacker's pace, not a wait for the server
        answer = await answered
        await closed_by_server(reader)
        return time.monotonic() - started, answer

    async with asyncio.timeout(WAIT):
        trickling = [asyncio.create_task(trickle()) for _ in range(50)]
        await healthy(server)
        results = await asyncio.gather(*trickling)
    assert len(request) * 0.2 > HEAD_TIMEOUT * 2  # the heads would have taken longer than the limit
    for elapsed, answer in results:
        assert answer.status == 408 and elapsed >= HEAD_TIMEOUT * EARLY
        assert answer.body == b"Request Timeout: the request head did not arrive within http.head_timeout (2 s)\n"


async def test_a_connection_that_sends_nothing_is_closed_after_head_timeout(server, connections):
    reader, _ = await connections(server)
    started = time.monotonic()
    async with asyncio.timeout(WAIT):
        assert await reader.read() == b""  # closed without an answer: there was no request
    assert time.monotonic() - started >= HEAD_TIMEOUT * EARLY


# -- bodies ------------------------------------------------------------------------------------------------


def login(server: Server, length: int) -> bytes:
    """The inbox's login form: a route that reads its body."""
    return head(server, "POST", "/inbox", b"Content-Type: application/x-www-form-urlencoded",
                b"Content-Length: %d" % length)


async def test_a_trickling_body_is_cut_after_body_timeout(server, connections):
    reader, writer = await connections(server)
    writer.write(login(server, 100) + b"token=")
    started = time.monotonic()
    answered = asyncio.create_task(read_answer(reader))
    async with asyncio.timeout(WAIT):
        while not answered.done():
            writer.write(b"a")
            await asyncio.wait([answered], timeout=0.2)  # the attacker's pace
        answer = await answered
        await closed_by_server(reader)
    assert answer.status == 408 and time.monotonic() - started >= BODY_TIMEOUT * EARLY
    assert answer.body == b"Request Timeout: the request body did not arrive within http.body_timeout (2 s)\n"
    await healthy(server)


async def test_a_body_over_max_body_bytes_gets_413(server, connections):
    # Declared too long: answered before any of it is sent.
    reader, writer = await connections(server)
    writer.write(login(server, MAX_BODY + 1))
    async with asyncio.timeout(WAIT):
        answer = await read_answer(reader)
    assert answer.status == 413
    assert answer.body == b"Content Too Large: the request body is over http.max_body_bytes (4096 bytes)\n"
    # Chunked, with no length said: answered once it passes the limit.
    reader, writer = await connections(server)
    writer.write(head(server, "POST", "/inbox", b"Content-Type: application/x-www-form-urlencoded",
                      b"Transfer-Encoding: chunked"))
    for _ in range(MAX_BODY // 1000 + 1):
        writer.write(b"3e8\r\n" + b"a" * 1000 + b"\r\n")
    async with asyncio.timeout(WAIT):
        answer = await read_answer(reader)
    assert answer.status == 413 and b"http.max_body_bytes" in answer.body
    # Within the limit, the form is read (and the token is wrong).
    async with httpx2.AsyncClient(base_url=server.url, timeout=WAIT) as http:
        response = await http.post("/inbox", data={"token": "x" * (MAX_BODY - 100)})
    assert response.status_code == 401


async def test_mcp_keeps_its_json_rpc_413_at_the_configured_limit(tmp_path):
    with _face(tmp_path) as server:
        async with httpx2.AsyncClient(base_url=server.url, timeout=WAIT) as http:
            response = await http.post("/mcp", content=b" " * (MAX_BODY + 1), headers={
                "accept": "application/json, text/event-stream", "content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["data"]["limit"] == MAX_BODY


# -- what still works --------------------------------------------------------------------------------------


async def test_pipelined_requests_on_a_kept_alive_connection_are_all_answered(server, connections):
    """The head counting feeds the parser in slices: bodies of either framing and the heads after them."""
    reader, writer = await connections(server)
    writer.write(
        head(server)
        + head(server, "POST", "/metrics", b"Content-Length: 5") + b"hello"
        + head(server, "POST", "/metrics", b"Transfer-Encoding: chunked") + b"5\r\nhello\r\n0\r\n\r\n"
        + head(server, "GET", "/metrics", b"Connection: close")
    )
    async with asyncio.timeout(WAIT):
        statuses = [(await read_answer(reader)).status for _ in range(4)]
        await closed_by_server(reader)
    assert statuses == [200, 405, 405, 200]
