// elicitgate rich-UI host: renders the server's ui:// resource in a sandboxed iframe and speaks the
// elicitation bridge with it: ui/notifications/elicitation-context out, ui/submit-elicitation in.
// Every submission is checked by the gateway; an invalid one goes back to the UI with the errors.
//
// When the guest gets its context: guests written against mcp-ui post `ui-lifecycle-iframe-ready` and
// expect it only then (as mcp-ui's `ui-lifecycle-iframe-render-data` too); others get it on the frame's
// load event. A guest that is not ready within the timeout is replaced by the plain form.
(function () {
  "use strict";
  var frame = document.getElementById("eg-ui");
  var data = JSON.parse(document.getElementById("eg-context").textContent);
  var errorBox = document.getElementById("eg-ui-error");
  var review = document.getElementById("eg-ui-review");
  var values = document.getElementById("eg-ui-values");
  var context = data.context || {};
  var ready = false;
  var MIN_HEIGHT = 120, MAX_HEIGHT = 4000;

  if (data.size && data.size.width) frame.style.width = data.size.width;
  if (data.size && data.size.height) frame.style.height = data.size.height;

  function sendContext(extra) {
    var ctx = Object.assign({}, context, extra || {});
    var params = { message: data.message, schema: data.schema, context: ctx };
    var guest = frame.contentWindow;
    // The sandboxed frame has an opaque origin: no narrower target than "*" exists.
    guest.postMessage({ jsonrpc: "2.0", method: "ui/notifications/elicitation-context", params: params }, "*");
    guest.postMessage({ type: "ui-lifecycle-iframe-render-data", payload: { renderData: params } }, "*");
  }

  function becameReady() {
    ready = true;
    document.body.setAttribute("data-ui", "ready");
    sendContext(context.errors ? {} : undefined);
  }

  var giveUp = setTimeout(function () {
    if (!ready) location.replace(data.plainUrl);
  }, data.readyTimeoutMs);

  function post(body) {
    return fetch(data.answerUrl, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Elicitgate-CSRF": data.csrf },
      body: JSON.stringify(body)
    }).then(function (r) { return r.json(); });
  }

  function ended(result) {
    document.body.setAttribute("data-ended", result.state || "");
    location.reload(); // the page now says how it ended
  }

  function showErrors(errors) {
    var text = errors.map(function (p) { return (p.property || "form") + ": " + p.message; }).join("; ");
    errorBox.textContent = "The answer was not accepted: " + text;
    errorBox.hidden = false;
    sendContext({ error: text, errors: errors });
  }

  function resize(payload) {
    var height = Number(payload && payload.height);
    if (isFinite(height) && height > 0) frame.style.height = Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.ceil(height))) + "px";
  }

  frame.addEventListener("load", function () {
    if (!data.lifecycle && !ready) becameReady(); // the load-event path; a lifecycle guest says when it is ready
  });
  frame.src = frame.getAttribute("data-src"); // only now: no load event can pass unheard

  function submitted(params) {
    clearTimeout(giveUp);
    post({ action: params.action, content: params.content, step: "check" }).then(function (result) {
      if (result.ended) return ended(result);
      if (!result.ok) return showErrors(result.errors || []);
      errorBox.hidden = true;
      values.textContent = "";
      result.review.forEach(function (row) {
        var wrap = document.createElement("div"); wrap.className = "eg-row";
        var dt = document.createElement("dt"); dt.textContent = row.label;
        var dd = document.createElement("dd"); dd.textContent = row.value;
        wrap.appendChild(dt); wrap.appendChild(dd); values.appendChild(wrap);
      });
      review.hidden = false;
      frame.hidden = true;
      document.getElementById("eg-ui-send").focus();
    });
  }

  window.addEventListener("message", function (event) {
    if (event.source !== frame.contentWindow) return;
    var msg = event.data;
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "ui-lifecycle-iframe-ready") { clearTimeout(giveUp); return becameReady(); }
    if (msg.type === "ui-request-render-data") return sendContext();
    if (msg.type === "ui-size-change") return resize(msg.payload);
    if (msg.jsonrpc === "2.0" && msg.method === "ui/submit-elicitation" && msg.params) return submitted(msg.params);
  });

  document.getElementById("eg-ui-send").addEventListener("click", function () {
    post({ action: "accept", step: "submit" }).then(function (result) {
      if (result.ended) return ended(result);
      review.hidden = true; frame.hidden = false;
      showErrors(result.errors || []);
    });
  });
  document.getElementById("eg-ui-change").addEventListener("click", function () {
    review.hidden = true; frame.hidden = false; sendContext();
  });
})();
