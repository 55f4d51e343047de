"""Rich-UI guests (`ui://tests/...`) that tests/peers/py_server.py serves for the hosted-page tests.

- `ui://tests/mcp-ui`: written the way mcp-ui guests are: it starts after its frame has loaded, posts
  `ui-lifecycle-iframe-ready` and only then listens, for `ui-lifecycle-iframe-render-data`; it reports
  its height with `ui-size-change` and answers with `ui/submit-elicitation`.
- `ui://tests/never-ready`: speaks the lifecycle but never becomes ready.
Any other `ui://tests/...` cannot be read.
"""

from __future__ import annotations

UI_MIME = "text/html;profile=mcp-app"

MCP_UI_GUEST = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mcp-ui guest</title></head>
<body>
  <p id="message">Starting…</p>
  <label for="answer">Answer</label> <input id="answer" type="text">
  <button id="send" type="button">Send</button>
  <p id="error" role="alert"></p>
<script>
  window.addEventListener("load", function () {
    setTimeout(function boot() {  // an app that starts after its frame loaded, as bundled apps do
      window.addEventListener("message", function (event) {
        var msg = event.data;
        if (event.source !== window.parent || !msg || msg.type !== "ui-lifecycle-iframe-render-data") return;
        var data = msg.payload.renderData;
        document.getElementById("message").textContent = data.message;
        document.getElementById("error").textContent = (data.context && data.context.error) || "";
        var rendered = Number(document.body.getAttribute("data-rendered") || 0) + 1;
        document.body.setAttribute("data-rendered", String(rendered));
      });
      window.parent.postMessage({ type: "ui-lifecycle-iframe-ready" }, "*");
      window.parent.postMessage({ type: "ui-size-change", payload: { height: 300, width: 400 } }, "*");
    }, 0);
  });
  document.getElementById("send").onclick = function () {
    window.parent.postMessage({ jsonrpc: "2.0", method: "ui/submit-elicitation",
      params: { action: "accept", content: { answer: document.getElementById("answer").value } } }, "*");
  };
</script>
</body></html>
"""

NEVER_READY_GUEST = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>never ready</title></head>
<body><p>Loading…</p>
<script>
  // Would post ui-lifecycle-iframe-ready once its data arrived, which never happens.
  function whenLoaded() { window.parent.postMessage({ type: "ui-lifecycle-iframe-ready" }, "*"); }
</script>
</body></html>
"""

GUESTS = {"ui://tests/mcp-ui": MCP_UI_GUEST, "ui://tests/never-ready": NEVER_READY_GUEST}
