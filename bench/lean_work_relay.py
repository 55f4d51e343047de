"""The lean relay plus the question's work, for stdio MCP: `python -m bench.lean_work_relay [--server NAME]
[--audit-dir DIR] COMMAND [ARGS...]`.

`bench.lean_relay`'s plumbing (protocol callbacks on uvloop, orjson, no task per message) plus, for each
handshake-era `elicitation/create` from COMMAND and its answer from the client, the work elicitgate's broker does
for it, done by elicitgate's own functions on a real `Broker` (the bench's limits, `configs.BENCH_LIMITS`) with a
real `AuditTrail` (the sqlite store the gateway uses by default, in `--audit-dir` or a temporary directory, opened at
start as the bench's gateway opens it) and `configure_logging("info")` on stderr. It is the floor for a gateway that
keeps elicitgate's promise: what elicitgate adds beyond it is plumbing.

On the push (`Broker.elicit`'s steps before it waits): the request checked and admitted as `Broker._admitted` does,
by the calls it makes (`_check_request`: its form's schema through `FormSchemas`, the message's size, secrets;
`_responder`; `admit_here`: the pending and rate limits; a form-mode request never awaits there, so they are called
in the callback: `_admitted` itself is a coroutine. A URL-mode request awaits `UrlPolicy.check`, which may resolve
the link's host: it runs `_admitted` in a task of its own, the one task here, on that rare path); refused, it is
recorded as the broker records it (`_refused`) and COMMAND gets the broker's error. Admitted: an `Elicitation`,
`_opened` (the pending maps and gauge), its deadline as a loop timer (what `Elicitation.wait_begins` sets; a
question past it ends by `_unanswered`, COMMAND gets its error), `_asked` (attempts, state) with the request as the
client sees it (`broker._outgoing`: the `[server] ` prefix and `_meta` `io.elicitgate/server`) under the relay's
own id for the client (`eg-N`, as the gateway's stdio face).

On the answer: the id mapped back, the timer cancelled (`Elicitation.wait_ends`), `_answered` (`answer_problems`,
`_end`, the recent ends); an answer that does not fit is asked again under a new id while attempts remain, as the
broker does. The result goes to COMMAND, then `_closed` and `_after_answer` (one loop callback later, after the
answer is written: `_recorded`, `pending_closed`, `_record_end`: `elicitation_ended` metrics, the
`elicitation.ended` log line, the `AuditRecord` into the trail). An error from the client ends it by `_not_asked`.

Which call caused the question (the audit record's `request_id` and `tool`, the limits' identity): the latest
`tools/call` of the client still in flight, as a stdio gateway guesses when the pipe does not say (the broker
refuses one with no call in flight, `ELICITATION_ORIGIN_UNKNOWN`). What elicitgate does besides (tool names
namespaced, its own ids upstream, the SDK models of the client's capabilities per request, 2026-07-28 rounds, a
`notifications/cancelled` to the client at a deadline) is not done: routing, not the question's work. Only the
handshake era is served with the work (a 2026-07-28 call's questions, inside its result, pass through untouched).
`bench.floor` measures it beside the direct call, `bench.lean_relay` and elicitgate.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import uvloop
from mcp_types import ClientCapabilities

from mcp.shared.exceptions import MCPError

from bench.configs import BENCH_LIMITS
from bench.lean_relay import ClientSide, Output, ServerSide
from elicitgate import errors
from elicitgate.audit.trail import AuditTrail
from elicitgate.capabilities import elicitation_modes
from elicitgate.config import AuditConfig, ElicitationConfig
from elicitgate.elicitation.broker import Broker, _outgoing  # pyright: ignore[reportPrivateUsage]
from elicitgate.elicitation.model import Elicitation, Responder
from elicitgate.logs import configure_logging

Message = dict[str, Any]


class Lines:
    """Splits a byte stream into lines and hands each one, parsed, to `on_message` (blank lines are dropped)."""

    def __init__(self, on_message: Callable[[Any], None]) -> None:
        self.on_message = on_message
        self.pending = bytearray()

    def feed(self, data: bytes) -> None:
        if not self.pending and data.endswith(b"\n") and data.count(b"\n") == 1:  # the usual case: one whole line
            if data.strip():
                self.on_message(orjson.loads(data))
            return
        self.pending += data
        if b"\n" not in data:
            return
        start = 0
        while (end := self.pending.find(b"\n", start)) >= 0:
            line = self.pending[start:end]
            start = end + 1
            if line.strip():
                self.on_message(orjson.loads(line))
        del self.pending[:start]


def line(message: Any) -> bytes:
    return orjson.dumps(message) + b"\n"


# -- who asks: the client's record and its calls in flight (what the broker reads of an `Origin`) -------------


@dataclass(eq=False)
class Peer:
    """The one client on this relay's stdin: what `DownstreamPeer` gives the broker."""

    id: str = "c1"
    client_name: str = "unknown client"
    principal: str | None = None
    closed: bool = False
    modes: frozenset[str] = frozenset()

    @property
    def identity(self) -> str:
        return self.principal or self.id


