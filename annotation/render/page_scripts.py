"""The scripts a render runs in the page (docs/rendering.md "Determinism").

:data:`DETERMINISM_JS` runs before any of the page's own scripts, in every document and frame.
It makes what a page could read the same on every run: a clock of the document's own (``Date``,
``performance.now``, timers and animation frames; it stands still until the renderer runs it,
then fires what is due in order, one task apart), seeded ``Math.random`` and
``crypto.getRandomValues``, a fresh tab's storage, name and history length, no WebRTC (a way
around the proxy), lazy images loaded eagerly, and no animation, transition or caret. Every other
clock a page can read is the same one (``Intl``, ``performance.*``, ``event.timeStamp``), messages
it sends itself tick on it, SMIL and ``<marquee>`` stand still, and workers get :data:`WORKER_JS`
first. What cannot be pinned (a blob URL's UUID) is noted and reported (``nondeterministic``).
Playwright's own clock is not used: it replays every earlier advance in each new document of a
tab, so a reused tab would start each page later than the last.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from annotation.render.media_regions import COLLECT_JS
from annotation.render.page_blocks import BLOCKS_JS
from annotation.render.page_charts import CHARTS_JS
from annotation.render.page_checks import DOM_EXPORT_JS

CLOCK_START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONSOLE_KEPT = 50  # console errors a document passes on, each cut to CONSOLE_CHARS characters
CONSOLE_CHARS = 300

# What every document and worker gets first: seeded chance, the clock's values (they stand still
# in a worker: it has no renderer to run them), pinned performance figures, the console cap,
# and a list of what a page used that cannot be pinned (``nondeterministic`` in the render's JSON).
_COMMON_JS = r"""
  const unpinned = new Set();
  const note = (what) => { unpinned.add(what); };
  const pin = (object, name, get) => {
    try { Object.defineProperty(object, name, { configurable: true, get }); } catch (e) {}
  };
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
  // new (new Date().constructor)(): a date's constructor is the clock's too.
  Object.defineProperty(RealDate.prototype, 'constructor', { value: FakeDate, writable: true, configurable: true });
  // Intl formats "now" when given no date.
  const DTF = Intl.DateTimeFormat.prototype;
  const format = Object.getOwnPropertyDescriptor(DTF, 'format').get;
  pin(DTF, 'format', function () { const f = format.call(this); return (date) => f(date === undefined ? START + now : date); });
  const formatToParts = DTF.formatToParts;
  DTF.formatToParts = function (date) { return formatToParts.call(this, date === undefined ? START + now : date); };
  if (globalThis.Temporal) { try { delete globalThis.Temporal; } catch (e) { note('Temporal'); } }
  performance.now = () => now;
  const perf = Object.getPrototypeOf(performance);
  pin(perf, 'timeOrigin', () => START);
  pin(Event.prototype, 'timeStamp', () => now);
  const memory = Object.freeze({ jsHeapSizeLimit: 4294705152, totalJSHeapSize: 10000000, usedJSHeapSize: 10000000 });
  pin(perf, 'memory', () => memory);
  if (globalThis.PerformanceTiming) {
    const timing = {};
    for (const key in PerformanceTiming.prototype) if (key !== 'toJSON') timing[key] = key === 'secureConnectionStart' ? 0 : START;
    const frozen = Object.freeze({ ...timing, toJSON: () => ({ ...timing }) });
    pin(perf, 'timing', () => frozen);
  }
  for (const name of ['getEntries', 'getEntriesByType', 'getEntriesByName']) perf[name] = () => [];
  const mark = perf.mark;
  perf.mark = function (name, options) { return mark.call(this, name, { startTime: now, ...(options || {}) }); };
  if (globalThis.PerformanceObserver) {
    const Observer = PerformanceObserver;
    globalThis.PerformanceObserver = function (callback) { note('PerformanceObserver'); return new Observer(callback); };
    globalThis.PerformanceObserver.prototype = Observer.prototype;
  }
  if (globalThis.AnimationTimeline) pin(AnimationTimeline.prototype, 'currentTime', () => now);
  const nav = (globalThis.Navigator || globalThis.WorkerNavigator).prototype;
  pin(nav, 'hardwareConcurrency', () => 4);
  if ('deviceMemory' in nav) pin(nav, 'deviceMemory', () => 8);
  // A blob: URL's UUID is the browser's, and a page may show it: noted, not pinned.
  const createObjectURL = URL.createObjectURL;
  URL.createObjectURL = function (object) { note('blob URL'); return createObjectURL.call(URL, object); };
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
  // The methods that print (not createTask and the like, whose results a page uses).
  for (const name of ['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir', 'dirxml', 'table', 'group',
    'groupCollapsed', 'groupEnd', 'assert', 'count', 'countReset', 'time', 'timeLog', 'timeEnd', 'timeStamp']) {
    if (typeof console[name] !== 'function') continue;
    console[name] = name !== 'error' ? () => {} : (...args) => {
      consoleErrors++;
      if (consoleErrors <= __MAX_KEPT__) consoleError.call(console, args.map(line).join(' ').slice(0, __MAX_CHARS__));
    };
  }
  Object.defineProperty(globalThis, '__arbiterReport', {
    value: () => ({ dropped: Math.max(0, consoleErrors - __MAX_KEPT__), unpinned: [...unpinned] }), enumerable: false,
  });
