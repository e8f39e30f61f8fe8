"""The settings of a render (docs/rendering.md) and their one-line errors."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from annotation.errors import ArbiterError

MODES = ("full", "canvas")
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
    that keeps growing would be. ``max_console_errors`` ``None`` allows any number.
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

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ArbiterError(f"--mode: expected full or canvas, got {self.mode[:20]!r}")
        if not 0.25 <= self.scale <= 4:
            raise ArbiterError(f"--scale: expected a number from 0.25 to 4, got {self.scale}")
        if not self.viewport_height <= self.max_height <= 100_000:
            raise ArbiterError(
                f"--max-height: expected {self.viewport_height} (the viewport's height) to 100000 pixels, got {self.max_height}"
            )
        if not 0.5 <= self.timeout_s <= 600:
            raise ArbiterError(f"--timeout: expected 0.5 to 600 seconds, got {self.timeout_s}")
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
