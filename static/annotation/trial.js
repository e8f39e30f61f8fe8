// The trial page of every study kind: synchronized zoom/scroll across the panes, flicker, target
// and element boxes placed from data-* attributes (the CSP forbids inline styles), keyboard
// shortcuts, and htmx swaps. Kind pages (SPEC §11) describe their keys in the markup rather than
// here: a radio with data-key="y" is chosen by y, an element with data-focus-key="e" is focused
// by e, a [data-question] answers the digits by position, or by value with data-digits="value".
// Zoom (buttons, keys, Ctrl+wheel and pinch around the pointer) and pan (drag) act on every pane
// at once and carry over to the next trial; flicker starts off on every trial. After a swap the
// focus is on the trial itself, so the next shortcut answers. Single-key shortcuts can be
// switched off (WCAG 2.1.4); the choice is kept in this browser (localStorage).
"use strict";
(function () {
  var ZOOM_KEY = "arbiter.zoom";
  var SHORTCUTS_KEY = "arbiter.single-key-shortcuts";
  var zoom = 1; // 1 = fit pane width; kept across trials (and reloads, in this tab)
  var flicker = false;
  var syncing = false;

  function stored(storage, key) {
    try { return window[storage].getItem(key); } catch (err) { return null; }
  }
  function store(storage, key, value) {
    try { window[storage].setItem(key, value); } catch (err) { /* private mode: not kept */ }
  }
  zoom = Math.min(Math.max(Number(stored("sessionStorage", ZOOM_KEY)) || 1, 0.5), 6);
  // What zoom 1 fits (issue 30): "page", the whole page in its pane (as wide as the pane when the
  // page is wider than tall for it, so it is also the default for short pages), or "width".
  var FIT_KEY = "arbiter.fit";
  var fit = stored("sessionStorage", FIT_KEY) === "width" ? "width" : "page";

  function shortcutsOn() { return stored("localStorage", SHORTCUTS_KEY) !== "off"; }

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

  // The canvas width at zoom 1: the pane's width, or in "page" mode the width at which the whole
  // page height fits the pane (its image's own aspect: natural size, else its width/height attributes).
  function fitWidth(c) {
    var s = c.closest("[data-scroller]");
    var img = c.querySelector(".page-img");
    if (!s || !img) { return null; }
    var w = s.clientWidth, h = s.clientHeight;
    var iw = img.naturalWidth || Number(img.getAttribute("width")) || 0;
    var ih = img.naturalHeight || Number(img.getAttribute("height")) || 0;
    if (fit !== "page" || !w || !h || !iw || !ih) { return null; }
    return Math.max(Math.min(w, (h - 1) * iw / ih), 1);
  }

  function applyZoom() {
    var r = root();
    if (!r) { return; }
    r.querySelectorAll("[data-canvas]").forEach(function (c) {
      var base = fitWidth(c);
      c.style.width = base === null ? (zoom * 100) + "%" : Math.floor(base * zoom) + "px";
    });
    r.querySelectorAll("[data-zoom-level]").forEach(function (o) { o.textContent = Math.round(zoom * 100) + "%"; });
    r.querySelectorAll("[data-action=zoom-fit], [data-action=zoom-fit-width]").forEach(function (b) {
      var mine = b.getAttribute("data-action") === "zoom-fit" ? "page" : "width";
      b.setAttribute("aria-pressed", fit === mine && zoom === 1 ? "true" : "false");
    });
  }

  function setFit(mode) {
    fit = mode;
    store("sessionStorage", FIT_KEY, mode);
    zoom = 1;
    store("sessionStorage", ZOOM_KEY, "1");
    applyZoom();
    document.querySelectorAll("[data-scroller]").forEach(function (s) { s.scrollTop = 0; s.scrollLeft = 0; });
  }

  function visibleScroller() {
    var all = Array.prototype.slice.call(document.querySelectorAll("[data-scroller]"));
    return all.filter(function (s) { return s.offsetParent !== null; })[0] || all[0] || null;
  }

  // Zoom to z keeping the image point under (x, y) (client coordinates; default: the pane's
  // centre) where it is; every pane follows the one zoomed (their scroll is synchronized).
  function setZoom(z, scroller, x, y) {
    var next = Math.min(Math.max(z, 0.5), 6);
    var s = scroller || visibleScroller();
    if (!s || next === zoom) { zoom = next; applyZoom(); store("sessionStorage", ZOOM_KEY, String(zoom)); return; }
    var box = s.getBoundingClientRect();
    var px = (x === undefined ? box.width / 2 : x - box.left);
    var py = (y === undefined ? box.height / 2 : y - box.top);
    var ratio = next / zoom;
    var left = (s.scrollLeft + px) * ratio - px;
    var top = (s.scrollTop + py) * ratio - py;
    zoom = next;
    applyZoom();
    store("sessionStorage", ZOOM_KEY, String(zoom));
    s.scrollLeft = left;
    s.scrollTop = top;
    s.dispatchEvent(new Event("scroll"));
  }

  function zoomAndPan(scope) {
    scope.querySelectorAll("[data-scroller]").forEach(function (s) {
      s.addEventListener("wheel", function (e) {
        if (!e.ctrlKey) { return; } // a trackpad pinch arrives as Ctrl+wheel too
        e.preventDefault();
        setZoom(zoom * Math.exp(-e.deltaY / 300), s, e.clientX, e.clientY);
      }, { passive: false });
      // Drag to pan with the mouse (touch pans natively).
      var drag = null;
      s.addEventListener("pointerdown", function (e) {
        if (e.pointerType !== "mouse" || e.button !== 0) { return; }
        drag = { x: e.clientX, y: e.clientY, left: s.scrollLeft, top: s.scrollTop };
        e.preventDefault(); // no text selection starts here (and none follows the pointer out)
        var sel = window.getSelection && window.getSelection();
        if (sel && sel.rangeCount) { sel.removeAllRanges(); }
        s.classList.add("dragging");
        document.body.classList.add("panning");
        try { s.setPointerCapture(e.pointerId); } catch (err) { /* not capturable */ }
      });
      s.addEventListener("pointermove", function (e) {
        if (!drag) { return; }
        s.scrollLeft = drag.left - (e.clientX - drag.x);
        s.scrollTop = drag.top - (e.clientY - drag.y);
      });
      function end() { drag = null; s.classList.remove("dragging"); document.body.classList.remove("panning"); }
      s.addEventListener("pointerup", end);
      s.addEventListener("pointercancel", end);
      // Pinch with two fingers zooms around their midpoint (touch events: the browser's own
      // panning cancels pointer events, not these).
      var pinch = null;
      function spread(t) { return Math.hypot(t[0].clientX - t[1].clientX, t[0].clientY - t[1].clientY) || 1; }
      s.addEventListener("touchstart", function (e) {
        pinch = e.touches.length === 2 ? { dist: spread(e.touches), zoom: zoom } : null;
      }, { passive: true });
      s.addEventListener("touchmove", function (e) {
        if (!pinch || e.touches.length !== 2) { return; }
        e.preventDefault();
        var t = e.touches;
        setZoom(pinch.zoom * spread(t) / pinch.dist, s, (t[0].clientX + t[1].clientX) / 2, (t[0].clientY + t[1].clientY) / 2);
      }, { passive: false });
      s.addEventListener("touchend", function (e) { if (e.touches.length < 2) { pinch = null; } }, { passive: true });
    });
  }

  // Phones: one viewer with Reference / A / B tabs (arrow keys in the tab list, ← → elsewhere, swipe).
  function showTab(viewer, name, focus) {
    var tabs = Array.prototype.slice.call(viewer.querySelectorAll("[role=tab]"));
    if (!tabs.length) { return; }
    var before = visibleScroller();
    var left = before ? before.scrollLeft : 0, top = before ? before.scrollTop : 0;
    viewer.setAttribute("data-tab", name);
    var after = visibleScroller();
    if (after && after !== before) { after.scrollLeft = left; after.scrollTop = top; } // same place in every image
    tabs.forEach(function (t) {
      var on = t.getAttribute("data-tab-for") === name;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      if (on && focus) { t.focus(); }
    });
  }

  function stepTab(viewer, step, focus) {
    var tabs = Array.prototype.slice.call(viewer.querySelectorAll("[role=tab]"));
    if (!tabs.length) { return false; }
    var i = tabs.findIndex(function (t) { return t.getAttribute("aria-selected") === "true"; });
    var next = tabs[(i + step + tabs.length) % tabs.length];
    showTab(viewer, next.getAttribute("data-tab-for"), focus);
    return true;
  }

  function tabsShown(viewer) {
    var list = viewer && viewer.querySelector("[role=tablist]");
    return !!(list && list.offsetParent !== null);
  }

  function tabs(viewer) {
    viewer.addEventListener("click", function (e) {
      var tab = e.target.closest("[role=tab]");
      if (tab) { showTab(viewer, tab.getAttribute("data-tab-for"), false); }
    });
    var list = viewer.querySelector("[role=tablist]");
    if (list) {
      list.addEventListener("keydown", function (e) {
        if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
          e.preventDefault();
          e.stopPropagation();
          stepTab(viewer, e.key === "ArrowRight" ? 1 : -1, true);
        }
      });
    }
    var start = null;
    viewer.addEventListener("touchstart", function (e) {
      start = e.touches.length === 1 && zoom <= 1 ? { x: e.touches[0].clientX, y: e.touches[0].clientY } : null;
    }, { passive: true });
    viewer.addEventListener("touchend", function (e) {
      if (!start || !tabsShown(viewer) || !e.changedTouches.length) { return; }
      var dx = e.changedTouches[0].clientX - start.x, dy = e.changedTouches[0].clientY - start.y;
      if (Math.abs(dx) > 60 && Math.abs(dx) > 2 * Math.abs(dy)) { stepTab(viewer, dx < 0 ? 1 : -1, false); }
      start = null;
    }, { passive: true });
  }

  function applyShortcutSwitch() {
    var on = shortcutsOn();
    document.body.classList.toggle("no-single-key", !on);
    document.querySelectorAll("[data-shortcuts-switch]").forEach(function (c) { c.checked = on; });
  }

  // The trial takes the height left below the page header (CSS reads --trial-top).
  function measureTop() {
    var t = document.querySelector("[data-trial]");
    if (!t) { return; }
    var top = t.getBoundingClientRect().top + window.scrollY;
    document.documentElement.style.setProperty("--trial-top", Math.max(Math.round(top), 0) + "px");
  }

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
    // Axes still as the verdict key set them follow a changed verdict.
    var field = defaultedField(f), value = AXIS_OF_VERDICT[checkedVerdict(f)];
    if (field && field.value && value !== undefined) {
      field.value.split(",").forEach(function (id) {
        var radio = f.querySelector("input[type=radio][name='axis:" + id + "'][value='" + value + "']");
        if (radio) { radio.checked = true; }
      });
    }
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

  // The question the digits answer is the highlighted one, and only it (issue 30): once every
  // question is answered nothing is highlighted, so a stray digit changes nothing; a click or Tab
  // into a question highlights it again.
  function highlight(f, q) {
    Array.prototype.slice.call(f.querySelectorAll("[data-question]")).forEach(function (x) {
      x.classList.remove("current");
      x.removeAttribute("aria-current");
    });
    if (q) { q.classList.add("current"); q.setAttribute("aria-current", "true"); }
  }

  function current(f) { return f.querySelector("[data-question].current"); }

  function digitsOn(f) { return f.getAttribute("data-digit-keys") !== "off"; }

  // "v": every active axis to the verdict's side (A better / B better / Equal for a tie); the
  // rater can change any afterwards. The axes so set and left unchanged go in axes_defaulted.
  var AXIS_OF_VERDICT = { A: "1", B: "-1", TIE: "0" };
  function defaultedField(f) { return f.querySelector("[data-axes-defaulted]"); }
  function axesFollowVerdict(f) {
    var value = AXIS_OF_VERDICT[checkedVerdict(f)];
    if (value === undefined || !f.querySelector("[data-action=axes-follow]")) { return false; }
    var names = [];
    f.querySelectorAll("[data-axis-fieldset]").forEach(function (fs) {
      if (fs.disabled) { return; }
      var radio = fs.querySelector("input[type=radio][value='" + value + "']");
      if (!radio) { return; }
      radio.checked = true;
      names.push(radio.name.replace(/^axis:/, ""));
    });
    var field = defaultedField(f);
    if (field) { field.value = names.join(","); }
    highlight(f, nextQuestion(f, -1));
    return true;
  }
  function axisChangedByHand(f, radio) {
    var field = defaultedField(f);
    if (!field || !field.value || !radio.name || radio.name.indexOf("axis:") !== 0) { return; }
    var id = radio.name.slice(5);
    field.value = field.value.split(",").filter(function (n) { return n && n !== id; }).join(",");
  }

  function answerDigit(f, digit) {
    if (!digitsOn(f)) { return; }
    var q = current(f);
    if (!q) { return; }
    var radio = q.getAttribute("data-digits") === "value"
      ? q.querySelector("input[type=radio][value='" + digit + "']")
      : q.querySelectorAll("input[type=radio]")[digit - 1];
    if (!radio) { return; }
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
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
    flicker = false; // every trial starts showing the candidates
    applyFlicker();
    syncScroll(trial);
    zoomAndPan(trial);
    var viewer = trial.querySelector("[data-viewer]");
    if (viewer) { tabs(viewer); }
    applyShortcutSwitch();
    measureTop();
    applyZoom(); // the panes have their height now
    // ... and keep it: a pane that changes size (the instructions open, fonts load) fits again.
    if (window.ResizeObserver) {
      var sizes = new WeakMap();
      var watcher = new ResizeObserver(function (entries) {
        var changed = entries.some(function (en) {
          var key = Math.round(en.contentRect.width) + "x" + Math.round(en.contentRect.height);
          var was = sizes.get(en.target);
          sizes.set(en.target, key);
          return was !== undefined && was !== key;
        });
        if (changed) { applyZoom(); }
      });
      trial.querySelectorAll("[data-scroller]").forEach(function (sc) { watcher.observe(sc); });
    }
    // The trial, not a text box htmx kept the focus in, takes the next key.
    if (scope !== document || document.activeElement === document.body) { trial.focus({ preventScroll: true }); }
    var f = form();
    if (!f) { return; }
    f.addEventListener("change", function (e) {
      if (e.target.name === "verdict") { updateAxesState(f); return; }
      axisChangedByHand(f, e.target);
      var q = e.target.closest("[data-question]");
      if (q) { highlight(f, nextQuestion(f, questions(f).indexOf(q))); }
    });
    f.addEventListener("focusin", function (e) {
      var q = e.target.closest("[data-question]");
      if (q) { highlight(f, q); }
    });
    updateAxesState(f);
  }

  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-shortcuts-switch]")) {
      store("localStorage", SHORTCUTS_KEY, e.target.checked ? "on" : "off");
      applyShortcutSwitch();
    }
  });

  window.addEventListener("resize", function () { measureTop(); applyZoom(); });
  // A page image's own size is known once it loads ("page" mode fits it).
  document.addEventListener("load", function (e) {
    if (e.target && e.target.classList && e.target.classList.contains("page-img")) { applyZoom(); }
  }, true);
  // A pan that leaves its pane selects nothing on the way.
  document.addEventListener("selectstart", function (e) {
    if (document.body.classList.contains("panning")) { e.preventDefault(); }
  });

  document.addEventListener("click", function (e) {
    var toggle = e.target.closest("[data-problem-toggle]");
    if (toggle) {
      var panel = document.getElementById(toggle.getAttribute("aria-controls"));
      var open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      if (panel) { panel.hidden = !open; }
      return;
    }
    var button = e.target.closest("[data-action]");
    if (!button) { return; }
    var action = button.getAttribute("data-action");
    if (action === "zoom-in") { setZoom(zoom + 0.25); }
    else if (action === "zoom-out") { setZoom(zoom - 0.25); }
    else if (action === "zoom-fit") { setFit("page"); }
    else if (action === "zoom-fit-width") { setFit("width"); }
    else if (action === "flicker") { flicker = !flicker; applyFlicker(); }
    else if (action === "axes-follow" && form()) { axesFollowVerdict(form()); }
  });

  document.addEventListener("keydown", function (e) {
    var f = form();
    if (!f) { return; }
    var t = e.target;
    // Ctrl+Enter submits from anywhere in the form, the rationale/evidence box included.
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.altKey && (!t || !t.closest || !t.closest("[data-problem]"))) {
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
    var viewer = document.querySelector("[data-viewer]");
    if ((key === "ArrowLeft" || key === "ArrowRight") && tabsShown(viewer) && !(t && t.type === "radio")) {
      stepTab(viewer, key === "ArrowRight" ? 1 : -1, false);
      e.preventDefault();
      return;
    }
    if (key.length === 1 && !shortcutsOn()) { return; } // WCAG 2.1.4: single-character keys are off
    if (key === "Enter" && t && t.closest && t.closest("[data-problem]")) { return; }
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
    else if ((key === "v" || key === "V") && f.querySelector("[data-action=axes-follow]")) { axesFollowVerdict(f); }
    else if (key === "Enter") {
      // A tapped image tab (phones) keeps the focus: Enter there submits, as it does on the trial.
      var tab = t && t.getAttribute && t.getAttribute("role") === "tab";
      if (!tab && t && (t.tagName === "BUTTON" || t.tagName === "A" || t.tagName === "SUMMARY")) { return; }
      submit(f);
    }
    else if ((key === "f" || key === "F") && document.querySelector("[data-action=flicker]")) {
      flicker = !flicker; applyFlicker();
    }
    else if (key === "+" || key === "=") { setZoom(zoom + 0.25); }
    else if (key === "-" || key === "_") { setZoom(zoom - 0.25); }
    else if (key === "0") { setFit("page"); }
    else if (key === "w" || key === "W") { setFit("width"); }
    else if (key === "z" || key === "Z") {
      var undo = document.querySelector("button[form=undo-form]");
      if (undo) { undo.click(); }
    }
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

  // An answer lost on the way (the node serving it died, the load balancer answered 502/503/504, or
  // the network dropped) is sent again, same form, same idempotency key: the server stores it once
  // and answers a repeat with the same next trial (docs/deploy.md, "Losing a node"). Five tries,
  // 0.5 s apart and doubling; any other error is shown as htmx shows it.
  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail.elt;
    if (!elt || elt.tagName !== "FORM" || !elt.querySelector("[name=idempotency_key]")) { return; }
    var status = e.detail.xhr ? e.detail.xhr.status : 0;
    var tries = Number(elt.dataset.resent || 0);
    if (e.detail.successful || !(status === 0 || status === 502 || status === 503 || status === 504) || tries >= 5) {
      delete elt.dataset.resent;
      return;
    }
    elt.dataset.resent = String(tries + 1);
    window.setTimeout(function () {
      if (document.body.contains(elt)) { htmx.trigger(elt, "submit"); }
    }, 500 * Math.pow(2, tries));
  });

  // htmx puts the focus back on an element with the old one's id (the rationale box) right after
  // the swap; the new trial takes it at once, so a key pressed before the swap settles answers.
  document.addEventListener("htmx:afterSwap", function (e) {
    var target = e.detail.target;
    if (!target || target.id !== "trial-root") { return; }
    init(target); // zoom, flicker and the boxes at once, not after the settle delay
    var trial = target.querySelector("[data-trial]");
    if (trial) { trial.focus({ preventScroll: true }); }
  });

  document.addEventListener("htmx:load", function (e) {
    var elt = e.detail.elt || document;
    // A problem report's thank-you closes by itself after a few seconds (the status was announced).
    if (elt.matches && elt.matches("[data-problem]") && elt.querySelector("[role=status]")) {
      window.setTimeout(function () {
        var toggle = elt.querySelector("[data-problem-toggle]");
        var panel = elt.querySelector(".problem-panel");
        if (toggle && panel && document.body.contains(elt)) { toggle.setAttribute("aria-expanded", "false"); panel.hidden = true; }
      }, 6000);
    }
    init(elt);
  });
  document.addEventListener("DOMContentLoaded", function () { init(document); });
})();
