"""A configurable upstream MCP server for the tests (official `mcp` SDK, low-level Server).

Run: `python -m tests.peers.py_server [--http HOST:PORT | --sse HOST:PORT] [--name NAME]` (stdio by default).
Both eras: handshake-era callers get pushed `elicitation/create`; 2026-07-28 callers get an
InputRequiredResult (one round per `ask`).

Tools:
- `echo {text}`                            -> text
- `whoami`                                 -> the server's --name
- `elicit {message?, schema?, ui?, mode?, url?, elicitation_id?, complete?, report_errors?}`
      one elicitation; returns the ElicitResult as JSON text. With mode=url and complete=true the
      server sends notifications/elicitation/complete after an accept. With report_errors=true a
      JSON-RPC error answering the elicitation comes back as text `{"error": {code, message, data}}`
      (what this server received) instead of failing the tool call.
- `sample {prompt?}`                       -> one sampling/createMessage (pushed, or an input request); the text
- `elicit_then_give_up {seconds}`          -> one elicitation that the server cancels after `seconds`
                                              (notifications/cancelled to its client), then "gave up"
- `elicit_twice {schema?}`                  -> two sequential elicitations, both results as JSON
- `url_required {elicitation_id?, url?}`   -> fails with -32042 URLElicitationRequired
- `fail {code, message, data?}`            -> fails with that JSON-RPC error
- `progress {n}`                           -> n progress notifications, then "done n"
- `sleep {seconds, pad?}`                  -> sleeps (cancellable), then "slept" (followed by `pad` dots)
- `die`                                    -> the process exits at once (upstream death)
- `die_during_elicit`                      -> starts an elicitation, exits 0.2 s later
- `last_cancelled`                         -> whether the previous `sleep`/`elicit` was cancelled
- `stats`                                  -> {"calls": tools/call received before, "last_result": of `elicit`}
- `echo_meta`                              -> the request's `_meta` as JSON; the result carries `_meta`
- `add_tool {name}`                        -> lists one more tool (answers "<name> from <server>") and
                                              sends notifications/tools/list_changed (on the session, or
                                              on `subscriptions/listen` streams for 2026-07-28 callers)
- `list_changed_flood {n}`                 -> n notifications/tools/list_changed on the session at once
- `touch {uri}`                            -> notifications/resources/updated for uri on the session
                                              (handshake era; `resources/subscribe` is accepted)
- `subscribed`                             -> the URIs the calling session subscribed to, as a JSON list
Resources: `mem://{name}/note` (listed), template `mem://{name}/items/{id}`, the rich-UI guests of
tests/peers/ui_guests.py (`ui://tests/...`, for `elicit`'s `ui`); prompt `greet {who}`.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from elicitgate.demo.serving import run_server
from tests.peers.ui_guests import GUESTS, UI_MIME

NAME = "py"
STATE: dict[str, Any] = {"cancelled": None, "calls": 0, "last_result": None, "lists": 0}
EXTRA_TOOLS: list[str] = []
SUBSCRIBED: dict[str, set[str]] = {}
"""The URIs each session (`_session_key`) subscribed to and did not unsubscribe from."""
BUS = InMemorySubscriptionBus()
"""2026-07-28 change notifications travel on `subscriptions/listen` streams."""
DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _request(args: dict[str, Any]) -> dict[str, Any]:
    if args.get("mode") == "url":
        return {
            "mode": "url",
            "message": args.get("message", "Open this page"),
            "url": args.get("url", "https://example.com/start"),
            "elicitationId": args.get("elicitation_id", "el-1"),
        }
    request = {"mode": args.get("mode", "form"), "message": args.get("message", "Please answer"),
               "requestedSchema": args.get("schema", DEFAULT_SCHEMA)}  # a mode other than form: as given
    if "ui" in args:
        request["ui"] = args["ui"]
    return request


async def ask(ctx: ServerRequestContext, params: types.CallToolRequestParams, key: str, request: dict[str, Any]) -> Any:
    """Returns the ElicitResult dict, or an InputRequiredResult for 2026-07-28 callers."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        outbound = ctx.session._request_outbound  # raw, so the test controls every field
        return await outbound.send_raw_request("elicitation/create", request, None)
    # Stateless: earlier rounds' answers travel in our own requestState.
    answers = dict(json.loads(params.request_state)["answers"]) if params.request_state else {}
    for got, response in (params.input_responses or {}).items():
        answers[got] = response if isinstance(response, dict) else response.model_dump(by_alias=True, exclude_none=True)
    if key in answers:
        return answers[key]
    return types.InputRequiredResult(
        input_requests={key: types.ElicitRequest.model_validate({"method": "elicitation/create", "params": request})},
        request_state=json.dumps({"answers": answers}),
    )


