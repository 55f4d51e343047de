"""A bundled demo upstream whose elicitation brings its own UI: a colour picker (`ui://colours/picker`).

`pick_colour` asks with `elicitation/create` carrying `ui: {uri, mode, context}` next to a plain
`requestedSchema`; a client (or elicitgate's hosted page) that supports rich UI delegation renders the
`ui://` resource in a sandboxed iframe and talks to it with `ui/notifications/elicitation-context` and
`ui/submit-elicitation`; any other client shows the plain form. The picker itself checks nothing: the
host's check of the schema is what counts (a name over 20 characters is refused and sent back).

Run: `python -m elicitgate.demo.colour_server [--http HOST:PORT]`. Front it with `"era": "handshake"`:
answering a 2026-07-28 caller, the `mcp` SDK re-models the `input_required` result and drops `ui`.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from elicitgate._compat import request_outbound
from elicitgate.demo.serving import serve_main
from elicitgate.json_shapes import JsonObject, is_object

UI_URI = "ui://colours/picker"
UI_MIME = "text/html;profile=mcp-app"

COLOUR_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "title": "Colour (#rrggbb)", "minLength": 7, "maxLength": 7, "default": "#3b82f6"},
        "name": {"type": "string", "title": "Name for it", "maxLength": 20},
    },
    "required": ["colour"],
}

PICKER_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Colour picker</title>
<style>
  body { font: 15px/1.4 system-ui, sans-serif; margin: 0; padding: 1rem; color: #1d2330; }
  .swatches { display: flex; gap: .5rem; flex-wrap: wrap; margin: .5rem 0 1rem; }
  .swatch { width: 2.4rem; height: 2.4rem; border-radius: 50%; border: 3px solid transparent; cursor: pointer; }
  .swatch[aria-pressed=true] { border-color: #1d2330; }
  #preview { width: 100%; height: 3rem; border-radius: 8px; margin-bottom: .8rem; border: 1px solid #ccd; }
  label { display: block; font-weight: 600; margin: .4rem 0 .2rem; }
  input[type=text] { width: 100%; padding: .4rem; border: 1px solid #b9c1cf; border-radius: 6px; font: inherit; }
  #error { color: #b3261e; min-height: 1.2rem; }
  .actions { display: flex; gap: .5rem; margin-top: .8rem; }
  button { font: inherit; padding: .45rem 1rem; border-radius: 6px; border: 1px solid #b9c1cf; background: #fff; }
  button.primary { background: #2952cc; color: #fff; border-color: #2952cc; }
</style></head>
<body>
  <p id="message">Waiting for the host…</p>
  <div id="preview"></div>
  <div class="swatches" id="swatches"></div>
  <label for="hex">Colour</label><input type="text" id="hex" value="#3b82f6">
  <label for="name">Name it</label><input type="text" id="name" placeholder="e.g. Sky">
  <p id="error" role="alert"></p>
  <div class="actions">
    <button class="primary" id="choose">Choose</button><button id="decline">Decline</button>
  </div>
<script>
  var COLOURS = ["#3b82f6", "#ef4444", "#22c55e", "#eab308", "#a855f7", "#0f172a"];
  var hex = document.getElementById("hex"), nameBox = document.getElementById("name");
  var preview = document.getElementById("preview"), error = document.getElementById("error");
  function pick(c) {
    hex.value = c; preview.style.background = c;
    Array.prototype.forEach.call(document.querySelectorAll(".swatch"), function (s) {
      s.setAttribute("aria-pressed", String(s.getAttribute("data-colour") === c));
    });
  }
  COLOURS.forEach(function (c) {
    var b = document.createElement("button");
    b.className = "swatch"; b.style.background = c; b.setAttribute("data-colour", c);
    b.setAttribute("aria-label", c); b.onclick = function () { pick(c); };
    document.getElementById("swatches").appendChild(b);
  });
  hex.oninput = function () { preview.style.background = hex.value; };
  function submit(action, content) {
    window.parent.postMessage({ jsonrpc: "2.0", method: "ui/submit-elicitation",
      params: { action: action, content: content } }, "*");
  }
  document.getElementById("choose").onclick = function () {
    var content = { colour: hex.value };
    if (nameBox.value) content.name = nameBox.value;
    submit("accept", content);
  };
  document.getElementById("decline").onclick = function () { submit("decline", null); };
  window.addEventListener("message", function (event) {
    var msg = event.data;
    if (event.source !== window.parent || !msg || msg.method !== "ui/notifications/elicitation-context") return;
    var p = msg.params || {};
    document.getElementById("message").textContent = p.message || "";
    var ctx = p.context || {};
    error.textContent = ctx.error || "";
    document.body.setAttribute("data-context", ctx.error ? "error" : "ready");
    if (!ctx.error) pick(ctx.defaultColor || (p.schema && p.schema.properties.colour.default) || COLOURS[0]);
  });
</script>
</body></html>
"""


async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="pick_colour",
                description="Ask the user to pick a colour (with a colour-picker UI where the host supports it).",
                input_schema={"type": "object", "properties": {"purpose": {"type": "string"}}},
            )
        ]
    )


async def list_resources(ctx: ServerRequestContext, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri=UI_URI, name="colour_picker", mime_type=UI_MIME, description="Colour picker")]
    )


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    if str(params.uri) != UI_URI:
        raise ValueError(f"unknown resource {params.uri}")
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=UI_URI, mime_type=UI_MIME, text=PICKER_HTML)]
    )


def _request(purpose: str) -> JsonObject:
    return {
        "mode": "form",
        "message": f"Pick a colour for {purpose}",
        "requestedSchema": COLOUR_SCHEMA,
        "ui": {"uri": UI_URI, "mode": "modal", "context": {"defaultColor": "#3b82f6"}},
    }


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> Any:
    if params.name != "pick_colour":
        raise ValueError(f"unknown tool {params.name}")
    request = _request(str((params.arguments or {}).get("purpose", "your theme")))
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        responses = params.input_responses or {}
        if "colour" not in responses:
            return {
                "resultType": "input_required",
                "inputRequests": {"colour": {"method": "elicitation/create", "params": request}},
                "requestState": "colour",
            }
        given = responses["colour"]
        answer = given if is_object(given) else given.model_dump(by_alias=True, exclude_none=True)
    else:
        # Raw, so that `ui` (which the typed request model does not know) reaches the client intact.
        answer = await request_outbound(ctx).send_raw_request("elicitation/create", request, None)
    if answer.get("action") != "accept":
        return types.CallToolResult(content=[types.TextContent(text=f"pick_colour: {answer.get('action')}")])
    content: object = answer.get("content") or {}
    return types.CallToolResult(content=[types.TextContent(text=f"pick_colour: {json.dumps(content, sort_keys=True)}")])


def build() -> Server:
    return Server(
        "elicitgate-colours",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def main() -> None:
    serve_main(build, __doc__)


if __name__ == "__main__":
    main()
