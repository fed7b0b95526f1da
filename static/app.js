// asynqpy dashboard: live-refresh pause (and while the tab is hidden), select-all checkboxes with the selected
// count, confirmations with counts, local times. No inline script anywhere (CSP).
(function () {
  "use strict";
  var LIVE_KEY = "asynqpy.live";

  function live() { return localStorage.getItem(LIVE_KEY) !== "off"; }

  function anySelected(el) {
    return !!(el && el.querySelector && el.querySelector("input[name=ids]:checked"));
  }

  function isPolling(elt, trigger) {
    return !!(elt.classList && elt.classList.contains("poll") && (!trigger || trigger.type !== "click") &&
      elt.getAttribute("hx-trigger") && elt.getAttribute("hx-trigger").indexOf("every") >= 0);
  }

  // The page's own refresh says so (X-Asynqpy-Poll): the server does not count it as the user's activity, so an
  // open tab does not keep an idle session alive.
  document.addEventListener("htmx:configRequest", function (evt) {
    if (isPolling(evt.detail.elt, evt.detail.triggeringEvent)) { evt.detail.headers["X-Asynqpy-Poll"] = "1"; }
  });

  // Polling requests (elements with class "poll" triggered by "every") are skipped while live refresh is
  // paused or the tab is hidden (the next tick after it shows again refreshes), and a table is not refreshed under the user's selection.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    var trigger = evt.detail.requestConfig && evt.detail.requestConfig.triggeringEvent;
    if (isPolling(elt, trigger)) {
      if (!live() || document.hidden || anySelected(elt) || document.activeElement && elt.contains(document.activeElement) &&
          document.activeElement.tagName === "INPUT") {
        evt.preventDefault();
      }
    }
  });

  // Errors: htmx-config's responseHandling swaps 4xx/5xx answers (the server retargets them to #messages with
  // their message). The Redis banner comes with a 503 (out of band) and goes with the next answer that is not an
  // error; an error page waiting for Redis reloads itself once its address answers again.
  function banner() { return document.getElementById("redis-banner"); }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (!xhr || xhr.status < 400) { return; }
    if (xhr.getResponseHeader("HX-Retarget")) {  // the dashboard's own error: its message goes to #messages
      evt.detail.selectOverride = "p.message";  // not the hx-select of the element that asked (e.g. #queue-body)
      return;
    }
    evt.detail.shouldSwap = false;  // someone else's error page (a proxy's 502): keep the page as it is
    showMessage("The dashboard answered " + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") +
      "; the page is kept as it was.");
  });

  document.addEventListener("htmx:afterRequest", function (evt) {
    var xhr = evt.detail.xhr;
    if (!xhr || !xhr.status) {  // no answer at all: the dashboard itself is unreachable
      showMessage("The dashboard did not answer; it is retried on the next refresh.");
      return;
    }
    if (xhr.status < 400) {
      var b = banner();
      if (b && !b.hidden) { b.hidden = true; b.textContent = ""; }
      // and the "Redis is unavailable" message a failed refresh left (an action's own messages stay)
      document.querySelectorAll("#messages .redis-down").forEach(function (m) { m.remove(); });
      if (evt.detail.elt.classList && evt.detail.elt.classList.contains("reload-when-ok")) { window.location.reload(); }
    }
  });

  function showMessage(text) {
    var box = document.getElementById("messages");
    if (!box) { return; }
    var p = document.createElement("p");
    p.className = "message error";
    p.setAttribute("role", "status");
    p.textContent = text;
    box.replaceChildren(p);
  }

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
    form.querySelectorAll("[data-selected-count]").forEach(function (c) {
      c.textContent = n === 0 ? "none" : n + (n === 1 ? " task" : " tasks");
    });
  }

  // Destructive actions on the selection ask first, with the count: data-confirm's "{n}" is the number of
  // checked rows and "{tasks}" says "1 task" or "N tasks" (hx-confirm's text is fixed when the page is drawn).
  function confirmText(elt) {
    var form = elt.closest("form");
    var n = form ? form.querySelectorAll("input[name=ids]:checked").length : 0;
    return elt.getAttribute("data-confirm").replace("{n}", String(n))
      .replace("{tasks}", n + (n === 1 ? " task" : " tasks"));
  }

  document.addEventListener("htmx:confirm", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-confirm")) { return; }
    evt.preventDefault();
    if (window.confirm(confirmText(elt))) { evt.detail.issueRequest(true); }
  });

  // Without htmx (a plain form post) the same question comes from the submit event.
  document.addEventListener("submit", function (evt) {
    var btn = evt.submitter;
    if (btn && btn.hasAttribute("data-confirm") && !window.htmx && !window.confirm(confirmText(btn))) {
      evt.preventDefault();
    }
  });

  // Copy buttons (data-copy names the element whose text is copied): the clipboard API where the page is a
  // secure context, else a selection and execCommand; the button says what happened.
  document.addEventListener("click", function (evt) {
    var btn = evt.target.closest && evt.target.closest("button[data-copy]");
    if (!btn) { return; }
    var src = document.querySelector(btn.getAttribute("data-copy"));
    if (!src) { return; }
    var text = src.textContent;
    var said = function (ok) { btn.textContent = ok ? "Copied" : "Select and copy by hand"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { said(true); }, function () { said(false); });
      return;
    }
    var area = document.createElement("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    try { said(document.execCommand("copy")); } catch (e) { said(false); }
    area.remove();
  });

  // A background job just started by an "all" button: its progress card comes into view where the user looks
  // (the button is at the end of the table; the page's message is at its top).
  function showStartedJob(root) {
    var card = root.querySelector && root.querySelector(".job[data-just-started]");
    if (card) {
      card.removeAttribute("data-just-started");
      card.scrollIntoView({ block: "center", behavior: "smooth" });
    }
  }

  function init(root) { localTimes(root); selection(root); showStartedJob(root); }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("live-toggle");
    if (toggle) {
      toggle.checked = live();
      toggle.addEventListener("change", function () { localStorage.setItem(LIVE_KEY, toggle.checked ? "on" : "off"); });
    }
    var control = document.getElementById("live-control");
    if (control && document.querySelector(".poll")) { control.hidden = false; }  // said only where it is true
    init(document);
  });
  document.addEventListener("htmx:load", function (evt) { init(evt.detail.elt.parentElement || document); });

})();
