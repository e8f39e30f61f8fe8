"""Crowd questionnaire hygiene: exclusion rules and their report (docs/study-kinds.md "Hygiene rules"
(Questionnaire hygiene)).

Pure module: pandas in, frozen dataclasses out, no Django.

docs/study-kinds.md "Hygiene rules": instructed-response attention checks are placed by the schedule and
excluded from the analysis; a comprehension check with two attempts comes before the first trial; exclusion
rules are applied by the analysis and reported (how many participants and answers each rule removed).

Input: one row per answered trial with ``participant``, ``trial`` (its position; orders the
trials), ``is_attention_check``, ``attention_passed`` (required on attention-check rows),
``response_ms``, ``answer`` and, when the study has a comprehension check,
``comprehension_attempts`` and ``comprehension_passed`` (the participant's values, repeated on
each of its rows). ``answer`` is the answer **as displayed** (e.g. the key pressed, "A" = left),
not the canonical one: straight-lining is a habit of the hand, and canonical A/B is randomized by
the display swap.

Attention-check answers are **never data**: they are dropped from the kept answers whatever the
rules, and the answer counts of the report are data answers only.

Rules, applied in this order (``RULE_ORDER``); participant rules look at the participant's data
answers before any answer is removed:

1. ``comprehension`` (participant): the comprehension check was not passed within
   ``comprehension_max_attempts`` attempts (default 2): ``not passed or attempts > max``.
2. ``attention`` (participant): more than ``max_attention_failures`` failed attention checks
   (default 0: any failure excludes).
2b. ``gold`` (participant; issue 30, the reference kind's gold trials): a number of failed gold
   trials improbable for an honest rater (``stats.gold_rule``: binomial upper tail at
   ``gold_honest_error``, default 0.05, below ``gold_false_exclusion``, default 0.01; ``None``
   turns the rule off). Needs the optional ``is_gold`` / ``gold_passed`` columns; gold rows, like
   attention checks, are never data.
3. ``too_fast_median`` (participant): median response time of the data answers below
   ``min_median_response_ms`` (default 1000 ms; missing times are ignored).
4. ``straight_lining_share`` (participant): with at least ``straightline_min_trials`` data answers
   (default 10), one answer value given on ≥ ``straightline_share`` of them (default 0.9).
5. ``straight_lining_run`` (participant): a run of ≥ ``straightline_run`` identical consecutive
   answers (data trials in trial order; attention checks skipped, a missing answer breaks the run;
   default off).
6. ``hidden_repeats`` (participant): with at least one answered hidden-repeat pair, the share of
   pairs answered alike below ``min_repeat_agreement`` (default off). Needs the optional
   ``repeat_agreed`` column (True/False on a repeat row whose original is answered, else empty).
7. ``position_bias`` (participant): with at least ``position_min_trials`` A/B answers (default 10),
   the share choosing the left candidate further than ``max_position_bias`` from 0.5 (default
   off). Needs the optional ``chose_left`` column (True/False on an A/B answer, else empty).
8. ``too_fast_answer`` (answer): a data answer faster than ``min_response_ms`` is dropped (default
   off); a participant left with no data answer by it counts as removed by it.

Rules 6 and 7 came with the reference kind (issue 17: ``pairwise_reference`` gets the same
machinery); a frame without their column is never excluded by them.

Every rule can be switched off with ``None``. For each rule the report gives the participants and
data answers it removed **first** (among those no earlier rule removed; these add up to the total
removed) and those it would remove **alone** (applied to the full data by itself).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from stats.errors import InvalidKindData
from stats.frames import bool_column, parse_bool, require_columns, string_column
from stats.gold_rule import GOLD_FALSE_EXCLUSION, GOLD_HONEST_ERROR, gold_excludes
from stats.serialize import json_safe

REQUIRED_COLUMNS: tuple[str, ...] = (
    "participant",
    "trial",
    "is_attention_check",
    "attention_passed",
    "response_ms",
    "answer",
)
RULE_ORDER: tuple[str, ...] = (
    "comprehension",
    "attention",
    "gold",
    "too_fast_median",
    "straight_lining_share",
    "straight_lining_run",
    "hidden_repeats",
    "position_bias",
    "too_fast_answer",
)
PARTICIPANT_RULES = RULE_ORDER[:-1]


@dataclass(frozen=True)
class HygieneRules:
    """Configurable thresholds of the exclusion rules (module docstring); ``None`` turns a rule off."""

    comprehension_max_attempts: int | None = 2
    max_attention_failures: int | None = 0
    gold_false_exclusion: float | None = GOLD_FALSE_EXCLUSION
    gold_honest_error: float = GOLD_HONEST_ERROR
    min_median_response_ms: float | None = 1000.0
    straightline_share: float | None = 0.9
    straightline_min_trials: int = 10
    straightline_run: int | None = None
    min_response_ms: float | None = None
    min_repeat_agreement: float | None = None
    max_position_bias: float | None = None
    position_min_trials: int = 10

    def __post_init__(self) -> None:
        if self.comprehension_max_attempts is not None and self.comprehension_max_attempts < 1:
            raise InvalidKindData("comprehension_max_attempts must be at least 1")
        if self.max_attention_failures is not None and self.max_attention_failures < 0:
            raise InvalidKindData("max_attention_failures must be non-negative")
        for name in ("min_median_response_ms", "min_response_ms"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise InvalidKindData(f"{name} must be a non-negative number")
        if self.straightline_share is not None and not 0 < self.straightline_share <= 1:
            raise InvalidKindData("straightline_share must be in (0, 1]")
        if self.straightline_min_trials < 1:
            raise InvalidKindData("straightline_min_trials must be at least 1")
        if self.straightline_run is not None and self.straightline_run < 2:
            raise InvalidKindData("straightline_run must be at least 2")
        if self.gold_false_exclusion is not None and not 0 < self.gold_false_exclusion < 1:
            raise InvalidKindData("gold_false_exclusion must be in (0, 1)")
        if not 0 < self.gold_honest_error < 0.5:
            raise InvalidKindData("gold_honest_error must be in (0, 0.5)")
        if self.min_repeat_agreement is not None and not 0 <= self.min_repeat_agreement <= 1:
            raise InvalidKindData("min_repeat_agreement must be in [0, 1]")
        if self.max_position_bias is not None and not 0 <= self.max_position_bias < 0.5:
            raise InvalidKindData("max_position_bias must be in [0, 0.5)")
        if self.position_min_trials < 1:
            raise InvalidKindData("position_min_trials must be at least 1")

    def enabled(self, rule: str) -> bool:
        return {
            "comprehension": self.comprehension_max_attempts is not None,
            "attention": self.max_attention_failures is not None,
            "gold": self.gold_false_exclusion is not None,
            "too_fast_median": self.min_median_response_ms is not None,
            "straight_lining_share": self.straightline_share is not None,
            "straight_lining_run": self.straightline_run is not None,
            "hidden_repeats": self.min_repeat_agreement is not None,
            "position_bias": self.max_position_bias is not None,
            "too_fast_answer": self.min_response_ms is not None,
        }[rule]


@dataclass(frozen=True)
class RuleReport:
    """What one rule removed: first (in ``RULE_ORDER``) and alone (on the full data)."""

    rule: str
    applies_to: str
    enabled: bool
    participants_first: int
    answers_first: int
    participants_alone: int
    answers_alone: int

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))


@dataclass(frozen=True)
class HygieneResult:
    """Kept data answers and the docs/study-kinds.md "Hygiene rules" exclusion report.

    ``kept``: the data answers that survive every rule (attention-check rows never do), original
    columns, in (participant, trial) order. ``excluded_participants``: participant → the rules that
    exclude it (first one first).
    """

    kept: pd.DataFrame
    rules: HygieneRules
    reports: tuple[RuleReport, ...]
    n_participants: int
    n_data_answers: int
    n_attention_answers: int
    excluded_participants: dict[str, tuple[str, ...]]
    participant_stats: tuple[dict[str, Any], ...]

    @property
    def n_kept_answers(self) -> int:
        return len(self.kept)

    @property
    def n_kept_participants(self) -> int:
        return int(self.kept["participant"].nunique()) if len(self.kept) else 0

    def report(self, rule: str) -> RuleReport:
        for r in self.reports:
            if r.rule == rule:
                return r
        raise KeyError(rule)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "analysis": "hygiene",
                "rule_order": list(RULE_ORDER),
                "settings": asdict(self.rules),
                "n_participants": self.n_participants,
                "n_data_answers": self.n_data_answers,
                "n_attention_answers": self.n_attention_answers,
                "n_kept_participants": self.n_kept_participants,
                "n_kept_answers": self.n_kept_answers,
                "rules": [r.to_dict() for r in self.reports],
                "excluded_participants": [
                    {"participant": p, "rule": rules[0], "rules": list(rules)}
                    for p, rules in sorted(self.excluded_participants.items())
                ],
                "participants": [dict(s) for s in self.participant_stats],
            }
        )


def _validate(answers: pd.DataFrame) -> pd.DataFrame:
    name = "answers"
    frame = require_columns(answers, REQUIRED_COLUMNS, name)
    frame["_participant"] = string_column(frame, "participant", name)
    trial = pd.to_numeric(frame["trial"], errors="coerce").astype(float)
    bad = ~np.isfinite(trial.to_numpy())
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidKindData(
            f"{name}: column 'trial' row {i}: expected a number, got {frame['trial'].iloc[i]!r}"
        )
    frame["_trial"] = trial
    dup = frame.duplicated(["_participant", "_trial"])
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InvalidKindData(
            f"{name}: row {i}: participant {frame['_participant'].iloc[i]!r} has trial {frame['trial'].iloc[i]!r} twice"
        )
    frame["_check"] = bool_column(frame, "is_attention_check", name)
    passed = np.zeros(len(frame), dtype=bool)
    for row in np.flatnonzero(frame["_check"].to_numpy()):
        value = frame["attention_passed"].iloc[int(row)]
        parsed = parse_bool(value)
        if parsed is None:
            raise InvalidKindData(
                f"{name}: column 'attention_passed' row {int(row)}: expected a boolean on an attention check, got {value!r}"
            )
        passed[row] = parsed
    gold = bool_column(frame, "is_gold", name) if "is_gold" in frame.columns else np.zeros(len(frame), dtype=bool)
    gold = np.asarray(gold, dtype=bool) & ~frame["_check"].to_numpy(dtype=bool)
    gold_passed = np.zeros(len(frame), dtype=bool)
    for row in np.flatnonzero(gold):
        value = frame["gold_passed"].iloc[int(row)] if "gold_passed" in frame.columns else None
        parsed = parse_bool(value)
        if parsed is None:
            raise InvalidKindData(
                f"{name}: column 'gold_passed' row {int(row)}: expected a boolean on a gold trial, got {value!r}"
            )
        gold_passed[row] = parsed
    frame["_passed"] = passed
    frame["_attention"] = frame["_check"].to_numpy(dtype=bool)
    frame["_gold"] = gold
    frame["_gold_passed"] = gold_passed
    frame["_check"] = frame["_attention"].to_numpy(dtype=bool) | gold  # never data
    ms = pd.to_numeric(frame["response_ms"], errors="coerce").astype(float)
    bad = (frame["response_ms"].notna() & ms.isna()) | (ms < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidKindData(
            f"{name}: column 'response_ms' row {i}: expected a non-negative number, got {frame['response_ms'].iloc[i]!r}"
        )
    frame["_ms"] = ms
    frame["_answer"] = [
        None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
        for v in frame["answer"].tolist()
    ]
    has_comp = "comprehension_passed" in frame.columns or "comprehension_attempts" in frame.columns
    if has_comp:
        if "comprehension_passed" not in frame.columns or "comprehension_attempts" not in frame.columns:
            raise InvalidKindData(f"{name}: comprehension_passed and comprehension_attempts go together")
        frame["_comp_passed"] = bool_column(frame, "comprehension_passed", name)
        att = pd.to_numeric(frame["comprehension_attempts"], errors="coerce").astype(float)
        bad = (
            ~np.isfinite(att.to_numpy()) | (att.to_numpy() < 0) | (att.to_numpy() != np.round(att.to_numpy()))
        )
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidKindData(
                f"{name}: column 'comprehension_attempts' row {i}: expected a count, got {frame['comprehension_attempts'].iloc[i]!r}"
            )
        frame["_comp_attempts"] = att
        for col in ("_comp_passed", "_comp_attempts"):
            per = frame.groupby("_participant")[col].nunique()
            if (per > 1).any():
                raise InvalidKindData(
                    f"{name}: participant {per[per > 1].index[0]!r} has more than one {col[1:]!r}"
                )
    frame.attrs["has_comprehension"] = has_comp
    for column in ("repeat_agreed", "chose_left"):
        values = frame[column].tolist() if column in frame.columns else [None] * len(frame)
        parsed_values = []
        for i, v in enumerate(values):
            if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
                parsed_values.append(np.nan)
                continue
            b = parse_bool(v)
            if b is None:
                raise InvalidKindData(f"{name}: column {column!r} row {i}: expected a boolean or empty, got {v!r}")
            parsed_values.append(1.0 if b else 0.0)
        frame["_" + column] = np.array(parsed_values, dtype=float)
    return frame.sort_values(["_participant", "_trial"], kind="stable")


def _longest_run(values: list[str | None]) -> int:
    best = run = 0
    prev: str | None = None
    for v in values:
        if v is not None and v == prev:
            run += 1
        else:
            run = 1 if v is not None else 0
        prev = v
        best = max(best, run)
    return best


def _participant_stats(frame: pd.DataFrame) -> pd.DataFrame:
    """Per participant (rows of ``frame`` sorted by participant, trial): the rule statistics."""
    has_comp = bool(frame.attrs["has_comprehension"])
    who = frame["_participant"].to_numpy(dtype=object)
    check = frame["_check"].to_numpy(dtype=bool)
    attention = frame["_attention"].to_numpy(dtype=bool)
    passed = frame["_passed"].to_numpy(dtype=bool)
    gold = frame["_gold"].to_numpy(dtype=bool)
    gold_passed = frame["_gold_passed"].to_numpy(dtype=bool)
    ms = frame["_ms"].to_numpy(dtype=float)
    answers = frame["_answer"].tolist()
    comp_passed = frame["_comp_passed"].to_numpy(dtype=bool) if has_comp else None
    comp_attempts = frame["_comp_attempts"].to_numpy(dtype=float) if has_comp else None
    agreed = frame["_repeat_agreed"].to_numpy(dtype=float)
    left = frame["_chose_left"].to_numpy(dtype=float)
    if not len(who):
        return pd.DataFrame()
    starts = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
    ends = np.r_[starts[1:], len(who)]
    rows = []
    for s, e in zip(starts, ends, strict=True):
        c = check[s:e]
        data_ms = ms[s:e][~c]
        data_answers = [a for a, is_check in zip(answers[s:e], c, strict=True) if not is_check]
        given = [a for a in data_answers if a is not None]
        modal = max((given.count(a) for a in set(given)), default=0)
        finite = data_ms[np.isfinite(data_ms)]
        pairs = agreed[s:e][~c]
        pairs = pairs[np.isfinite(pairs)]
        sides = left[s:e][~c]
        sides = sides[np.isfinite(sides)]
        rows.append(
            {
                "participant": str(who[s]),
                "n_data_answers": len(data_answers),
                "n_attention_checks": int(attention[s:e].sum()),
                "attention_failures": int((attention[s:e] & ~passed[s:e]).sum()),
                "gold_trials": int(gold[s:e].sum()),
                "gold_failures": int((gold[s:e] & ~gold_passed[s:e]).sum()),
                "median_response_ms": float(np.median(finite)) if len(finite) else math.nan,
                "modal_answer_share": modal / len(data_answers) if data_answers else math.nan,
                "longest_run": _longest_run(data_answers),
                "repeat_pairs": len(pairs),
                "repeat_agreement": float(pairs.mean()) if len(pairs) else math.nan,
                "decisive_answers": len(sides),
                "left_share": float(sides.mean()) if len(sides) else math.nan,
                "comprehension_passed": bool(comp_passed[s]) if comp_passed is not None else None,
                "comprehension_attempts": int(comp_attempts[s]) if comp_attempts is not None else None,
            }
        )
    return pd.DataFrame(rows).set_index("participant") if rows else pd.DataFrame()


def _participant_rule(rule: str, st: pd.DataFrame, rules: HygieneRules, has_comp: bool) -> set[str]:
    """Participants that ``rule`` excludes (on the full data)."""
    if not rules.enabled(rule) or st.empty:
        return set()
    if rule == "comprehension":
        if not has_comp:
            return set()
        bad = ~st["comprehension_passed"].astype(bool) | (
            st["comprehension_attempts"] > rules.comprehension_max_attempts
        )
    elif rule == "attention":
        bad = st["attention_failures"] > rules.max_attention_failures
    elif rule == "gold":
        level = float(rules.gold_false_exclusion or 0.0)
        bad = pd.Series(
            [
                gold_excludes(
                    int(f), int(n), honest_error=rules.gold_honest_error, false_exclusion=level
                )
                for f, n in zip(st["gold_failures"], st["gold_trials"], strict=True)
            ],
            index=st.index,
            dtype=bool,
        )
    elif rule == "too_fast_median":
        bad = st["median_response_ms"].notna() & (st["median_response_ms"] < rules.min_median_response_ms)
    elif rule == "straight_lining_share":
        share = float(rules.straightline_share or 0.0)
        # 1e-12: a share of exactly the threshold (e.g. 9/10 ≥ 0.9) must count despite rounding.
        bad = (st["n_data_answers"] >= rules.straightline_min_trials) & (
            st["modal_answer_share"] >= share - 1e-12
        )
    elif rule == "straight_lining_run":
        bad = st["longest_run"] >= rules.straightline_run
    elif rule == "hidden_repeats":
        bad = (st["repeat_pairs"] > 0) & (st["repeat_agreement"] < float(rules.min_repeat_agreement or 0) - 1e-12)
    elif rule == "position_bias":
        bad = (st["decisive_answers"] >= rules.position_min_trials) & (
            (st["left_share"] - 0.5).abs() > float(rules.max_position_bias or 0) + 1e-12
        )
    else:  # pragma: no cover - guarded by RULE_ORDER
        raise InvalidKindData(f"unknown rule {rule!r}")
    return {str(p) for p in st.index[bad.to_numpy(dtype=bool)]}


def apply_hygiene(answers: pd.DataFrame, rules: HygieneRules | None = None) -> HygieneResult:
    """Apply the docs/study-kinds.md "Hygiene rules" exclusion rules in ``RULE_ORDER`` and report what each
    removed.

    Returns the kept data answers (attention checks never kept) and, per rule, the participants
    and data answers it removed first and would remove alone (module docstring).
    """
    rules = rules or HygieneRules()
    frame = _validate(answers)
    has_comp = bool(frame.attrs["has_comprehension"])
    st = _participant_stats(frame)
    data = frame[~frame["_check"].to_numpy(dtype=bool)]
    data_count = data.groupby("_participant").size()
    participants = sorted(set(frame["_participant"]))

    def n_answers_of(ps: set[str]) -> int:
        return int(data_count.reindex(sorted(ps)).fillna(0).sum()) if ps else 0

    alone: dict[str, set[str]] = {r: _participant_rule(r, st, rules, has_comp) for r in PARTICIPANT_RULES}
    fast = (
        data["_ms"].notna() & (data["_ms"] < rules.min_response_ms)
        if rules.min_response_ms is not None
        else pd.Series(False, index=data.index)
    )

    reports = []
    removed: set[str] = set()
    for rule in PARTICIPANT_RULES:
        first = alone[rule] - removed
        reports.append(
            RuleReport(
                rule=rule,
                applies_to="participant",
                enabled=rules.enabled(rule) and (rule != "comprehension" or has_comp),
                participants_first=len(first),
                answers_first=n_answers_of(first),
                participants_alone=len(alone[rule]),
                answers_alone=n_answers_of(alone[rule]),
            )
        )
        removed |= first

    # Answer rule: a participant left with no data answer by it counts as removed by it.
    left = ~data["_participant"].isin(removed)
    fast_first = fast & left
    remaining = data[left & ~fast]
    emptied = set(data.loc[left, "_participant"]) - set(remaining["_participant"])
    alone["too_fast_answer"] = set(data["_participant"]) - set(data.loc[~fast, "_participant"])
    reports.append(
        RuleReport(
            rule="too_fast_answer",
            applies_to="answer",
            enabled=rules.enabled("too_fast_answer"),
            participants_first=len(emptied),
            answers_first=int(fast_first.sum()),
            participants_alone=len(alone["too_fast_answer"]),
            answers_alone=int(fast.sum()),
        )
    )

    excluded: dict[str, tuple[str, ...]] = {}
    for p in participants:
        hit = tuple(r for r in RULE_ORDER if p in alone[r])
        if hit:
            excluded[p] = hit

    kept = remaining.drop(columns=[c for c in remaining.columns if c.startswith("_")]).reset_index(drop=True)
    kept.attrs = {}
    stats_rows = []
    for p in participants:
        row = {"participant": p, **{k: v for k, v in (st.loc[p].to_dict() if p in st.index else {}).items()}}
        row["excluded_by"] = excluded[p][0] if p in excluded else None
        stats_rows.append(row)
    return HygieneResult(
        kept=kept,
        rules=rules,
        reports=tuple(reports),
        n_participants=len(participants),
        n_data_answers=len(data),
        n_attention_answers=int(frame["_attention"].sum()),
        excluded_participants=excluded,
        participant_stats=tuple(stats_rows),
    )


__all__ = ["RULE_ORDER", "HygieneResult", "HygieneRules", "RuleReport", "apply_hygiene"]
