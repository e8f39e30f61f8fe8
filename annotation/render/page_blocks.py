"""The page's blocks from the rendered DOM (docs/protocol.md "Blocks from the DOM").

:data:`BLOCKS_JS` runs in the page after it settled, scrolled to its top, in the same round trip
as the DOM export of the checks (``dom.blocks`` in the render's JSON, docs/rendering.md "The JSON
of a render"). It follows AmbiHTMLBench's Appendix A.1: the visible blocks of the page in document
order, each ``{type, text, html, latex, box, bbox_1000}``:

- ``table``: a ``table`` (or an element with ``role=table``/``grid``) is one block; its ``html``
  is the table's raw HTML and its text its cells' visible text; nothing inside it is a block of
  its own.
- ``formula``: MathML ``math``, KaTeX and MathJax output (``.katex``, ``mjx-container``,
  ``.MathJax``, ``.MathJax_Display``); ``latex`` is the TeX source where the DOM exposes it (a
  ``<annotation encoding="application/x-tex">``, a ``data-latex``/``data-tex`` attribute, or
  MathJax 2's ``script type="math/tex"``), else null.
- ``figure``: ``figure`` (its caption's text as its text), ``img``, ``picture``, ``video``,
  ``canvas``, ``iframe``, ``object``, ``embed``, and an ``svg`` larger than an icon (a side above
  twice its font size, as for media regions).
- ``title``: ``h1``–``h6`` and ``role=heading``. ``list``: ``ul``, ``ol``, ``dl`` (the outermost).
- ``text``: the rest of the visible text, one block per nearest block-level container (a
  paragraph with its links and emphasis is one block), its box around its text runs.

Left out: elements whose ``class`` contains ``placeholder`` (and what they hold); what is hidden
(``display: none``, ``visibility`` other than visible, opacity 0 on it or an ancestor); text whose
colour is fully transparent or whose font is under :data:`MIN_FONT_PX` CSS px; boxes that, cut to
the ancestors that clip them and to the captured image (``[0, 0, W, H]`` as in "Media regions from
the DOM"), keep less than one CSS pixel either way. ``box`` is in CSS pixels of the captured image,
``bbox_1000`` the same normalized to it (×1000), both rounded to 0.01. At most :data:`MAX_BLOCKS`
blocks, each text cut to :data:`MAX_BLOCK_TEXT` characters and a table's HTML to
:data:`MAX_TABLE_HTML`; ``blocks_truncated`` says when anything was cut.

No Django here (the renderer's threads use it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from annotation.render.page_checks import DOM_HELPERS_JS

BLOCK_TYPES = ("title", "text", "list", "table", "formula", "figure")
MAX_BLOCKS = 2_000
MAX_BLOCK_TEXT = 20_000
MAX_TABLE_HTML = 200_000
MIN_FONT_PX = 4

BLOCKS_JS = (
    r"""
