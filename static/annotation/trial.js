// The trial page of every study kind: synchronized zoom/scroll across the panes, flicker, target
// and element boxes placed from data-* attributes (the CSP forbids inline styles), keyboard
// shortcuts, and htmx swaps. Kind pages (SPEC §11) describe their keys in the markup rather than
// here: a radio with data-key="y" is chosen by y, an element with data-focus-key="e" is focused
// by e, a [data-question] answers the digits by position, or by value with data-digits="value".
"use strict";
(function () {
  var zoom = 1; // 1 = fit pane width; kept across trials
  var flicker = false;
  var syncing = false;

  function root() { return document.getElementById("trial-root"); }

  function placeBoxes(scope) {
    scope.querySelectorAll(".target-box[data-bbox]").forEach(function (box) {
      var v = box.getAttribute("data-bbox").split(",").map(Number);
      if (v.length !== 4 || v.some(isNaN)) { return; }
      box.style.left = (v[0] / 10) + "%";
      box.style.top = (v[1] / 10) + "%";
      box.style.width = Math.max(v[2] - v[0], 0) / 10 + "%";
      box.style.height = Math.max(v[3] - v[1], 0) / 10 + "%";
    });
  }

  function applyZoom() {
    var r = root();
    if (!r) { return; }
    r.querySelectorAll("[data-canvas]").forEach(function (c) { c.style.width = (zoom * 100) + "%"; });
  }

  function setZoom(z) { zoom = Math.min(Math.max(z, 0.5), 4); applyZoom(); }

  function applyFlicker() {
    var viewer = document.querySelector("[data-viewer]");
    var button = document.querySelector("[data-action=flicker]");
    if (viewer) { viewer.classList.toggle("flicker", flicker); }
    if (button) { button.setAttribute("aria-pressed", flicker ? "true" : "false"); }
  }

  function syncScroll(scope) {
    var scrollers = Array.prototype.slice.call(scope.querySelectorAll("[data-scroller]"));
    scrollers.forEach(function (s) {
      s.addEventListener("scroll", function () {
        if (syncing) { return; }
        syncing = true;
        scrollers.forEach(function (o) {
          if (o !== s) { o.scrollTop = s.scrollTop; o.scrollLeft = s.scrollLeft; }
        });
        window.requestAnimationFrame(function () { syncing = false; });
      }, { passive: true });
    });
  }

  function form() { return document.querySelector("[data-answer-form]"); }

  function checkedVerdict(f) {
    var v = f.querySelector("input[name=verdict]:checked");
    return v ? v.value : "";
  }

  function updateAxesState(f) {
    var cannot = checkedVerdict(f) === "CANNOT_JUDGE";
    f.querySelectorAll("[data-axis-fieldset]").forEach(function (fs) { fs.disabled = cannot; });
    var axes = f.querySelector("[data-axes]");
    if (axes) { axes.classList.toggle("inactive", cannot); }
    highlight(f, nextQuestion(f, -1));
  }

  function questions(f) {
    return Array.prototype.slice.call(f.querySelectorAll("[data-question]")).filter(function (q) { return !q.disabled; });
  }

  function answered(q) { return !!q.querySelector("input:checked"); }

  function nextQuestion(f, after) {
    var qs = questions(f);
    for (var i = after + 1; i < qs.length; i++) { if (!answered(qs[i])) { return qs[i]; } }
    for (var j = 0; j < qs.length; j++) { if (!answered(qs[j])) { return qs[j]; } }
    return null;
  }

  function highlight(f, q) {
    questions(f).concat(Array.prototype.slice.call(f.querySelectorAll("[data-question]"))).forEach(function (x) {
      x.classList.remove("current");
    });
    if (q) { q.classList.add("current"); }
  }

  function current(f) { return f.querySelector("[data-question].current") || nextQuestion(f, -1); }

  function answerDigit(f, digit) {
    var q = current(f);
    if (!q) { return; }
    var radio = q.getAttribute("data-digits") === "value"
      ? q.querySelector("input[type=radio][value='" + digit + "']")
      : q.querySelectorAll("input[type=radio]")[digit - 1];
    if (!radio) { return; }
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    var qs = questions(f);
    highlight(f, nextQuestion(f, qs.indexOf(q)) || q);
  }

  function setVerdict(f, value) {
    var radio = f.querySelector("input[name=verdict][value=" + value + "]");
    if (!radio) { return; }
    radio.checked = true;
    updateAxesState(f);
  }

  // A radio named by its data-key (kind pages), chosen as if clicked.
  function chooseByKey(f, key) {
    var radio = f.querySelector("input[type=radio][data-key='" + key + "']");
    if (!radio || radio.disabled) { return false; }
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  function submit(f) {
    if (typeof f.requestSubmit === "function") { f.requestSubmit(); } else { f.submit(); }
  }

  function init(scope) {
    var trial = scope.matches && scope.matches("[data-trial]") ? scope
      : (scope.querySelector ? scope.querySelector("[data-trial]") : null);
    if (!trial || trial.hasAttribute("data-ready")) { return; }
    trial.setAttribute("data-ready", "");
    placeBoxes(trial);
    applyZoom();
    applyFlicker();
    syncScroll(trial);
    var f = form();
    if (!f) { return; }
    f.addEventListener("change", function (e) {
      if (e.target.name === "verdict") { updateAxesState(f); return; }
      var q = e.target.closest("[data-question]");
      if (q) { highlight(f, nextQuestion(f, questions(f).indexOf(q)) || q); }
    });
    f.addEventListener("focusin", function (e) {
      var q = e.target.closest("[data-question]");
      if (q) { highlight(f, q); }
    });
    updateAxesState(f);
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest("[data-action]");
    if (!button) { return; }
    var action = button.getAttribute("data-action");
    if (action === "zoom-in") { setZoom(zoom + 0.25); }
    else if (action === "zoom-out") { setZoom(zoom - 0.25); }
    else if (action === "zoom-fit") { setZoom(1); }
    else if (action === "flicker") { flicker = !flicker; applyFlicker(); }
  });

  document.addEventListener("keydown", function (e) {
    var f = form();
    if (!f) { return; }
    var t = e.target;
    // Ctrl+Enter submits from anywhere in the form, the rationale/evidence box included.
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.altKey && t && f.contains(t)) {
      e.preventDefault();
      submit(f);
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) { return; }
    var typing = t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type !== "radio" && t.type !== "checkbox"));
    if (typing) {
      if (e.key === "Escape") { t.blur(); }
      return;
    }
    var key = e.key;
    var letter = /^[a-z]$/i.test(key) ? key.toLowerCase() : ""; // safe inside a selector
    var keyed = !!f.querySelector("[data-key]");
    var focusTarget = letter ? f.querySelector("[data-focus-key='" + letter + "']") : null;
    var handled = true;
    if (keyed && letter && chooseByKey(f, letter)) { /* chosen */ }
    else if (focusTarget) { focusTarget.focus(); }
    // The pairwise_reference page names its verdicts by value (no data-key).
    else if (!keyed && letter === "a") { setVerdict(f, "A"); }
    else if (!keyed && letter === "b") { setVerdict(f, "B"); }
    else if (!keyed && letter === "t") { setVerdict(f, "TIE"); }
    else if (!keyed && letter === "x") { setVerdict(f, "CANNOT_JUDGE"); }
    else if (key >= "1" && key <= "9" && key.length === 1) { answerDigit(f, Number(key)); }
    else if (key === "Enter") {
      if (t && (t.tagName === "BUTTON" || t.tagName === "A" || t.tagName === "SUMMARY")) { return; }
      submit(f);
    }
    else if ((key === "f" || key === "F") && document.querySelector("[data-action=flicker]")) {
      flicker = !flicker; applyFlicker();
    }
    else if (key === "+" || key === "=") { setZoom(zoom + 0.25); }
    else if (key === "-" || key === "_") { setZoom(zoom - 0.25); }
    else if (key === "0") { setZoom(1); }
    else if (key === "i" || key === "I") {
      var d = document.querySelector("[data-instructions]");
      if (d) { d.open = !d.open; }
    }
    else { handled = false; }
    if (handled) { e.preventDefault(); }
  });

  // Validation errors (400) and stale trials (409) come back as a trial page to show.
  document.addEventListener("htmx:beforeSwap", function (e) {
    var status = e.detail.xhr ? e.detail.xhr.status : 0;
    if (status === 400 || status === 403 || status === 409) {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });

  document.addEventListener("htmx:load", function (e) { init(e.detail.elt || document); });
  document.addEventListener("DOMContentLoaded", function () { init(document); });
})();
