"""The settings of a render (docs/rendering.md) and their one-line errors."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from annotation.errors import ArbiterError

MODES = ("full", "canvas")
# How failed renders count in a leaderboard (docs/protocol.md "Failed renders in the leaderboard"):
# AmbiHTMLBench scores only rendered outputs, AesCode keeps failures in the denominator (a failed
# output loses each pair to a rendered one). Kept beside the render settings in the study's
# ``render`` object as ``failure_rule``; not a setting of the render itself (a page renders the
# same under either rule, so a finished render is kept whatever the rule).
FAILURE_RULES = ("ambihtmlbench", "aescode")
DEFAULT_FAILURE_RULE = "ambihtmlbench"
FAILURE_RULE_KEY = "failure_rule"
FAILURE_RULE_NAMES = {"ambihtmlbench": "AmbiHTMLBench", "aescode": "AesCode"}
# A page's render time is capped: a looping page holds a browser (and a researcher's run) for at
# most this long (issue 50: 600 s let one upload hold the queue for an hour).
MAX_TIMEOUT_S = 60.0
_VIEWPORT = re.compile(r"^\s*(\d{1,5})\s*[xX×]\s*(\d{1,5})\s*$")


class RenderUnavailable(ArbiterError):
    """No browser to render with (Chromium or Playwright missing): one line naming what to install."""


def parse_viewport(text: str) -> tuple[int, int]:
    """``"1280x720"`` → ``(1280, 720)``; anything else is a one-line error."""
    match = _VIEWPORT.match(text or "")
    if not match:
        raise ArbiterError(f"--viewport: expected WIDTHxHEIGHT such as 1280x720, got {text[:40]!r}")
    width, height = int(match[1]), int(match[2])
    if not (100 <= width <= 8192 and 100 <= height <= 8192):
        raise ArbiterError(f"--viewport: width and height are 100 to 8192 pixels, got {width}x{height}")
    return width, height


@dataclass(frozen=True)
class RenderSettings:
    """What a render depends on besides the file; stored in every render's JSON (``settings``).

    ``max_height`` caps a ``full`` page (CSS pixels): a taller page is a failed render, as a page
    that keeps growing would be. ``max_console_errors`` ``None`` allows any number. ``memory_mb``
    bounds the browser's whole memory while a page renders (annotation.render.memory).
    """

    viewport_width: int = 1280
    viewport_height: int = 720
    scale: float = 1.0
    mode: str = "full"
    max_height: int = 10000
    timeout_s: float = 20.0
    javascript: bool = True
    max_console_errors: int | None = None
    settle_ms: int = 1000
    memory_mb: int = 1024

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ArbiterError(f"--mode: expected full or canvas, got {self.mode[:20]!r}")
        if not 0.25 <= self.scale <= 4:
            raise ArbiterError(f"--scale: expected a number from 0.25 to 4, got {self.scale}")
        if not self.viewport_height <= self.max_height <= 100_000:
            raise ArbiterError(
                f"--max-height: expected {self.viewport_height} (the viewport's height) to 100000 pixels, got {self.max_height}"
            )
        if not 0.5 <= self.timeout_s <= MAX_TIMEOUT_S:
            raise ArbiterError(f"--timeout: expected 0.5 to {MAX_TIMEOUT_S:g} seconds, got {self.timeout_s}")
        # At most 4 GB a browser: a study's render settings come from a researcher, and a page needs far less.
        if not isinstance(self.memory_mb, int) or not 256 <= self.memory_mb <= 4096:
            raise ArbiterError(f"--memory-mb: expected 256 to 4096 MB, got {str(self.memory_mb)[:20]}")
        if self.max_console_errors is not None and self.max_console_errors < 0:
            raise ArbiterError(f"--max-console-errors: expected 0 or more, got {self.max_console_errors}")

    @property
    def viewport(self) -> str:
        return f"{self.viewport_width}x{self.viewport_height}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["viewport_width"], data["viewport_height"]
        return {"viewport": self.viewport, **data}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RenderSettings:
        """The inverse of :meth:`to_json` (a study's stored settings); unknown keys are an error."""
        data = dict(data)
        width, height = parse_viewport(str(data.pop("viewport", "1280x720")))
        known = {f for f in cls.__dataclass_fields__ if f not in ("viewport_width", "viewport_height")}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ArbiterError(f"render settings: unknown key {unknown[0]!r} (known: viewport, {', '.join(sorted(known))})")
        return cls(viewport_width=width, viewport_height=height, **data)


def parse_failure_rule(value: object, *, where: str = "--render-failures") -> str:
    """``"ambihtmlbench"`` or ``"aescode"`` (any case); anything else is a one-line error naming ``where``."""
    rule = value.strip().lower() if isinstance(value, str) else value
    if rule not in FAILURE_RULES:
        shown = repr(value[:40]) if isinstance(value, str) else type(value).__name__
        raise ArbiterError(f"{where}: expected {' or '.join(FAILURE_RULES)}, got {shown}")
    return str(rule)


def study_render_from_json(data: dict[str, Any]) -> dict[str, Any]:
    """A study's ``render`` object (the bundle's ``$.render``, ``Study.options["render"]``): the render
    settings with defaults filled in, plus ``failure_rule`` (default ``ambihtmlbench``)."""
    data = dict(data)
    rule = parse_failure_rule(data.pop(FAILURE_RULE_KEY, DEFAULT_FAILURE_RULE), where=FAILURE_RULE_KEY)
    return {**RenderSettings.from_json(data).to_json(), FAILURE_RULE_KEY: rule}


def failure_rule_of(options: dict[str, Any] | None) -> str:
    """The failure rule of a study from its options (``options["render"]["failure_rule"]``); the
    default when the study has none (a study of images, or one made before the rule existed)."""
    render = (options or {}).get("render")
    rule = render.get(FAILURE_RULE_KEY) if isinstance(render, dict) else None
    return rule if rule in FAILURE_RULES else DEFAULT_FAILURE_RULE
