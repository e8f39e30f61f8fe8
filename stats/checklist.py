"""Checklist predicates: human majority and agreement of automatic answers
(docs/study-kinds.md "The kind report"; AesCode §E.1, §E.3).

Pure module: pandas in, frozen dataclasses out, no Django.

docs/study-kinds.md "The kind report" rules, case by case:

- Each predicate is answered by k raters (default 3) with YES / NO / UNCLEAR.
- **Human majority**: YES (or NO) when it has a strict majority of the predicate's *non-UNCLEAR*
  main answers, i.e. ``n_YES > n_NO`` (or ``n_NO > n_YES``); otherwise (a YES/NO tie, or only
  UNCLEAR answers, or no answer) the predicate has **no** majority. A human UNCLEAR is missing:
  it neither votes nor blocks a majority (YES, YES, UNCLEAR → YES; YES, NO, UNCLEAR → none).
- **Automatic answers** (imported) are compared with the human majority on the predicates that
  have one; an automatic UNCLEAR counts as **NO** (the property fails, as in the checklist's own
  scoring: "unclear counts as failure"). A predicate without an automatic answer is left out.
- Agreement = agreeing predicates / compared predicates, with two binomial intervals (Wilson
  score, ``stats.agreement.wilson_interval``; Clopper–Pearson, ``statsmodels``
  ``proportion_confint(method="beta")``) and a percentile interval from the cluster bootstrap over
  briefs (``stats.bootstrap`` with briefs as pages, one stratum).
- When predicates carry a question type (``question_type``, e.g. Content / Layout / Style), the
  agreement is also broken down by type (same bootstrap count matrix).

Decisions (the protocol is silent):

1. The majority uses **every** main answer of the predicate, whatever their number; ``k`` is the
   design target and the report counts predicates with fewer (``n_predicates_short``) or more
   (``n_predicates_over``) main answers than ``k``. Hidden repeats (``is_repeat``) are not data.
2. The cluster of a predicate is its item's brief; an adapter whose item has no brief passes the
   item id as ``brief`` (so each image is its own cluster).
3. Several automatic sources can be compared at once: the column ``automatic`` and any column
   ``automatic:<NAME>`` of ``predicates``, each reported separately (source ``automatic`` or NAME).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from stats.agreement import wilson_interval
from stats.bootstrap import BriefBootstrap, bootstrap_ratio_ci, brief_bootstrap, check_bootstrap_args
from stats.errors import InvalidKindData
from stats.frames import bool_column, require_columns, string_column
from stats.serialize import json_safe

KIND = "checklist"
ANSWERS: tuple[str, ...] = ("YES", "NO", "UNCLEAR")
ANSWER_COLUMNS: tuple[str, ...] = ("predicate", "rater", "answer")
PREDICATE_COLUMNS: tuple[str, ...] = ("predicate", "brief")
AUTOMATIC_PREFIX = "automatic:"
DEFAULT_K = 3


def human_majority(n_yes: int, n_no: int) -> str | None:
    """docs/study-kinds.md "The kind report" human majority of a predicate from its non-UNCLEAR answer counts.

    ``"YES"`` when ``n_yes > n_no``, ``"NO"`` when ``n_no > n_yes``, ``None`` otherwise (a tie, or
    no YES/NO answer at all). UNCLEAR answers are missing and must not be counted in either.
    """
    if n_yes < 0 or n_no < 0:
        raise InvalidKindData("answer counts must be non-negative")
    if n_yes > n_no:
        return "YES"
    if n_no > n_yes:
        return "NO"
    return None


def automatic_as_binary(answer: str) -> str:
    """docs/study-kinds.md "The kind report": an automatic UNCLEAR counts as NO (the property fails); YES and
    NO stay."""
    if answer not in ANSWERS:
        raise InvalidKindData(f"automatic answer must be one of {', '.join(ANSWERS)}, got {answer!r}")
    return "YES" if answer == "YES" else "NO"


def binomial_intervals(k: int, n: int, confidence: float = 0.95) -> dict[str, tuple[float, float]]:
    """Wilson score and Clopper–Pearson (exact) intervals of ``k / n``; NaN when ``n = 0``."""
    if n < 0 or k < 0 or k > n:
        raise InvalidKindData("need 0 ≤ k ≤ n")
    if n == 0:
        return {"wilson": (math.nan, math.nan), "clopper_pearson": (math.nan, math.nan)}
    lo, hi = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    return {"wilson": wilson_interval(k, n, confidence), "clopper_pearson": (float(lo), float(hi))}


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChecklistAgreement:
    """Agreement of one automatic source with the human majority on one set of predicates
    (docs/study-kinds.md "The kind report").

    ``question_type`` is None for the overall entry. ``confusion[auto][human]`` counts predicates
    by the raw automatic answer (YES/NO/UNCLEAR) and the human majority (YES/NO).
    """

    question_type: str | None
    n_predicates: int
    n_agree: int
    n_briefs: int
    value: float
    wilson95: tuple[float, float]
    clopper_pearson95: tuple[float, float]
    bootstrap95: tuple[float, float]
    confusion: dict[str, dict[str, int]]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "question_type": self.question_type,
                "n_predicates": self.n_predicates,
                "n_agree": self.n_agree,
                "n_briefs": self.n_briefs,
                "value": self.value,
                "ci95": {
                    "wilson": list(self.wilson95),
                    "clopper_pearson": list(self.clopper_pearson95),
                    "bootstrap": list(self.bootstrap95),
                },
                "confusion": self.confusion,
            }
        )


@dataclass(frozen=True)
class SourceAgreement:
    """One automatic source: overall agreement, by question type, and predicates it did not answer."""

    source: str
    overall: ChecklistAgreement
    by_type: tuple[ChecklistAgreement, ...]
    n_without_answer: int
    n_unclear: int

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "source": self.source,
                "overall": self.overall.to_dict(),
                "by_type": [t.to_dict() for t in self.by_type],
                "n_predicates_without_answer": self.n_without_answer,
                "n_automatic_unclear": self.n_unclear,
            }
        )


@dataclass(frozen=True)
class ChecklistResult:
    """docs/study-kinds.md "The kind report" checklist analysis: human majorities and each automatic source's
    agreement.

    ``predicates`` has one row per predicate: ``predicate, brief, question_type, n_YES, n_NO,
    n_UNCLEAR, majority`` and one ``automatic`` / ``automatic:<NAME>`` entry per source (raw answer).
    """

    k: int
    n_predicates: int
    n_answers: int
    n_unclear_answers: int
    n_with_majority: int
    n_tied: int
    n_all_unclear: int
    n_unanswered: int
    n_predicates_short: int
    n_predicates_over: int
    n_repeat_answers_excluded: int
    n_briefs: int
    sources: tuple[SourceAgreement, ...]
    predicates: tuple[dict[str, Any], ...]
    resamples: int
    seed: int

    def source(self, name: str) -> SourceAgreement:
        for s in self.sources:
            if s.source == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "kind": KIND,
                "analysis": "checklist",
                "k": self.k,
                "n_predicates": self.n_predicates,
                "n_answers": self.n_answers,
                "n_unclear_answers": self.n_unclear_answers,
                "human_majority": {
                    "n_with_majority": self.n_with_majority,
                    "n_tied": self.n_tied,
                    "n_all_unclear": self.n_all_unclear,
                    "n_unanswered": self.n_unanswered,
                },
                "n_predicates_short": self.n_predicates_short,
                "n_predicates_over": self.n_predicates_over,
                "n_repeat_answers_excluded": self.n_repeat_answers_excluded,
                "sources": [s.to_dict() for s in self.sources],
                "predicates": [dict(p) for p in self.predicates],
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


def _answer_column(frame: pd.DataFrame, column: str, name: str, *, allow_missing: bool) -> pd.Series:
    values: list[str | None] = []
    for i, v in enumerate(frame[column].tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip()):
            if not allow_missing:
                raise InvalidKindData(f"{name}: column {column!r} row {i}: missing answer")
            values.append(None)
            continue
        s = str(v).strip().upper()
        if s not in ANSWERS:
            raise InvalidKindData(
                f"{name}: column {column!r} row {i}: expected one of {', '.join(ANSWERS)}, got {v!r}"
            )
        values.append(s)
    return pd.Series(values, index=frame.index, dtype=object)


def _validate(
    answers: pd.DataFrame, predicates: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, list[str], int]:
    a = require_columns(answers, ANSWER_COLUMNS, "answers")
    a["predicate"] = string_column(a, "predicate", "answers")
    a["rater"] = string_column(a, "rater", "answers")
    a["answer"] = _answer_column(a, "answer", "answers", allow_missing=False)
    a["is_repeat"] = bool_column(a, "is_repeat", "answers", default=False)

    p = require_columns(predicates, PREDICATE_COLUMNS, "predicates")
    p["predicate"] = string_column(p, "predicate", "predicates")
    p["brief"] = string_column(p, "brief", "predicates")
    dup = p.duplicated("predicate")
    if dup.any():
        raise InvalidKindData(f"predicates: predicate {p.loc[dup, 'predicate'].iloc[0]!r} listed twice")
    if "question_type" in p.columns:
        p["question_type"] = [
            None if t is None or (isinstance(t, float) and math.isnan(t)) or str(t) == "" else str(t)
            for t in p["question_type"].tolist()
        ]
    else:
        p["question_type"] = None
    sources = [
        c for c in p.columns if c == "automatic" or (isinstance(c, str) and c.startswith(AUTOMATIC_PREFIX))
    ]
    for c in sources:
        p[c] = _answer_column(p, c, "predicates", allow_missing=True)

    unknown = ~a["predicate"].isin(set(p["predicate"]))
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise InvalidKindData(f"answers: row {i}: unknown predicate {a['predicate'].iloc[i]!r}")
    main = a[~a["is_repeat"].to_numpy(dtype=bool)]
    dup = main.duplicated(["rater", "predicate"])
    if dup.any():
        row = main[dup].iloc[0]
        raise InvalidKindData(
            f"answers: rater {row['rater']!r} has more than one main answer on predicate {row['predicate']!r}"
        )
    return main.reset_index(drop=True), p, sources, int(a["is_repeat"].sum())


# --------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------


def _agreement(
    question_type: str | None, sel: pd.DataFrame, source: str, boot: BriefBootstrap, confidence: float
) -> ChecklistAgreement:
    auto_raw = sel[source].to_numpy(dtype=object)
    human = sel["majority"].to_numpy(dtype=object)
    agree = np.array([automatic_as_binary(x) == h for x, h in zip(auto_raw, human, strict=True)], dtype=float)
    n = len(agree)
    k = int(agree.sum())
    intervals = binomial_intervals(k, n, confidence)
    confusion = {a: {h: int(((auto_raw == a) & (human == h)).sum()) for h in ("YES", "NO")} for a in ANSWERS}
    return ChecklistAgreement(
        question_type=question_type,
        n_predicates=n,
        n_agree=k,
        n_briefs=int(sel["brief"].nunique()),
        value=k / n if n else math.nan,
        wilson95=intervals["wilson"],
        clopper_pearson95=intervals["clopper_pearson"],
        bootstrap95=bootstrap_ratio_ci(boot, sel["brief"].to_numpy(dtype=object), agree, np.ones(n)),
        confusion=confusion,
    )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def checklist_agreement(
    answers: pd.DataFrame,
    predicates: pd.DataFrame,
    *,
    resamples: int,
    seed: int,
    k: int = DEFAULT_K,
    confidence: float = 0.95,
) -> ChecklistResult:
    """docs/study-kinds.md "The kind report" checklist analysis: human majority per predicate, agreement of
    automatic answers.

    ``answers``: one row per human answer, ``predicate, rater, answer`` (YES/NO/UNCLEAR) and
    optional ``is_repeat`` (hidden repeats are dropped). ``predicates``: one row per predicate,
    ``predicate, brief`` (the bootstrap cluster), optional ``question_type`` and the automatic
    answer columns ``automatic`` / ``automatic:<NAME>`` (YES/NO/UNCLEAR, empty when none).
    ``k`` is the design's raters per predicate (reported against, decision 1). Intervals: Wilson,
    Clopper–Pearson and the percentile cluster bootstrap over briefs (one count matrix for every
    source and type).
    """
    check_bootstrap_args(resamples, seed)
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidKindData("k must be a positive integer")
    if not 0 < confidence < 1:
        raise InvalidKindData("confidence must be between 0 and 1")
    main, preds, sources, n_repeats = _validate(answers, predicates)

    counts = main.groupby(["predicate", "answer"]).size().unstack(fill_value=0)
    counts = counts.reindex(index=preds["predicate"], columns=list(ANSWERS), fill_value=0)
    preds = preds.assign(
        n_YES=counts["YES"].to_numpy(dtype=np.int64),
        n_NO=counts["NO"].to_numpy(dtype=np.int64),
        n_UNCLEAR=counts["UNCLEAR"].to_numpy(dtype=np.int64),
    )
    preds["majority"] = [human_majority(y, n) for y, n in zip(preds["n_YES"], preds["n_NO"], strict=True)]
    n_answers_per = preds["n_YES"] + preds["n_NO"] + preds["n_UNCLEAR"]
    has_majority = preds["majority"].notna()
    decisive = preds["n_YES"] + preds["n_NO"]

    boot = brief_bootstrap(preds["brief"].tolist(), resamples=resamples, seed=seed)
    types = sorted({t for t in preds["question_type"] if isinstance(t, str)})
    any_untagged = preds["question_type"].isna().any()

    results = []
    for source in sources:
        compared = preds[has_majority & preds[source].notna()]
        by_type: list[ChecklistAgreement] = []
        if types:
            for t in types:
                by_type.append(
                    _agreement(t, compared[compared["question_type"] == t], source, boot, confidence)
                )
            if any_untagged:
                by_type.append(
                    _agreement(None, compared[compared["question_type"].isna()], source, boot, confidence)
                )
        results.append(
            SourceAgreement(
                source="automatic" if source == "automatic" else source[len(AUTOMATIC_PREFIX) :],
                overall=_agreement(None, compared, source, boot, confidence),
                by_type=tuple(by_type),
                n_without_answer=int(preds[source].isna().sum()),
                n_unclear=int((preds[source] == "UNCLEAR").sum()),
            )
        )

    rows = []
    for rec in preds.to_dict(orient="records"):
        row = {
            "predicate": rec["predicate"],
            "brief": rec["brief"],
            "question_type": _str_or_none(rec["question_type"]),
            "n_YES": int(rec["n_YES"]),
            "n_NO": int(rec["n_NO"]),
            "n_UNCLEAR": int(rec["n_UNCLEAR"]),
            "majority": _str_or_none(rec["majority"]),
        }
        for source in sources:
            row[source] = _str_or_none(rec[source])
        rows.append(row)

    return ChecklistResult(
        k=int(k),
        n_predicates=len(preds),
        n_answers=len(main),
        n_unclear_answers=int(preds["n_UNCLEAR"].sum()),
        n_with_majority=int(has_majority.sum()),
        n_tied=int(((decisive > 0) & ~has_majority).sum()),
        n_all_unclear=int(((decisive == 0) & (preds["n_UNCLEAR"] > 0)).sum()),
        n_unanswered=int((n_answers_per == 0).sum()),
        n_predicates_short=int((n_answers_per < k).sum()),
        n_predicates_over=int((n_answers_per > k).sum()),
        n_repeat_answers_excluded=n_repeats,
        n_briefs=len(boot.briefs),
        sources=tuple(results),
        predicates=tuple(rows),
        resamples=int(resamples),
        seed=int(seed),
    )


def predicates_frame(
    predicates: Sequence[dict[str, Any]], brief_of_item: dict[str, str | None]
) -> pd.DataFrame:
    """Bundle ``predicates[{id, item, question, boxes[], automatic, type?}]``
    (docs/study-kinds.md "The kind report") → ``predicates`` frame.

    ``brief_of_item`` maps item id → brief id (None: the item is its own cluster, decision 2).
    ``automatic`` may be a string (one source) or a mapping ``{source: answer}``; an optional
    ``type`` or ``question_type`` becomes ``question_type``.
    """
    rows = []
    for i, p in enumerate(predicates):
        for key in ("id", "item"):
            if key not in p:
                raise InvalidKindData(f"predicates[{i}]: missing {key!r}")
        item = str(p["item"])
        if item not in brief_of_item:
            raise InvalidKindData(f"predicates[{i}].item: unknown item {item!r}")
        brief = brief_of_item[item]
        row: dict[str, Any] = {
            "predicate": str(p["id"]),
            "brief": item if brief is None else str(brief),
            "question_type": p.get("question_type", p.get("type")),
        }
        auto = p.get("automatic")
        if isinstance(auto, dict):
            for name, answer in auto.items():
                row[AUTOMATIC_PREFIX + str(name)] = answer
        else:
            row["automatic"] = auto
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = [
    "ChecklistAgreement",
    "ChecklistResult",
    "SourceAgreement",
    "automatic_as_binary",
    "binomial_intervals",
    "checklist_agreement",
    "human_majority",
    "predicates_frame",
]
