"""Checks computed from the render (docs/protocol.md "Checks computed from the render").

AesCode's deterministic verifiers as ``automatic`` answers of ``checklist`` predicates: *the page
rendered*, *the required text is visible* and *the content stays inside the canvas*. They read
the render's DOM export (``dom`` in the render's JSON, docs/rendering.md "The JSON of a render"),
which :data:`DOM_EXPORT_JS` collects in the page after it settled, scrolled to its top, in the same
round trip as the media regions:

- ``visible_text``: the page's visible text, its text runs in document order joined by single
  spaces. A run is a text node's text whose element is shown (not ``display: none``, not opacity 0
  on it or an ancestor, ``visibility: visible``) and whose box, cut to every ancestor that clips
  its overflow (as media boxes are), keeps at least one CSS pixel square on the captured image.
- ``outside_canvas``: the shown elements and text runs whose box, cut to the ancestors that clip
  it, reaches more than one CSS pixel beyond the canvas (the captured image: ``[0, 0, W, H]``,
  ``W`` the viewport's width, ``H`` the viewport's height in ``canvas`` mode and the page's height in
  ``full`` mode); the first :data:`MAX_LISTED` as ``{tag, box}``, and ``n_outside_canvas`` all of them.
- ``content_boxes``: the boxes of the text runs and media elements (``img``, ``svg``, ``canvas``,
  ``video``, ``iframe``, ``object``, ``embed``) in page CSS pixels, cut to the ancestors that clip
  them but not to the image, the first :data:`MAX_CONTENT_BOXES` (``content_truncated`` when there
  were more): the rule score's Boundary channel measures them against a brief's canvas
  (docs/protocol.md "AesCode's rule score").
- ``truncated``: the page has more than :data:`MAX_NODES` elements or text nodes, or more than
  :data:`MAX_TEXT` characters of visible text; what lies beyond was not read, so a check that
  found nothing answers UNCLEAR.

No Django here (the renderer's threads use it).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

CHECKS = ("rendered", "text_visible", "inside_canvas")
MAX_NODES = 50_000
MAX_LISTED = 20
MAX_TEXT = 200_000  # characters of visible text kept in the export
MAX_CONTENT_BOXES = 5_000  # content boxes kept for the rule score's Boundary channel

# Shared with the blocks' script (annotation.render.page_blocks), after ``root`` and ``body``: whether
# an element is shown (not display: none, no opacity 0 on it or an ancestor) and the box that clips
# its content (its ancestors' overflow and clip-path boxes, intersected).
DOM_HELPERS_JS = r"""
  const shownCache = new Map();
  const shown = (el) => {
    if (shownCache.has(el)) return shownCache.get(el);
    const s = getComputedStyle(el);
    let value = s.display !== 'none' && parseFloat(s.opacity) !== 0;
    if (value && el.parentElement && el !== body) value = shown(el.parentElement);
    shownCache.set(el, value);
    return value;
  };
  const clipCache = new Map();
  // The box that clips an element's content: its ancestors' overflow and clip-path boxes, intersected.
  const clipOf = (el) => {
    if (!el || el === root || el === body) return [-Infinity, -Infinity, Infinity, Infinity];
    if (clipCache.has(el)) return clipCache.get(el);
    let [x0, y0, x1, y1] = clipOf(el.parentElement);
    const s = getComputedStyle(el);
    const clipX = s.overflowX !== 'visible', clipY = s.overflowY !== 'visible';
    const clipPath = s.clipPath && s.clipPath !== 'none';
    if (clipX || clipY || clipPath) {
      const r = el.getBoundingClientRect();
      if (clipX || clipPath) { x0 = Math.max(x0, r.left); x1 = Math.min(x1, r.right); }
      if (clipY || clipPath) { y0 = Math.max(y0, r.top); y1 = Math.min(y1, r.bottom); }
    }
    const box = [x0, y0, x1, y1];
    clipCache.set(el, box);
    return box;
  };
"""

DOM_EXPORT_JS = (
    r"""
