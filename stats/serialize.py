"""Plain JSON types for every report of the package (docs/protocol.md "Report keys" keys,
docs/study-kinds.md "The kind report" reports).

``json_safe`` is the one cleaner: numpy scalars and arrays → Python, NaN / ±inf / ``pd.NA`` /
``NaT`` → ``None``, tuples → lists, mapping keys → ``str``; anything else that JSON cannot hold is
written as its ``str``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd


def json_safe(value: Any) -> Any:
    """``value`` in plain JSON types (see the module docstring); recursive over mappings and lists."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        f = float(value)
        return f if math.isfinite(f) else None
    if value is None or isinstance(value, str):
        return value
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)