@dataclass(eq=False)
class Call:
    """One `tools/call` of the client in flight: the broker's `Origin` for the questions it causes."""

    peer: Peer
    request_id: Any
    tool: str | None
    push: Callable[[str, Message], None]
    """Writes an `elicitation/create` to the client under the relay's id."""
    era: str = "handshake"
    asking: str = ""
    """The relay's id for the attempt `send_request` is called for (set just before `Broker._asked`)."""
    stream: Any = None
    """Over HTTP (`bench.lean_http_work_relay`): the client connection whose response stream carries the call."""

    @property
    def modes(self) -> frozenset[str]:
        return self.peer.modes

    def carry(self, elicitation: Elicitation) -> None:
        """Nothing to attach: a pipe cannot break alone (as the gateway's stdio calls)."""

    def elicitation_ended(self, elicitation: Elicitation) -> None:
        """Nothing kept per question."""

    def require(self, capabilities: Message) -> None:
        """A handshake-era call cannot say what the client lacks (as `DownstreamCall.require`)."""

    def send_request(self, method: str, params: Message) -> None:
        """`PushToClient.ask`'s push: written at once; the answer comes back through `QuestionWork.answered`."""
        self.push(self.asking, params)


@dataclass(eq=False, slots=True)
class Asked:
    """A question put to the client, under the relay's id for its latest attempt."""

    el: Elicitation
    server_id: Any
    """COMMAND's id for its `elicitation/create`: its answer goes back under it."""
    identity: str
    responder: Responder
    origin: Call
    request_id: str = ""


# -- the work ---------------------------------------------------------------------------------------------------


