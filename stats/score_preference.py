"""Score–preference analysis of the ``pairwise`` kind (docs/study-kinds.md "The kind report"; AesCode §E.3,
§E.4, Table E5).

Pure module: pandas in, frozen dataclasses out, no Django.

docs/study-kinds.md "The kind report" rule. Each image (item) may carry imported metric scores. For a pair
whose two scores on a metric differ, a human choice scores **1** when it picks the higher-scoring image,
**0.5** for TIE and **0** when it picks the lower one; CANNOT_JUDGE carries no choice and is left out. Pairs
whose two scores are equal are reported apart (how often people said TIE, A or B there) and never
enter the agreement. Agreement is reported overall and by relative score gap
``gap = |Δscore| / metric range × 100`` in the bins ``< 5``, ``5–15``, ``≥ 15``, with percentile
2.5/97.5 intervals from a cluster bootstrap over source tasks (briefs; ``stats.bootstrap``
with the briefs as pages and one stratum).

Decisions (the protocol is silent):

1. *Metric range* = max − min of that metric over **every item of the study that carries it**
   (the ``scores`` frame, not only the items that were compared), so the bins do not depend on
   which pairs happened to be voted on. A metric whose range is 0 has only equal-score pairs.
2. The gap is rounded to 9 decimals before binning, so that ``(0.35 − 0.30) / 1 × 100`` falls in
   ``5–15`` as written, not in ``< 5`` through floating-point error. Bins are half-open:
   ``< 5`` is ``gap < 5``, ``5–15`` is ``5 ≤ gap < 15``, ``≥ 15`` is ``gap ≥ 15``.
3. Scores are equal when they are the same number (exact equality of the imported values).
4. Agreement is the mean over valid main votes (every human judgment weighs the same), i.e.
   ``Σ scores / n_votes``; a bootstrap resample is the same ratio of sums over the drawn briefs.
5. Hidden repeats (``is_repeat``) are not data (docs/protocol.md "Human reference and agreement" main
annotations) and are left out.
6. A pair lacking a score of a metric on either image is left out of that metric and counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stats.bootstrap import BriefBootstrap, bootstrap_ratio_ci, brief_bootstrap, check_bootstrap_args
from stats.errors import InvalidKindData
from stats.frames import bool_column, require_columns, string_column
from stats.serialize import json_safe

KIND = "pairwise"
LABELS: tuple[str, ...] = ("A", "B", "TIE", "CANNOT_JUDGE")
#: Relative score-gap bins of docs/study-kinds.md "The kind report": (label, low inclusive, high exclusive) in
#: % of the range.
GAP_BINS: tuple[tuple[str, float, float], ...] = (
    ("< 5", 0.0, 5.0),
    ("5–15", 5.0, 15.0),
    ("≥ 15", 15.0, math.inf),
)
VOTE_COLUMNS: tuple[str, ...] = ("comparison", "brief", "item_a", "item_b", "rater", "label")
SCORE_COLUMNS: tuple[str, ...] = ("item", "metric", "score")
GAP_DECIMALS = 9


def choice_score(label: str, score_a: float, score_b: float) -> float:
    """docs/study-kinds.md "The kind report" score of one human choice against a metric's ordering of a pair.

    1 for the higher-scoring image, 0.5 for TIE, 0 for the lower one; NaN for CANNOT_JUDGE or an
    equal-score pair (not scored). ``label`` is canonical (A = item_a, B = item_b).
    """
    if label not in LABELS:
        raise InvalidKindData(f"label must be one of {', '.join(LABELS)}, got {label!r}")
    if label == "CANNOT_JUDGE" or score_a == score_b:
        return math.nan
    if label == "TIE":
        return 0.5
    higher = "A" if score_a > score_b else "B"
    return 1.0 if label == higher else 0.0


def relative_gap(delta: np.ndarray | float, metric_range: float) -> np.ndarray | float:
    """docs/study-kinds.md "The kind report" relative score gap ``|Δscore| / range × 100``, rounded to 9
    decimals (decision 2)."""
    if not metric_range > 0:
        raise InvalidKindData("metric range must be positive to compute a relative gap")
    out = np.round(np.abs(np.asarray(delta, dtype=float)) / metric_range * 100.0, GAP_DECIMALS)
    return float(out) if out.ndim == 0 else out


def gap_bin(gap: np.ndarray | float) -> np.ndarray:
    """Index into ``GAP_BINS`` of each (already rounded) relative gap: ``< 5``, ``5–15``, ``≥ 15``."""
    g = np.atleast_1d(np.asarray(gap, dtype=float))
    if np.isnan(g).any() or (g < 0).any():
        raise InvalidKindData("relative gaps must be non-negative numbers")
    return np.searchsorted(np.array([hi for _, _, hi in GAP_BINS[:-1]]), g, side="right")


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GapBinAgreement:
    """Agreement of human choices with a metric's ordering on one set of unequal-score pairs.

    ``value = (n_higher + 0.5 n_tie) / n_votes`` (docs/study-kinds.md "The kind report"), ``ci95`` from the
    brief bootstrap. ``gap_low``/``gap_high`` bound the bin in % of the metric's range (None for "all").
    """

    bin: str
    gap_low: float | None
    gap_high: float | None
    n_pairs: int
    n_briefs: int
    n_votes: int
    n_higher: int
    n_tie: int
    n_lower: int
    value: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "bin": self.bin,
                "gap_low": self.gap_low,
                "gap_high": self.gap_high,
                "n_pairs": self.n_pairs,
                "n_briefs": self.n_briefs,
                "n_votes": self.n_votes,
                "n_higher": self.n_higher,
                "n_tie": self.n_tie,
                "n_lower": self.n_lower,
                "value": self.value,
                "ci95": list(self.ci95),
            }
        )


@dataclass(frozen=True)
class EqualScorePairs:
    """Equal-score pairs of one metric, reported apart (docs/study-kinds.md "The kind report"): the human
    answers there.

    ``tie_share = n_tie / n_votes`` over valid votes, with a brief-bootstrap interval.
    """

    n_pairs: int
    n_briefs: int
    n_votes: int
    n_a: int
    n_tie: int
    n_b: int
    tie_share: float
    tie_share_ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "n_pairs": self.n_pairs,
                "n_briefs": self.n_briefs,
                "n_votes": self.n_votes,
                "n_A": self.n_a,
                "n_TIE": self.n_tie,
                "n_B": self.n_b,
                "tie_share": self.tie_share,
                "tie_share_ci95": list(self.tie_share_ci95),
            }
        )


@dataclass(frozen=True)
class MetricPreference:
    """docs/study-kinds.md "The kind report" score–preference result for one imported metric.

    ``pairs`` has one row per scored comparison: ``comparison, brief, score_a, score_b, delta,
    gap`` (None for equal scores), ``bin`` (None for equal scores), ``n_votes``, ``agreement``
    (mean choice score, None for equal scores), ``n_A, n_TIE, n_B``.
    """

    metric: str
    range_min: float
    range_max: float
    n_items_scored: int
    overall: GapBinAgreement
    by_gap: tuple[GapBinAgreement, ...]
    equal_score: EqualScorePairs
    n_pairs_unscored: int
    n_votes_unscored: int
    pairs: tuple[dict[str, Any], ...]

    @property
    def range(self) -> float:
        return self.range_max - self.range_min

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "metric": self.metric,
                "range": {"min": self.range_min, "max": self.range_max, "width": self.range},
                "n_items_scored": self.n_items_scored,
                "overall": self.overall.to_dict(),
                "by_gap": [b.to_dict() for b in self.by_gap],
                "equal_score": self.equal_score.to_dict(),
                "n_pairs_unscored": self.n_pairs_unscored,
                "n_votes_unscored": self.n_votes_unscored,
                "pairs": [dict(p) for p in self.pairs],
            }
        )


@dataclass(frozen=True)
class ScorePreferenceResult:
    """Every metric's docs/study-kinds.md "The kind report" score–preference agreement plus the counts and
    bootstrap settings."""

    metrics: tuple[MetricPreference, ...]
    n_comparisons: int
    n_briefs: int
    n_valid_votes: int
    n_cannot_judge: int
    n_repeat_votes_excluded: int
    resamples: int
    seed: int

    def metric(self, name: str) -> MetricPreference:
        for m in self.metrics:
            if m.metric == name:
                return m
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "kind": KIND,
                "analysis": "score_preference",
                "n_comparisons": self.n_comparisons,
                "n_briefs": self.n_briefs,
                "n_valid_votes": self.n_valid_votes,
                "n_cannot_judge": self.n_cannot_judge,
                "n_repeat_votes_excluded": self.n_repeat_votes_excluded,
                "gap_bins": [label for label, _, _ in GAP_BINS],
                "metrics": [m.to_dict() for m in self.metrics],
                "bootstrap": {
                    "resamples": self.resamples,
                    "seed": self.seed,
                    "clusters": "brief",
                    "n_clusters": self.n_briefs,
                },
            }
        )


# --------------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------------


def _validate_votes(votes: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Canonical votes → (main votes frame, number of repeats dropped). Raises naming column and row."""
    name = "votes"
    frame = require_columns(votes, VOTE_COLUMNS, name)
    for col in VOTE_COLUMNS:
        frame[col] = string_column(frame, col, name)
    bad = ~frame["label"].isin(LABELS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidKindData(
            f"{name}: column 'label' row {i}: expected one of {', '.join(LABELS)}, got {frame['label'].iloc[i]!r}"
        )
    same = frame["item_a"] == frame["item_b"]
    if same.any():
        raise InvalidKindData(
            f"{name}: row {int(np.flatnonzero(same)[0])}: item_a and item_b are the same image"
        )
    frame["is_repeat"] = bool_column(frame, "is_repeat", name, default=False)
    for col in ("brief", "item_a", "item_b"):
        per = frame.groupby("comparison", sort=False)[col].nunique()
        if (per > 1).any():
            raise InvalidKindData(f"{name}: comparison {per[per > 1].index[0]!r} has more than one {col!r}")
    main = frame[~frame["is_repeat"].to_numpy(dtype=bool)]
    dup = main.duplicated(["rater", "comparison"])
    if dup.any():
        row = main[dup].iloc[0]
        raise InvalidKindData(
            f"{name}: rater {row['rater']!r} has more than one main vote on comparison {row['comparison']!r}"
        )
    return main.reset_index(drop=True), int(frame["is_repeat"].sum())


def _validate_scores(scores: pd.DataFrame) -> pd.DataFrame:
    name = "scores"
    frame = require_columns(scores, SCORE_COLUMNS, name)
    frame["item"] = string_column(frame, "item", name)
    frame["metric"] = string_column(frame, "metric", name)
    values = pd.to_numeric(frame["score"], errors="coerce").astype(float)
    bad = ~np.isfinite(values.to_numpy())
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidKindData(
            f"{name}: column 'score' row {i}: expected a finite number, got {frame['score'].iloc[i]!r}"
        )
    frame["score"] = values
    dup = frame.duplicated(["item", "metric"])
    if dup.any():
        row = frame[dup].iloc[0]
        raise InvalidKindData(
            f"{name}: item {row['item']!r} has more than one score for metric {row['metric']!r}"
        )
    return frame


def scores_from_items(items: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Bundle ``items[{id, metrics{name: score}}]`` (docs/study-kinds.md "The kind report") → long ``item,
    metric, score`` frame."""
    rows = []
    for i, item in enumerate(items):
        if "id" not in item:
            raise InvalidKindData(f"items[{i}]: missing 'id'")
        for metric, score in (item.get("metrics") or {}).items():
            rows.append({"item": str(item["id"]), "metric": str(metric), "score": score})
    return pd.DataFrame(rows, columns=list(SCORE_COLUMNS))


# --------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------


def _agreement_entry(
    label: str,
    low: float | None,
    high: float | None,
    sel_votes: pd.DataFrame,
    boot: BriefBootstrap,
) -> GapBinAgreement:
    s = sel_votes["choice_score"].to_numpy(dtype=float)
    n = len(s)
    n_higher = int((s == 1.0).sum())
    n_tie = int((s == 0.5).sum())
    n_lower = int((s == 0.0).sum())
    return GapBinAgreement(
        bin=label,
        gap_low=low,
        gap_high=high,
        n_pairs=int(sel_votes["comparison"].nunique()),
        n_briefs=int(sel_votes["brief"].nunique()),
        n_votes=n,
        n_higher=n_higher,
        n_tie=n_tie,
        n_lower=n_lower,
        value=float(s.mean()) if n else math.nan,
        ci95=bootstrap_ratio_ci(boot, sel_votes["brief"].to_numpy(dtype=object), s, np.ones(n)),
    )


def _metric_preference(
    metric: str, valid: pd.DataFrame, comparisons: pd.DataFrame, scores: pd.DataFrame, boot: BriefBootstrap,
    fixed_range: tuple[float, float] | None = None,
) -> MetricPreference:
    ms = scores[scores["metric"] == metric]
    lookup = dict(zip(ms["item"], ms["score"], strict=True))
    if fixed_range is not None:  # a metric defined on a known scale (the Visual score's 0–100 points)
        range_min, range_max = float(fixed_range[0]), float(fixed_range[1])
    else:
        range_min = float(ms["score"].min())
        range_max = float(ms["score"].max())
    width = range_max - range_min

    comp = comparisons.copy()
    comp["score_a"] = comp["item_a"].map(lookup).astype(float)
    comp["score_b"] = comp["item_b"].map(lookup).astype(float)
    scored = comp["score_a"].notna() & comp["score_b"].notna()
    comp["delta"] = comp["score_a"] - comp["score_b"]
    comp["equal"] = scored & (comp["delta"] == 0)
    unequal = scored & ~comp["equal"]
    comp["gap"] = np.nan
    comp["bin"] = -1
    if unequal.any():
        # width > 0 whenever two scores differ.
        gaps = relative_gap(comp.loc[unequal, "delta"].to_numpy(), width)
        comp.loc[unequal, "gap"] = gaps
        comp.loc[unequal, "bin"] = gap_bin(gaps)

    v = valid.merge(
        comp[["comparison", "score_a", "score_b", "delta", "equal", "gap", "bin"]], on="comparison"
    )
    v_scored = v[v["score_a"].notna() & v["score_b"].notna()]
    v_unequal = v_scored[~v_scored["equal"].to_numpy(dtype=bool)].copy()
    # docs/study-kinds.md "The kind report": 1 for the higher-scoring image, 0.5 for TIE, 0 for the lower.
    higher_is_a = (v_unequal["delta"] > 0).to_numpy()
    lab = v_unequal["label"].to_numpy(dtype=object)
    v_unequal["choice_score"] = np.where(lab == "TIE", 0.5, np.where((lab == "A") == higher_is_a, 1.0, 0.0))
    v_equal = v_scored[v_scored["equal"].to_numpy(dtype=bool)]

    overall = _agreement_entry("all", None, None, v_unequal, boot)
    by_gap = tuple(
        _agreement_entry(
            label,
            lo,
            None if not math.isfinite(hi) else hi,
            v_unequal[v_unequal["bin"].to_numpy() == k],
            boot,
        )
        for k, (label, lo, hi) in enumerate(GAP_BINS)
    )

    eq_labels = v_equal["label"].to_numpy(dtype=object)
    is_tie = (eq_labels == "TIE").astype(float)
    equal = EqualScorePairs(
        n_pairs=int(comp["equal"].sum()),
        n_briefs=int(comp.loc[comp["equal"], "brief"].nunique()),
        n_votes=len(v_equal),
        n_a=int((eq_labels == "A").sum()),
        n_tie=int(is_tie.sum()),
        n_b=int((eq_labels == "B").sum()),
        tie_share=float(is_tie.mean()) if len(v_equal) else math.nan,
        tie_share_ci95=bootstrap_ratio_ci(
            boot, v_equal["brief"].to_numpy(dtype=object), is_tie, np.ones(len(v_equal))
        ),
    )

    per_pair_score = v_unequal.groupby("comparison")["choice_score"].mean()
    per_pair_counts = v_scored.groupby(["comparison", "label"]).size().unstack(fill_value=0)
    pairs = []
    for row in comp[scored].itertuples(index=False):
        counts = per_pair_counts.loc[row.comparison] if row.comparison in per_pair_counts.index else {}
        n_a = int(counts.get("A", 0))
        n_t = int(counts.get("TIE", 0))
        n_b = int(counts.get("B", 0))
        pairs.append(
            {
                "comparison": row.comparison,
                "brief": row.brief,
                "item_a": row.item_a,
                "item_b": row.item_b,
                "score_a": float(row.score_a),
                "score_b": float(row.score_b),
                "delta": float(row.delta),
                "gap": None if row.equal else float(row.gap),
                "bin": None if row.equal else GAP_BINS[int(row.bin)][0],
                "n_votes": n_a + n_t + n_b,
                "n_A": n_a,
                "n_TIE": n_t,
                "n_B": n_b,
                "agreement": None
                if row.equal or row.comparison not in per_pair_score.index
                else float(per_pair_score.loc[row.comparison]),
            }
        )
    return MetricPreference(
        metric=metric,
        range_min=range_min,
        range_max=range_max,
        n_items_scored=len(ms),
        overall=overall,
        by_gap=by_gap,
        equal_score=equal,
        n_pairs_unscored=int((~scored).sum()),
        n_votes_unscored=len(v) - len(v_scored),
        pairs=tuple(pairs),
    )


def score_preference(
    votes: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    resamples: int,
    seed: int,
    metrics: Sequence[str] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> ScorePreferenceResult:
    """docs/study-kinds.md "The kind report" score–preference agreement of human choices with each imported
    metric.

    ``votes``: one row per answered trial, canonical labels: ``comparison, brief, item_a, item_b,
    rater, label`` (A = item_a chosen, B = item_b, TIE, CANNOT_JUDGE) and optional ``is_repeat``
    (hidden repeats are dropped). ``scores``: ``item, metric, score`` for every item of the study
    (the metric range is taken over all of them, decision 1, unless ``ranges`` gives a metric's
    scale as ``(min, max)``: a checklist judge's Visual score is on 0–100 points, docs/protocol.md
    "Judge reliability against people"). ``metrics`` restricts / orders the metrics reported
    (default: every metric in ``scores``, sorted).

    Intervals: percentile 2.5/97.5 of a cluster bootstrap over briefs, one count matrix drawn
    from (briefs, resamples, seed) shared by every metric and bin. Deterministic in its inputs.
    """
    check_bootstrap_args(resamples, seed)
    main, n_repeats = _validate_votes(votes)
    score_frame = _validate_scores(scores)
    known = sorted(set(score_frame["metric"]))
    if metrics is None:
        chosen = known
    else:
        chosen = [str(m) for m in metrics]
        unknown = [m for m in chosen if m not in known]
        if unknown:
            raise InvalidKindData(f"scores: no score for metric(s) {', '.join(unknown)}")
    valid = main[main["label"] != "CANNOT_JUDGE"].reset_index(drop=True)
    comparisons = main.groupby("comparison", sort=True)[["brief", "item_a", "item_b"]].first().reset_index()
    boot = brief_bootstrap(comparisons["brief"].tolist(), resamples=resamples, seed=seed)
    fixed = dict(ranges or {})
    for m, (low, high) in fixed.items():
        if not (math.isfinite(low) and math.isfinite(high) and high > low):
            raise InvalidKindData(f"ranges: metric {m!r} needs a finite range with max > min, got {(low, high)}")
    results = tuple(_metric_preference(m, valid, comparisons, score_frame, boot, fixed.get(m)) for m in chosen)
    return ScorePreferenceResult(
        metrics=results,
        n_comparisons=len(comparisons),
        n_briefs=len(boot.briefs),
        n_valid_votes=len(valid),
        n_cannot_judge=len(main) - len(valid),
        n_repeat_votes_excluded=n_repeats,
        resamples=int(resamples),
        seed=int(seed),
    )


__all__ = [
    "GAP_BINS",
    "EqualScorePairs",
    "GapBinAgreement",
    "MetricPreference",
    "ScorePreferenceResult",
    "choice_score",
    "gap_bin",
    "relative_gap",
    "score_preference",
    "scores_from_items",
]
