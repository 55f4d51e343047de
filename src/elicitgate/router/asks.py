"""The gateway asks on its own: missing tool and prompt arguments, and confirmations before tool calls.

`GatewayAsks.needed` is the only part every `tools/call` / `prompts/get` pays for: a catalog lookup and a look
at the argument names. When it finds something to ask, `run` asks through `router.inbound` (the one way into
the broker) like any elicitation (the client's own form, an `input_required` round for 2026-07-28 clients, or
the hosted page / inbox), with `source="gateway"`, and returns the params to forward, or the result to answer
with when the person said no (the upstream is then never called).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from mcp.shared.exceptions import MCPError

from elicitgate import errors
from elicitgate.config import GatewayConfig
from elicitgate.contracts import Origin
from elicitgate.elicitation.argument_forms import (
    confirmation_form,
    missing_arguments_form,
    prompt_arguments_form,
    shown_arguments,
)
from elicitgate.elicitation.model import GatewayReason
from elicitgate.json_shapes import JsonObject, is_array, is_mapping
from elicitgate.router.catalog import Catalog
from elicitgate.router.inbound import InboundRouter
from elicitgate.upstreams.link import UpstreamLink

logger = logging.getLogger(__name__)

DESTRUCTIVE = "destructive"
"""The `confirm_tools` entry that matches every tool annotated `destructiveHint: true`."""
MAX_CHOICES = 20
"""A prompt argument's completions become a form's choices when the server offers at most this many."""
COMPLETION_TIMEOUT = 5.0
MAX_KEPT_NEEDS = 1024
"""Listed tools and prompts whose needs `GatewayAsks.needed` keeps (then all are let go)."""


@dataclass(frozen=True)
class Ask:
    """What one call needs before it may go upstream."""

    kind: str
    """`tools` or `prompts`."""
    server: str
    name: str
    """The upstream's own name."""
    item: Mapping[str, Any]
    """The tool or prompt as the server lists it."""
    missing: tuple[str, ...]
    confirm: bool


class _Needs:
    """What a listed tool or prompt needs before every call, read from its entry once (`GatewayAsks.needed`): the
    names of its required arguments that the gateway asks for when missing (none where it does not ask), and whether
    the call is confirmed first."""

    __slots__ = ("item", "required", "required_set", "confirm")

    def __init__(self, item: Mapping[str, Any], required: tuple[str, ...], confirm: bool) -> None:
        self.item = item
        """The entry, held: its id is the key it is kept by, and is no other's while it lives."""
        self.required = required
        self.required_set = frozenset(required)
        self.confirm = confirm


@dataclass(frozen=True)
class Answered:
    """The person said no: the client gets this instead of the upstream's answer."""

    result: JsonObject


