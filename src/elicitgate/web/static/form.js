// elicitgate hosted form: checks in the page (the gateway checks again; its verdict counts), errors next
// to the fields, drafts kept across reloads, the back button and other tabs (never the secret fields),
// and one submission per press.
(function () {
  "use strict";
  var DRAFTS = "elicitgate-draft:";
  var key = DRAFTS + location.pathname;
  sweepDrafts();
  if (document.querySelector("[data-state]")) { localStorage.removeItem(key); return; } // it has ended
  var form = document.getElementById("eg-form") || document.querySelector("form.eg-form");
  if (!form) return;
  onePress(form);
  if (form.id !== "eg-form") return; // the review step: nothing to type
  form.noValidate = true; // our own messages, next to the fields

  function fieldsOf() { return Array.prototype.slice.call(form.querySelectorAll(".eg-field")); }
  function errorOf(field) { return field.querySelector(".eg-error"); }
  function controlOf(field) { return field.querySelector("input, select"); }

  function problem(field) {
    var kind = field.getAttribute("data-kind");
    if (kind === "multi") {
      var n = field.querySelectorAll("input[type=checkbox]:checked").length;
      var min = field.getAttribute("data-min-items"), max = field.getAttribute("data-max-items");
      if (min !== null && n < Number(min)) return "choose at least " + min;
      if (max !== null && n > Number(max)) return "choose at most " + max;
      return "";
    }
    var control = controlOf(field);
    if (!control || control.checkValidity()) return "";
    var v = control.validity;
    if (v.valueMissing) return "is required";
    if (v.typeMismatch && control.type === "email") return "is not a valid email address";
    if (v.typeMismatch && control.type === "url") return "is not a valid URL";
    if (v.rangeUnderflow) return "must be at least " + control.min;
    if (v.rangeOverflow) return "must be at most " + control.max;
    if (v.stepMismatch) return "must be a whole number";
    if (v.tooShort) return "must be at least " + control.minLength + " characters";
    if (v.tooLong) return "must be at most " + control.maxLength + " characters";
    if (v.badInput) return "is not a valid value";
    return control.validationMessage;
  }

  function show(field, message) {
    var error = errorOf(field);
    if (error) error.textContent = message;
    var target = field.getAttribute("data-kind") === "multi" ? field : controlOf(field);
    if (target) {
      if (message) target.setAttribute("aria-invalid", "true"); else target.removeAttribute("aria-invalid");
    }
  }

  function check() {
    var first = null;
    fieldsOf().forEach(function (field) {
      var message = problem(field);
      show(field, message);
      if (message && !first) first = field;
    });
    return first;
  }

  function focusField(field) {
    var control = controlOf(field);
    if (control) control.focus();
  }

  form.addEventListener("submit", function (event) {
    var submitter = event.submitter;
    if (event.defaultPrevented || (submitter && submitter.value !== "review")) return;
    var first = check();
    if (first) {
      event.preventDefault();
      form.removeAttribute("data-sent");
      focusField(first);
    }
  });

  // An error is re-checked as the person types, never on blur: blur happens on the pointer's way down on
  // a button, and a message vanishing then moves the button away before the pointer comes up.
  fieldsOf().forEach(function (field) {
    field.addEventListener("input", function () { if (errorOf(field).textContent) show(field, problem(field)); });
  });

  // The gateway's own verdict (a page without JavaScript's checks, or the broker's): focus its first error.
  var flagged = form.querySelector(".eg-error:not(:empty)");
  if (flagged) focusField(flagged.closest(".eg-field"));

  // Drafts: in localStorage, so a reload, the back button (the page is never cached) and a second tab all
  // find what was typed; other open tabs follow as it is typed. They expire with the request.
  function kept(el) { return el.name.indexOf("f.") === 0 && el.type !== "password"; } // the schema's fields, no secrets
  function collect() {
    var values = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!kept(el)) return;
      if (el.type === "checkbox") { (values[el.name] = values[el.name] || []); if (el.checked) values[el.name].push(el.value); }
      else values[el.name] = el.value;
    });
    return values;
  }
  function apply(values) {
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!kept(el) || !(el.name in values) || el === document.activeElement) return;
      if (el.type === "checkbox") el.checked = values[el.name].indexOf(el.value) >= 0;
      else el.value = values[el.name];
    });
  }
  function deadline() {
    var time = document.querySelector(".eg-meta time[datetime]");
    var at = time ? Date.parse(time.getAttribute("datetime")) : NaN;
    return isFinite(at) ? at : Date.now() + 3600 * 1000;
  }
  function save() {
    localStorage.setItem(key, JSON.stringify({ expires: deadline(), values: collect() }));
  }
  function load(text) {
    try { return JSON.parse(text).values || null; } catch (e) { return null; }
  }
  var saved = load(localStorage.getItem(key));
  if (saved && !flagged) apply(saved); // with the gateway's errors on the page, its copy of the draft counts
  form.addEventListener("input", save);
  form.addEventListener("change", save);
  window.addEventListener("storage", function (event) {
    if (event.key === key && event.newValue) { var values = load(event.newValue); if (values) apply(values); }
  });

  function sweepDrafts() {
    for (var i = localStorage.length - 1; i >= 0; i--) {
      var name = localStorage.key(i);
      if (name.indexOf(DRAFTS) !== 0) continue;
      try { if (JSON.parse(localStorage.getItem(name)).expires < Date.now()) localStorage.removeItem(name); }
      catch (e) { localStorage.removeItem(name); }
    }
  }

  // One submission per press: a double click, or Enter pressed twice, sends the form once.
  function onePress(target) {
    target.addEventListener("submit", function (event) {
      if (target.getAttribute("data-sent")) { event.preventDefault(); return; }
      target.setAttribute("data-sent", "1");
    });
    window.addEventListener("pageshow", function () { target.removeAttribute("data-sent"); });
  }
})();
