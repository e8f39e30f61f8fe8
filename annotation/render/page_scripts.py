"""The scripts a render runs in the page (docs/rendering.md "Determinism").

:data:`DETERMINISM_JS` runs before any of the page's own scripts, in every document and frame.
It makes what a page could read the same on every run: a clock of the document's own (``Date``,
``performance.now``, timers and animation frames; it stands still until the renderer runs it,
then fires what is due in order, one task apart), seeded ``Math.random`` and
``crypto.getRandomValues``, a fresh tab's storage, name and history length, no WebRTC (a way
around the proxy), lazy images loaded eagerly, and no animation, transition or caret. Playwright's
own clock is not used: it replays every earlier advance in each new document of a tab, so a
reused tab would start each page later than the last.
"""

from __future__ import annotations

from datetime import UTC, datetime

from annotation.render.media_regions import COLLECT_JS
from annotation.render.page_blocks import BLOCKS_JS
from annotation.render.page_checks import DOM_EXPORT_JS

CLOCK_START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONSOLE_KEPT = 50  # console errors a document passes on, each cut to CONSOLE_CHARS characters
CONSOLE_CHARS = 300

DETERMINISM_JS = r"""
(() => {
  let seed = 0x9E3779B9;
  const random = () => {
    seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
    return seed / 4294967296;
  };
  Math.random = random;
  if (globalThis.Crypto && Crypto.prototype.getRandomValues) {
    Crypto.prototype.getRandomValues = function (array) {
      const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
      return array;
    };
    Crypto.prototype.randomUUID = function () {
      const h = [...Array(32)].map(() => Math.floor(random() * 16).toString(16));
      h[12] = '4'; h[16] = '89ab'[Math.floor(random() * 4)];
      return h.slice(0, 8).join('') + '-' + h.slice(8, 12).join('') + '-' + h.slice(12, 16).join('') + '-'
        + h.slice(16, 20).join('') + '-' + h.slice(20).join('');
    };
  }
  // A clock of this document's own: time starts at START_MS and moves only when the renderer
  // runs it (runFor), firing the due timers and animation frames in order, one task apart.
  const START = __START_MS__;
  const LIMIT = 10000;
  const RealDate = Date;
  let now = 0;
  function FakeDate(...args) {
    if (!new.target) return new RealDate(START + now).toString();
    return args.length ? new RealDate(...args) : new RealDate(START + now);
  }
  FakeDate.prototype = RealDate.prototype;
  FakeDate.now = () => START + now;
  FakeDate.parse = RealDate.parse;
  FakeDate.UTC = RealDate.UTC;
  globalThis.Date = FakeDate;
  performance.now = () => now;
  const timers = new Map();
  let nextId = 1;
  const add = (type, fn, delay, args) => {
    const id = nextId++;
    delay = Math.max(0, Number(delay) || 0);
    const at = type === 'frame' ? (Math.floor(now / 16) + 1) * 16 : now + delay;
    timers.set(id, { id, type, fn, args, delay: type === 'interval' ? Math.max(delay, 1) : delay, at });
    return id;
  };
  const clear = (id) => { timers.delete(id); };
  globalThis.setTimeout = (fn, delay, ...args) => add('timeout', fn, delay, args);
  globalThis.setInterval = (fn, delay, ...args) => add('interval', fn, delay, args);
  globalThis.clearTimeout = clear;
  globalThis.clearInterval = clear;
  globalThis.requestAnimationFrame = (fn) => add('frame', fn, 0, []);
  globalThis.cancelAnimationFrame = clear;
  globalThis.requestIdleCallback = (fn) => add('idle', fn, 1, []);
  globalThis.cancelIdleCallback = clear;
  const channel = new MessageChannel();
  const waiting = [];
  channel.port1.onmessage = () => { const resolve = waiting.shift(); if (resolve) resolve(); };
  const nextTask = () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
  const report = (error) => { queueMicrotask(() => { throw error; }); };
  const runFor = async (ms) => {
    const end = now + ms;
    for (let count = 0; count < LIMIT; count++) {
      let first = null;
      for (const t of timers.values()) {
        if (t.at <= end && (!first || t.at < first.at || (t.at === first.at && t.id < first.id))) first = t;
      }
      if (!first) break;
      now = Math.max(now, first.at);
      if (first.type === 'interval') first.at = now + first.delay; else timers.delete(first.id);
      try {
        if (typeof first.fn !== 'function') (0, eval)(String(first.fn));
        else if (first.type === 'frame') first.fn(now);
        else if (first.type === 'idle') first.fn({ didTimeout: false, timeRemaining: () => 0 });
        else first.fn(...first.args);
      } catch (error) { report(error); }
      await nextTask();
    }
    now = end;
    return timers.size;
  };
  Object.defineProperty(window, '__arbiterClock', { value: Object.freeze({ runFor }), enumerable: false });
  for (const name of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel']) {
    try { delete globalThis[name]; } catch (e) {}
  }
  if (window.top === window) {
    // A tab reused for the next page must look like a fresh one.
    try { window.name = ''; } catch (e) {}
    try { Object.defineProperty(History.prototype, 'length', { get: () => 1 }); } catch (e) {}
    try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}
    try {
      for (const c of document.cookie.split(';')) {
        const name = c.split('=')[0].trim();
        if (name) document.cookie = name + '=; expires=Thu, 01 Jan 1970 00:00:00 GMT; path=/';
      }
    } catch (e) {}
  }
  // The console: the first MAX_KEPT errors of this document reach the renderer, each one line
  // of at most MAX_CHARS characters; later ones are only counted (__arbiterConsole), and the
  // other levels, never recorded, are dropped. A flood never crosses to the browser's driver.
  const consoleError = console.error;
  let consoleErrors = 0;
  const line = (value) => {
    try {
      return (value instanceof Error ? String(value.stack || value) : String(value)).slice(0, __MAX_CHARS__);
    } catch (e) { return '?'; }
  };
  for (const name of Object.keys(console)) {
    if (typeof console[name] !== 'function') continue;
    console[name] = name !== 'error' ? () => {} : (...args) => {
      consoleErrors++;
      if (consoleErrors <= __MAX_KEPT__) consoleError.call(console, args.map(line).join(' ').slice(0, __MAX_CHARS__));
    };
  }
  Object.defineProperty(window, '__arbiterConsole', {
    value: Object.freeze({ dropped: () => Math.max(0, consoleErrors - __MAX_KEPT__) }), enumerable: false,
  });
  const still = () => {
    for (const el of document.querySelectorAll('img[loading="lazy"], iframe[loading="lazy"]')) el.loading = 'eager';
    if (!document.getElementById('__arbiter_still')) {
      const style = document.createElement('style');
      style.id = '__arbiter_still';
      style.textContent = '*, *::before, *::after { animation-duration: 0s !important; animation-delay: 0s !important;'
        + ' transition: none !important; caret-color: transparent !important; scroll-behavior: auto !important; }';
      (document.head || document.documentElement).appendChild(style);
    }
  };
  document.addEventListener('DOMContentLoaded', still, { once: true });
})();
""".replace("__START_MS__", str(int(CLOCK_START.timestamp() * 1000))).replace(
    "__MAX_KEPT__", str(CONSOLE_KEPT)).replace("__MAX_CHARS__", str(CONSOLE_CHARS))