class GatewayAsks:
    def __init__(self, config: GatewayConfig, catalog: Catalog, inbound: InboundRouter) -> None:
        self.catalog = catalog
        self.inbound = inbound
        self.broker = inbound.broker
        """Asked only whether a question could reach a human, and what a secret is: the asking is `inbound`'s."""
        self.max_properties = config.elicitation.max_properties
        self.confirm_patterns = [p for p in config.elicitation.confirm_tools if p != DESTRUCTIVE]
        self.confirm_destructive = DESTRUCTIVE in config.elicitation.confirm_tools
        self.ask_missing = {
            name: cfg.ask_missing_arguments
            if cfg.ask_missing_arguments is not None
            else config.elicitation.ask_missing_arguments
            for name, cfg in config.upstreams().items()
        }
        self._needs: dict[int, _Needs] = {}
        """`_Needs` by the id of the catalog entry (never written to: a catalog refreshed lists new ones)."""

    # -- the cheap check on every call ------------------------------------------------------------

    def needed(
        self, kind: str, server: str, name: str, item: JsonObject | None, params: Mapping[str, Any]
    ) -> Ask | None:
        """What the gateway asks before the call of `item` (`catalog.find(kind, server, name)`), if anything."""
        if item is None:
            return None
        needs = self._needs.get(id(item))
        if needs is None or needs.item is not item:
            needs = self._needs_of(kind, server, name, item)
        missing: tuple[str, ...] = ()
        if needs.required:
            found = params.get("arguments")
            given: Mapping[str, Any] = found if is_mapping(found) else {}
            if not needs.required_set <= given.keys():
                missing = tuple(n for n in needs.required if n not in given)
        confirm = needs.confirm
        return Ask(kind, server, name, item, missing, confirm) if missing or confirm else None

    def _needs_of(self, kind: str, server: str, name: str, item: JsonObject) -> _Needs:
        """`item`'s needs, read from it and kept (a catalog entry is one tool or prompt of one server's)."""
        required = tuple(_required(kind, item)) if self.ask_missing.get(server) else ()
        needs = _Needs(item, required, kind == "tools" and self._confirms(server, name, item))
        if len(self._needs) >= MAX_KEPT_NEEDS:
            self._needs.clear()
        self._needs[id(item)] = needs
        return needs

    def _confirms(self, server: str, name: str, item: Mapping[str, Any]) -> bool:
        if self.confirm_destructive:
            annotations = item.get("annotations")
            if is_mapping(annotations) and annotations.get("destructiveHint") is True:
                return True
        if self.confirm_patterns:
            public = self.catalog.public_name(server, name)
            return any(fnmatchcase(public, pattern) for pattern in self.confirm_patterns)
        return False

    # -- asking -----------------------------------------------------------------------------------

    async def run(
        self, ask: Ask, link: UpstreamLink, call: Origin, params: JsonObject
    ) -> JsonObject | Answered:
        """The params to forward (with the answers merged in), or `Answered` when the person said no."""
        given = params.get("arguments")
        arguments: JsonObject = dict(given) if is_mapping(given) else {}
        public = self.catalog.public_name(ask.server, ask.name)
        if ask.missing:
            schema = await self._missing_form(ask, link, call, arguments)
            request = None
            if schema is not None:
                request = {"mode": "form", "message": _missing_message(ask, public), "requestedSchema": schema}
            if request is not None and self.broker.can_present(ask.server, call, request):
                answer = await self._elicit(link, call, request, "missing_arguments")
                if answer.get("action") != "accept":
                    return _refused(ask, public, answer.get("action"), f"provide the missing arguments of {public}")
                content: Mapping[str, Any] = answer.get("content") or {}
                # Only what was missing: an argument the client gave is never replaced.
                arguments = {**{k: v for k, v in content.items() if k in ask.missing}, **arguments}
                params = {**params, "arguments": arguments}
            else:
                logger.info("%s %s misses %s and the gateway cannot ask: forwarded as it is",
                            ask.kind[:-1], public, ", ".join(ask.missing))
        if ask.confirm:
            shown = shown_arguments(arguments, ask.item.get("inputSchema"), self.broker.secret_words)
            request = {
                "mode": "form",
                "message": f"Allow {public} (server {ask.server}) to run? Arguments: {shown}",
                "requestedSchema": confirmation_form(),
            }
            answer = await self._elicit(link, call, request, "confirmation")
            if answer.get("action") != "accept":
                return _refused(ask, public, answer.get("action"), f"allow {public} to run")
        return params

    async def _elicit(
        self, link: UpstreamLink, call: Origin, request: JsonObject, reason: GatewayReason
    ) -> JsonObject:
        return await self.inbound.gateway_question(link, call, request, reason)

    async def _missing_form(
        self, ask: Ask, link: UpstreamLink, call: Origin, arguments: JsonObject
    ) -> JsonObject | None:
        if ask.kind == "tools":
            return missing_arguments_form(ask.item.get("inputSchema"), ask.missing, max_properties=self.max_properties)
        declared = ask.item.get("arguments")
        listed = [a for a in declared if is_mapping(a)] if is_array(declared) else []
        choices = await self._completions(ask, link, call, arguments)
        return prompt_arguments_form(listed, ask.missing, choices, max_properties=self.max_properties)

    async def _completions(
        self, ask: Ask, link: UpstreamLink, call: Origin, given: JsonObject
    ) -> dict[str, list[str]]:
        """The server's completions for each missing prompt argument, where it offers a short, complete list."""
        conn = link.primary
        if conn is None or conn.negotiated is None or "completions" not in conn.negotiated.capabilities:
            return {}
        choices: dict[str, list[str]] = {}
        try:
            connection = await link.connection_for(call.peer)  # the one the prompt goes on (may start it)
        except MCPError:
            return {}
        for argument in ask.missing:
            request = {
                "ref": {"type": "ref/prompt", "name": ask.name},
                "argument": {"name": argument, "value": ""},
                "context": {"arguments": {k: str(v) for k, v in given.items()}},
            }
            try:
                result = await connection.request(
                    "completion/complete", request, origin=call, timeout=COMPLETION_TIMEOUT
                )
            except (MCPError, TimeoutError) as exc:
                logger.debug("completion of %s.%s failed: %r", ask.name, argument, exc)
                continue
            completion = result.get("completion")
            if not is_mapping(completion):
                continue
            values, total = completion.get("values"), completion.get("total")
            if not is_array(values) or not 0 < len(values) <= MAX_CHOICES or completion.get("hasMore"):
                continue
            if (not isinstance(total, int) or total <= len(values)) and all(isinstance(v, str) for v in values):
                choices[argument] = values
        return choices


def _required(kind: str, item: Mapping[str, Any]) -> list[str]:
    if kind == "tools":
        schema = item.get("inputSchema")
        required = schema.get("required") if is_mapping(schema) else None
        return [r for r in required if isinstance(r, str)] if is_array(required) else []
    arguments = item.get("arguments")
    if not is_array(arguments):
        return []
    return [a["name"] for a in arguments if is_mapping(a) and a.get("required") is True
            and isinstance(a.get("name"), str)]


def _missing_message(ask: Ask, public: str) -> str:
    what = "tool" if ask.kind == "tools" else "prompt"
    return (
        f"The {what} {public} (server {ask.server}) was called without {', '.join(ask.missing)}. "
        "Fill them in to go on."
    )


def _refused(ask: Ask, public: str, action: Any, what: str) -> Answered:
    if action == "cancel":
        text = f"The user cancelled; {public} was not called."
    else:
        text = f"The user declined to {what}; {public} was not called."
    if ask.kind == "tools":
        return Answered({"content": [{"type": "text", "text": text}], "isError": True})
    raise errors.gateway_error(errors.INVALID_PARAMS, text, prompt=public, missing=list(ask.missing), action=action)
