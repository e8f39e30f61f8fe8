"""Per-provider image limit presets (issue 14 item 8), measured the way each provider measures.

Pure: no Django. A judge's own ``max_image_edge`` / ``max_image_bytes`` / ``max_request_bytes``
win; otherwise the preset of its provider applies. Byte limits are converted to the raw image
bytes our repair works on: Anthropic's 5 MB per image is counted on the *base64* text
(5,242,880 base64 characters = 3,932,160 raw bytes); OpenAI's 20 MB per image is on the file.

=================  ========  ==================  ============  ===================
provider           images    long edge (px)      per image     per request
=================  ========  ==================  ============  ===================
openai / azure     500       — (resized by them) 20 MB raw     50 MB
openai-responses   500       —                   20 MB raw     50 MB
anthropic          100       8,000               5 MB base64   32 MB
gemini             3,600     —                   —             20 MB (inline data)
=================  ========  ==================  ============  ===================
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1024 * 1024


@dataclass(frozen=True)
class ImageLimits:
    max_images: int
    max_edge: int | None
    max_image_bytes: int | None  # as the provider counts them
    max_request_bytes: int | None
    base64_measured: bool = False  # max_image_bytes counts base64 characters, not file bytes

    def raw_image_bytes(self) -> int | None:
        """The per-image limit in file bytes (what ``judges.images.prepare_image`` takes)."""
        if self.max_image_bytes is None:
            return None
        return self.max_image_bytes * 3 // 4 if self.base64_measured else self.max_image_bytes


PRESETS: dict[str, ImageLimits] = {
    "openai": ImageLimits(500, None, 20 * MB, 50 * MB),
    "openai-responses": ImageLimits(500, None, 20 * MB, 50 * MB),
    "azure-openai": ImageLimits(500, None, 20 * MB, 50 * MB),
    "anthropic": ImageLimits(100, 8000, 5 * MB, 32 * MB, base64_measured=True),
    "gemini": ImageLimits(3600, None, None, 20 * MB),
}


def preset_for(provider: str) -> ImageLimits | None:
    return PRESETS.get(provider)
