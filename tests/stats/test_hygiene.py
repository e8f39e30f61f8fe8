"""docs/study-kinds.md "Hygiene rules" questionnaire hygiene: each exclusion rule, their order, and the
removal report.

References: hand-built participants with one known fault each, and a plain-Python re-implementation
of the rules on a simulated crowd (which participants and answers each rule removes first / alone).
"""

from __future__ import annotations

import itertools
import json
import statistics

import numpy as np
import pandas as pd
import pytest

from stats.errors import InvalidKindData
from stats.hygiene import RULE_ORDER, HygieneRules, apply_hygiene


def _participant(
    pid: str,
    answers: list[str],
    *,
    ms: float | list[float] = 3000.0,
    checks: dict[int, bool] | None = None,
    comprehension: tuple[int, bool] = (1, True),
) -> list[dict]:
    """Data answers in order, attention checks inserted at the given positions (passed or not)."""
    checks = checks or {}
    times = ms if isinstance(ms, list) else [ms] * len(answers)
    rows, trial, k = [], 0, 0
    total = len(answers) + len(checks)
    while trial < total:
        if trial in checks:
            rows.append(
                {
                    "participant": pid,
                    "trial": trial,
                    "is_attention_check": True,
                    "attention_passed": checks[trial],
                    "response_ms": 100.0,
                    "answer": "B",
                }
            )
        else:
            rows.append(
                {
                    "participant": pid,
                    "trial": trial,
                    "is_attention_check": False,
                    "attention_passed": None,
                    "response_ms": times[k],
                    "answer": answers[k],
                }
            )
            k += 1
        trial += 1
    for r in rows:
        r["comprehension_attempts"], r["comprehension_passed"] = comprehension
    return rows


MIXED = ["A", "B", "TIE", "B", "A", "A", "B", "TIE", "A", "B", "B", "A"]


def test_each_rule_on_a_participant_with_one_fault() -> None:
    rows = (
        _participant("ok", MIXED, checks={3: True, 8: True})
        + _participant("comp_second_try", MIXED, comprehension=(2, True))
        + _participant("comp_failed", MIXED, comprehension=(2, False))
        + _participant("comp_third_try", MIXED, comprehension=(3, True))
        + _participant("inattentive", MIXED, checks={5: False})
        + _participant("fast", MIXED, ms=400.0)
        + _participant("always_a", ["A"] * 11 + ["B"])  # 11/12 ≥ 0.9
        + _participant("mostly_a", ["A"] * 10 + ["B", "TIE"])  # 10/12 < 0.9
    )
    res = apply_hygiene(pd.DataFrame(rows))
    assert res.excluded_participants == {
        "comp_failed": ("comprehension",),
        "comp_third_try": ("comprehension",),
        "inattentive": ("attention",),
        "fast": ("too_fast_median",),
        "always_a": ("straight_lining_share",),
    }
    assert sorted(set(res.kept["participant"])) == ["comp_second_try", "mostly_a", "ok"]
    assert res.n_kept_answers == 36
    assert not res.kept["is_attention_check"].any()  # attention checks are never data
    assert res.n_attention_answers == 3 and res.n_data_answers == 8 * 12
    first = {r.rule: (r.participants_first, r.answers_first) for r in res.reports}
    assert first == {
        "comprehension": (2, 24),
        "attention": (1, 12),
        "gold": (0, 0),
        "too_fast_median": (1, 12),
        "straight_lining_share": (1, 12),
        "straight_lining_run": (0, 0),
        "hidden_repeats": (0, 0),
        "position_bias": (0, 0),
        "too_fast_answer": (0, 0),
    }
    assert [r.rule for r in res.reports] == list(RULE_ORDER)
    json.dumps(res.to_dict(), allow_nan=False)


def test_first_versus_alone_when_rules_overlap() -> None:
    # Fails attention AND straight-lines AND is fast: attention removes it first.
    rows = _participant("bad", ["A"] * 12, ms=300.0, checks={2: False}) + _participant("good", MIXED)
    res = apply_hygiene(pd.DataFrame(rows))
    rep = {r.rule: r for r in res.reports}
    assert (rep["attention"].participants_first, rep["attention"].answers_first) == (1, 12)
    assert (rep["too_fast_median"].participants_first, rep["too_fast_median"].participants_alone) == (0, 1)
    assert (rep["straight_lining_share"].participants_first, rep["straight_lining_share"].answers_alone) == (
        0,
        12,
    )
    assert res.excluded_participants["bad"] == ("attention", "too_fast_median", "straight_lining_share")
    assert res.to_dict()["excluded_participants"][0]["rule"] == "attention"