# Run every frame's clock (the renderer calls it on each frame after the page settled).
RUN_CLOCK_JS = "(ms) => window.__arbiterClock ? window.__arbiterClock.runFor(ms) : 0"
# A frame's console errors past the CONSOLE_KEPT it passed on (counted, never sent).
DROPPED_CONSOLE_JS = "() => window.__arbiterConsole ? window.__arbiterConsole.dropped() : 0"

# Settled: parsed and loaded, web fonts loaded, every image decoded or failed; lazy images
# switched to eager on the way (images a timer added after DOMContentLoaded too).
READY_JS = r"""
() => {
  for (const el of document.querySelectorAll('img[loading="lazy"], iframe[loading="lazy"]')) el.loading = 'eager';
  return document.readyState === 'complete'
    && (!document.fonts || document.fonts.status === 'loaded')
    && Array.from(document.images).every((img) => img.complete);
}
"""

# Animations stopped, scrolled to the top (both modes capture from the page's top left); the page's size in CSS
# pixels, its media boxes, its DOM export for the checks (annotation.render.page_checks; the argument: canvas
# mode) with its blocks (annotation.render.page_blocks) and its DOM (for the digest), in one round trip.
MEASURE_JS = (
    "(canvasMode) => { window.scrollTo(0, 0); const root = document.documentElement, body = document.body;"
    # Animations a script started (element.animate) stand at their start; CSS ones are off already.
    " for (const a of (document.getAnimations ? document.getAnimations() : [])) {"
    " try { a.pause(); a.currentTime = 0; } catch (e) {} }"
    " return { height: Math.max(root ? root.scrollHeight : 0, body ? body.scrollHeight : 0),"
    # A page that breaks the export (it replaced getComputedStyle, say) renders with no export: its checks UNCLEAR.
    " boxes: (" + COLLECT_JS.strip() + ")(),"
    " dom: (() => { try { const dom = (" + DOM_EXPORT_JS.strip() + ")(canvasMode);"
    # The blocks (annotation.render.page_blocks) in the same export; a page that breaks them keeps the rest.
    " try { const b = (" + BLOCKS_JS.strip() + ")(canvasMode); dom.blocks = b.blocks; dom.blocks_truncated = b.truncated; }"
    " catch (e) { dom.blocks = null; } return dom; } catch (e) { return null; } })(),"
    " html: root ? root.outerHTML : '' }; }"
)
