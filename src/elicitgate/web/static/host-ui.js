// elicitgate rich-UI host: renders the server's ui:// resource in a sandboxed iframe and speaks the
// elicitation bridge with it: ui/notifications/elicitation-context out, ui/submit-elicitation in.
// Every submission is checked by the gateway; an invalid one goes back to the UI with the errors.
(function () {
  "use strict";
  var frame = document.getElementById("eg-ui");
  var data = JSON.parse(document.getElementById("eg-context").textContent);
  var errorBox = document.getElementById("eg-ui-error");
  var review = document.getElementById("eg-ui-review");
  var values = document.getElementById("eg-ui-values");
  var context = data.context || {};

  function sendContext(extra) {
    var ctx = Object.assign({}, context, extra || {});
    frame.contentWindow.postMessage({
      jsonrpc: "2.0", method: "ui/notifications/elicitation-context",
      params: { message: data.message, schema: data.schema, context: ctx }
    }, "*"); // the sandboxed frame has an opaque origin: no narrower target exists
  }

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

  frame.addEventListener("load", function () { sendContext(context.errors ? {} : undefined); });

  window.addEventListener("message", function (event) {
    if (event.source !== frame.contentWindow) return;
    var msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0" || msg.method !== "ui/submit-elicitation" || !msg.params) return;
    var action = msg.params.action;
    post({ action: action, content: msg.params.content, step: "check" }).then(function (result) {
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
    });
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
