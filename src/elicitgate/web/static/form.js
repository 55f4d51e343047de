// elicitgate hosted form: checks in the page (the gateway checks again; its verdict counts),
// errors next to the fields, and drafts kept across reloads (never the secret fields).
(function () {
  "use strict";
  var form = document.getElementById("eg-form");
  if (!form) return;
  var key = "elicitgate-draft:" + location.pathname;
  form.noValidate = true; // our own messages, next to the fields

  function fieldsOf() { return Array.prototype.slice.call(form.querySelectorAll(".eg-field")); }
  function errorOf(field) { return field.querySelector(".eg-error"); }

  function problem(field) {
    var kind = field.getAttribute("data-kind");
    if (kind === "multi") {
      var n = field.querySelectorAll("input[type=checkbox]:checked").length;
      var min = field.getAttribute("data-min-items"), max = field.getAttribute("data-max-items");
      if (min !== null && n < Number(min)) return "choose at least " + min;
      if (max !== null && n > Number(max)) return "choose at most " + max;
      return "";
    }
    var control = field.querySelector("input, select");
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
    var target = field.getAttribute("data-kind") === "multi" ? field : field.querySelector("input, select");
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

  form.addEventListener("submit", function (event) {
    var submitter = event.submitter;
    if (submitter && submitter.value !== "review") { sessionStorage.removeItem(key); return; }
    var first = check();
    if (first) {
      event.preventDefault();
      var control = first.querySelector("input, select");
      if (control) control.focus();
    }
  });

  // An error is re-checked as the person types, never on blur: blur happens on the pointer's way down on
  // a button, and a message vanishing then moves the button away before the pointer comes up.
  fieldsOf().forEach(function (field) {
    field.addEventListener("input", function () { if (errorOf(field).textContent) show(field, problem(field)); });
  });

  // Drafts: what was typed survives a reload even before the first Review.
  function kept(el) { return el.name.indexOf("f.") === 0 && el.type !== "password"; } // the schema's fields, no secrets
  function save() {
    var data = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!kept(el)) return;
      if (el.type === "checkbox") { (data[el.name] = data[el.name] || []); if (el.checked) data[el.name].push(el.value); }
      else data[el.name] = el.value;
    });
    sessionStorage.setItem(key, JSON.stringify(data));
  }
  var hasServerErrors = form.querySelector(".eg-error:not(:empty)") !== null;
  var saved = sessionStorage.getItem(key);
  if (saved && !hasServerErrors) {
    try {
      var data = JSON.parse(saved);
      Array.prototype.forEach.call(form.elements, function (el) {
        if (!kept(el) || !(el.name in data)) return;
        if (el.type === "checkbox") el.checked = data[el.name].indexOf(el.value) >= 0;
        else el.value = data[el.name];
      });
    } catch (e) { sessionStorage.removeItem(key); }
  }
  form.addEventListener("input", save);
  form.addEventListener("change", save);
})();
