"""The conformance upstream: everything the `@modelcontextprotocol/conformance` server suite calls.

Run: `python -m tests.conformance.server [--http HOST:PORT]` (stdio by default; HTTP serves streamable
HTTP at `/mcp`, with an in-memory event store and a 100 ms retry hint so SEP-1699 resumption works).

Written with the `mcp` SDK's low-level `Server`, like tests/peers/py_server.py. Tools, resources,
prompts and completions follow the scenario texts of the suite (see tests/conformance/fixtures.py).
Server-to-client requests (elicitation, sampling) ride the calling request's own channel
(`related_request_id`), as a well-behaved HTTP server sends them; 2026-07-28 callers get an
`input_required` result instead, answered on the retry.
"""

from __future__ import annotations

import argparse
import json
import uuid
import warnings
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from tests.conformance import fixtures as fx
from tests.peers.event_store import MemoryEventStore

warnings.filterwarnings("ignore", category=DeprecationWarning)  # logging is deprecated as of 2026-07-28
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
STATE: dict[str, Any] = {"level": "debug", "subscriptions": set()}
RETRY_MS = 100
WAITING: dict[str, ServerSession] = {}
"""URL-mode elicitations announced with -32042, by id: the session to tell when each completes."""


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def _log(ctx: ServerRequestContext[Any, Any], message: str) -> None:
    if LEVELS.index("info") >= LEVELS.index(STATE["level"]):
        await ctx.session.send_log_message("info", message, logger="conformance", related_request_id=ctx.request_id)


def _declared(ctx: ServerRequestContext[Any, Any], mode: str) -> bool:
    """Whether the client declared this elicitation mode (`{"elicitation": {}}` means form only)."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.elicitation if capabilities is not None else None
    if declared is None:
        return False
    if declared.form is None and declared.url is None:
        return mode == "form"
    return getattr(declared, mode) is not None


async def _ask(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, request: dict[str, Any]
) -> dict[str, Any] | types.CallToolResult | types.InputRequiredResult:
    """One elicitation: its ElicitResult, or the error result / input request to return instead."""
    if _modern(ctx):
        answer = (params.input_responses or {}).get("ask")
        if answer is None:
            elicit = types.ElicitRequest.model_validate({"method": "elicitation/create", "params": request})
            return types.InputRequiredResult(input_requests={"ask": elicit})
        return answer if isinstance(answer, dict) else answer.model_dump(by_alias=True, exclude_none=True)
    mode = request["mode"]
    if not _declared(ctx, mode):
        return _text(f"Elicitation not supported: the client did not declare {mode} mode elicitation", error=True)
    try:
        if mode == "url":
            answer = await ctx.session.elicit_url(
                request["message"], request["url"], request["elicitationId"], related_request_id=ctx.request_id
            )
        else:
            answer = await ctx.session.elicit_form(
                request["message"], request["requestedSchema"], related_request_id=ctx.request_id
            )
        return answer.model_dump(by_alias=True, exclude_none=True)
    except MCPError as exc:
        return _text(f"Elicitation failed: {exc.error.code} {exc.error.message}", error=True)


async def _elicit(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, message: str, schema: dict[str, Any]
) -> types.CallToolResult | types.InputRequiredResult:
    result = await _ask(ctx, params, {"mode": "form", "message": message, "requestedSchema": schema})
    if not isinstance(result, dict):
        return result
    content = json.dumps(result.get("content") or {}, sort_keys=True)
    return _text(f"Elicitation completed: action={result.get('action')}, content={content}")


async def _elicit_url(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, *, complete: bool
) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-1036: a URL-mode elicitation; with `complete`, `notifications/elicitation/complete` after an accept."""
    elicitation_id = f"sep1036-{uuid.uuid4().hex}"
    request = {
        "mode": "url",
        "message": "Please complete authorization",
        "url": fx.URL,
        "elicitationId": elicitation_id,
    }
    result = await _ask(ctx, params, request)
    if not isinstance(result, dict):
        return result
    if complete and result.get("action") == "accept" and not _modern(ctx):
        await ctx.session.send_elicit_complete(elicitation_id)
    return _text(json.dumps({"action": result.get("action"), "elicitationId": elicitation_id}, sort_keys=True))


