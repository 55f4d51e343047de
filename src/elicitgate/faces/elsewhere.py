"""Handshake-era sessions held by another replica (`redis_url`): a client whose stream broke and whose load
balancer sends it here now.

- `GET` with a `Last-Event-ID` of a stream another replica copied to Redis (`cluster.streams`): the stream is
  replayed from Redis after that event and followed until its end; the replica holding the session is told
  that a client reads it again (its questions' grace period stops) and when it stops.
- `POST` and `DELETE` of such a session (the client's answer to a question, its next request, its end) go to
  the replica holding it, whole, over its Redis channel, and run there through its whole app, its
  authentication included (a request whose answer streams comes back at its end).

Only sessions with a broken stream are known in Redis: the others stay on their replica (a load balancer keeps
a session on one replica, docs/deploy.md).
"""

from __future__ import annotations

import base64
import contextlib
import logging
from typing import TYPE_CHECKING

import anyio
from mcp_types import INVALID_REQUEST
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.faces.event_streams import EVENT_ID
from elicitgate.faces.http_answers import (
    PING,
    SSE_PING_INTERVAL,
    encode,
    error_message,
    reply,
    send_event,
    sse_response,
)
from elicitgate.json_shapes import JsonObject
from elicitgate.metrics import STREAM_RESUMPTIONS, labelled

if TYPE_CHECKING:
    from elicitgate.cluster.streams import SharedStreams  # redis-py only with replicas (test_startup)

logger = logging.getLogger(__name__)

FORWARD_TIMEOUT = 60.0
FORWARDED_HEADERS = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "authorization", "user-agent")
READER_OP = "stream-reader"
"""The operation the replica holding a session serves: another replica's response reads one of its streams."""
FORWARD_OP = "mcp-request"
"""The operation the replica holding a session serves: a request of that session another replica received, run
through its whole app (Host check, authentication) as if it had arrived there."""


class ElsewhereSessions:
    def __init__(self, shared: SharedStreams) -> None:
        self.shared = shared
        self.replicas = shared.replicas

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, session_id: str, principal: str
    ) -> bool:
        """Serve a request of `session_id`, unknown here, if another replica holds it; False to let this replica
        answer it as unknown."""
        resume = None
        try:
            if scope["method"] == "GET":
                last_event_id = headers.get("last-event-id")
                resume = EVENT_ID.match(last_event_id) if last_event_id is not None else None
                if resume is None:
                    return False
                about = await self.shared.about(resume[1])
                if about.get("session") != session_id or about.get("principal") != principal:
                    return False
                holder = about["replica"]
            else:
                holder = await self.shared.holder_of_session(session_id)
                if holder is None or holder == self.replicas.id:
                    return False
        except MCPError as exc:  # Redis out of reach: nothing known of it here, as without Redis
            logger.warning("session %s is unknown here and Redis cannot say where it is: %s", session_id[:64],
                           exc.error.message)
            return False
        try:
            if resume is not None:
                await self._resume(holder, session_id, resume[1], int(resume[2]), receive, send)
            else:
                await self._forward(holder, scope, receive, send, headers)
            return True
        except MCPError as exc:  # the replica holding it gone (410), Redis out of reach (503)
            status = 410 if exc.error.code == errors.REPLICA_GONE else 503
            await reply(send, status, {"jsonrpc": "2.0", "id": None, "error": exc.error.model_dump(exclude_none=True)})
            return True

    async def _resume(
        self, holder: str, session_id: str, stream: str, after: int, receive: Receive, send: Send
    ) -> None:
        header = [(b"mcp-session-id", session_id.encode())]
        args: JsonObject = {"session": session_id, "stream": stream}
        what = "this session"
        if not await self.replicas.ask(holder, READER_OP, {**args, "attached": True}, what=what, timeout=10):
            labelled(STREAM_RESUMPTIONS, "unknown").inc()
            await reply(send, 404, error_message(None, INVALID_REQUEST, "Last-Event-ID not found in this session",
                                                 header="last-event-id", value=f"{stream}/{after}",
                                                 fix="the stream has ended: send the request again"), extra=header)
            return
        labelled(STREAM_RESUMPTIONS, "resumed").inc()
        logger.debug("session %s (on replica %s) resumes stream %s after event %d here", session_id, holder, stream,
                     after)
        complete = False
        try:
            async with sse_response(send, receive, header):
                async for item in self.shared.events_after(stream, after, SSE_PING_INTERVAL):
                    if item is None:
                        await send(PING)
                        continue
                    seq, message, last = item
                    await send_event(send, encode(message), f"{stream}/{seq}".encode())
                    complete = last
        except (OSError, MCPError):
            pass
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10), contextlib.suppress(MCPError):
                await self.replicas.ask(holder, READER_OP, {**args, "attached": False, "complete": complete},
                                        what=what, timeout=10)

    async def _forward(self, holder: str, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        body = bytearray()
        while True:
            event = await receive()
            if event["type"] != "http.request":
                break
            body += event.get("body", b"")
            if not event.get("more_body", False):
                break
        args = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": {k: headers[k] for k in FORWARDED_HEADERS if k in headers} | {"host": headers.get("host", "")},
            "body": base64.b64encode(bytes(body)).decode(),
            "base": f"{scope.get('scheme', 'http')}://{headers.get('host', 'localhost')}",
        }
        answered = await self.replicas.ask(holder, FORWARD_OP, args, what="this session", timeout=FORWARD_TIMEOUT + 5)
        content = base64.b64decode(answered["body"])
        kept = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in answered["headers"]]
        await send({"type": "http.response.start", "status": answered["status"],
                    "headers": [*kept, (b"content-length", str(len(content)).encode())]})
        await send({"type": "http.response.body", "body": content})


async def serve_forwarded(app: ASGIApp, args: JsonObject) -> JsonObject:
    """Run a request another replica forwarded (`FORWARD_OP`) through `app`, this replica's whole app."""
    import httpx2  # only with replicas: a gateway without them starts without an HTTP client (test_startup)

    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url=args["base"]) as client:
        response = await client.request(
            args["method"], args["path"], params=args.get("query") or None, headers=args.get("headers"),
            content=base64.b64decode(args.get("body") or ""), timeout=FORWARD_TIMEOUT,
        )
    return {
        "status": response.status_code,
        "headers": [[k, v] for k, v in response.headers.multi_items() if k.lower() != "content-length"],
        "body": base64.b64encode(response.content).decode(),
    }