def test_thresholds_and_switches() -> None:
    rows = _participant("one_miss", MIXED, checks={1: False, 4: True})
    frame = pd.DataFrame(rows)
    assert "one_miss" in apply_hygiene(frame).excluded_participants
    assert apply_hygiene(frame, HygieneRules(max_attention_failures=1)).excluded_participants == {}
    assert apply_hygiene(frame, HygieneRules(max_attention_failures=None)).excluded_participants == {}
    # No comprehension columns: the rule is reported as not applied.
    bare = frame.drop(columns=["comprehension_attempts", "comprehension_passed"])
    res = apply_hygiene(bare, HygieneRules(max_attention_failures=None))
    assert res.report("comprehension").enabled is False


def test_median_uses_data_answers_only_and_the_answer_floor() -> None:
    # Attention checks are answered in 100 ms; the data median is 3000 ms → not too fast.
    rows = _participant("p", MIXED, checks={i: True for i in range(0, 24, 2)})
    assert apply_hygiene(pd.DataFrame(rows)).excluded_participants == {}
    # Per-answer floor: two answers under 500 ms are dropped, the participant stays.
    times = [3000.0] * 12
    times[3] = times[7] = 200.0
    rows = _participant("q", MIXED, ms=times) + _participant("all_fast", MIXED, ms=[2000.0] * 12)
    rules = HygieneRules(min_response_ms=500.0, min_median_response_ms=None)
    res = apply_hygiene(pd.DataFrame(rows), rules)
    rep = res.report("too_fast_answer")
    assert (rep.answers_first, rep.participants_first) == (2, 0)
    assert res.n_kept_answers == 22
    rules = HygieneRules(min_response_ms=2500.0, min_median_response_ms=None)
    res = apply_hygiene(pd.DataFrame(rows), rules)
    rep = res.report("too_fast_answer")
    assert (rep.answers_first, rep.participants_first, rep.participants_alone) == (14, 1, 1)
    assert res.excluded_participants == {"all_fast": ("too_fast_answer",)}


def test_straight_lining_run_skips_attention_checks() -> None:
    answers = ["A", "B"] + ["A"] * 6 + ["B", "TIE", "B", "A"]
    rows = _participant("p", answers, checks={5: True})  # the check falls inside the run of six A
    rules = HygieneRules(straightline_run=6, straightline_share=None)
    assert apply_hygiene(pd.DataFrame(rows), rules).excluded_participants == {"p": ("straight_lining_run",)}
    rules = HygieneRules(straightline_run=7, straightline_share=None)
    assert apply_hygiene(pd.DataFrame(rows), rules).excluded_participants == {}
    # Too few trials for the share rule.
    short = _participant("s", ["A"] * 9)
    assert apply_hygiene(pd.DataFrame(short)).excluded_participants == {}


# --------------------------------------------------------------------------------------------
# A simulated crowd against a plain-Python re-implementation
# --------------------------------------------------------------------------------------------


def _crowd(seed: int, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n):
        kind = rng.choice(["good", "lazy", "fast", "careless", "unsure"], p=[0.6, 0.1, 0.1, 0.1, 0.1])
        n_trials = int(rng.integers(8, 25))
        if kind == "lazy":
            answers = [str(rng.choice(["A", "B"], p=[0.95, 0.05])) for _ in range(n_trials)]
        else:
            answers = [str(rng.choice(["A", "B", "TIE"])) for _ in range(n_trials)]
        base = 600.0 if kind == "fast" else 3000.0
        ms = [float(max(50.0, rng.normal(base, base / 3))) for _ in range(n_trials)]
        check_pos = {
            int(x): bool(rng.random() > (0.5 if kind == "careless" else 0.02))
            for x in rng.choice(n_trials, 2, replace=False)
        }
        comp = (int(rng.integers(1, 4)), bool(rng.random() > 0.3)) if kind == "unsure" else (1, True)
        rows += _participant(f"p{p:02d}", answers, ms=ms, checks=check_pos, comprehension=comp)
    return pd.DataFrame(rows).sample(frac=1, random_state=seed)  # row order must not matter


def _naive_rules(frame: pd.DataFrame, rules: HygieneRules) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {r: set() for r in RULE_ORDER}
    for pid, g in frame.groupby("participant"):
        g = g.sort_values("trial")
        data = g[~g["is_attention_check"]]
        checks = g[g["is_attention_check"]]
        attempts, passed = g["comprehension_attempts"].iloc[0], g["comprehension_passed"].iloc[0]
        if not passed or attempts > rules.comprehension_max_attempts:
            out["comprehension"].add(pid)
        if (~checks["attention_passed"].astype(bool)).sum() > rules.max_attention_failures:
            out["attention"].add(pid)
        if statistics.median(data["response_ms"]) < rules.min_median_response_ms:
            out["too_fast_median"].add(pid)
        answers = list(data["answer"])
        if (
            len(answers) >= rules.straightline_min_trials
            and max(answers.count(a) for a in answers) / len(answers) >= rules.straightline_share
        ):
            out["straight_lining_share"].add(pid)
        longest = run = 1
        for x, y in itertools.pairwise(answers):
            run = run + 1 if x == y else 1
            longest = max(longest, run)
        if rules.straightline_run is not None and longest >= rules.straightline_run:
            out["straight_lining_run"].add(pid)
        if rules.min_response_ms is not None and (data["response_ms"] < rules.min_response_ms).all():
            out["too_fast_answer"].add(pid)
    return out


