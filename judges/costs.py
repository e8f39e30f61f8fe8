"""Token and cost estimates for judge calls (issue 14: ``run_judges --dry-run``, cost reports).

Pure: no Django. Image tokens follow each provider's published rule for the image it will get:
- OpenAI / Azure (``detail: high``): fit in 2048 × 2048, shortest side to 768, then
  85 + 170 per 512-px tile;
- Anthropic: the long edge is brought to 1568 px at most (and ~1.15 megapixels), then
  width × height / 750;
- Gemini: 258 per image up to 384 px on both sides, else 258 per 768 × 768 tile.
Text tokens are estimated at 4 characters a token (the prompt, the system prompt, the schema).
These are estimates: the tokens the provider reports are recorded on every output, and the
closing report of a run compares the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHARS_PER_TOKEN = 4.0
# A reply: {"winner": ..., "confidence": ..., "reason": one or two sentences, "axes": [...]}.
REPLY_BASE_TOKENS = 60
REPLY_TOKENS_PER_AXIS = 10


def text_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _fit(width: int, height: int, box: int) -> tuple[float, float]:
    scale = min(1.0, box / max(width, height))
    return width * scale, height * scale


def image_tokens(provider: str, width: int, height: int) -> int:
    """Estimated input tokens of one image of ``width`` × ``height`` px as sent to ``provider``."""
    if width <= 0 or height <= 0:
        return 0
    if provider == "anthropic":
        w, h = _fit(width, height, 1568)
        megapixels = w * h / 1_000_000
        if megapixels > 1.15:
            shrink = math.sqrt(1.15 / megapixels)
            w, h = w * shrink, h * shrink
        return math.ceil(w * h / 750)
    if provider == "gemini":
        if width <= 384 and height <= 384:
            return 258
        return 258 * math.ceil(width / 768) * math.ceil(height / 768)
    # OpenAI family (chat, responses, Azure, compatible servers): the high-detail tile rule.
    w, h = _fit(width, height, 2048)
    short = min(w, h)
    if short > 768:
        w, h = w * 768 / short, h * 768 / short
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def reply_tokens(active_axes: int) -> int:
    return REPLY_BASE_TOKENS + REPLY_TOKENS_PER_AXIS * active_axes


@dataclass(frozen=True)
class Prices:
    input_per_mtok: float | None
    output_per_mtok: float | None
    batch_discount: float = 0.5

    @property
    def known(self) -> bool:
        return self.input_per_mtok is not None and self.output_per_mtok is not None


def cost_usd(prices: Prices, input_tokens: int | None, output_tokens: int | None, *,
             cached_tokens: int | None = None, batch: bool = False) -> float | None:
    """Dollars for these tokens at the judge's prices (None when a price or a count is unknown).

    Cached input tokens are billed as input here (providers discount them differently; the
    figure is an upper bound).
    """
    if not prices.known or input_tokens is None or output_tokens is None:
        return None
    assert prices.input_per_mtok is not None and prices.output_per_mtok is not None
    dollars = (input_tokens * prices.input_per_mtok + output_tokens * prices.output_per_mtok) / 1_000_000
    return dollars * (1 - prices.batch_discount) if batch else dollars
