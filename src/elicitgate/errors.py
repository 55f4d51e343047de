"""The gateway's own JSON-RPC error codes, and every exception that crosses a module: one tree.

2026-07-28 leaves -32000..-32019 to implementations (it uses -32020..-32022 and -32042 itself),
and the SDK itself takes -32000 (connection closed) and -32001 (request timeout), so every
gateway-made error lives in -32010..-32019, and the replicas' own (`redis_url`) in
-32008..-32009. `docs/errors.md` is the table people read; keep the two
in step.

The tree (who raises each, in brackets):

    MCPError (the mcp SDK's: a JSON-RPC error, code / message / data)
    ├── GatewayError ............ an error the gateway raises itself, `data.source` "elicitgate" (`gateway_error`)
    ├── ClientGone .............. the client's connection closed while the gateway asked it something [faces]
    ├── PeerLost ................ the connection ended before the answer came, never the peer's own answer
    │                             [wire.endpoint]
    ├── MethodNotFound .......... the peer's -32601 [wire.endpoint]
    └── UrlElicitationRequired .. a server's -32042, with the elicitations it asks for [wire.endpoint]
    ValueError (every message that cannot be read is one, so that no reader or writer ends on it)
    ├── TooDeep ................. JSON nested deeper than the parsers go [wire.codec]
    ├── LoneSurrogate ........... half of a UTF-16 pair in a string [wire.codec]
    ├── NotFinite ............... NaN or Infinity, which JSON has not; holds the value read [wire.codec]
    ├── NotAMessage ............. valid JSON, but not a JSON-RPC message [wire.framing]
    ├── LineTooLong ............. a stdio line past `MAX_LINE_BYTES`, skipped to its end [wire.framing]
    ├── NonFiniteParams ......... a request's params hold NaN or Infinity; names its id [wire.framing]
    └── AuthConfigError ......... `http.auth` cannot be used as written [faces.auth]
    Exception
    ├── ConfigError ............. a configuration problem, for the person who wrote the file [config]
    │                             (defined in config_error.py, which imports nothing: the configuration
    │                             loads before the SDK does)
    ├── ConnectError ............ an upstream could not be started or did not negotiate [upstreams.connection]
    ├── HumanGone ............... the human's side went away with the elicitation open [elicitation.responders]
    ├── HeadTooLarge ............ an HTTP request head over a limit, with the status that answers it
    │                             [web.http_protocol]
    ├── AuditStoreError ......... the audit store cannot be opened or read [audit.store]
    ├── InboxError .............. the terminal inbox cannot use the gateway it was pointed at [web.terminal]
    ├── SseEventTooLarge ........ one event of an upstream's stream past `max_event_bytes` [wire.sse]
    └── HttpError ............... an HTTP exchange with an upstream failed [wire.http_client]
        ├── TransportError ...... the connection failed, or what came on it was not HTTP
        │   ├── HttpConnectError  no connection: refused, no such host, a TLS handshake that failed
        │   ├── ConnectTimeout .. no connection (or TLS handshake) within the connect timeout
        │   ├── ReadTimeout ..... nothing received within the read timeout
        │   ├── WriteTimeout .... the server took none of the request within the write timeout
        │   ├── ReadError ....... the connection ended before the response did
        │   ├── WriteError ...... the request could not be written: the connection was closed
        │   └── ProtocolError ... not an HTTP/1.1 response, or one past a limit
        │       └── BodyTooLarge  a body read whole grew past the reader's limit
        └── InvalidUrl .......... a URL the client cannot reach (also a ValueError)

Private to one module, and never crossing it, so left there: `upstreams.connection.HandshakeRefused` (`auto`:
the server refused `initialize`, ask it `server/discover`), `web.body_limit._OverLimit` (a body past its limit,
inside the middleware), `demo.walkthrough.WalkthroughFailed` (the walkthrough's exit 1).
"""

from __future__ import annotations

from typing import Any

from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from mcp.shared.exceptions import MCPError

from elicitgate.config_error import ConfigError
from elicitgate.json_shapes import JsonObject, is_array, is_mapping

