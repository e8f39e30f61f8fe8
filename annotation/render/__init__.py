"""A sandboxed, deterministic renderer of HTML outputs (issue 38; docs/rendering.md).

Model-written HTML is untrusted: each page is rendered in Debian's Chromium through Playwright's
sync API, its own folder served from an in-process handler on a fake origin, every other request
refused and recorded, and the browser started behind a proxy that refuses everything. The same
file gives the same pixels on every run (fixed clock and random numbers, no animations, fonts and
images waited for, stable raster flags). Media regions (docs/protocol.md "Media regions from the
DOM") come from the rendered DOM.

- :mod:`annotation.render.settings`: the settings of a render and their parsing.
- :mod:`annotation.render.sandbox`: which file a request may read.
- :mod:`annotation.render.media_regions`: the DOM's media boxes in 0–1000 page coordinates.
- :mod:`annotation.render.page_blocks`: the DOM's blocks (title, text, list, table, formula, figure).
- :mod:`annotation.render.chromium`: the browser's flags, launch and manifest.
- :mod:`annotation.render.renderer`: one worker rendering pages one after another.
- :mod:`annotation.render.pages`: a folder of pages to PNG + JSON, several workers at once.

No Django here: worker threads and the benchmark use it as a plain library.
"""
