"""The one JSON cleaner and the one percentile interval of the statistics package."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from stats import errors
from stats.bootstrap import percentile_ci, percentile_interval
from stats.serialize import json_safe


def test_json_safe_gives_plain_json() -> None:
    value = {
        1: (np.float64(0.5), np.int64(3), np.bool_(True)),
        "nan": [math.nan, math.inf, -math.inf, pd.NA, pd.NaT, None],
        "array": np.array([[1.0, np.nan], [2.0, 3.0]]),
        "text": "x",
    }
    out = json_safe(value)
    assert out == {
        "1": [0.5, 3, True],
        "nan": [None, None, None, None, None, None],
        "array": [[1.0, None], [2.0, 3.0]],
        "text": "x",
    }
    assert type(out["1"][1]) is int and type(out["1"][2]) is bool
    json.dumps(out, allow_nan=False)


def test_percentile_interval_leaves_out_undefined_resamples() -> None:
    values = np.array([np.nan, np.inf, *np.arange(1.0, 101.0)])
    lo, hi = percentile_interval(values)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(np.arange(1.0, 101.0), [2.5, 97.5])))
    assert percentile_ci(values) == pytest.approx((lo, hi))
    assert all(math.isnan(v) for v in percentile_ci(np.array([])))
    assert all(math.isnan(v) for v in percentile_ci(np.array([np.nan, -np.inf])))
    assert np.isnan(percentile_interval(np.zeros((0, 3)))).all() and percentile_interval(np.zeros((0, 3))).shape == (2, 3)


def test_every_statistics_error_is_a_value_error() -> None:
    for name in ("InvalidVotes", "InvalidKindData", "AblationError"):
        assert issubclass(getattr(errors, name), errors.StatisticsError)
    assert issubclass(errors.StatisticsError, ValueError)