UPSTREAM_UNAVAILABLE = -32010
"""The upstream server that owns the tool / prompt / resource is not connected."""
UPSTREAM_TIMEOUT = -32011
"""The upstream did not answer within its `request_timeout` (human time excluded)."""
ELICITATION_UNDELIVERABLE = -32013
"""No responder can present this elicitation: the client lacks the mode and hosting is off."""
ELICITATION_LIMIT = -32014
"""Too many pending elicitations for the session or the gateway."""
ELICITATION_RATE_LIMITED = -32015
"""The client's elicitation rate limit is exhausted."""
ELICITATION_TIMEOUT = -32016
"""No answer arrived before the elicitation's deadline."""
ELICITATION_ORIGIN_UNKNOWN = -32017
"""An upstream elicited outside any call the gateway can attribute it to."""
ELICITATION_SENSITIVE_BLOCKED = -32018
"""The form asks for a secret and `elicitation.sensitive_fields` is `block`."""
ELICITATION_FAILED = -32019
"""The downstream client failed the elicitation request (its error is in `data.cause`)."""
UPSTREAM_GONE = -32012
"""The upstream connection closed while a request was in flight."""
REPLICA_GONE = -32008
"""With `redis_url`: the gateway replica holding the call or elicitation stopped (or does not answer)."""
CLUSTER_UNAVAILABLE = -32009
"""With `redis_url`: Redis is unreachable, and this request needs what the replicas share there."""

__all__ = [
    "CLUSTER_UNAVAILABLE",
    "ELICITATION_FAILED",
    "ELICITATION_LIMIT",
    "ELICITATION_ORIGIN_UNKNOWN",
    "ELICITATION_RATE_LIMITED",
    "ELICITATION_SENSITIVE_BLOCKED",
    "ELICITATION_TIMEOUT",
    "ELICITATION_UNDELIVERABLE",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "REPLICA_GONE",
    "UPSTREAM_GONE",
    "UPSTREAM_TIMEOUT",
    "UPSTREAM_UNAVAILABLE",
    "AuditStoreError",
    "AuthConfigError",
    "ClientGone",
    "ConfigError",
    "ConnectError",
    "GatewayError",
    "HeadTooLarge",
    "HumanGone",
    "InboxError",
    "LineTooLong",
    "LoneSurrogate",
    "MethodNotFound",
    "NonFiniteParams",
    "NotAMessage",
    "NotFinite",
    "PeerLost",
    "TooDeep",
    "UrlElicitationRequired",
    "describe_failure",
    "gateway_error",
]

_REFUSALS = {
    ELICITATION_RATE_LIMITED: "rate_limited",
    ELICITATION_LIMIT: "pending_limit",
    ELICITATION_SENSITIVE_BLOCKED: "sensitive_blocked",
    ELICITATION_UNDELIVERABLE: "undeliverable",
    ELICITATION_ORIGIN_UNKNOWN: "origin_unknown",
}


class GatewayError(MCPError):
    """An error the gateway raises itself (`data.source` is `elicitgate`).

    `refusal` is the short reason the audit trail and the metrics give when it refuses an elicitation
    before a human sees it: the code's own reason, or a more specific one given where it is raised.
    """

    def __init__(self, code: int, message: str, data: JsonObject, refusal: str | None = None) -> None:
        super().__init__(code, message, data)
        self.refusal = refusal or _REFUSALS.get(code, "invalid_request")


class ClientGone(MCPError):
    """The downstream client's connection closed while the gateway was asking it something (the SDK's
    `CONNECTION_CLOSED` on the face, turned into this where the face calls the SDK)."""


def gateway_error(code: int, message: str, *, refusal: str | None = None, **data: Any) -> GatewayError:
    """A `GatewayError` whose `data` always says who raised it, plus the specifics."""
    return GatewayError(code, message, {"source": "elicitgate", **data}, refusal)


# -- errors of a JSON-RPC peer (wire.endpoint) ----------------------------------------------

class PeerLost(MCPError):
    """The connection ended before the answer came: the wire closed (the peer exited, the gateway closed
    it) or, over HTTP, the request's response stream ended without one. Never an answer of the peer's,
    even one with the same code."""


class NotSent(PeerLost):
    """The connection had ended before the request was written: the peer never saw it."""


class MethodNotFound(MCPError):
    """The peer's -32601: it does not serve the method."""


class UrlElicitationRequired(MCPError):
    """A server's -32042: the call needs URL elicitations first. The error goes on to the client as
    the server said it; `elicitations` are its raw items, for the gateway's own checks."""

    @property
    def elicitations(self) -> list[Any]:
        data = self.error.data
        items = data.get("elicitations") if is_mapping(data) else None
        return list(items) if is_array(items) else []


# -- what cannot be read or written (wire.codec, wire.framing) -------------------------------

class TooDeep(ValueError):
    """JSON nested deeper than the parsers go."""


class LoneSurrogate(ValueError):
    """A string escape that is half of a UTF-16 pair: JSON's grammar allows it, Unicode does not."""