def _url_required(elicitation_id: str) -> MCPError:
    elicitation = {"mode": "url", "elicitationId": elicitation_id, "url": fx.URL, "message": "Authorize access"}
    return MCPError(
        code=types.URL_ELICITATION_REQUIRED,
        message="This request requires more information.",
        data={"elicitations": [elicitation]},
    )


async def _sample(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, prompt: str
) -> types.CallToolResult | types.InputRequiredResult:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
    if _modern(ctx):
        answer = (params.input_responses or {}).get("sample")
        if answer is None:
            request = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(messages=[message], max_tokens=100)
            )
            return types.InputRequiredResult(input_requests={"sample": request})
        raw = answer if isinstance(answer, dict) else answer.model_dump(by_alias=True, exclude_none=True)
        result = types.CreateMessageResult.model_validate(raw)
    else:
        capabilities = ctx.session.client_capabilities
        if capabilities is None or capabilities.sampling is None:
            return _text("Sampling not supported: the client did not declare the sampling capability", error=True)
        try:
            result = await ctx.session.create_message([message], max_tokens=100, related_request_id=ctx.request_id)
        except MCPError as exc:
            return _text(f"Sampling failed: {exc.error.code} {exc.error.message}", error=True)
    content = result.content
    reply = content.text if isinstance(content, types.TextContent) else "No response"
    return _text(f"LLM response: {reply}")


async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name=n, description=d, input_schema=s) for n, (d, s) in fx.TOOLS.items()]
    )


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    name, args = params.name, params.arguments or {}
    if name == "test_simple_text":
        return _text("This is a simple text response for testing.")
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(data=fx.IMAGE_PNG, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(data=fx.AUDIO_WAV, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        resource = types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
        )
        return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])
    if name == "test_multiple_content_types":
        resource = types.TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
        )
        return types.CallToolResult(
            content=[
                types.TextContent(text="Multiple content types test:"),
                types.ImageContent(data=fx.IMAGE_PNG, mime_type="image/png"),
                types.EmbeddedResource(resource=resource),
            ]
        )
    if name == "test_tool_with_logging":
        for step, message in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
            if step:
                await anyio.sleep(0.05)  # the scenario asks for ~50 ms between messages
            await _log(ctx, message)
        return _text("Tool with logging executed successfully")
    if name == "test_tool_with_progress":
        for step, progress in enumerate([0, 50, 100]):
            if step:
                await anyio.sleep(0.05)
            await ctx.session.report_progress(progress, 100, f"Completed step {progress} of 100")
        token = ctx.meta.get("progress_token") if ctx.meta else None
        return _text(str(token if token is not None else 0))
    if name == "test_error_handling":
        return _text("This tool intentionally returns an error for testing", error=True)
    if name == "test_reconnection":
        await _log(ctx, "Before disconnect")
        closed = ctx.close_sse_stream is not None  # only for 2025-11-25+ callers, with the event store
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
        await _log(ctx, "After reconnect")
        return _text(f"Reconnection test completed ({'stream closed mid-call' if closed else 'stream kept'})")
    if name == "test_sampling":
        return await _sample(ctx, params, str(args.get("prompt", "")))
    if name == "test_elicitation":
        return await _elicit(
            ctx, params, str(args.get("message", "Please provide your information")), fx.USER_INFO_SCHEMA
        )
    if name in fx.ELICITATIONS:
        message, schema = fx.ELICITATIONS[name]
        return await _elicit(ctx, params, message, schema)
    if name in ("test_elicitation_sep1036_url", "test_elicitation_sep1036_complete"):
        return await _elicit_url(ctx, params, complete=name.endswith("complete"))
    if name == "test_elicitation_sep1036_error":
        elicitation_id = str(args.get("elicitationId") or f"sep1036-{uuid.uuid4().hex}")
        WAITING[elicitation_id] = ctx.session
        raise _url_required(elicitation_id)
    if name == "finish_url_elicitation":
        elicitation_id = str(args["elicitationId"])
        # The completion goes to the session whose request needed it, whoever reports the end.
        await WAITING.pop(elicitation_id, ctx.session).send_elicit_complete(elicitation_id)
        return _text("finished")
    if name == "json_schema_2020_12_tool":
        return _text(f"JSON Schema 2020-12 tool called with: {json.dumps(args, sort_keys=True)}")
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


