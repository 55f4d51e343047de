"""One `mcp` SDK server (low-level `Server`) that asks in all three styles a new user writes (issue #31).

- `mrtr_book {date}`: a 2026-07-28 tool as the low-level API writes one: it *returns* a hand-written
  `InputRequiredResult` whatever the era of the connection. On a handshake-era connection the SDK turns
  that into -32603 "Handler returned an invalid result"; only a 2026-07-28 request can use it.
- `push_book {date}`: push-style, `ctx.session.elicit_form(...)`: works only on a handshake-era connection
  (2026-07-28 has no back-channel).
- `resolve_book {date}`: the SDK's `Resolve(...)` / `Elicit[...]` markers (an `MCPServer` tool the
  low-level handler hands the call to): works in both eras.
- `push_then_return_input_required {date}`: asks by push, then returns an `InputRequiredResult` anyway (a
  push-style tool whose result no era carries after it asked: it must never be run again).
- `invalid_result`: returns a result neither era accepts (-32603 "Handler returned an invalid result" in both).
- prompt `mrtr_greeting`: a prompt that returns a hand-written `InputRequiredResult` (2026-07-28 only), asking
  for `{"seats": integer}`; then "a table for <seats>".
- `stats`: how often each tool's handler ran in this process, as JSON (a push-style tool must never run
  twice for one call).

Each asks for `{"seats": integer}` and answers "<tool> booked <seats> seats on <date>".

Run: `python -m tests.peers.dual_style_server [--http HOST:PORT]` (stdio by default). Both eras on both
transports: the SDK's transports serve `initialize` and `server/discover` alike.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Annotated, Any

import mcp_types as types
from pydantic import BaseModel

from mcp.server import Server, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.shared.exceptions import MCPError

from elicitgate.demo.serving import run_server

SEATS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"seats": {"type": "integer", "minimum": 1}},
    "required": ["seats"],
}
RAN: Counter[str] = Counter()


class Seats(BaseModel):
    seats: int


def _booked(tool: str, seats: object, date: object) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=f"{tool} booked {seats} seats on {date}")])


def _asked_in_2026(date: object) -> types.InputRequiredResult:
    question = {"mode": "form", "message": f"How many seats on {date}? (mrtr)", "requestedSchema": SEATS_SCHEMA}
    return types.InputRequiredResult(
        input_requests={"seats": types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(question))},
        request_state="asked-seats",
    )


# -- the Resolve tool, on an MCPServer the low-level handler hands it to ----------------------------

resolving = MCPServer(name="dual-style-resolve")


async def ask_seats(date: str) -> Elicit[Seats]:
    return Elicit(f"How many seats on {date}? (resolve)", Seats)


@resolving.tool()
async def resolve_book(date: str, seats: Annotated[Seats, Resolve(ask_seats)]) -> str:
    return f"resolve_book booked {seats.seats} seats on {date}"


# -- the low-level server ----------------------------------------------------------------------------


async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}
    tools = [types.Tool(name=name, input_schema=schema)
             for name in ("mrtr_book", "push_book", "resolve_book", "push_then_return_input_required")]
    bare = [types.Tool(name=name, input_schema={"type": "object"}) for name in ("invalid_result", "stats")]
    return types.ListToolsResult(tools=[*tools, *bare])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> Any:
    args = params.arguments or {}
    name = params.name
    if name == "stats":
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(dict(RAN), sort_keys=True))])
    RAN[name] += 1
    date = args.get("date")
    if name == "mrtr_book":
        answer = (params.input_responses or {}).get("seats")
        if answer is None:
            return _asked_in_2026(date)
        answer = answer if isinstance(answer, dict) else answer.model_dump(by_alias=True, exclude_none=True)
        return _booked(name, answer["content"]["seats"], date)
    if name == "push_book":
        result = await ctx.session.elicit_form(f"How many seats on {date}? (push)", SEATS_SCHEMA,
                                               related_request_id=ctx.request_id)
        return _booked(name, (result.content or {}).get("seats"), date)
    if name == "push_then_return_input_required":
        await ctx.session.elicit_form(f"How many seats on {date}? (push)", SEATS_SCHEMA,
                                      related_request_id=ctx.request_id)
        return _asked_in_2026(date)
    if name == "invalid_result":
        return {"content": "not a list of content blocks"}
    if name == "resolve_book":
        context = Context(request_context=ctx, mcp_server=resolving, input_params=params)
        return await resolving.call_tool(name, args, context)
    raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name}")


async def list_prompts(ctx: ServerRequestContext, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="mrtr_greeting")])


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams) -> Any:
    answer = (params.input_responses or {}).get("seats")
    if answer is None:
        return _asked_in_2026("the greeting")
    answer = answer if isinstance(answer, dict) else answer.model_dump(by_alias=True, exclude_none=True)
    text = types.TextContent(text=f"a table for {answer['content']['seats']}")
    return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])


def build() -> Server:
    return Server("dual-style", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT")
    args = parser.parse_args()
    run_server(build(), http=args.http)


if __name__ == "__main__":
    main()