(canvasMode) => {
  const MAX_BLOCKS = __MAX_BLOCKS__, MAX_TEXT = __MAX_TEXT__, MAX_HTML = __MAX_HTML__, MIN_FONT = __MIN_FONT__;
  const root = document.documentElement, body = document.body;
  if (!body) return {blocks: [], truncated: false};
  const W = window.innerWidth;
  const H = canvasMode ? window.innerHeight
    : Math.max(root ? root.scrollHeight : 0, body.scrollHeight, window.innerHeight);
  const sx = window.scrollX, sy = window.scrollY;
  const styles = new Map();
  const style = (el) => { let s = styles.get(el); if (!s) { s = getComputedStyle(el); styles.set(el, s); } return s; };
__DOM_HELPERS__  // A box cut to its clipping ancestors and to the captured image, in page coordinates; null when
  // under one CSS pixel either way.
  const onImage = (r, parent) => {
    const c = clipOf(parent);
    const x0 = Math.max(r.left, c[0]) + sx, y0 = Math.max(r.top, c[1]) + sy;
    const x1 = Math.min(r.right, c[2]) + sx, y1 = Math.min(r.bottom, c[3]) + sy;
    const b = [Math.max(x0, 0), Math.max(y0, 0), Math.min(x1, W), Math.min(y1, H)];
    return b[2] - b[0] >= 1 && b[3] - b[1] >= 1 ? b : null;
  };
  const union = (a, b) => a ? [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3])] : b;
  const round = (v) => Math.round(v * 100) / 100;
  const placeholder = (el) => /placeholder/i.test(el.getAttribute('class') || '');
  const SKIP = new Set(['SCRIPT', 'STYLE', 'TEMPLATE', 'NOSCRIPT', 'HEAD']);
  const FIGURE = new Set(['FIGURE', 'IMG', 'PICTURE', 'VIDEO', 'CANVAS', 'IFRAME', 'OBJECT', 'EMBED']);
  const typeOf = (el) => {
    const tag = el.tagName.toUpperCase(), role = el.getAttribute('role') || '';
    if (tag === 'TABLE' || role === 'table' || role === 'grid') return 'table';
    if (tag === 'MATH' || el.matches('.katex, .katex-display, mjx-container, .MathJax, .MathJax_Display, .MathJax_SVG')) return 'formula';
    if (FIGURE.has(tag)) return 'figure';
    if (tag === 'SVG') {
      const r = el.getBoundingClientRect(), font = parseFloat(style(el).fontSize) || 16;
      return r.width > 2 * font || r.height > 2 * font ? 'figure' : null;
    }
    if (/^H[1-6]$/.test(tag) || role === 'heading') return 'title';
    if (tag === 'UL' || tag === 'OL' || tag === 'DL') return 'list';
    return null;
  };
  const visibleText = (node) => {
    const parent = node.parentElement;
    if (!parent || !shown(parent)) return null;
    const s = style(parent);
    if (s.visibility !== 'visible' || parseFloat(s.fontSize) < MIN_FONT) return null;
    const colour = s.color || '';
    if (colour === 'transparent' || /rgba\([^)]*,\s*0(\.0+)?\)$/.test(colour) || /\/\s*0%?\)$/.test(colour)) return null;
    const words = node.data.replace(/\s+/g, ' ').trim();
    if (!words) return null;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = onImage(range.getBoundingClientRect(), parent);
    return box ? {words, box} : null;
  };
  // The visible text under el (skipping placeholders and hidden parts), and its runs' box.
  const textUnder = (el) => {
    const words = [];
    let box = null;
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
      acceptNode: (n) => n.nodeType === 1 && (SKIP.has(n.tagName.toUpperCase()) || placeholder(n))
        ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
    });
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.nodeType !== 3) continue;
      const t = visibleText(n);
      if (t) { words.push(t.words); box = union(box, t.box); }
    }
    return {text: words.join(' '), box};
  };
  const latexOf = (el) => {
    const a = el.querySelector('annotation[encoding="application/x-tex"], annotation[encoding="TeX"]');
    if (a && a.textContent.trim()) return a.textContent.trim();
    const own = el.getAttribute('data-latex') || el.getAttribute('data-tex') || el.getAttribute('alttext');
    if (own) return own;
    const next = el.nextElementSibling;
    if (next && next.tagName === 'SCRIPT' && /^math\/tex/.test(next.getAttribute('type') || '')) return next.textContent.trim();
    return null;
  };
  const blocks = [];
  let truncated = false;
  const add = (type, text, box, extra) => {
    if (!box) return;
    if (blocks.length >= MAX_BLOCKS) { truncated = true; return; }
    if (text.length > MAX_TEXT) { text = text.slice(0, MAX_TEXT); truncated = true; }
    blocks.push({type, text, html: null, latex: null, ...extra, box: box.map(round),
                 bbox_1000: [1000 * box[0] / W, 1000 * box[1] / H, 1000 * box[2] / W, 1000 * box[3] / H].map(round)});
  };
  const blockLevel = (el) => !/^(inline|contents)/.test(style(el).display);
  const texts = new Map(); // block-level container -> its own text block (in document order of first text)
  const walk = (el) => {
    for (let n = el.firstChild; n; n = n.nextSibling) {
      if (blocks.length >= MAX_BLOCKS) { truncated = true; return; }
      if (n.nodeType === 3) {
        const t = visibleText(n);
        if (!t) continue;
        let c = n.parentElement;
        while (c && c !== body && !blockLevel(c)) c = c.parentElement;
        let entry = texts.get(c);
        if (!entry) { entry = {type: 'text', text: [], box: null}; texts.set(c, entry); blocks.push(entry); }
        entry.text.push(t.words);
        entry.box = union(entry.box, t.box);
        continue;
      }
      if (n.nodeType !== 1) continue;
      const tag = n.tagName.toUpperCase();
      if (SKIP.has(tag) || placeholder(n) || !shown(n)) continue;
      const type = typeOf(n);
      if (!type) { walk(n); continue; }
      const s = style(n);
      if (type === 'figure') {
        if (s.visibility !== 'visible') continue;
        const caption = tag === 'FIGURE' ? textUnder(n).text : (n.getAttribute('alt') || '').trim();
        add(type, caption, onImage(n.getBoundingClientRect(), n.parentElement), {});
        continue;
      }
      const under = textUnder(n);
      if (!under.box) continue;
      if (type === 'table') {
        let html = n.outerHTML;
        if (html.length > MAX_HTML) { html = html.slice(0, MAX_HTML); truncated = true; }
        add(type, under.text, under.box, {html});
      } else if (type === 'formula') {
        add(type, under.text, under.box, {latex: latexOf(n)});
      } else {
        add(type, under.text, under.box, {});
      }
    }
  };
  walk(body);
  const out = blocks.map((b) => {
    if (b.type !== 'text' || b.bbox_1000) return b;
    let text = b.text.join(' ');
    if (text.length > MAX_TEXT) { text = text.slice(0, MAX_TEXT); truncated = true; }
    const box = b.box;
    return {type: 'text', text, html: null, latex: null, box: box.map(round),
            bbox_1000: [1000 * box[0] / W, 1000 * box[1] / H, 1000 * box[2] / W, 1000 * box[3] / H].map(round)};
  });
  return {blocks: out, truncated};
}
""".replace("__DOM_HELPERS__", DOM_HELPERS_JS.strip("\n") + "\n")
    .replace("__MAX_BLOCKS__", str(MAX_BLOCKS))
    .replace("__MAX_TEXT__", str(MAX_BLOCK_TEXT))
    .replace("__MAX_HTML__", str(MAX_TABLE_HTML))
    .replace("__MIN_FONT__", str(MIN_FONT_PX))
)


def render_blocks(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A render's blocks as a study keeps them, ``[{type, bbox_1000}]`` (no text: the trial page needs
    their geometry only): the well-formed ones of ``dom.blocks``, at most :data:`MAX_BLOCKS`; none for a
    failed render or a render made before blocks existed."""
    dom = record.get("dom") if record.get("status") == "ok" else None
    found = dom.get("blocks") if isinstance(dom, Mapping) else None
    out: list[dict[str, Any]] = []
    for block in found if isinstance(found, list) else []:
        if not isinstance(block, Mapping) or block.get("type") not in BLOCK_TYPES:
            continue
        box = block.get("bbox_1000")
        if not isinstance(box, list) or len(box) != 4:
            continue
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in box):
            continue
        x0, y0, x1, y1 = (min(max(float(v), 0.0), 1000.0) for v in box)
        if x0 < x1 and y0 < y1:
            out.append({"type": block["type"], "bbox_1000": [x0, y0, x1, y1]})
        if len(out) == MAX_BLOCKS:
            break
    return out