async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
    STATE["lists"] += 1
    names = [
        "echo", "whoami", "elicit", "sample", "elicit_then_give_up", "elicit_twice", "url_required", "fail", "progress",
        "sleep", "die",
        "die_during_elicit", "last_cancelled", "echo_meta", "add_tool", "stats", "list_changed_flood", "touch",
        "subscribed",
        *EXTRA_TOOLS,
    ]
    return types.ListToolsResult(
        tools=[types.Tool(name=n, input_schema={"type": "object", "additionalProperties": True}) for n in names]
    )


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> Any:
    args = params.arguments or {}
    name = params.name
    if name == "stats":
        return _text(json.dumps({k: STATE[k] for k in ("calls", "last_result", "lists")}, sort_keys=True))
    STATE["calls"] += 1
    if name == "echo":
        return _text(str(args.get("text", "")))
    if name == "whoami":
        return _text(NAME)
    if name == "echo_meta":
        received = dict(params.meta or {})
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(received, sort_keys=True))],
            meta={"example.com/trace": "t-1"},
            structured_content={"received": received},
        )
    if name == "add_tool":
        EXTRA_TOOLS.append(str(args["name"]))
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await BUS.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()
        return _text("added")
    if name == "list_changed_flood":
        for _ in range(int(args.get("n", 100))):
            await ctx.session.send_tool_list_changed()
        return _text("flooded")
    if name == "subscribed":
        return _text(json.dumps(sorted(SUBSCRIBED.get(_session_key(ctx), set()))))
    if name == "touch":
        await ctx.session.send_resource_updated(str(args["uri"]))
        return _text("touched")
    if name in EXTRA_TOOLS:
        return _text(f"{name} from {NAME}")
    if name == "elicit":
        STATE["cancelled"] = None
        try:
            result = await ask(ctx, params, "ask", _request(args))
        except anyio.get_cancelled_exc_class():
            STATE["cancelled"] = True
            raise
        except MCPError as exc:
            STATE["cancelled"] = False
            if not args.get("report_errors"):
                raise
            error = {"code": exc.error.code, "message": exc.error.message, "data": exc.error.data}
            return _text(json.dumps({"error": error}, sort_keys=True))
        if isinstance(result, types.InputRequiredResult):
            return result
        STATE["cancelled"] = False
        STATE["last_result"] = result
        if args.get("complete") and result.get("action") == "accept":
            await ctx.session.send_elicit_complete(args.get("elicitation_id", "el-1"))
        return _text(json.dumps(result, sort_keys=True))
    if name == "elicit_then_give_up":
        with anyio.move_on_after(float(args.get("seconds", 0.5))):
            return _text(json.dumps(await ask(ctx, params, "ask", _request(args)), sort_keys=True))
        return _text("gave up")
    if name == "sample":
        request = {"messages": [{"role": "user", "content": {"type": "text", "text": args.get("prompt", "hi")}}],
                   "maxTokens": 20}
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            reply = await ctx.session._request_outbound.send_raw_request("sampling/createMessage", request, None)
        elif params.input_responses and "s" in params.input_responses:
            reply = params.input_responses["s"]
            reply = reply if isinstance(reply, dict) else reply.model_dump(by_alias=True, exclude_none=True)
        else:
            return types.InputRequiredResult(
                input_requests={"s": types.CreateMessageRequest.model_validate(
                    {"method": "sampling/createMessage", "params": request})},
                request_state="sampling",
            )
        return _text(reply["content"]["text"])
    if name == "elicit_twice":
        first = await ask(ctx, params, "first", _request({**args, "message": "first"}))
        if isinstance(first, types.InputRequiredResult):
            return first
        second = await ask(ctx, params, "second", _request({**args, "message": "second"}))
        if isinstance(second, types.InputRequiredResult):
            return second
        return _text(json.dumps([first, second], sort_keys=True))
    if name == "url_required":
        raise MCPError(
            code=types.URL_ELICITATION_REQUIRED,
            message="This request requires more information.",
            data={
                "elicitations": [
                    {
                        "mode": "url",
                        "elicitationId": args.get("elicitation_id", "auth-1"),
                        "url": args.get("url", "https://example.com/authorize"),
                        "message": "Authorize access",
                    }
                ]
            },
        )
    if name == "fail":
        raise MCPError(code=int(args["code"]), message=str(args["message"]), data=args.get("data"))
    if name == "progress":
        n = int(args.get("n", 3))
        for i in range(1, n + 1):
            await ctx.session.report_progress(i, n, f"step {i}")
        return _text(f"done {n}")
    if name == "sleep":
        STATE["cancelled"] = None
        try:
            await anyio.sleep(float(args.get("seconds", 30)))
        except anyio.get_cancelled_exc_class():
            STATE["cancelled"] = True
            raise
        STATE["cancelled"] = False
        return _text("slept" + "." * int(args.get("pad", 0)))
    if name == "last_cancelled":
        return _text(json.dumps(STATE["cancelled"]))
    if name == "die":
        os._exit(3)
    if name == "die_during_elicit":
        async with anyio.create_task_group() as tg:
            async def die_soon() -> None:
                await anyio.sleep(0.3)
                os._exit(4)

            tg.start_soon(die_soon)
            await ask(ctx, params, "ask", _request(args))
    raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name}")