class QuestionWork:
    """The broker's work for each question, between the two sides' writers."""

    def __init__(self, server: str, audit_url: str) -> None:
        self.server = server
        self.config = ElicitationConfig(**BENCH_LIMITS)
        self.trail = AuditTrail(AuditConfig(url=audit_url, open_at_start=True))
        self.broker = Broker(self.config, self.trail)
        self.peer = Peer()
        self.calls: dict[Any, Call] = {}
        """The client's `tools/call`s in flight, by its request id."""
        self.asked: dict[str, Asked] = {}
        """Questions put to the client, by the relay's id for them."""
        self.ids = itertools.count(1)
        self.to_client: Callable[[bytes], None] = lambda data: None
        self.to_server: Callable[[bytes], None] = lambda data: None

    # the client's messages

    def from_client(self, message: Any) -> None:
        if not isinstance(message, dict):  # a batch, or not JSON-RPC: passed on
            self.to_server(line(message))
            return
        method = message.get("method")
        if method is None:
            request_id = message.get("id")
            if isinstance(request_id, str) and (asked := self.asked.pop(request_id, None)) is not None:
                self.answered(asked, message)
                return
        elif method == "tools/call" and "id" in message:
            params = message.get("params") or {}
            tool = params.get("name") if isinstance(params, dict) else None
            self.calls[message["id"]] = Call(self.peer, message["id"], tool, self._push)
        elif method == "initialize":
            self._introduced(message.get("params") or {})
        self.to_server(line(message))

    def _introduced(self, params: Message) -> None:
        """The client's name and modes, once per session (the gateway reads them from the SDK's models)."""
        info = params.get("clientInfo") or {}
        self.peer.client_name = str(info.get("name", "unknown client"))
        self.peer.modes = elicitation_modes(ClientCapabilities.model_validate(params.get("capabilities") or {}))

    # COMMAND's messages

    def from_server(self, message: Any) -> None:
        if isinstance(message, dict):
            method = message.get("method")
            if method == "elicitation/create" and "id" in message:
                self.pushed(message)
                return
            if method is None and "id" in message:
                self.calls.pop(message["id"], None)
        self.to_client(line(message))

    def pushed(self, message: Message) -> None:
        """`Broker.elicit` up to its wait: checked, admitted, opened, asked."""
        params = dict(message.get("params") or {})
        origin = next(reversed(self.calls.values()), None)
        mode = params.get("mode", "form")
        if mode == "url":
            asyncio.get_running_loop().create_task(self._admitted_url(message["id"], origin, params))
            return
        try:
            checked = self.broker._check_request(self.server, mode, params, True)  # pyright: ignore[reportPrivateUsage]
            if checked is not None:
                params["requestedSchema"] = checked.schema
            if origin is None:
                raise errors.gateway_error(
                    errors.ELICITATION_ORIGIN_UNKNOWN,
                    "elicitation/create arrived outside any call the gateway can attribute it to",
                    server=self.server,
                )
            secrets = checked.secrets if checked is not None else ()
            responder = self.broker._responder(self.server, origin, mode, secrets)  # pyright: ignore[reportPrivateUsage]
            identity = self.broker.admit_here(self.server, origin.peer, origin.peer.identity)  # pyright: ignore[reportArgumentType]
        except MCPError as exc:
            self._refused(message["id"], mode, origin, exc)
            return
        self._open(message["id"], origin, responder, identity, mode, params)

    async def _admitted_url(self, server_id: Any, origin: Call | None, params: Message) -> None:
        try:
            _, responder, identity, mode = await self.broker._admitted(  # pyright: ignore[reportPrivateUsage]
                self.server, origin, params, True
            )
        except MCPError as exc:
            self._refused(server_id, "url", origin, exc)
            return
        assert origin is not None
        self._open(server_id, origin, responder, identity, mode, params)

    def _refused(self, server_id: Any, mode: str, origin: Call | None, exc: MCPError) -> None:
        self.broker._refused(  # pyright: ignore[reportPrivateUsage]
            self.server, str(mode), origin, exc, "upstream", None
        )
        self.to_server(line({"jsonrpc": "2.0", "id": server_id, "error": exc.error.model_dump(exclude_none=True)}))

    def _open(
        self, server_id: Any, origin: Call, responder: Responder, identity: str, mode: str, params: Message
    ) -> None:
        """Pending (`_opened`), its deadline on the loop (as `Elicitation.wait_begins`), asked."""
        loop = asyncio.get_running_loop()
        el = Elicitation(
            server=self.server,
            mode=mode,
            params=params,
            deadline=loop.time() + self.config.default_timeout,
            origin=origin,
            responder=responder,
        )
        self.broker._opened(el, origin, identity, ())  # pyright: ignore[reportPrivateUsage]
        asked = Asked(el, server_id, identity, responder, origin)
        el.timer = loop.call_at(el.deadline, self._past_deadline, asked)
        self._ask(asked, _outgoing(el))

    def _ask(self, asked: Asked, outgoing: Message) -> None:
        """One attempt, under a new id of the relay's (`Broker._asked`, whose responder writes it)."""
        asked.request_id = request_id = f"eg-{next(self.ids)}"
        self.asked[request_id] = asked
        asked.origin.asking = request_id
        self.broker._asked(asked.el, asked.responder, outgoing)  # pyright: ignore[reportPrivateUsage]

    def _push(self, request_id: str, params: Message) -> None:
        self.to_client(line({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params}))

    def answered(self, asked: Asked, message: Message) -> None:
        """The client's answer: checked (`_answered`), asked again, or sent on to COMMAND and recorded after."""
        el = asked.el
        try:
            if "error" in message:
                error = message["error"] if isinstance(message["error"], dict) else {}
                cause = MCPError(int(error.get("code", 0)), str(error.get("message", "")), error.get("data"))
                result = self.broker._not_asked(el, asked.responder, cause)  # pyright: ignore[reportPrivateUsage]
            else:
                answer, done = self.broker._answered(el, message.get("result"))  # pyright: ignore[reportPrivateUsage]
                if not done:
                    self._ask(asked, answer)
                    return
                result = answer
            reply: Message = {"jsonrpc": "2.0", "id": asked.server_id, "result": result}
        except MCPError as exc:
            reply = {"jsonrpc": "2.0", "id": asked.server_id, "error": exc.error.model_dump(exclude_none=True)}
        el.wait_ends()
        self._ended(asked, reply)

    def _past_deadline(self, asked: Asked) -> None:
        """Nobody answered in time: `_unanswered` ends it; the client's answer, if it comes, is dropped."""
        self.asked.pop(asked.request_id, None)
        asked.el.timer = None
        try:
            result = self.broker._unanswered(asked.el, asked.responder, self.config.unattended)  # pyright: ignore[reportPrivateUsage]
            reply: Message = {"jsonrpc": "2.0", "id": asked.server_id, "result": result}
        except MCPError as exc:
            reply = {"jsonrpc": "2.0", "id": asked.server_id, "error": exc.error.model_dump(exclude_none=True)}
        self._ended(asked, reply)

    def _ended(self, asked: Asked, reply: Message) -> None:
        """The answer on its way first, then `Broker.elicit`'s `finally`: closed, recorded one callback later."""
        self.to_server(line(reply))
        el = asked.el
        self.broker._closed(el, asked.origin, asked.identity)  # pyright: ignore[reportPrivateUsage]
        self.broker._after_answer(el, None, ())  # pyright: ignore[reportPrivateUsage]