class NotFinite(ValueError):
    """`NaN`, `Infinity`, `-Infinity` or a number beyond a double's range: not a JSON number (RFC 8259).
    `value` is what was read, with those numbers as non-finite floats."""

    def __init__(self, value: Any) -> None:
        super().__init__("NaN and Infinity are not JSON numbers (RFC 8259)")
        self.value = value


class NotAMessage(ValueError):
    """Valid JSON, but not a JSON-RPC message (an object)."""


class LineTooLong(ValueError):
    """A stdio line longer than the wire reads (`wire.framing.MAX_LINE_BYTES`): not kept, skipped to its end."""


class NonFiniteParams(ValueError):
    """A request or notification whose params hold NaN or Infinity (not JSON, RFC 8259) outside the answers
    it carries; `request_id` is its id (None for a notification), so that the refusal can name it."""

    def __init__(self, message: JsonObject, where: str) -> None:
        super().__init__(f"{message.get('method')} holds a number JSON does not have (NaN or Infinity) at {where}")
        self.request_id: Any = message.get("id")


# -- configuration -----------------------------------------------------------------------------

class AuthConfigError(ValueError):
    """`http.auth` cannot be used as written (a tokens file that is missing or malformed)."""


# -- upstreams ---------------------------------------------------------------------------------

class ConnectError(Exception):
    """An upstream could not be started or did not complete negotiation.

    The message names the URL of an HTTP server, and ends with the last line a stdio server wrote to
    stderr (all of `stderr_tail` is kept for `doctor`)."""

    def __init__(
        self,
        server: str,
        cause: BaseException | None,
        *,
        url: str | None = None,
        stderr_tail: list[str] | None = None,
    ) -> None:
        self.server = server
        self.cause = cause
        self.stderr_tail = stderr_tail or []
        detail = describe_failure(cause) if cause is not None else "the connection closed during negotiation"
        if url is not None:  # an HTTP server's
            detail = f"{url}: {detail}{_http_hint(cause)}"
        said = next((line.strip() for line in reversed(self.stderr_tail) if line.strip()), None)
        if said:
            detail += f"; its stderr ended with: {said}"
        super().__init__(f"upstream {server!r}: {detail}")


def _http_hint(cause: BaseException | None) -> str:
    # "Not Found" is how the SDK's streamable HTTP client spells a 404 to a POST before any session.
    if isinstance(cause, MethodNotFound) and cause.error.message == "Not Found":
        return " (the URL's path may be wrong: streamable HTTP servers usually answer at /mcp, SSE ones at /sse)"
    return ""


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer to server/discover or initialize in time"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, MCPError):
        return f"negotiation failed: {exc.error.message} (code {exc.error.code})"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


# -- the human's side, the web, the audit store ------------------------------------------------

class HumanGone(Exception):
    """The human's side went away with the elicitation open (client disconnected, page closed for good).

    The broker ends the elicitation `cancelled` and tells the upstream `{"action": "cancel"}`.
    """


class HeadTooLarge(Exception):
    """A request head over a limit: the status and the text that answer it."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class AuditStoreError(Exception):
    """The store cannot be opened or read; the message says which and why (never the password)."""


class InboxError(Exception):
    pass


class SseEventTooLarge(Exception):
    """One event of an upstream's stream grew past the server's `max_event_bytes`."""


# -- the upstream HTTP client's (wire.http_client), in the manner of httpx's own tree --


class HttpError(Exception):
    """An HTTP exchange failed: the base of every error this client raises."""


class TransportError(HttpError):
    """The connection failed, or what came on it was not HTTP."""


class HttpConnectError(TransportError):
    """No connection: refused, no such host, or a TLS handshake that failed (an untrusted certificate)."""


class ConnectTimeout(TransportError):
    """No connection (or TLS handshake) within the connect timeout."""


class ReadTimeout(TransportError):
    """Nothing received within the read timeout while waiting for a response's head or body."""


class WriteTimeout(TransportError):
    """The server took none of the request within the write timeout."""


class ReadError(TransportError):
    """The connection ended before the response did."""


class WriteError(TransportError):
    """The request could not be written: the connection was closed."""


class ProtocolError(TransportError):
    """The server's bytes are not an HTTP/1.1 response, or one past a limit (its head, a body read whole)."""


class BodyTooLarge(ProtocolError):
    """A body read whole grew past the reader's limit."""


class InvalidUrl(HttpError, ValueError):
    """A URL this client cannot reach (not http or https, no host, a bad port)."""
