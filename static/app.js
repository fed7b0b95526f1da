// asynqpy dashboard: live-refresh pause, select-all checkboxes, local times. No inline script anywhere (CSP).
(function () {
  "use strict";
  var LIVE_KEY = "asynqpy.live";

  function live() { return localStorage.getItem(LIVE_KEY) !== "off"; }

  function anySelected(el) {
    return !!(el && el.querySelector && el.querySelector("input[name=ids]:checked"));
  }

  // Polling requests (elements with class "poll" triggered by "every") are skipped while live refresh is
  // paused, and a table is not refreshed under the user's selection.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    var trigger = evt.detail.requestConfig && evt.detail.requestConfig.triggeringEvent;
    var polling = elt.classList && elt.classList.contains("poll") && (!trigger || trigger.type !== "click");
    if (polling && elt.getAttribute("hx-trigger") && elt.getAttribute("hx-trigger").indexOf("every") >= 0) {
      if (!live() || anySelected(elt) || document.activeElement && elt.contains(document.activeElement) &&
          document.activeElement.tagName === "INPUT") {
        evt.preventDefault();
      }
    }
  });

  function localTimes(root) {
    var fmt;
    try { fmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" }); } catch (e) { return; }
    root.querySelectorAll("time[datetime]:not([data-local])").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) { return; }
      t.setAttribute("data-local", "1");
      if (t.closest("td") && t.closest("table.tasks, table.errors, table.servers, table.entries")) {
        t.title = fmt.format(d) + " (local)";  // tables stay compact: local time on hover
        return;
      }
      var span = document.createElement("span");
      span.className = "local";
      span.textContent = " (" + fmt.format(d) + " local)";
      t.after(span);
    });
  }

  function selection(root) {
    root.querySelectorAll("input.select-all").forEach(function (all) {
      if (all.dataset.bound) { return; }
      all.dataset.bound = "1";
      all.addEventListener("change", function () {
        var table = all.closest("table");
        table.querySelectorAll("input[name=ids]").forEach(function (c) { c.checked = all.checked; });
        bulkState(table.closest("form"));
      });
    });
    root.querySelectorAll("form#task-form").forEach(function (f) {
      if (f.dataset.bound) { return; }
      f.dataset.bound = "1";
      f.addEventListener("change", function () { bulkState(f); });
      bulkState(f);
    });
  }

  function bulkState(form) {
    if (!form) { return; }
    var n = form.querySelectorAll("input[name=ids]:checked").length;
    form.querySelectorAll("[data-needs-selection]").forEach(function (b) { b.disabled = n === 0; });
  }

  function init(root) { localTimes(root); selection(root); }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("live-toggle");
    if (toggle) {
      toggle.checked = live();
      toggle.addEventListener("change", function () { localStorage.setItem(LIVE_KEY, toggle.checked ? "on" : "off"); });
    }
    init(document);
  });
  document.addEventListener("htmx:load", function (evt) { init(evt.detail.elt.parentElement || document); });

  // An error answer the server addressed to #messages (HX-Retarget: the Redis-down banner's message, a refused
  // action) is shown there; htmx swaps no 4xx/5xx answer by itself. Others stay unswapped.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr && xhr.status >= 400 && xhr.getResponseHeader("HX-Retarget") === "#messages") {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  // Once a request succeeds again, Redis answers: its "unavailable" message goes.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr && xhr.status > 0 && xhr.status < 400) {
      document.querySelectorAll("#messages .redis-down").forEach(function (m) { m.remove(); });
    }
  });
})();