def test_simulated_crowd_matches_a_plain_loop() -> None:
    frame = _crowd(seed=3)
    rules = HygieneRules(straightline_run=8, min_response_ms=400.0)
    res = apply_hygiene(frame, rules)
    naive = _naive_rules(frame, rules)
    data = frame[~frame["is_attention_check"]]
    per = data.groupby("participant").size()
    removed: set[str] = set()
    for rule in RULE_ORDER[:-1]:
        rep = res.report(rule)
        first = naive[rule] - removed
        assert rep.participants_alone == len(naive[rule]), rule
        assert rep.answers_alone == int(per.reindex(sorted(naive[rule])).sum()), rule
        assert (rep.participants_first, rep.answers_first) == (
            len(first),
            int(per.reindex(sorted(first)).sum()),
        ), rule
        removed |= first
    left = data[~data["participant"].isin(removed)]
    kept = left[~(left["response_ms"] < 400.0)]
    assert res.report("too_fast_answer").answers_first == len(left) - len(kept)
    assert res.n_kept_answers == len(kept)
    assert sorted(res.kept["participant"].unique()) == sorted(kept["participant"].unique())
    # Every data answer is either kept or removed first by exactly one rule.
    assert sum(r.answers_first for r in res.reports) + res.n_kept_answers == res.n_data_answers
    assert len(removed) >= 5  # the crowd does contain bad participants


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.drop(columns=["response_ms"]), "response_ms"),
        (lambda f: f.assign(trial=0), "twice"),
        (lambda f: f.assign(is_attention_check="maybe"), "boolean"),
        (lambda f: f.assign(attention_passed=None, is_attention_check=True), "boolean"),
        (lambda f: f.assign(response_ms=-5), "non-negative"),
        (lambda f: f.drop(columns=["comprehension_passed"]), "go together"),
        (lambda f: f.assign(comprehension_attempts=[1, 2] * 6), "more than one"),
    ],
)
def test_bad_input_raises(mutate, message: str) -> None:
    frame = pd.DataFrame(_participant("p", MIXED))
    with pytest.raises(InvalidKindData, match=message):
        apply_hygiene(mutate(frame))


def test_bad_rules_raise() -> None:
    with pytest.raises(ValueError, match="straightline_share"):
        HygieneRules(straightline_share=1.5)
    with pytest.raises(ValueError, match="straightline_run"):
        HygieneRules(straightline_run=1)


def test_gold_rule_excludes_improbable_gold_failures_and_gold_is_never_data() -> None:
    # Three gold trials: at 5 % honest error P(X >= 2) = 0.00725 <= 0.01, P(X >= 1) = 0.1426 is not.
    rows = []
    for who, wrong in (("good", 0), ("one", 1), ("junk", 2)):
        for i, a in enumerate(MIXED):
            rows.append({"participant": who, "trial": i + 1, "is_attention_check": False, "attention_passed": None,
                         "response_ms": 3000.0, "answer": a, "is_gold": False, "gold_passed": None})
        for g in range(3):
            rows.append({"participant": who, "trial": 100 + g, "is_attention_check": False, "attention_passed": None,
                         "response_ms": 3000.0, "answer": "A", "is_gold": True, "gold_passed": g >= wrong})
    res = apply_hygiene(pd.DataFrame(rows))
    assert res.excluded_participants == {"junk": ("gold",)}  # 2 of 3 improbable; 1 of 3 is not
    assert not res.kept["is_gold"].any() and res.n_data_answers == 3 * len(MIXED)
    assert res.report("gold").participants_first == 1
    # At a 20 % false-exclusion level one failure of three (P = 0.1426) is improbable enough too.
    loose = apply_hygiene(pd.DataFrame(rows), HygieneRules(gold_false_exclusion=0.2))
    assert set(loose.excluded_participants) == {"one", "junk"}
    off = apply_hygiene(pd.DataFrame(rows), HygieneRules(gold_false_exclusion=None))
    assert off.excluded_participants == {}
    with pytest.raises(ValueError, match="gold_honest_error"):
        HygieneRules(gold_honest_error=0.5)
