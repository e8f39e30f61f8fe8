"""The gold exclusion test (stats.gold_rule; docs/protocol.md "Gold trials: the exclusion test").

Exact figures are checked against scipy's binomial distribution computed here independently (the
pmf summed, not the survival function the module uses), and the false-exclusion rate and power
against a simulation of raters answering gold trials one at a time, as the study serves them.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from stats.errors import StatisticsError
from stats.gold_rule import (
    CLICKERS,
    gold_critical_failures,
    gold_excludes,
    gold_rule_row,
    gold_trials_for_power,
)


def _tail(c: int, n: int, p: float) -> float:
    return float(sum(binom.pmf(x, n, p) for x in range(c, n + 1)))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 10, 20, 40])
def test_critical_count_is_the_smallest_improbable_failure_count(n: int) -> None:
    c = gold_critical_failures(n)
    improbable = [x for x in range(n + 1) if _tail(x, n, 0.05) <= 0.01]
    assert c == (min(improbable) if improbable else None)
    if c is not None:
        assert gold_excludes(c, n) and not gold_excludes(c - 1, n)


def test_the_table_of_the_protocol() -> None:
    # docs/protocol.md "Gold trials: the exclusion test" quotes these figures.
    expected = {2: (2, 0.0025, 0.25, 0.444), 4: (3, 0.0005, 0.3125, 0.593), 6: (3, 0.0022, 0.656, 0.900),
                10: (4, 0.0010, 0.828, 0.980)}
    for n, (c, false_rate, ab, abt) in expected.items():
        row = gold_rule_row(n)
        assert row.critical_failures == c
        assert row.false_exclusion == pytest.approx(_tail(c, n, 0.05), abs=1e-12)
        assert row.false_exclusion == pytest.approx(false_rate, abs=5e-5)
        assert row.power["A/B"] == pytest.approx(ab, abs=5e-4)
        assert row.power["A/B/TIE"] == pytest.approx(abt, abs=5e-4)


def test_one_gold_trial_never_excludes() -> None:
    assert gold_critical_failures(1) is None and not gold_excludes(1, 1)
    assert gold_rule_row(1).power == {"A/B": 0.0, "A/B/TIE": 0.0}


@pytest.mark.parametrize("n", [2, 4, 6, 10])
def test_simulated_raters_are_excluded_at_the_exact_rates(n: int) -> None:
    """Raters answering n gold trials one at a time (honest: the identical side with 95 %; an A/B
    clicker: a fair coin between the sides; an A/B/TIE clicker: one of three); the share the rule
    excludes matches the exact figure within 4 binomial standard errors."""
    rng = np.random.default_rng([39, n])
    raters = 40_000
    row = gold_rule_row(n)
    answers = {
        "honest": np.where(rng.random((raters, n)) < 0.95, "A", rng.choice(["B", "TIE"], (raters, n))),
        "A/B": rng.choice(["A", "B"], (raters, n)),
        "A/B/TIE": rng.choice(["A", "B", "TIE"], (raters, n)),
    }
    for who, labels in answers.items():
        failures = (labels != "A").sum(axis=1)
        verdict = np.array([gold_excludes(f, n) for f in range(n + 1)])  # the rule, per failure count
        excluded = verdict[failures].mean()
        exact = row.false_exclusion if who == "honest" else row.power[who]
        se = max(np.sqrt(exact * (1 - exact) / raters), 1 / raters)
        assert abs(excluded - exact) <= 4 * se, (who, excluded, exact)
        if who == "honest":
            assert excluded <= 0.01 + 4 * se


def test_gold_trials_for_power_stays_above_from_its_answer_on() -> None:
    n = gold_trials_for_power(0.9)
    assert n == 12
    for m in range(n, 60):
        assert gold_rule_row(m).power["A/B"] >= 0.9
    assert gold_rule_row(n - 1).power["A/B"] < 0.9
    # Power dips when the critical count steps up (8 trials: 0.855; 10: 0.828).
    assert gold_rule_row(8).power["A/B"] > gold_rule_row(10).power["A/B"]
    assert gold_trials_for_power(0.9, clicker_failure=CLICKERS["A/B/TIE"]) == 7


def test_bad_levels_are_refused() -> None:
    with pytest.raises(StatisticsError, match="honest error"):
        gold_critical_failures(5, honest_error=0.6)
    with pytest.raises(StatisticsError, match="false-exclusion"):
        gold_critical_failures(5, false_exclusion=0.0)
    with pytest.raises(StatisticsError, match="failures"):
        gold_excludes(6, 5)
