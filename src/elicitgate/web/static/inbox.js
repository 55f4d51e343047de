// elicitgate inbox: the pending list, live (server-sent events from the admin API).
(function () {
  "use strict";
  var login = document.getElementById("eg-login");
  if (login) {
    // The demo's link carries the token in the fragment, which never reaches a server or its logs:
    // take it out of the address bar and log in by POST.
    var match = /^#token=(.+)$/.exec(window.location.hash);
    if (match) {
      history.replaceState(null, "", window.location.pathname);
      document.getElementById("token").value = decodeURIComponent(match[1]);
      if (!document.getElementById("eg-login-error")) login.submit();
    }
    return;
  }
  var rows = document.getElementById("eg-rows");
  var empty = document.getElementById("eg-empty");
  var live = document.getElementById("eg-live");

  function cell(text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }
  function ago(iso) {
    var s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return s < 60 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s";
  }
  // A page some browser opened answers only there; the operator can hand it back (web/claims.py).
  function releaseForm(id) {
    var form = document.createElement("form");
    form.method = "post"; form.action = "/inbox/release/" + encodeURIComponent(id); form.className = "eg-release";
    var token = document.createElement("input");
    token.type = "hidden"; token.name = "csrf"; token.value = document.getElementById("eg-inbox").getAttribute("data-form-token");
    var note = document.createElement("span"); note.className = "eg-meta"; note.textContent = "opened";
    var button = document.createElement("button");
    button.type = "submit"; button.className = "eg-secondary"; button.textContent = "Release";
    form.appendChild(token); form.appendChild(note); form.appendChild(document.createTextNode(" ")); form.appendChild(button);
    return form;
  }
  function render(items) {
    rows.textContent = "";
    items.forEach(function (item) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-id", item.id);
      tr.appendChild(cell(item.server, "eg-col-server"));
      tr.appendChild(cell(item.message || "", "eg-col-message"));
      tr.appendChild(cell(item.mode));
      var age = cell(ago(item.created_at)); age.className = "eg-age"; age.setAttribute("data-created", item.created_at);
      tr.appendChild(age);
      tr.appendChild(cell(item.deadline.replace("T", " ")));
      var action = document.createElement("td");
      if (item.form_url) {
        var a = document.createElement("a");
        a.href = item.form_url; a.className = "eg-answer"; a.textContent = "Answer";
        action.appendChild(a);
      } else {
        action.textContent = "with client " + (item.client || "?");
      }
      if (item.claimed_at) action.appendChild(releaseForm(item.id));
      tr.appendChild(action);
      rows.appendChild(tr);
    });
    empty.hidden = items.length > 0;
  }
  function tick() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-created]"), function (td) {
      td.textContent = ago(td.getAttribute("data-created"));
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("time.eg-age"), function (t) {
    var td = t.parentNode; td.setAttribute("data-created", t.getAttribute("datetime")); td.textContent = ago(t.getAttribute("datetime"));
  });
  setInterval(tick, 1000);
  var source = new EventSource("/api/elicitations/events");
  source.addEventListener("pending", function (event) {
    render(JSON.parse(event.data));
    document.body.setAttribute("data-version", String(Number(document.body.getAttribute("data-version") || 0) + 1));
    live.textContent = "Updates live.";
  });
  source.onerror = function () { live.textContent = "Reconnecting…"; };
})();