# -- the plumbing: `bench.lean_relay`'s protocols, each message handed to `QuestionWork` -------------------------


async def started_work(server: str, audit_dir: Path, relay: str) -> tuple[QuestionWork, asyncio.Task[None]]:
    """The question's work, logging as the gateway's default does, its audit trail open, and the trail's one writer
    (as in the gateway): `relay` names who exits when the store does not open."""
    configure_logging("info")
    work = QuestionWork(server, f"sqlite:///{audit_dir / 'audit.db'}")
    writer = asyncio.get_running_loop().create_task(work.trail.run())
    await asyncio.sleep(0)  # its first step: `opened` waits for a writer that has begun
    if await work.trail.opened(30.0) is None:
        raise SystemExit(f"{relay}: the audit store at {audit_dir} did not open")
    return work, writer


async def relay(argv: list[str], server: str, audit_dir: Path) -> int:
    work, writer = await started_work(server, audit_dir, "lean_work_relay")
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    closed: asyncio.Future[None] = loop.create_future()
    stdout, _ = await loop.connect_write_pipe(lambda: Output(closed), sys.stdout.buffer)
    work.to_client = stdout.write
    _, command = await loop.subprocess_exec(lambda: ServerSide(Lines(work.from_server), done), *argv, stderr=None)
    work.to_server = command.write
    await loop.connect_read_pipe(lambda: ClientSide(command, Lines(work.from_client)), sys.stdin.buffer)
    for signum in (signal.SIGINT, signal.SIGTERM):  # passed on to the server; the relay exits after it
        loop.add_signal_handler(signum, command.signal, signum)
    code = await done
    stdout.close()
    await closed
    await work.trail.close()  # what is queued reaches the store
    await writer
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="up", help="the upstream's name in messages and records (default: up)")
    parser.add_argument("--audit-dir", type=Path, help="where the audit store goes (default: a temporary directory)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with tempfile.TemporaryDirectory(prefix="lean-work-audit-") as temporary:
        audit_dir = args.audit_dir or Path(temporary)
        sys.exit(uvloop.run(relay(command, args.server, audit_dir)))


if __name__ == "__main__":
    main()