async def list_resources(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri=uri, name=name, description=description, mime_type=mime)
            for uri, (name, description, mime) in fx.RESOURCES.items()
        ]
    )


async def list_templates(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template=fx.TEMPLATE, name="template", description="Parameter substitution", mime_type="application/json"
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == "test://static-text":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=fx.STATIC_TEXT)
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=fx.IMAGE_PNG)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=fx.WATCHED_TEXT)
    elif uri.startswith(fx.TEMPLATE_PREFIX) and uri.endswith(fx.TEMPLATE_SUFFIX):
        item = uri[len(fx.TEMPLATE_PREFIX) : -len(fx.TEMPLATE_SUFFIX)]
        text = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
    else:
        raise MCPError(code=types.RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}", data={"uri": uri})
    return types.ReadResourceResult(contents=[contents])


async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
    STATE["subscriptions"].add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    STATE["subscriptions"].discard(str(params.uri))
    return types.EmptyResult()


async def list_prompts(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name=name,
                description=description,
                arguments=[types.PromptArgument(name=a, description=d, required=True) for a, d in arguments] or None,
            )
            for name, (description, arguments) in fx.PROMPTS.items()
        ]
    )


async def get_prompt(
    ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    args = params.arguments or {}
    missing = [a for a, _ in fx.PROMPTS.get(params.name, ("", []))[1] if a not in args]
    if params.name not in fx.PROMPTS or missing:
        raise MCPError(
            code=types.INVALID_PARAMS, message=f"Unknown prompt or missing arguments: {params.name} {missing}"
        )

    def user(content: Any) -> types.PromptMessage:
        return types.PromptMessage(role="user", content=content)

    if params.name == "test_simple_prompt":
        messages = [user(types.TextContent(text="This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        messages = [
            user(types.TextContent(text=f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))
        ]
    elif params.name == "test_prompt_with_embedded_resource":
        resource = types.TextResourceContents(
            uri=args["resourceUri"], mime_type="text/plain", text="Embedded resource content for testing."
        )
        messages = [
            user(types.EmbeddedResource(resource=resource)),
            user(types.TextContent(text="Please process the embedded resource above.")),
        ]
    else:
        messages = [
            user(types.ImageContent(data=fx.IMAGE_PNG, mime_type="image/png")),
            user(types.TextContent(text="Please analyze the image above.")),
        ]
    return types.GetPromptResult(messages=messages)


async def complete(ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams) -> types.CompleteResult:
    """Minimal, as the scenario allows: an empty, well-formed completion."""
    return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))


async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    STATE["level"] = params.level
    return types.EmptyResult()


def build() -> Server[Any]:
    return Server(
        "elicitgate-conformance-server",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
    )


def serve(http: str | None) -> None:
    server = build()
    if http:
        host, _, port = http.rpartition(":")
        app = server.streamable_http_app(host=host, event_store=MemoryEventStore(), retry_interval=RETRY_MS)
        uvicorn.run(app, host=host, port=int(port), log_level="warning")
        return

    async def run_stdio() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run_stdio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at /mcp (default: stdio)")
    serve(parser.parse_args().http)


if __name__ == "__main__":
    main()
