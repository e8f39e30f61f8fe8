"""The API's JSON parser: DRF's, with bounded nesting and no NUL (SECURITY.md row 19)."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from annotation.safe_json import JSONRefused, loads_bounded, refuse_constant


class BoundedJSONParser(JSONParser):
    """400 with one line for a body nested deeper than ``ARBITER_JSON_MAX_DEPTH`` or holding NUL."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            return loads_bounded(
                text, max_depth=int(getattr(settings, "ARBITER_JSON_MAX_DEPTH", 64)), parse_constant=refuse_constant
            )
        except JSONRefused as exc:
            raise ParseError(f"JSON refused: {exc}") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {' '.join(str(exc).split())}") from None
