"""docs/study-kinds.md "The kind report" checklist analysis against independent computations.

References: the protocol rules case by case, statsmodels ``proportion_confint`` (Wilson, Clopper–
Pearson), a naive bootstrap loop over briefs with the same count matrix, and simulated raters with
known error rates (expected agreement with the majority computed by enumerating the three answers).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from stats.bootstrap import brief_bootstrap
from stats.checklist import (
    automatic_as_binary,
    binomial_intervals,
    checklist_agreement,
    human_majority,
    predicates_frame,
)
from stats.errors import InvalidKindData


def _majority_of(answers: tuple[str, ...]) -> str | None:
    return human_majority(answers.count("YES"), answers.count("NO"))


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (("YES", "YES", "YES"), "YES"),
        (("YES", "YES", "NO"), "YES"),
        (("NO", "NO", "YES"), "NO"),
        (("YES", "YES", "UNCLEAR"), "YES"),  # UNCLEAR is missing
        (("YES", "UNCLEAR", "UNCLEAR"), "YES"),  # 1 of 1 non-UNCLEAR is a strict majority
        (("YES", "NO", "UNCLEAR"), None),  # tie among non-UNCLEAR
        (("UNCLEAR", "UNCLEAR", "UNCLEAR"), None),
        (("NO", "UNCLEAR", "UNCLEAR"), "NO"),
        (("YES", "NO"), None),
        ((), None),
        (("YES", "YES", "NO", "NO", "YES"), "YES"),
    ],
)
def test_human_majority_rules(answers: tuple[str, ...], expected: str | None) -> None:
    assert _majority_of(answers) == expected


@pytest.mark.parametrize(("raw", "binary"), [("YES", "YES"), ("NO", "NO"), ("UNCLEAR", "NO")])
def test_automatic_unclear_counts_as_no(raw: str, binary: str) -> None:
    assert automatic_as_binary(raw) == binary


def _answers(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["predicate", "rater", "answer"])


def test_case_by_case_agreement() -> None:
    # predicate: (human answers, automatic answer, agrees?)
    cases = {
        "yes_yes": (("YES", "YES", "NO"), "YES", True),
        "yes_no": (("YES", "YES", "UNCLEAR"), "NO", False),
        "yes_unclear": (("YES", "UNCLEAR", "YES"), "UNCLEAR", False),  # automatic UNCLEAR = NO ≠ YES
        "no_unclear": (("NO", "NO", "YES"), "UNCLEAR", True),  # automatic UNCLEAR = NO = NO
        "no_no": (("NO", "UNCLEAR", "UNCLEAR"), "NO", True),
        "tie": (("YES", "NO", "UNCLEAR"), "YES", None),  # no human majority: left out
        "all_unclear": (("UNCLEAR",) * 3, "NO", None),  # no human majority: left out
        "no_auto": (("YES", "YES", "YES"), None, None),  # no automatic answer: left out
        "unanswered": ((), "YES", None),  # nobody answered
    }
    rows = [(p, f"r{i}", a) for p, (ans, _, _) in cases.items() for i, a in enumerate(ans)]
    preds = pd.DataFrame(
        {
            "predicate": list(cases),
            "brief": [f"b{i % 3}" for i in range(len(cases))],
            "automatic": [auto for _, auto, _ in cases.values()],
        }
    )
    res = checklist_agreement(_answers(rows), preds, resamples=50, seed=0)
    src = res.source("automatic")
    expected = [agree for _, _, agree in cases.values() if agree is not None]
    assert src.overall.n_predicates == len(expected) == 5
    assert src.overall.n_agree == sum(expected) == 3
    assert src.overall.value == pytest.approx(3 / 5)
    assert src.n_without_answer == 1 and src.n_unclear == 2
    assert res.n_with_majority == 6  # five compared + no_auto
    assert (res.n_tied, res.n_all_unclear, res.n_unanswered) == (1, 1, 1)
    assert res.n_predicates_short == 1  # "unanswered" has 0 < 3 answers
    majorities = {p["predicate"]: p["majority"] for p in res.predicates}
    assert majorities == {p: _majority_of(ans) for p, (ans, _, _) in cases.items()}
    conf = src.overall.confusion
    assert conf["UNCLEAR"] == {"YES": 1, "NO": 1}
    assert conf["YES"] == {"YES": 1, "NO": 0} and conf["NO"] == {"YES": 1, "NO": 1}


@pytest.mark.parametrize(("k", "n"), [(0, 5), (3, 5), (5, 5), (140, 150), (1, 1)])
def test_binomial_intervals_equal_statsmodels(k: int, n: int) -> None:
    got = binomial_intervals(k, n)
    assert got["wilson"] == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)
    assert got["clopper_pearson"] == pytest.approx(proportion_confint(k, n, method="beta"), abs=1e-12)
    nan = binomial_intervals(0, 0)
    assert all(math.isnan(x) for x in nan["wilson"] + nan["clopper_pearson"])


# --------------------------------------------------------------------------------------------
# Simulation with a known answer
# --------------------------------------------------------------------------------------------

P_UNCLEAR = 0.15  # a rater answers UNCLEAR
P_WRONG = 0.10  # a rater who answers YES/NO gets the truth wrong
P_AUTO_WRONG = 0.12  # the automatic judge is wrong
P_AUTO_UNCLEAR = 0.05  # the automatic judge says UNCLEAR (= NO)


def _expected_agreement(p_true: float) -> float:
    """Enumerate three raters (correct / wrong / unclear) → P(auto agrees | majority exists)."""
    p_outcome = {"c": (1 - P_UNCLEAR) * (1 - P_WRONG), "w": (1 - P_UNCLEAR) * P_WRONG, "u": P_UNCLEAR}
    p_maj_correct = p_maj_wrong = 0.0
    for combo in itertools.product("cwu", repeat=3):
        p = math.prod(p_outcome[x] for x in combo)
        c, w = combo.count("c"), combo.count("w")
        if c > w:
            p_maj_correct += p
        elif w > c:
            p_maj_wrong += p
    p_has = p_maj_correct + p_maj_wrong
    # automatic: truthful answer w.p. 1 - wrong - unclear, flipped w.p. wrong, UNCLEAR (→ NO) otherwise
    agree = 0.0
    for truth, p_t in (("YES", p_true), ("NO", 1 - p_true)):
        p_auto_yes = (1 - P_AUTO_WRONG - P_AUTO_UNCLEAR) if truth == "YES" else P_AUTO_WRONG
        p_auto = {"YES": p_auto_yes, "NO": 1 - p_auto_yes}
        other = "NO" if truth == "YES" else "YES"
        agree += p_t * (p_maj_correct * p_auto[truth] + p_maj_wrong * p_auto[other])
    return agree / p_has


def _simulate(seed: int, n_predicates: int = 3000, n_briefs: int = 150):
    rng = np.random.default_rng(seed)
    rows, preds = [], []
    for i in range(n_predicates):
        truth = "YES" if rng.random() < 0.6 else "NO"
        flip = "NO" if truth == "YES" else "YES"
        for r in range(3):
            if rng.random() < P_UNCLEAR:
                a = "UNCLEAR"
            elif rng.random() < P_WRONG:
                a = flip
            else:
                a = truth
            rows.append((f"p{i}", f"rater{(i + r) % 40}", a))
        u = rng.random()
        auto = flip if u < P_AUTO_WRONG else ("UNCLEAR" if u < P_AUTO_WRONG + P_AUTO_UNCLEAR else truth)
        preds.append(
            {
                "predicate": f"p{i}",
                "brief": f"b{i % n_briefs}",
                "automatic": auto,
                "question_type": ("Content", "Layout", "Style")[i % 3],
            }
        )
    return _answers(rows), pd.DataFrame(preds)


def _naive_agreement(answers: pd.DataFrame, preds: pd.DataFrame) -> tuple[int, int]:
    agree = n = 0
    by_pred: dict[str, list[str]] = {}
    for row in answers.itertuples(index=False):
        by_pred.setdefault(row.predicate, []).append(row.answer)
    for row in preds.itertuples(index=False):
        ans = by_pred.get(row.predicate, [])
        yes, no = ans.count("YES"), ans.count("NO")
        if yes == no or row.automatic is None:
            continue
        human = "YES" if yes > no else "NO"
        auto = "YES" if row.automatic == "YES" else "NO"
        n += 1
        agree += auto == human
    return agree, n


def test_simulated_raters_recover_expected_agreement() -> None:
    answers, preds = _simulate(seed=7)
    res = checklist_agreement(answers, preds, resamples=300, seed=2)
    src = res.source("automatic")
    agree, n = _naive_agreement(answers, preds)
    assert (src.overall.n_agree, src.overall.n_predicates) == (agree, n)
    expected = _expected_agreement(0.6)
    se = math.sqrt(expected * (1 - expected) / n)
    assert abs(src.overall.value - expected) < 4 * se
    for ci in (src.overall.wilson95, src.overall.clopper_pearson95, src.overall.bootstrap95):
        assert ci[0] < expected < ci[1]
    # Per-type breakdown partitions the compared predicates.
    assert [t.question_type for t in src.by_type] == ["Content", "Layout", "Style"]
    assert sum(t.n_predicates for t in src.by_type) == src.overall.n_predicates
    assert sum(t.n_agree for t in src.by_type) == src.overall.n_agree
    for t in src.by_type:
        sub = preds[preds["question_type"] == t.question_type]
        assert (t.n_agree, t.n_predicates) == _naive_agreement(
            answers[answers["predicate"].isin(sub["predicate"])], sub
        )


def test_cluster_bootstrap_equals_naive_loop() -> None:
    answers, preds = _simulate(seed=1, n_predicates=120, n_briefs=12)
    resamples, seed = 80, 5
    res = checklist_agreement(answers, preds, resamples=resamples, seed=seed)
    boot = brief_bootstrap(preds["brief"].tolist(), resamples=resamples, seed=seed)
    values = []
    for r in range(resamples):
        agree = n = 0
        for j, brief in enumerate(boot.briefs):
            sub = preds[preds["brief"] == brief]
            a, m = _naive_agreement(answers[answers["predicate"].isin(sub["predicate"])], sub)
            agree += int(boot.counts[r, j]) * a
            n += int(boot.counts[r, j]) * m
        values.append(agree / n if n else math.nan)
    v = np.array(values)
    expected = np.percentile(v[np.isfinite(v)], [2.5, 97.5])
    assert res.source("automatic").overall.bootstrap95 == pytest.approx(tuple(expected), abs=1e-12)


def test_several_sources_repeats_untagged_types_and_json() -> None:
    answers = _answers(
        [("p1", "r1", "YES"), ("p1", "r2", "YES"), ("p2", "r1", "NO"), ("p2", "r2", "NO"), ("p1", "r1", "NO")]
    )
    answers["is_repeat"] = [False, False, False, False, True]
    preds = predicates_frame(
        [
            {
                "id": "p1",
                "item": "i1",
                "question": "q",
                "automatic": {"vgr": "YES", "visual": "UNCLEAR"},
                "type": "Layout",
            },
            {"id": "p2", "item": "i2", "question": "q", "automatic": {"vgr": "UNCLEAR", "visual": "NO"}},
        ],
        {"i1": "b1", "i2": None},
    )
    assert preds["brief"].tolist() == ["b1", "i2"]  # an item without brief is its own cluster
    res = checklist_agreement(answers, preds, resamples=20, seed=0, k=2)
    assert res.n_repeat_answers_excluded == 1 and res.n_answers == 4
    assert res.source("vgr").overall.value == 1.0
    assert res.source("visual").overall.value == 0.5
    types = [t.question_type for t in res.source("vgr").by_type]
    assert types == ["Layout", None]
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["sources"][0]["overall"]["ci95"].keys() == {"wilson", "clopper_pearson", "bootstrap"}
    assert res.n_predicates_short == 0 and res.n_predicates_over == 0


@pytest.mark.parametrize(
    ("answers", "preds", "message"),
    [
        (_answers([("p1", "r1", "MAYBE")]), None, "expected one of"),
        (_answers([("p1", "r1", "YES"), ("p1", "r1", "NO")]), None, "more than one main answer"),
        (_answers([("p9", "r1", "YES")]), None, "unknown predicate"),
        (_answers([("p1", "r1", "YES")]), pd.DataFrame({"predicate": ["p1"]}), "brief"),
        (
            _answers([("p1", "r1", "YES")]),
            pd.DataFrame({"predicate": ["p1", "p1"], "brief": ["b", "b"]}),
            "twice",
        ),
        (
            _answers([("p1", "r1", "YES")]),
            pd.DataFrame({"predicate": ["p1"], "brief": ["b"], "automatic": ["PASS"]}),
            "automatic",
        ),
    ],
)
def test_bad_input_raises(answers: pd.DataFrame, preds: pd.DataFrame | None, message: str) -> None:
    if preds is None:
        preds = pd.DataFrame({"predicate": ["p1"], "brief": ["b1"], "automatic": ["YES"]})
    with pytest.raises(InvalidKindData, match=message):
        checklist_agreement(answers, preds, resamples=5, seed=0)
