"""What the report pages' figures must be: each an SVG on a request of its own, the same bytes when
drawn again from an empty cache (another web process), no script (calibration/services/report_figures.py)."""

from __future__ import annotations

import re
from html import unescape
from xml.etree import ElementTree

from django.core.cache import cache
from django.test import Client


def page_figures(client: Client, body: str, *, under: str, count: int) -> list[str]:
    """The page's ``<img>`` sources, after checking that each is an SVG served under ``under``."""
    sources = [unescape(src) for src in re.findall(r'<img[^>]*\ssrc="([^"]+)"', body)]
    assert len(sources) == count and all(src.startswith(under) for src in sources), sources
    for src in sources:
        figure = client.get(src)
        assert figure.status_code == 200 and figure["Content-Type"] == "image/svg+xml"
        assert ElementTree.fromstring(figure.content).tag.endswith("svg") and b"<script" not in figure.content
        cache.clear()
        assert client.get(src).content == figure.content, "drawn again from an empty cache: other bytes"
    return sources
