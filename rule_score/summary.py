"""Rule and its channels per system, with brief-block bootstrap intervals (docs/protocol.md "AesCode's
rule score").

Each output (one system's render of one brief) has a result (:class:`~rule_score.verifiers.RuleResult`
as JSON). A system's score on a channel is the mean of that channel's score over its outputs where
the channel was scored; its Rule is the mean of its outputs' Rule over the outputs where any channel
was. The interval is the percentile interval of the same ratio over the cluster bootstrap of the
briefs (``stats.bootstrap.brief_bootstrap``: one draw of briefs shared by every system and
channel, each brief carrying all of its outputs). No Django here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rule_score.verifiers import CHANNELS, SCORED
from stats.bootstrap import brief_bootstrap, percentile_ci, ratio_of_sums

MEASURES = ("rule", *CHANNELS)


@dataclass(frozen=True)
class OutputResult:
    """One output: its brief, its system and its stored result (``RuleResult.to_json()``)."""

    brief: str
    system: str
    result: Mapping[str, Any]


@dataclass(frozen=True)
class MeasureSummary:
    mean: float | None
    low: float | None
    high: float | None
    n: int  # outputs where it was scored

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci": [self.low, self.high], "n": self.n}


@dataclass(frozen=True)
class SystemRule:
    system: str
    outputs: int
    measures: dict[str, MeasureSummary]

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "outputs": self.outputs,
            **{m: s.to_json() for m, s in self.measures.items()},
        }


def _value(result: Mapping[str, Any], measure: str) -> float | None:
    if measure == "rule":
        value = result.get("rule")
    else:
        channel = (result.get("channels") or {}).get(measure) or {}
        value = channel.get("score") if channel.get("status") == SCORED else None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def summarize(outputs: Sequence[OutputResult], *, resamples: int = 2000, seed: int = 0) -> list[SystemRule]:
    """One :class:`SystemRule` per system (sorted by id), every measure with its interval."""
    boot = brief_bootstrap([o.brief for o in outputs], resamples=resamples, seed=seed)
    weights = boot.counts.astype(float)
    out = []
    for system in sorted({o.system for o in outputs}):
        mine = [o for o in outputs if o.system == system]
        columns = boot.column_of([o.brief for o in mine])
        measures = {}
        for measure in MEASURES:
            values = [_value(o.result, measure) for o in mine]
            num = np.array([v if v is not None else 0.0 for v in values])
            den = np.array([1.0 if v is not None else 0.0 for v in values])
            n = int(den.sum())
            if n == 0:
                measures[measure] = MeasureSummary(None, None, None, 0)
                continue
            num_b = np.bincount(columns, weights=num, minlength=len(boot.briefs))
            den_b = np.bincount(columns, weights=den, minlength=len(boot.briefs))
            low, high = percentile_ci(np.asarray(ratio_of_sums(weights @ num_b, weights @ den_b)))
            measures[measure] = MeasureSummary(float(num.sum() / n), _finite(low), _finite(high), n)
        out.append(SystemRule(system=system, outputs=len(mine), measures=measures))
    return out