async def list_resources(ctx: ServerRequestContext, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=f"mem://{NAME}/note", name="note")])


async def list_templates(ctx: ServerRequestContext, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(uri_template=f"mem://{NAME}/items/{{id}}", name="item")]
    )


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri.startswith("ui://tests/"):
        if uri not in GUESTS:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no UI at {uri}")
        html = types.TextResourceContents(uri=uri, mime_type=UI_MIME, text=GUESTS[uri])
        return types.ReadResourceResult(contents=[html])
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=str(params.uri), text=f"{NAME}:{params.uri}")]
    )


async def list_prompts(ctx: ServerRequestContext, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[types.Prompt(name="greet", arguments=[types.PromptArgument(name="who", required=True)])]
    )


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    who = (params.arguments or {}).get("who", "world")
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=f"hello {who} from {NAME}"))]
    )


async def complete(ctx: ServerRequestContext, params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[f"{NAME}-{params.argument.value}"]))


def _session_key(ctx: ServerRequestContext) -> str:
    """The HTTP session id (each request of a streamable HTTP session may have a context of its own), or
    the one session of a stdio process."""
    headers = getattr(ctx.request, "headers", None)
    return (headers.get("mcp-session-id") if headers is not None else None) or "stdio"


async def subscribe(ctx: ServerRequestContext, params: Any) -> types.EmptyResult:
    SUBSCRIBED.setdefault(_session_key(ctx), set()).add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: Any) -> types.EmptyResult:
    SUBSCRIBED.get(_session_key(ctx), set()).discard(str(params.uri))
    return types.EmptyResult()


def build() -> Server:
    return Server(
        NAME,
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_subscriptions_listen=ListenHandler(BUS),
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )


def main() -> None:
    global NAME
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT")
    parser.add_argument("--sse", metavar="HOST:PORT")
    parser.add_argument("--name", default="py")
    args = parser.parse_args()
    NAME = args.name
    run_server(build(), http=args.http, sse=args.sse)


if __name__ == "__main__":
    main()