(canvasMode) => {
  const MAX_NODES = __MAX_NODES__, MAX_LISTED = __MAX_LISTED__, MAX_TEXT = __MAX_TEXT__, MAX_CONTENT = __MAX_CONTENT__;
  const root = document.documentElement, body = document.body;
  const W = window.innerWidth;
  const H = canvasMode ? window.innerHeight
    : Math.max(root ? root.scrollHeight : 0, body ? body.scrollHeight : 0, window.innerHeight);
__DOM_HELPERS__  const cut = (r, clip) => [Math.max(r.left, clip[0]), Math.max(r.top, clip[1]),
                            Math.min(r.right, clip[2]), Math.min(r.bottom, clip[3])];
  const outside = [], content = [];
  let nOutside = 0, nodes = 0, truncated = false, contentTruncated = false;
  // Content boxes (text runs and media elements, cut to what clips them, not to the image): what
  // AesCode's Boundary channel measures against a brief's canvas (rule_score).
  const MEDIA = new Set(['img', 'svg', 'canvas', 'video', 'iframe', 'object', 'embed']);
  const keep = (box) => {
    if (box[2] - box[0] <= 0 || box[3] - box[1] <= 0) return;
    if (content.length >= MAX_CONTENT) { contentTruncated = true; return; }
    content.push([box[0] + window.scrollX, box[1] + window.scrollY, box[2] + window.scrollX, box[3] + window.scrollY]
      .map((v) => Math.round(v * 100) / 100));
  };
  const check = (tag, box) => {
    if (box[2] - box[0] <= 0 || box[3] - box[1] <= 0) return;
    if (box[0] < -1 || box[1] < -1 || box[2] > W + 1 || box[3] > H + 1) {
      nOutside++;
      if (outside.length < MAX_LISTED) outside.push({tag, box: box.map((v) => Math.round(v * 100) / 100)});
    }
  };
  const texts = [];
  let textLength = 0;
  const range = document.createRange();
  const walker = body ? document.createTreeWalker(body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT) : null;
  for (let node = walker ? walker.nextNode() : null; node; node = walker.nextNode()) {
    if (++nodes > MAX_NODES) { truncated = true; break; }
    if (node.nodeType === 1) {
      const tag = node.tagName.toLowerCase();
      if (tag === 'script' || tag === 'style' || tag === 'template' || tag === 'noscript') continue;
      if (!shown(node) || getComputedStyle(node).visibility !== 'visible') continue;
      const box = cut(node.getBoundingClientRect(), clipOf(node.parentElement));
      check(tag, box);
      if (MEDIA.has(tag) && !(node.parentElement && node.parentElement.closest('svg'))) keep(box);
      continue;
    }
    const parent = node.parentElement;
    const words = node.data.replace(/\s+/g, ' ').trim();
    if (!words || !parent || !shown(parent) || getComputedStyle(parent).visibility !== 'visible') continue;
    const ptag = parent.tagName.toLowerCase();
    if (ptag === 'script' || ptag === 'style' || ptag === 'template' || ptag === 'noscript') continue;
    range.selectNodeContents(node);
    const box = cut(range.getBoundingClientRect(), clipOf(parent));
    check('#text', box);
    keep(box);
    const onImage = Math.min(box[2], W) - Math.max(box[0], 0) >= 1 && Math.min(box[3], H) - Math.max(box[1], 0) >= 1;
    if (onImage && textLength < MAX_TEXT) { texts.push(words); textLength += words.length + 1; }
    else if (onImage) truncated = true;
  }
  return {visible_text: texts.join(' ').slice(0, MAX_TEXT), outside_canvas: outside, n_outside_canvas: nOutside,
          canvas: [W, H], truncated, content_boxes: content, content_truncated: contentTruncated};
}
""".replace("__DOM_HELPERS__", DOM_HELPERS_JS.strip("\n") + "\n")
    .replace("__MAX_NODES__", str(MAX_NODES))
    .replace("__MAX_LISTED__", str(MAX_LISTED))
    .replace("__MAX_TEXT__", str(MAX_TEXT))
    .replace("__MAX_CONTENT__", str(MAX_CONTENT_BOXES))
)


def fold_text(text: str) -> str:
    """What text matching compares: NFKC, case-folded, with every whitespace removed (a run broken
    across elements, ``Hel<b>lo</b>``, or across lines still matches)."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def check_answer(record: Mapping[str, Any], check: str, *, text: str = "") -> str:
    """The automatic answer (YES / NO / UNCLEAR) of one check from a render's JSON record.

    ``rendered``: YES when the render's status is ``ok``. ``text_visible``: YES when ``text``
    (compared as :func:`fold_text` says) is part of the visible text. ``inside_canvas``: YES when no
    shown element or text run reaches beyond the canvas. A failed render answers NO to every
    check (nothing of it is visible); a render without a DOM export (made before it existed)
    answers UNCLEAR, as does a truncated export where nothing was found.
    """
    if check not in CHECKS:
        raise ValueError(f"unknown check {check!r} (expected one of {', '.join(CHECKS)})")
    if record.get("status") != "ok":
        return "NO"
    if check == "rendered":
        return "YES"
    dom = record.get("dom")
    if not isinstance(dom, Mapping):
        return "UNCLEAR"
    truncated = bool(dom.get("truncated"))
    if check == "text_visible":
        wanted = fold_text(text)
        if not wanted:
            raise ValueError("the text_visible check needs the text to look for")
        if wanted in fold_text(str(dom.get("visible_text") or "")):
            return "YES"
        return "UNCLEAR" if truncated else "NO"
    if int(dom.get("n_outside_canvas") or 0) > 0:
        return "NO"
    return "UNCLEAR" if truncated else "YES"
