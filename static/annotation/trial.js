// The trial page of every study kind: synchronized zoom/scroll across the panes, flicker, target
// and element boxes placed from data-* attributes (the CSP forbids inline styles), keyboard
// shortcuts, and htmx swaps. Kind pages (docs/study-kinds.md "The rater pages") describe their keys in the markup rather than
// here: a radio with data-key="y" is chosen by y, an element with data-focus-key="e" is focused
// by e, a [data-question] answers the digits by position, or by value with data-digits="value".
// Every pane shows its page at one scale, read out as it is (rendered px / natural px); the
// default is chosen per trial from the page's shape and the panes' size, never below 60 % (issue
// 40). Zoom (buttons, keys, Ctrl+wheel and pinch around the pointer) and pan (drag) act on every
// pane at once; a zoomed scale carries over to the next trial. An overview strip (the pages small,
// the view marked, click to go there) and a loupe (hold l: the same part of every page at 100 %)
// are built here from the panes' own images. Flicker starts off on every trial. After a swap the
// focus is on the trial itself, so the next shortcut answers. Single-key shortcuts can be
// switched off (WCAG 2.1.4); the choice is kept in this browser (localStorage).
"use strict";
(function () {
  var VIEW_KEY = "arbiter.view";
  var SHORTCUTS_KEY = "arbiter.single-key-shortcuts";
  // The view (issue 40): "auto", the default chosen from the page's shape and the pane's size
  // (legibleScale below); "page", the whole page; "width", the pane's width; or a scale the rater
  // zoomed to, a number. Every pane shows its page at the same scale, and the readout is that true
  // scale (rendered px / natural px of the trial's page). A zoomed scale carries over to the next
  // trial (this tab only); the fit modes are fitted again on every trial.
  var view = "auto";
  var scale = 1; // the scale shown now
  var flicker = false;
  // The default view never shows a page below 2/3 of its pixels (issue 45): body text of 15 CSS px is
  // then 10 px or more on screen (decision 0062).
  var LEGIBLE = 2 / 3;
  var STEPS = [0.25, 0.33, 0.5, 0.6, 0.67, 0.75, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6];

  function stored(storage, key) {
    try { return window[storage].getItem(key); } catch (err) { return null; }
  }
  function store(storage, key, value) {
    try { window[storage].setItem(key, value); } catch (err) { /* private mode: not kept */ }
  }
  (function () {
    var v = stored("sessionStorage", VIEW_KEY);
    if (v === "page" || v === "width") { view = v; }
    else if (v && isFinite(Number(v)) && Number(v) > 0) { view = Math.min(Math.max(Number(v), 0.1), 6); }
  })();

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

  // An image's own size: natural once loaded, else its width/height attributes (the reference
  // has them), else null.
  function naturalSize(img) {
    var w = img.naturalWidth || Number(img.getAttribute("width")) || 0;
    var h = img.naturalHeight || Number(img.getAttribute("height")) || 0;
    return w && h ? { w: w, h: h } : null;
  }

  // The image a pane shows (the reference while flicker is on).
  function shownImage(canvas) {
    var ref = canvas.querySelector(".flicker-ref");
    var viewer = canvas.closest("[data-viewer]");
    if (ref && viewer && viewer.classList.contains("flicker")) { return ref; }
    return canvas.querySelector(".page-img:not(.flicker-ref)") || canvas.querySelector(".page-img");
  }

  function visibleScrollers(r) {
    return Array.prototype.slice.call((r || document).querySelectorAll("[data-scroller]"))
      .filter(function (s) { return s.offsetParent !== null && s.clientWidth > 0 && s.clientHeight > 0; });
  }

  // What the scales are measured against: the trial's page (the reference, else the first image).
  // Every canvas is this page's natural width times the scale, so a point of the page is at the
  // same place in every pane and the panes scroll together pixel for pixel.
  function unitSize(r) {
    var img = r.querySelector(".pane-ref .page-img") || r.querySelector("[data-canvas] .page-img");
    return img ? naturalSize(img) : null;
  }

  // The scales of the fit modes and of the default, from the panes' size and the pages' shapes.
  function fits(r) {
    var unit = unitSize(r);
    var panes = visibleScrollers(r);
    if (!unit || !panes.length) { return null; }
    var pw = Math.min.apply(null, panes.map(function (s) { return s.clientWidth; }));
    var ph = Math.min.apply(null, panes.map(function (s) { return s.clientHeight; }));
    var aspect = unit.h / unit.w; // the tallest page decides whether the whole of each fits
    r.querySelectorAll("[data-canvas] .page-img").forEach(function (img) {
      var n = img.naturalWidth ? naturalSize(img) : null;
      if (n) { aspect = Math.max(aspect, n.h / n.w); }
    });
    var width = pw / unit.w;
    var page = Math.min(width, (ph - 1) / (aspect * unit.w));
    // The default: the page at its natural width when the pane allows, else as wide as the pane
    // but never below LEGIBLE (then the rater scrolls, the overview strip showing where); or the
    // whole page instead, when that shows it at LEGIBLE or more and at most 15 % smaller.
    var reading = Math.min(Math.max(width, LEGIBLE), 1);
    var auto = page >= LEGIBLE && page >= 0.85 * reading ? Math.min(page, 1) : reading;
    return { page: page, width: width, auto: auto, unit: unit };
  }

  function scaleOf(mode, f) {
    if (typeof mode === "number") { return mode; }
    return f ? f[mode] : 1;
  }

  function applyZoom() {
    var r = root();
    if (!r) { return; }
    var f = fits(r);
    if (!f) { return; }
    scale = scaleOf(view, f);
    var w = Math.max(Math.round(scale * f.unit.w), 1);
    if (scale >= LEGIBLE && w < LEGIBLE * f.unit.w) { w = Math.ceil(LEGIBLE * f.unit.w); } // never rounded below it
    r.querySelectorAll("[data-canvas]").forEach(function (c) { c.style.width = w + "px"; });
    var shown = w / f.unit.w; // the true scale, after rounding to whole pixels
    r.querySelectorAll("[data-zoom-level]").forEach(function (o) {
      o.textContent = Math.round(shown * 100) + "%";
      o.setAttribute("data-scale", shown.toFixed(4));
    });
    r.querySelectorAll("[data-action=zoom-fit], [data-action=zoom-fit-width]").forEach(function (b) {
      var mine = b.getAttribute("data-action") === "zoom-fit" ? "page" : "width";
      b.setAttribute("aria-pressed", view === mine ? "true" : "false");
    });
    updateMinimap();
    if (loupeAt) { showLoupe(loupeAt); }
  }

  function remember() { store("sessionStorage", VIEW_KEY, String(view)); }

  // A fit mode, or back to the default when it is already on (0 and w toggle).
  function setFit(mode) {
    view = view === mode ? "auto" : mode;
    remember();
    applyZoom();
    document.querySelectorAll("[data-scroller]").forEach(function (s) { s.scrollTop = 0; s.scrollLeft = 0; });
  }

  function visibleScroller() {
    var all = Array.prototype.slice.call(document.querySelectorAll("[data-scroller]"));
    return all.filter(function (s) { return s.offsetParent !== null; })[0] || all[0] || null;
  }

  // The next step of the scale ladder up (dir 1) or down (-1) from the scale shown.
  function stepScale(dir) {
    if (dir > 0) {
      for (var i = 0; i < STEPS.length; i++) { if (STEPS[i] > scale + 0.005) { return STEPS[i]; } }
      return STEPS[STEPS.length - 1];
    }
    for (var j = STEPS.length - 1; j >= 0; j--) { if (STEPS[j] < scale - 0.005) { return STEPS[j]; } }
    return STEPS[0];
  }

  // Zoom to the scale z keeping the image point under (x, y) (client coordinates; default: the
  // pane's centre) where it is; every pane follows the one zoomed (their scroll is synchronized).
  function setZoom(z, scroller, x, y) {
    var next = Math.min(Math.max(z, 0.1), 6);
    var s = scroller || visibleScroller();
    var before = scale;
    view = next;
    remember();
    if (!s || !before) { applyZoom(); return; }
    var c = s.querySelector("[data-canvas]");
    var box = s.getBoundingClientRect();
    var px = (x === undefined ? box.width / 2 : x - box.left);
    var py = (y === undefined ? box.height / 2 : y - box.top);
    var offset = c ? c.offsetLeft : 0; // a canvas narrower than its pane is centred
    var cx = s.scrollLeft + px - offset, cy = s.scrollTop + py;
    applyZoom();
    var ratio = scale / before;
    offset = c ? c.offsetLeft : 0;
    s.scrollLeft = cx * ratio + offset - px;
    s.scrollTop = cy * ratio - py;
    s.dispatchEvent(new Event("scroll"));
  }

  // --- The overview strip (issue 40): the three pages small, the panes' view marked on each; a
  // click (or drag) on one centres the panes there. Its images are the panes' own (same URLs).
  var minimapFrame = 0;
  function updateMinimap() {
    if (minimapFrame) { return; }
    minimapFrame = window.requestAnimationFrame(function () {
      minimapFrame = 0;
      var r = root();
      if (!r) { return; }
      sizeMinimap(r);
      r.querySelectorAll("[data-minimap-page]").forEach(function (m) {
        var pane = document.getElementById(m.getAttribute("data-minimap-page"));
        var s = pane && pane.querySelector("[data-scroller]");
        var c = s && s.querySelector("[data-canvas]");
        var mark = m.querySelector("[data-minimap-view]");
        if (!s || !c || !mark || !c.offsetWidth || !c.offsetHeight) { return; }
        var cw = c.offsetWidth, ch = c.offsetHeight, left = c.offsetLeft;
        var x0 = Math.max(0, s.scrollLeft - left), x1 = Math.min(cw, s.scrollLeft + s.clientWidth - left);
        var y0 = Math.max(0, s.scrollTop), y1 = Math.min(ch, s.scrollTop + s.clientHeight);
        mark.style.left = (100 * x0 / cw) + "%";
        mark.style.width = (100 * Math.max(x1 - x0, 0) / cw) + "%";
        mark.style.top = (100 * y0 / ch) + "%";
        mark.style.height = (100 * Math.max(y1 - y0, 0) / ch) + "%";
      });
    });
  }

  // Thumbnails as wide as lets the tallest page fit the strip's height, between 24 and 44 px.
  function sizeMinimap(r) {
    var strip = r.querySelector("[data-minimap]");
    if (!strip || !strip.clientHeight) { return; }
    var aspect = 0;
    strip.querySelectorAll(".minimap-frame img").forEach(function (img) {
      if (img.naturalWidth) { aspect = Math.max(aspect, img.naturalHeight / img.naturalWidth); }
    });
    var label = strip.querySelector(".minimap-label");
    var room = strip.clientHeight - (label ? label.offsetHeight : 0) - 4;
    var w = aspect ? Math.min(Math.max(Math.floor(room / aspect), 24), 44) : 36; // narrow: the panes need the width (issue 45)
    if (strip.getAttribute("data-thumb-width") === String(w)) { return; }
    strip.setAttribute("data-thumb-width", String(w));
    strip.querySelectorAll(".minimap-page").forEach(function (m) { m.style.width = w + "px"; });
    applyZoom(); // the panes beside it changed width
  }

  function jumpTo(m, e) {
    var pane = document.getElementById(m.getAttribute("data-minimap-page"));
    var s = pane && pane.querySelector("[data-scroller]");
    var c = s && s.querySelector("[data-canvas]");
    var frame = m.querySelector(".minimap-frame");
    if (!s || !c || !frame) { return; }
    var b = frame.getBoundingClientRect();
    if (!b.width || !b.height) { return; }
    var fx = Math.min(Math.max((e.clientX - b.left) / b.width, 0), 1);
    var fy = Math.min(Math.max((e.clientY - b.top) / b.height, 0), 1);
    s.scrollLeft = fx * c.offsetWidth + c.offsetLeft - s.clientWidth / 2;
    s.scrollTop = fy * c.offsetHeight - s.clientHeight / 2;
    s.dispatchEvent(new Event("scroll"));
  }

  function buildMinimap(trial) {
    var viewer = trial.querySelector("[data-viewer]");
    if (!viewer || viewer.querySelector("[data-minimap]")) { return; }
    var panes = Array.prototype.slice.call(viewer.querySelectorAll(".pane"));
    if (panes.length < 2) { return; }
    var strip = document.createElement("div");
    strip.className = "minimap";
    strip.setAttribute("data-minimap", "");
    strip.setAttribute("role", "group");
    strip.setAttribute("aria-label", "Overview of the pages: the marked part is in view; click to go there");
    panes.forEach(function (pane, i) {
      if (!pane.id) { pane.id = "pane-" + (i + 1); }
      var img = pane.querySelector("[data-canvas] .page-img:not(.flicker-ref)") || pane.querySelector("[data-canvas] .page-img");
      var title = pane.querySelector("h2");
      var name = title ? (title.firstChild && title.firstChild.nodeType === 3 ? title.firstChild.nodeValue : title.textContent).trim() : "";
      var m = document.createElement("div");
      m.className = "minimap-page";
      m.setAttribute("data-minimap-page", pane.id);
      var label = document.createElement("span");
      label.className = "minimap-label";
      label.textContent = name === "Reference" ? "Ref." : name;
      var frame = document.createElement("div");
      frame.className = "minimap-frame";
      var thumb = document.createElement("img");
      thumb.alt = "";
      thumb.draggable = false;
      if (img) { thumb.src = img.getAttribute("src"); }
      var mark = document.createElement("div");
      mark.className = "minimap-view";
      mark.setAttribute("data-minimap-view", "");
      frame.appendChild(thumb);
      frame.appendChild(mark);
      m.appendChild(label);
      m.appendChild(frame);
      strip.appendChild(m);
      var dragging = false;
      frame.addEventListener("pointerdown", function (e) {
        if (e.button !== 0) { return; }
        dragging = true;
        e.preventDefault();
        try { frame.setPointerCapture(e.pointerId); } catch (err) { /* not capturable */ }
        jumpTo(m, e);
      });
      frame.addEventListener("pointermove", function (e) { if (dragging) { jumpTo(m, e); } });
      frame.addEventListener("pointerup", function () { dragging = false; });
      frame.addEventListener("pointercancel", function () { dragging = false; });
      thumb.addEventListener("load", updateMinimap);
    });
    viewer.appendChild(strip);
    viewer.classList.add("has-minimap");
  }

  // --- The loupe (issue 40): while L (or the Loupe button) is held, a box in every pane shows the
  // same part of each page at 100 %, around the pointer (or the middle of the panes).
  var loupeAt = null; // {scroller, x, y}: where the loupe points (client coordinates), while shown
  var pointer = null; // the pointer's last place over a pane

  function loupeBox(pane) {
    var box = pane.querySelector("[data-loupe]");
    if (box) { return box; }
    box = document.createElement("div");
    box.className = "loupe";
    box.setAttribute("data-loupe", "");
    box.setAttribute("aria-hidden", "true");
    box.hidden = true;
    var img = document.createElement("img");
    img.alt = "";
    img.draggable = false;
    box.appendChild(img);
    pane.appendChild(box);
    return box;
  }

  function showLoupe(at) {
    var r = root();
    var s0 = at.scroller;
    if (!r || !s0 || !document.body.contains(s0)) { return; }
    var c0 = s0.querySelector("[data-canvas]");
    var sb = s0.getBoundingClientRect(), cb = c0.getBoundingClientRect();
    if (!cb.width) { return; }
    var ox = Math.min(Math.max(at.x - sb.left, 0), sb.width), oy = Math.min(Math.max(at.y - sb.top, 0), sb.height);
    // The page point under it, across the page's width (0..1), and down it in the hub's page (0..1),
    // so every pane's loupe shows the same part of its own page (aligned as the panes scroll).
    var fx = (at.x - cb.left) / cb.width;
    var panes = alignment(r);
    var source = panes.filter(function (p) { return p.scroller === s0; })[0];
    var shownH = source && source.img ? source.img.getBoundingClientRect().height : cb.height;
    var hubU = through(source ? source.points : [[0, 0], [1, 1]], Math.min(Math.max((at.y - cb.top) / (shownH || 1), 0), 1), 0);
    loupeAt = at;
    panes.forEach(function (pane) {
      var s = pane.scroller;
      if (s.offsetParent === null || !s.clientWidth) { return; }
      var section = s.closest(".pane");
      var c = s.querySelector("[data-canvas]");
      var src = c && shownImage(c);
      if (!section || !src) { return; }
      var n = naturalSize(src);
      if (!n) { return; }
      var fy = through(pane.points, hubU, 1) * n.h / n.w; // down its page, in page widths
      var box = loupeBox(section);
      var img = box.querySelector("img");
      if (img.getAttribute("src") !== src.getAttribute("src")) { img.src = src.getAttribute("src"); }
      box.hidden = false;
      var pb = section.getBoundingClientRect(), b = s.getBoundingClientRect();
      var bw = box.offsetWidth, bh = box.offsetHeight;
      // The same place in every pane (they are the same size and scroll together), kept inside it.
      var left = Math.min(Math.max(b.left - pb.left + ox - bw / 2, b.left - pb.left), b.right - pb.left - bw);
      var top = Math.min(Math.max(b.top - pb.top + oy - bh / 2, b.top - pb.top), b.bottom - pb.top - bh);
      box.style.left = Math.round(left) + "px";
      box.style.top = Math.round(top) + "px";
      var px = b.left - pb.left + ox - left, py = b.top - pb.top + oy - top; // the point, in the box
      img.style.width = n.w + "px"; // 100 %
      img.style.left = Math.round(px - fx * n.w) + "px";
      img.style.top = Math.round(py - fy * n.w) + "px";
    });
    var viewer = r.querySelector("[data-viewer]");
    if (viewer) { viewer.classList.add("loupe-on"); }
    r.querySelectorAll("[data-action=loupe]").forEach(function (btn) { btn.setAttribute("aria-pressed", "true"); });
  }

  function hideLoupe() {
    loupeAt = null;
    document.querySelectorAll("[data-loupe]").forEach(function (box) { box.hidden = true; });
    document.querySelectorAll("[data-viewer].loupe-on").forEach(function (v) { v.classList.remove("loupe-on"); });
    document.querySelectorAll("[data-action=loupe]").forEach(function (btn) { btn.setAttribute("aria-pressed", "false"); });
  }

  function loupeTarget() {
    if (pointer && document.body.contains(pointer.scroller) && pointer.scroller.offsetParent !== null) { return pointer; }
    var s = visibleScroller();
    if (!s) { return null; }
    var b = s.getBoundingClientRect();
    return { scroller: s, x: b.left + b.width / 2, y: b.top + b.height / 2 };
  }

  function startLoupe() {
    var at = loupeTarget();
    if (at) { showLoupe(at); }
  }

  function addLoupeButton(trial) {
    var tools = trial.querySelector(".tools");
    if (!tools || tools.querySelector("[data-action=loupe]")) { return; }
    var button = document.createElement("button");
    button.type = "button";
    button.setAttribute("data-action", "loupe");
    button.setAttribute("aria-keyshortcuts", "l");
    button.setAttribute("aria-pressed", "false");
    button.title = "Hold L (or this button) to see the same part of every page at 100 %";
    button.appendChild(document.createTextNode("Loupe "));
    var kbd = document.createElement("kbd");
    kbd.className = "key";
    kbd.setAttribute("aria-hidden", "true");
    kbd.textContent = "l";
    button.appendChild(kbd);
    var after = tools.querySelector("[data-action=zoom-fit-width]");
    tools.insertBefore(button, after ? after.nextSibling : null);
    button.addEventListener("pointerdown", function (e) {
      if (e.button !== 0) { return; }
      e.preventDefault();
      try { button.setPointerCapture(e.pointerId); } catch (err) { /* not capturable */ }
      startLoupe();
    });
    button.addEventListener("pointerup", hideLoupe);
    button.addEventListener("pointercancel", hideLoupe);
  }

  // --- Instructions that fit (issue 40): when the open instructions are taller than their box,
  // the box says so (a visible scroll bar, a fade and a "more below" line that scrolls it), and
  // takes the keyboard (Tab, then the arrow keys).
  function fitInstructions(trial) {
    var details = trial.querySelector("[data-instructions]");
    var box = details && details.querySelector(".markdown");
    if (!box || details.querySelector("[data-more]")) { return; }
    var more = document.createElement("button");
    more.type = "button";
    more.className = "link more-below";
    more.setAttribute("data-more", "");
    details.appendChild(more);
    function update() {
      var scrolls = details.open && box.scrollHeight > box.clientHeight + 2;
      details.classList.toggle("scrolls", scrolls);
      more.hidden = !scrolls;
      if (scrolls) {
        box.tabIndex = 0;
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", "Instructions, scrollable");
      } else {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
      if (!scrolls) { return; }
      var left = box.scrollHeight - box.clientHeight - box.scrollTop;
      details.classList.toggle("at-end", left <= 2);
      more.textContent = left <= 2 ? "↑ Back to the top of the instructions"
        : "↓ More instructions below (" + Math.round(100 * (box.scrollTop + box.clientHeight) / box.scrollHeight) + " % shown): scroll, or click here";
    }
    more.addEventListener("click", function () {
      var left = box.scrollHeight - box.clientHeight - box.scrollTop;
      box.scrollTop = left <= 2 ? 0 : box.scrollTop + box.clientHeight * 0.8;
    });
    box.addEventListener("scroll", update, { passive: true });
    details.addEventListener("toggle", update);
    if (window.ResizeObserver) { new ResizeObserver(update).observe(box); }
    update();
  }

  // --- Axis descriptions (issue 40): a description cut to its first line shows whole above its
  // axis on hover, while a button of the axis has the keyboard focus, or after a tap on it.
  function axisDescriptions(trial) {
    trial.querySelectorAll("[data-axis-fieldset] .axis-desc").forEach(function (desc) {
      var fs = desc.closest("[data-axis-fieldset]");
      if (!fs || fs.querySelector(".axis-desc-full")) { return; }
      var full = document.createElement("div");
      full.className = "axis-desc-full";
      full.setAttribute("aria-hidden", "true"); // the fieldset is already described by the text
      full.textContent = desc.textContent.replace(/\s+/g, " ").trim();
      desc.parentNode.insertBefore(full, desc.nextSibling);
      function clipped() { fs.classList.toggle("desc-clipped", desc.scrollHeight > desc.clientHeight + 1 || desc.scrollWidth > desc.clientWidth + 1); }
      clipped();
      if (window.ResizeObserver) { new ResizeObserver(clipped).observe(desc); }
      desc.addEventListener("click", function () {
        var open = !fs.classList.contains("desc-open");
        trial.querySelectorAll(".desc-open").forEach(function (o) { o.classList.remove("desc-open"); });
        fs.classList.toggle("desc-open", open);
      });
    });
  }

  function zoomAndPan(scope) {
    scope.querySelectorAll("[data-scroller]").forEach(function (s) {
      s.addEventListener("wheel", function (e) {
        if (!e.ctrlKey) { return; } // a trackpad pinch arrives as Ctrl+wheel too
        e.preventDefault();
        setZoom(scale * Math.exp(-e.deltaY / 300), s, e.clientX, e.clientY);
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
        pinch = e.touches.length === 2 ? { dist: spread(e.touches), scale: scale } : null;
      }, { passive: true });
      s.addEventListener("touchmove", function (e) {
        if (!pinch || e.touches.length !== 2) { return; }
        e.preventDefault();
        var t = e.touches;
        setZoom(pinch.scale * spread(t) / pinch.dist, s, (t[0].clientX + t[1].clientX) / 2, (t[0].clientY + t[1].clientY) / 2);
      }, { passive: false });
      s.addEventListener("touchend", function (e) { if (e.touches.length < 2) { pinch = null; } }, { passive: true });
    });
  }

  // Phones: one viewer with Reference / A / B tabs (arrow keys in the tab list, ← → elsewhere, swipe).
  function showTab(viewer, name, focus) {
    var tabs = Array.prototype.slice.call(viewer.querySelectorAll("[role=tab]"));
    if (!tabs.length) { return; }
    var before = visibleScroller();
    var panes = alignment(viewer);
    var place = before ? hubPlace(panes, before) : null, left = before ? before.scrollLeft : 0;
    viewer.setAttribute("data-tab", name);
    var after = visibleScroller();
    if (after && after !== before) { placeAll(panes, place, left, null); } // the same part of every page
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

  // A swipe changes tabs only while the page is no wider than its pane (else it pans).
  function pageFitsWidth() {
    var s = visibleScroller();
    var c = s && s.querySelector("[data-canvas]");
    return !c || c.offsetWidth <= s.clientWidth + 1;
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
      start = e.touches.length === 1 && pageFitsWidth() ? { x: e.touches[0].clientX, y: e.touches[0].clientY } : null;
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

  // --- Scrolling together, aligned by content (issue 45). A pane's page may carry its blocks
  // (data-blocks on its image: [type, y0, y1] per heading, paragraph, list, table, formula or
  // figure, y in thousandths of the page's height, from the render's DOM; never any text). The
  // panes' blocks are matched in reading order by type (a weighted longest common subsequence,
  // headings, tables and figures weighing most, far-apart places less), and the matched blocks'
  // tops are the anchors of a piecewise-linear map between the pages; without blocks a page
  // scrolls proportionally. A pane's position is its focus point: the share of its scroll range
  // times its page's height (the top edge of the view at the top, its bottom edge at the end), so
  // Home and End bring every page to its top and its end. The map's hub is the reference when it
  // has blocks, else the first page that has them.
  var TYPES = { title: 4, table: 4, figure: 3, formula: 3, list: 2, text: 1 };
  var MAX_BLOCKS = 400;

  function pageBlocks(img) {
    if (!img) { return null; }
    if (img.__blocks !== undefined) { return img.__blocks; }
    var raw = img.getAttribute("data-blocks"), out = null;
    if (raw) {
      try {
        out = JSON.parse(raw).filter(function (b) {
          return Array.isArray(b) && TYPES[b[0]] && isFinite(b[1]) && isFinite(b[2]);
        }).map(function (b) { return { t: b[0], u: Math.min(Math.max(b[1] / 1000, 0), 1) }; });
        out.sort(function (a, b) { return a.u - b.u; });
        out = out.slice(0, MAX_BLOCKS);
      } catch (err) { out = null; }
    }
    img.__blocks = out && out.length ? out : null;
    return img.__blocks;
  }

  // Anchors [[u in a, u in b], ...] from 0 to 1, strictly increasing on both sides.
  function anchors(a, b) {
    var n = a.length, m = b.length, i, j;
    var score = [], cell;
    for (i = 0; i <= n; i++) { score.push(new Float64Array(m + 1)); }
    for (i = 1; i <= n; i++) {
      for (j = 1; j <= m; j++) {
        cell = Math.max(score[i - 1][j], score[i][j - 1]);
        if (a[i - 1].t === b[j - 1].t) {
          var gain = TYPES[a[i - 1].t] * (1 - Math.min(Math.abs(a[i - 1].u - b[j - 1].u) * 2, 0.9));
          cell = Math.max(cell, score[i - 1][j - 1] + gain);
        }
        score[i][j] = cell;
      }
    }
    var pairs = [];
    i = n; j = m;
    while (i > 0 && j > 0) {
      if (score[i][j] === score[i - 1][j]) { i--; }
      else if (score[i][j] === score[i][j - 1]) { j--; }
      else { pairs.push([a[i - 1].u, b[j - 1].u]); i--; j--; }
    }
    pairs.reverse();
    var out = [[0, 0]];
    pairs.forEach(function (p) {
      var last = out[out.length - 1];
      if (p[0] > last[0] && p[1] > last[1] && p[0] < 1 && p[1] < 1) { out.push(p); }
    });
    out.push([1, 1]);
    return out;
  }

  // The piecewise-linear map through anchors, from side `from` (0 or 1) to the other side.
  function through(points, u, from) {
    var to = 1 - from;
    for (var k = 1; k < points.length; k++) {
      if (u <= points[k][from] || k === points.length - 1) {
        var p = points[k - 1], q = points[k];
        var span = q[from] - p[from];
        var t = span > 0 ? Math.min(Math.max((u - p[from]) / span, 0), 1) : 0;
        return p[to] + t * (q[to] - p[to]);
      }
    }
    return u;
  }

  var matched = new WeakMap(); // page image -> {hub: the hub's image, points: its anchors to it}

  // Every pane of the trial: its scroller, the page it shows, and its anchors to the hub.
  function alignment(r) {
    var panes = Array.prototype.slice.call(r.querySelectorAll("[data-scroller]")).map(function (s) {
      var c = s.querySelector("[data-canvas]");
      var img = c ? shownImage(c) : null;
      return { scroller: s, img: img, blocks: pageBlocks(img) };
    });
    var hub = panes.filter(function (p) { return p.blocks; })[0] || null;
    panes.forEach(function (p) {
      if (!hub || !p.blocks || p === hub) { p.points = [[0, 0], [1, 1]]; return; }
      var mine = matched.get(p.img); // matched once per pair of pages, not on every scroll
      if (!mine || mine.hub !== hub.img) { mine = { hub: hub.img, points: anchors(p.blocks, hub.blocks) }; matched.set(p.img, mine); }
      p.points = mine.points;
    });
    return panes;
  }

  // A pane's focus point, as a share of its page's height (0..1), or null when it cannot scroll.
  function focusOf(s) {
    var range = s.scrollHeight - s.clientHeight;
    return range > 0 ? s.scrollTop / range : null;
  }

  function paneSize(pane) {
    var img = pane.img, c = pane.scroller.querySelector("[data-canvas]");
    var h = img && img.offsetHeight ? img.offsetHeight : (c ? c.offsetHeight : 0);
    var full = c ? c.offsetHeight : h;
    return { h: h, full: full || h };
  }

  var expected = new WeakMap(); // a follower's scroll position set here: its own echo, not a move

  // Where pane `s` is, in the hub's page (0..1), or null when it cannot scroll.
  function hubPlace(panes, s) {
    var src = panes.filter(function (p) { return p.scroller === s; })[0];
    var share = src ? focusOf(s) : null;
    if (share === null) { return null; }
    var size = paneSize(src);
    return through(src.points, Math.min(share * size.full / (size.h || size.full), 1), 0);
  }

  // Every shown pane but `except` to the place `hubU` of the hub's page, `left` across.
  function placeAll(panes, hubU, left, except) {
    panes.forEach(function (p) {
      var o = p.scroller;
      if (o === except || o.offsetParent === null) { return; }
      o.scrollLeft = left;
      if (hubU !== null) {
        var range = o.scrollHeight - o.clientHeight;
        var sz = paneSize(p);
        var v = through(p.points, hubU, 1) * (sz.h || sz.full) / (sz.full || 1);
        o.scrollTop = Math.round(Math.min(Math.max(v, 0), 1) * Math.max(range, 0));
      }
      expected.set(o, { top: o.scrollTop, left: o.scrollLeft });
    });
    updateMinimap();
    if (loupeAt) { showLoupe(loupeAt); }
  }

  // Every other pane to the place of `s` (aligned by content); then the overview and the loupe.
  function follow(s) {
    var r = root();
    if (!r) { return; }
    var panes = alignment(r);
    placeAll(panes, hubPlace(panes, s), s.scrollLeft, s);
  }

  function syncScroll(scope) {
    scope.querySelectorAll("[data-scroller]").forEach(function (s) {
      s.addEventListener("scroll", function () {
        var was = expected.get(s);
        if (was && Math.abs(was.top - s.scrollTop) <= 1 && Math.abs(was.left - s.scrollLeft) <= 1) {
          updateMinimap();
          return; // the echo of a position this script set
        }
        expected.delete(s);
        follow(s);
      }, { passive: true });
      s.addEventListener("pointermove", function (e) {
        pointer = { scroller: s, x: e.clientX, y: e.clientY };
        if (loupeAt) { showLoupe(pointer); }
      });
    });
  }

  // The keys that pan every pane at once (issue 45): arrows, Space / Shift+Space, PageUp /
  // PageDown, Home / End. The pane the keyboard is in leads, else the reference (the first shown).
  var PAN_STEP = 48;
  function panKey(e) {
    var key = e.key;
    var down = key === "ArrowDown" ? 1 : key === "ArrowUp" ? -1 : 0;
    var across = key === "ArrowRight" ? 1 : key === "ArrowLeft" ? -1 : 0;
    var pageStep = key === "PageDown" || (key === " " && !e.shiftKey) ? 1
      : key === "PageUp" || (key === " " && e.shiftKey) ? -1 : 0;
    var end = key === "End" ? 1 : key === "Home" ? -1 : 0;
    if (!down && !across && !pageStep && !end) { return false; }
    var t = e.target;
    var lead = t && t.closest ? t.closest("[data-scroller]") : null;
    if (!lead || lead.offsetParent === null) { lead = visibleScroller(); }
    if (!lead) { return false; }
    if (end) { lead.scrollTop = end > 0 ? lead.scrollHeight : 0; }
    else if (pageStep) { lead.scrollTop += pageStep * Math.max(lead.clientHeight * 0.85, PAN_STEP); }
    else if (down) { lead.scrollTop += down * PAN_STEP; }
    else { lead.scrollLeft += across * PAN_STEP; }
    expected.set(lead, { top: lead.scrollTop, left: lead.scrollLeft });
    follow(lead);
    return true;
  }

  // Whether a key pressed on `t` is the page's to take (not a control's own: a radio's arrows,
  // a button's Space, a scrolling instructions box, the problem report).
  function pansHere(t) {
    if (!t || !t.closest || t === document.body || t === document.documentElement) { return true; }
    if (t.closest("[data-problem], .instructions > .markdown, summary, select, textarea, [contenteditable]")) { return false; }
    if (t.closest("[data-scroller]") || t.matches("[data-trial]")) { return true; }
    return !t.closest("input, button, a, [role=tab], [role=radio]");
  }

  // "Report a problem" (key r, issue 45): open (true), closed (false) or the other way (null). Opened
  // from the keyboard, its first choice takes the focus; closed, the trial takes it back.
  function toggleProblem(open, fromKeyboard) {
    var toggle = document.querySelector("[data-problem-toggle]");
    if (!toggle) { return; }
    var panel = document.getElementById(toggle.getAttribute("aria-controls"));
    var wasOpen = toggle.getAttribute("aria-expanded") === "true";
    var now = open === null ? !wasOpen : open;
    toggle.setAttribute("aria-expanded", now ? "true" : "false");
    if (panel) { panel.hidden = !now; }
    if (now && open !== null && panel) {
      var first = panel.querySelector("input:not([type=hidden]), textarea, button");
      if (first) { first.focus(); }
    } else if (now && fromKeyboard && panel) {
      var choice = panel.querySelector("input:not([type=hidden])");
      if (choice) { choice.focus(); }
    } else if (!now && wasOpen && open === false) {
      var trial = document.querySelector("[data-trial]");
      if (trial) { trial.focus({ preventScroll: true }); }
    }
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
    hideLoupe();
    pointer = null;
    buildMinimap(trial);
    addLoupeButton(trial);
    fitInstructions(trial);
    axisDescriptions(trial);
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
    if (!e.target.closest(".axis-desc")) {
      document.querySelectorAll(".desc-open").forEach(function (o) { o.classList.remove("desc-open"); });
    }
    if (e.target.closest("[data-problem-toggle]")) {
      toggleProblem(null, e.detail === 0);
      return;
    }
    var button = e.target.closest("[data-action]");
    if (!button) { return; }
    var action = button.getAttribute("data-action");
    if (action === "zoom-in") { setZoom(stepScale(1)); }
    else if (action === "zoom-out") { setZoom(stepScale(-1)); }
    else if (action === "loupe") { if (e.detail === 0) { if (loupeAt) { hideLoupe(); } else { startLoupe(); } } } // Enter/Space: on, off
    else if (action === "zoom-fit") { setFit("page"); }
    else if (action === "zoom-fit-width") { setFit("width"); }
    else if (action === "flicker") { flicker = !flicker; applyFlicker(); if (loupeAt) { showLoupe(loupeAt); } }
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
    if ((key === "l" || key === "L") && shortcutsOn() && document.querySelector("[data-viewer]")) {
      if (!e.repeat) { startLoupe(); } // held: shown until the key is let go
      e.preventDefault();
      return;
    }
    var viewer = document.querySelector("[data-viewer]");
    if ((key === "ArrowLeft" || key === "ArrowRight") && tabsShown(viewer) && !(t && t.type === "radio")) {
      stepTab(viewer, key === "ArrowRight" ? 1 : -1, false);
      e.preventDefault();
      return;
    }
    var inProblem = !!(t && t.closest && t.closest("[data-problem]"));
    if (key === "Escape" && inProblem) { toggleProblem(false); e.preventDefault(); return; }
    if (pansHere(t) && panKey(e)) { e.preventDefault(); return; }
    if (key.length === 1 && !shortcutsOn()) { return; } // WCAG 2.1.4: single-character keys are off
    if (inProblem) { return; } // the report's own radios and button take their keys
    if ((key === "r" || key === "R") && document.querySelector("[data-problem-toggle]")) {
      toggleProblem(true);
      e.preventDefault();
      return;
    }
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
    else if (key === "+" || key === "=") { setZoom(stepScale(1)); }
    else if (key === "-" || key === "_") { setZoom(stepScale(-1)); }
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

  document.addEventListener("keyup", function (e) {
    if ((e.key === "l" || e.key === "L") && loupeAt) { hideLoupe(); }
  });
  window.addEventListener("blur", hideLoupe);

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
