"""Inter-rater agreement for every study kind (docs/protocol.md "Human reference and agreement" statistics
applied to the other study kinds (docs/study-kinds.md "The kind report")).

Pure module: pandas in, frozen dataclasses out, no Django. The formulas are those of
docs/protocol.md "Human reference and agreement" and are reused from ``stats.agreement`` on per-unit count
matrices (rows = units, columns = the kind's values in order):

- exact agreement (``exact_agreement``) and the Fleiss-type κ for unequal rater counts
  (``fleiss_kappa``: items with ``n_i ≥ 2``; with equal ``n_i`` it is statsmodels' Fleiss κ);
- Krippendorff α at the level the kind's answers have:

  ===========  ======================  ==============================  =================
  kind         unit                    values (in order)               α level
  ===========  ======================  ==============================  =================
  pairwise     comparison              B < TIE < A                     ordinal
  checklist    predicate               NO, YES                         nominal
  rating       item × dimension        the scale, e.g. 1 < 2 < … < 5   ordinal
  ===========  ======================  ==============================  =================

  Missing: a pairwise CANNOT_JUDGE, a checklist UNCLEAR (docs/study-kinds.md "The kind report": human UNCLEAR
  is missing), a unit a rater did not see. The ordinal α is ``stats.agreement.krippendorff_alpha_ordinal``;
  the nominal α is the ``krippendorff`` package (point) and the same formula on the weighted
  coincidence matrix (bootstrap). For a two-valued scale the ordinal and nominal α coincide.
  κ treats the rating scale as nominal categories (it ignores the order); α is the ordered measure.
- hidden-repeat consistency (docs/protocol.md "Human reference and agreement"): original vs repeat answer of
the same rater on the same
  unit (and dimension); equal raw answers / answered pairs, the missing labels (CANNOT_JUDGE,
  UNCLEAR) counting as answers; for ratings also the mean absolute difference and the share within
  one scale point.

Intervals: percentile 2.5/97.5 of the cluster bootstrap over briefs (docs/study-kinds.md "The kind report";
the ``brief`` column, or each unit its own cluster when absent), one count matrix for every dimension.
Hidden repeats are never part of the agreement statistics (docs/protocol.md "Human reference and agreement"
main annotations).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stats.agreement import (
    coincidence_matrix,
    exact_agreement,
    fleiss_kappa,
    hidden_repeat_agreement,
    krippendorff_alpha_ordinal,
    krippendorff_package_alpha,
    n_agreement_pairs,
)
from stats.bootstrap import BriefBootstrap, brief_bootstrap, check_bootstrap_args, percentile_ci
from stats.errors import InvalidKindData
from stats.frames import bool_column, require_columns, string_column
from stats.serialize import json_safe

ANSWER_COLUMNS: tuple[str, ...] = ("unit", "rater", "answer")


@dataclass(frozen=True)
class KindScale:
    """The answers of a kind: valid values in order, the missing labels, and the α level.

    ``numeric``: the answers are integers on a rating scale, one agreement entry per dimension,
    and the hidden repeats also report the mean absolute difference. The caller (the kind's report)
    picks its scale with ``winner_scale``, ``predicate_scale`` or ``rating_scale``.
    """

    kind: str
    values: tuple[Any, ...]
    missing: tuple[Any, ...]
    level: str
    numeric: bool = False


def winner_scale(kind: str = "pairwise") -> KindScale:
    """A pairwise winner: B < TIE < A, CANNOT_JUDGE missing, ordinal α."""
    return KindScale(kind, ("B", "TIE", "A"), ("CANNOT_JUDGE",), "ordinal")


def predicate_scale(kind: str = "checklist") -> KindScale:
    """A checklist predicate: NO, YES, UNCLEAR missing, nominal α."""
    return KindScale(kind, ("NO", "YES"), ("UNCLEAR",), "nominal")


def rating_scale(scale: tuple[int, int] | None = (1, 5), kind: str = "rating") -> KindScale:
    """A rating: the integers low..high in order, one entry per dimension, ordinal α."""
    if scale is None or len(scale) != 2 or not scale[0] < scale[1]:
        raise InvalidKindData("rating: scale must be (low, high) with low < high")
    return KindScale(kind, tuple(range(int(scale[0]), int(scale[1]) + 1)), (), "ordinal", numeric=True)


def nominal_alpha_from_coincidences(o: np.ndarray) -> np.ndarray | float:
    """Nominal Krippendorff α from a coincidence matrix, vectorized over leading axes
    (docs/study-kinds.md "The kind report" checklist).

    ``α = 1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k`` with ``n_c = Σ_k o_ck``, ``n = Σ_c n_c``.
    NaN when the expected disagreement is 0 (a single value used).
    """
    o = np.asarray(o, dtype=float)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    observed = n - np.trace(o, axis1=-2, axis2=-1)
    expected = n**2 - (n_c**2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(
            (expected > 0) & (n > 1), 1 - (n - 1) * observed / np.where(expected > 0, expected, 1.0), np.nan
        )
    return float(alpha) if alpha.ndim == 0 else alpha


def krippendorff_alpha_nominal(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | float:
    """Nominal α from a (units × values) count matrix; the ``krippendorff`` package for the point value."""
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2:
        raise InvalidKindData("counts must be a 2-D (units × values) array")
    if weights is not None:
        return nominal_alpha_from_coincidences(coincidence_matrix(c, weights))
    return krippendorff_package_alpha(c, level="nominal")


def krippendorff_alpha(
    counts: np.ndarray, level: str, weights: np.ndarray | None = None
) -> np.ndarray | float:
    """α at ``level`` (``"ordinal"``: ``stats.agreement``; ``"nominal"``: above)."""
    if level == "ordinal":
        return krippendorff_alpha_ordinal(counts, weights)
    if level == "nominal":
        return krippendorff_alpha_nominal(counts, weights)
    raise InvalidKindData(f"unknown level {level!r}")


def value_counts(
    units: Sequence[object], answers: Sequence[object], unit_order: Sequence[object], values: Sequence[object]
) -> np.ndarray:
    """(units × values) counts of valid answers; answers outside ``values`` (missing) are not counted."""
    u_index = {u: i for i, u in enumerate(unit_order)}
    v_index = {v: j for j, v in enumerate(values)}
    out = np.zeros((len(unit_order), len(values)), dtype=np.int64)
    for u, a in zip(units, answers, strict=True):
        j = v_index.get(a)
        if j is not None:
            out[u_index[u], j] += 1
    return out


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepeatConsistency:
    """docs/protocol.md "Human reference and agreement" hidden-repeat agreement (equal answers / pairs); for
    ratings also |Δ| summaries."""

    agree: int
    n: int
    mean_abs_difference: float | None = None
    within_one: float | None = None

    @property
    def value(self) -> float:
        return self.agree / self.n if self.n else math.nan

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"agree": self.agree, "n": self.n, "value": self.value}
        if self.mean_abs_difference is not None or self.within_one is not None:
            out["mean_abs_difference"] = self.mean_abs_difference
            out["within_one"] = self.within_one
        return json_safe(out)


@dataclass(frozen=True)
class AgreementEntry:
    """Agreement of one kind (one dimension for ratings) with brief-bootstrap intervals."""

    dimension: str | None
    level: str
    values: tuple[Any, ...]
    n_units: int
    n_pairable_units: int
    n_answers: int
    n_valid: int
    n_pairs: int
    exact_agreement: float
    exact_agreement_ci95: tuple[float, float]
    fleiss_kappa: float
    fleiss_kappa_ci95: tuple[float, float]
    alpha: float
    alpha_ci95: tuple[float, float]
    hidden_repeat: RepeatConsistency

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "dimension": self.dimension,
                "values": list(self.values),
                "n_units": self.n_units,
                "n_pairable_units": self.n_pairable_units,
                "n_main_answers": self.n_answers,
                "n_valid_answers": self.n_valid,
                "coverage": self.n_valid / self.n_answers if self.n_answers else math.nan,
                "exact_agreement": {
                    "value": self.exact_agreement,
                    "ci95": list(self.exact_agreement_ci95),
                    "n_pairs": self.n_pairs,
                },
                "fleiss_kappa": {"value": self.fleiss_kappa, "ci95": list(self.fleiss_kappa_ci95)},
                "krippendorff_alpha": {
                    "level": self.level,
                    "value": self.alpha,
                    "ci95": list(self.alpha_ci95),
                },
                "hidden_repeat_agreement": self.hidden_repeat.to_dict(),
            }
        )


@dataclass(frozen=True)
class KindAgreementResult:
    """Agreement for one study: one entry (pairwise, checklist) or one per dimension (rating)."""

    kind: str
    level: str
    entries: tuple[AgreementEntry, ...]
    n_repeat_answers: int
    n_clusters: int
    resamples: int
    seed: int

    def entry(self, dimension: str | None = None) -> AgreementEntry:
        for e in self.entries:
            if e.dimension == dimension:
                return e
        raise KeyError(dimension)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "kind": self.kind,
                "analysis": "agreement",
                "level": self.level,
                "n_repeat_answers": self.n_repeat_answers,
                "entries": [e.to_dict() for e in self.entries],
                "bootstrap": {
                    "resamples": self.resamples,
                    "seed": self.seed,
                    "clusters": "brief",
                    "n_clusters": self.n_clusters,
                },
            }
        )


# --------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------


def _validate(answers: pd.DataFrame, ks: KindScale) -> pd.DataFrame:
    name = "answers"
    cols = (*ANSWER_COLUMNS, "dimension") if ks.numeric else ANSWER_COLUMNS
    frame = require_columns(answers, cols, name)
    for col in ("unit", "rater"):
        frame[col] = string_column(frame, col, name)
    frame["dimension"] = string_column(frame, "dimension", name) if ks.numeric else ""
    frame["brief"] = string_column(frame, "brief", name) if "brief" in frame.columns else frame["unit"]
    frame["is_repeat"] = bool_column(frame, "is_repeat", name, default=False)
    allowed = set(ks.values) | set(ks.missing)
    parsed = []
    for i, v in enumerate(frame["answer"].tolist()):
        if ks.numeric:
            try:
                f = float(v)
            except (TypeError, ValueError):
                f = math.nan
            key: Any = int(f) if math.isfinite(f) and f == round(f) else None
        else:
            key = str(v).strip().upper() if isinstance(v, str) else None
        if key not in allowed:
            expected = ", ".join(str(x) for x in (*ks.values, *ks.missing))
            raise InvalidKindData(f"{name}: column 'answer' row {i}: expected one of {expected}, got {v!r}")
        parsed.append(key)
    frame["answer"] = pd.Series(parsed, index=frame.index, dtype=object)
    per = frame.groupby("unit", sort=False)["brief"].nunique()
    if (per > 1).any():
        raise InvalidKindData(f"{name}: unit {per[per > 1].index[0]!r} has more than one 'brief'")
    main = frame[~frame["is_repeat"].to_numpy(dtype=bool)]
    dup = main.duplicated(["rater", "unit", "dimension"])
    if dup.any():
        row = main[dup].iloc[0]
        raise InvalidKindData(
            f"{name}: rater {row['rater']!r} has more than one main answer on unit {row['unit']!r}"
        )
    return frame


def _entry(dimension: str | None, frame: pd.DataFrame, ks: KindScale, boot: BriefBootstrap) -> AgreementEntry:
    main = frame[~frame["is_repeat"].to_numpy(dtype=bool)]
    units = sorted(set(main["unit"]))
    counts = value_counts(main["unit"].tolist(), main["answer"].tolist(), units, ks.values)
    unit_brief = main.groupby("unit")["brief"].first().reindex(units).tolist()
    w = boot.weights(unit_brief) if units else np.zeros((boot.resamples, 0))

    def point_and_ci(fn: Any) -> tuple[float, tuple[float, float]]:
        if not units:
            return math.nan, (math.nan, math.nan)
        return float(fn(counts)), percentile_ci(np.asarray(fn(counts, w)))

    exact, exact_ci = point_and_ci(exact_agreement)
    kappa, kappa_ci = point_and_ci(fleiss_kappa)
    alpha, alpha_ci = point_and_ci(lambda c, w=None: krippendorff_alpha(c, ks.level, w))

    reps = frame[frame["is_repeat"].to_numpy(dtype=bool)][["rater", "unit", "dimension", "answer"]]
    pairs = reps.merge(
        main[["rater", "unit", "dimension", "answer"]],
        on=["rater", "unit", "dimension"],
        suffixes=("_repeat", "_original"),
    )
    rep = hidden_repeat_agreement(pairs["answer_original"].tolist(), pairs["answer_repeat"].tolist())
    mad = within = None
    if ks.numeric:
        diff = np.abs(
            pairs["answer_original"].to_numpy(dtype=float) - pairs["answer_repeat"].to_numpy(dtype=float)
        )
        mad = float(diff.mean()) if len(diff) else math.nan
        within = float((diff <= 1).mean()) if len(diff) else math.nan
    n_per = counts.sum(axis=1)
    return AgreementEntry(
        dimension=dimension,
        level=ks.level,
        values=ks.values,
        n_units=int((n_per >= 1).sum()),
        n_pairable_units=int((n_per >= 2).sum()),
        n_answers=len(main),
        n_valid=int(counts.sum()),
        n_pairs=n_agreement_pairs(counts),
        exact_agreement=exact,
        exact_agreement_ci95=exact_ci,
        fleiss_kappa=kappa,
        fleiss_kappa_ci95=kappa_ci,
        alpha=alpha,
        alpha_ci95=alpha_ci,
        hidden_repeat=RepeatConsistency(rep.agree, rep.n, mad, within),
    )


def kind_agreement(
    answers: pd.DataFrame,
    *,
    scale: KindScale,
    resamples: int,
    seed: int,
) -> KindAgreementResult:
    """Fleiss-type κ, Krippendorff α at the kind's level and hidden-repeat consistency
    (docs/protocol.md "Human reference and agreement", docs/study-kinds.md "The kind report").

    ``answers``: one row per answer, ``unit`` (comparison / predicate / rated item), ``rater``,
    ``answer`` (on ``scale``: canonical A/B/TIE/CANNOT_JUDGE; YES/NO/UNCLEAR; an integer), optional
    ``brief`` (bootstrap cluster; default the unit), ``is_repeat``, and for ratings ``dimension``.
    """
    check_bootstrap_args(resamples, seed)
    ks = scale
    frame = _validate(answers, ks)
    boot = brief_bootstrap(frame["brief"].tolist(), resamples=resamples, seed=seed)
    if ks.numeric:
        entries = tuple(
            _entry(dim, frame[frame["dimension"] == dim], ks, boot) for dim in sorted(set(frame["dimension"]))
        )
    else:
        entries = (_entry(None, frame, ks, boot),)
    return KindAgreementResult(
        kind=ks.kind,
        level=ks.level,
        entries=entries,
        n_repeat_answers=int(frame["is_repeat"].sum()),
        n_clusters=len(boot.briefs),
        resamples=int(resamples),
        seed=int(seed),
    )


__all__ = [
    "AgreementEntry",
    "KindAgreementResult",
    "KindScale",
    "RepeatConsistency",
    "kind_agreement",
    "krippendorff_alpha",
    "krippendorff_alpha_nominal",
    "nominal_alpha_from_coincidences",
    "predicate_scale",
    "rating_scale",
    "value_counts",
    "winner_scale",
]
