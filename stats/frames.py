"""Input frames of the docs/study-kinds.md "The kind report" analyses: column checks and parsing, errors
naming column and row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from stats.errors import InvalidKindData


def require_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> pd.DataFrame:
    """A private, index-reset copy of ``frame`` after checking that ``columns`` are present."""
    if not isinstance(frame, pd.DataFrame):
        raise InvalidKindData(f"{name} must be a pandas DataFrame")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidKindData(f"{name}: missing column(s) {', '.join(missing)}")
    return frame.reset_index(drop=True).copy()


def string_column(frame: pd.DataFrame, column: str, name: str) -> pd.Series:
    """``frame[column]`` as ``str`` values; a missing value raises naming the row."""
    bad = frame[column].isna()
    if bad.any():
        raise InvalidKindData(f"{name}: column {column!r} row {int(np.flatnonzero(bad)[0])}: missing value")
    return pd.Series([str(v) for v in frame[column].tolist()], index=frame.index, dtype=object)


def parse_bool(v: Any) -> bool | None:
    """True/False, 1/0, "true"/"false", "1"/"0" → bool; anything else (missing included) → None."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer, float, np.floating)) and not isinstance(v, bool):
        return bool(v) if v in (0, 1) else None
    if isinstance(v, str):
        key = v.strip().lower()
        if key in ("true", "1"):
            return True
        if key in ("false", "0"):
            return False
    return None


def bool_column(frame: pd.DataFrame, column: str, name: str, *, default: bool | None = None) -> pd.Series:
    """``frame[column]`` as ``bool`` (accepts bools, 0/1, "true"/"false"); absent column → ``default``."""
    if column not in frame.columns:
        if default is None:
            raise InvalidKindData(f"{name}: missing column {column!r}")
        return pd.Series(default, index=frame.index, dtype=bool)
    out = []
    for i, v in enumerate(frame[column].tolist()):
        parsed = parse_bool(v)
        if parsed is None:
            raise InvalidKindData(f"{name}: column {column!r} row {i}: expected a boolean, got {v!r}")
        out.append(parsed)
    return pd.Series(out, index=frame.index, dtype=bool)