"""

DETERMINISM_JS = r"""
(() => {
""" + _COMMON_JS + r"""
  const LIMIT = 10000;
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
  // Two of the browser's own frames (at most 1 s): what a frame painted late is painted before
  // the capture.
  const browserFrame = window.requestAnimationFrame.bind(window), browserTimeout = window.setTimeout.bind(window);
  const painted = () => new Promise((resolve) => {
    browserTimeout(resolve, 1000);
    browserFrame(() => browserFrame(() => resolve()));
  });
  Object.defineProperty(window, '__arbiterPainted', { value: painted, enumerable: false });
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
  // Messages a page sends itself tick on its own clock: each is delivered when the clock runs (a
  // transfer goes at once: its objects must move now). Our own channel above keeps the browser's.
  const portPost = MessagePort.prototype.postMessage;
  MessagePort.prototype.postMessage = function (...args) {
    if (this === channel.port2 || (args[1] && (args[1].length || args[1].transfer))) return portPost.apply(this, args);
    add('timeout', () => portPost.apply(this, args), 0, []);
  };
  const windowPost = window.postMessage;
  window.postMessage = function (...args) {
    if (args[2] && args[2].length) return windowPost.apply(this, args);
    add('timeout', () => windowPost.apply(this, args), 0, []);
  };
  if (globalThis.Scheduler && Scheduler.prototype.postTask) {
    Scheduler.prototype.postTask = function (callback, options) {
      return new Promise((resolve, reject) => add('timeout', () => {
        try { resolve(callback()); } catch (e) { reject(e); }
      }, (options && options.delay) || 0, []));
    };
    if (Scheduler.prototype.yield) Scheduler.prototype.yield = () => new Promise((resolve) => add('timeout', resolve, 0, []));
  }
  // Every worker starts with WORKER_JS: a blob: or data: worker's script gets it in front here, a
  // file's from the renderer (the mark in its URL's query). One that cannot be reached (a blob of
  // another document) is noted; a shared worker is refused.
  try { delete globalThis.SharedWorker; } catch (e) {}
  const blobs = new Map();
  const objectURL = URL.createObjectURL;
  URL.createObjectURL = function (object) {
    const url = objectURL.call(URL, object);
    if (object instanceof Blob) blobs.set(url, object);
    return url;
  };
  const RealWorker = globalThis.Worker;
  if (RealWorker) {
    const prelude = __WORKER_JS__ + '\n';
    const withPrelude = (body) => createObjectURL.call(URL, new Blob([prelude, body], { type: 'text/javascript' }));
    globalThis.Worker = function Worker(url, options) {
      if (!new.target) throw new TypeError("Failed to construct 'Worker': Please use the 'new' operator");
      let href = String(url);
      try {
        const absolute = new URL(href, document.baseURI);
        if (absolute.protocol === 'blob:' && blobs.has(absolute.href)) href = withPrelude(blobs.get(absolute.href));
        else if (absolute.protocol === 'data:') {
          const comma = href.indexOf(','), body = href.slice(comma + 1);
          href = withPrelude(href.slice(0, comma).endsWith(';base64')
            ? Uint8Array.from(atob(body), (c) => c.charCodeAt(0)) : decodeURIComponent(body));
        } else if (absolute.protocol === 'http:') { absolute.searchParams.set('__WORKER_MARK__', '1'); href = absolute.href; }
        else note('worker');
      } catch (e) { note('worker'); }
      return new RealWorker(href, options);
    };
    globalThis.Worker.prototype = RealWorker.prototype;
  }
  if (globalThis.CSS && CSS.paintWorklet) {
    const addModule = CSS.paintWorklet.addModule;
    CSS.paintWorklet.addModule = function (...args) { note('paint worklet'); return addModule.apply(this, args); };
  }
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
  // SMIL animations paused at time 0 and marquees stopped, as soon as they are in the document.
  const freeze = (root) => {
    for (const svg of root.querySelectorAll ? root.querySelectorAll('svg') : []) {
      try { svg.pauseAnimations(); svg.setCurrentTime(0); } catch (e) {}
    }
    for (const marquee of root.querySelectorAll ? root.querySelectorAll('marquee') : []) {
      try { marquee.stop(); } catch (e) {}
    }
  };
  Object.defineProperty(globalThis, '__arbiterFreeze', { value: () => freeze(document), enumerable: false });
  new MutationObserver((records) => {
    for (const record of records) for (const node of record.addedNodes) {
      if (node.nodeType !== 1) continue;
      if (node.localName === 'svg' || node.localName === 'marquee') freeze(node.parentNode || node); else freeze(node);
    }
  }).observe(document, { childList: true, subtree: true });
  const still = () => {
    freeze(document);
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
"""


def _filled(script: str) -> str:
    return (script.replace("__START_MS__", str(int(CLOCK_START.timestamp() * 1000)))
            .replace("__MAX_KEPT__", str(CONSOLE_KEPT)).replace("__MAX_CHARS__", str(CONSOLE_CHARS)))


# A worker's: the shared part (its clock stands still: it has no renderer to run it), and no
# worker of its own (refused: nothing would put this script in front of it).
WORKER_JS = _filled("(() => {" + _COMMON_JS + """
  for (const name of ['Worker', 'SharedWorker']) { try { delete globalThis[name]; } catch (e) {} }
})();""")
WORKER_MARK = "__arbiter_worker"  # in a worker script's query: the renderer puts WORKER_JS in front
DETERMINISM_JS = _filled(DETERMINISM_JS).replace("__WORKER_JS__", json.dumps(WORKER_JS)).replace("__WORKER_MARK__", WORKER_MARK)

# Run every frame's clock (the renderer calls it on each frame after the page settled).
RUN_CLOCK_JS = "(ms) => window.__arbiterClock ? window.__arbiterClock.runFor(ms) : 0"
# Before the capture, in the main frame, after REPORT_JS: two of the browser's frames painted.
PAINTED_JS = "() => window.__arbiterPainted ? window.__arbiterPainted() : null"
# Before the capture, in each frame: SMIL and marquees frozen again, then the frame's console
# errors past the CONSOLE_KEPT it passed on (counted, never sent) and what it used unpinned.
REPORT_JS = ("() => { if (window.__arbiterFreeze) window.__arbiterFreeze();"
             " return window.__arbiterReport ? window.__arbiterReport() : { dropped: 0, unpinned: [] }; }")

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
# mode) with its blocks (annotation.render.page_blocks), its ECharts series (annotation.render.page_charts) and its
# DOM (for the digest), in one round trip.
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
    " catch (e) { dom.blocks = null; }"
    # The live ECharts series (annotation.render.page_charts); likewise.
    " try { const c = (" + CHARTS_JS.strip() + ")(); dom.charts = c.charts; dom.charts_truncated = c.truncated;"
    " dom.charts_found = c.found; } catch (e) { dom.charts = null; }"
    " return dom; } catch (e) { return null; } })(),"
    " html: root ? root.outerHTML : '' }; }"
)
