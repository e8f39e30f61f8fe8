"""The docs/study-kinds.md "Running the other study kinds" cluster bootstrap over briefs is the shared
page-block bootstrap with one stratum."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stats.bootstrap import bootstrap_page_blocks, bootstrap_ratio_ci, bootstrap_units, brief_bootstrap
from stats.errors import InvalidKindData
from stats.frames import bool_column


def test_brief_bootstrap_is_the_shared_bootstrap_with_briefs_as_pages() -> None:
    briefs = ["b3", "b1", "b2", "b1", "b10"]
    boot = brief_bootstrap(briefs, resamples=30, seed=4)
    units = bootstrap_units(sorted(set(briefs)))
    assert boot.briefs == ("b1", "b10", "b2", "b3")
    assert np.array_equal(boot.counts, bootstrap_page_blocks(units, resamples=30, seed=4))
    assert (boot.counts.sum(axis=1) == 4).all()
    # Input order and repetition do not matter.
    again = brief_bootstrap([*reversed(briefs), "b2"], resamples=30, seed=4)
    assert np.array_equal(again.counts, boot.counts)
    assert np.array_equal(boot.weights(["b2", "b2", "b3"]), boot.counts[:, [2, 2, 3]])


def test_ratio_ci_equals_loop() -> None:
    briefs = np.array(["a", "a", "b", "c", "c", "c"], dtype=object)
    num = np.array([1.0, 0.0, 1.0, 0.5, 1.0, 0.0])
    boot = brief_bootstrap(briefs, resamples=100, seed=0)
    values = []
    for r in range(100):
        s = n = 0.0
        for j, b in enumerate(boot.briefs):
            s += boot.counts[r, j] * num[briefs == b].sum()
            n += boot.counts[r, j] * (briefs == b).sum()
        values.append(s / n)
    assert bootstrap_ratio_ci(boot, briefs, num, np.ones(6)) == pytest.approx(
        tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12
    )


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), (0, False), (1.0, True), ("false", False), (" TRUE ", True)]
)
def test_bool_column_accepts(value, expected: bool) -> None:
    assert bool(bool_column(pd.DataFrame({"x": [value]}), "x", "t").iloc[0]) is expected


@pytest.mark.parametrize("value", [None, float("nan"), 2, "yes"])
def test_bool_column_rejects(value) -> None:
    with pytest.raises(InvalidKindData, match="row 0"):
        bool_column(pd.DataFrame({"x": [value]}), "x", "t")


def test_empty_studies_give_json_safe_reports() -> None:
    import json

    from stats.checklist import checklist_agreement
    from stats.hygiene import apply_hygiene
    from stats.rater_agreement import kind_agreement, winner_scale
    from stats.score_preference import score_preference

    votes = pd.DataFrame(columns=["comparison", "brief", "item_a", "item_b", "rater", "label"])
    scores = pd.DataFrame({"item": ["a", "b"], "metric": ["m", "m"], "score": [1.0, 0.0]})
    sp = score_preference(votes, scores, resamples=10, seed=0)
    assert sp.metric("m").overall.n_votes == 0
    answers = pd.DataFrame(columns=["predicate", "rater", "answer"])
    preds = pd.DataFrame({"predicate": ["p1"], "brief": ["b"], "automatic": ["YES"]})
    ck = checklist_agreement(answers, preds, resamples=10, seed=0)
    assert ck.n_unanswered == 1 and ck.source("automatic").overall.n_predicates == 0
    ag = kind_agreement(
        pd.DataFrame(columns=["unit", "rater", "answer"]), scale=winner_scale(), resamples=10, seed=0
    )
    hy = apply_hygiene(
        pd.DataFrame(
            columns=[
                "participant",
                "trial",
                "is_attention_check",
                "attention_passed",
                "response_ms",
                "answer",
            ]
        )
    )
    assert hy.n_participants == 0 and hy.n_kept_answers == 0
    for result in (sp, ck, ag, hy):
        json.dumps(result.to_dict(), allow_nan=False)
