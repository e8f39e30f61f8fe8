"""JSON with bounded nesting and no NUL characters (SECURITY.md row 19).

``json.loads`` of ``[[[[...]]]]`` 100,000 deep raises ``RecursionError`` (a 500 in a view, a
traceback in a command), and a ``\\u0000`` inside a string parses fine but cannot be stored in a
PostgreSQL text column. :func:`loads_bounded` turns both into a :class:`JSONRefused` (a
``ValueError``) whose message names the depth or the JSON path. Pure Python, no Django.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

MAX_DEPTH = 64
# json.loads(text) without options is _default_decoder.decode: skip whitespace, scan one value,
# skip whitespace, refuse extra data. A str object "{...}" has no whitespace at either end, so one
# scan_once that ends at the last character gives the same value (anything else takes json.loads).
_SCAN_OBJECT: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class JSONRefused(ValueError):
    """Well-formed JSON that Arbiter does not take: nested too deeply, or a string with NUL."""


def refuse_constant(name: str) -> NoReturn:
    """``json.loads``'s ``parse_constant``: ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (a ``ValueError``)."""
    raise ValueError(f"{name} is not valid JSON")


def check_value(value: Any, *, max_depth: int = MAX_DEPTH, allow_nul: bool = False) -> None:
    """Refuse nesting deeper than ``max_depth`` and (unless allowed) NUL in any key or string."""
    stack: list[tuple[Any, str, int]] = [(value, "$", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                raise JSONRefused(f"nested deeper than {max_depth} levels at {path}")
            if isinstance(item, dict):
                for key, child in item.items():
                    child_path = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)[:40]}]"
                    if not allow_nul and "\x00" in key:
                        raise JSONRefused(f"a key at {path} contains a NUL character")
                    stack.append((child, child_path, depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, str) and not allow_nul and "\x00" in item:
            raise JSONRefused(f"{path} contains a NUL character")


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_DEPTH, allow_nul: bool = False, **options: Any) -> Any:
    """``json.loads`` that raises :class:`JSONRefused` instead of recursing without bound or
    returning NUL characters; ``json.JSONDecodeError`` for malformed JSON as usual."""
    try:
        value = None
        if not options and type(text) is str and text[:1] == "{" and text[-1:] == "}":
            try:
                value, end = _SCAN_OBJECT(text, 0)
            except (ValueError, StopIteration):
                value = None
            else:
                if end != len(text):
                    value = None
        if value is None:
            value = json.loads(text, **options)
    except RecursionError:
        raise JSONRefused(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. an integer past Python's 4,300-digit conversion limit
        raise JSONRefused(f"not valid JSON ({' '.join(str(exc).split())})") from None
    # Fast path (exact): fewer opening brackets in the whole text than max_depth cannot nest
    # deeper, and JSON can hold a NUL only as the escape \u0000 (json.loads refuses a raw one in
    # a string), so a text without that escape has none. Else the full walk names the JSON path.
    if isinstance(text, bytes):
        short = text.count(b"[") + text.count(b"{") < max_depth
        nul = b"\\u0000" in text
    else:
        short = text.count("[") + text.count("{") < max_depth
        nul = "\\u0000" in text
    if short and (allow_nul or not nul) and options.get("strict", True):
        return value
    check_value(value, max_depth=max_depth, allow_nul=allow_nul)
    return value
