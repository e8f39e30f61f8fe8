"""The gold exclusion test (stats.gold_rule; docs/protocol.md "Gold trials: the exclusion test").

Exact figures are checked against scipy's binomial distribution computed here independently (the
pmf summed, not the survival function the module uses), and the false-exclusion rate and power
against a simulation of raters answering gold trials one at a time, as the study serves them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from stats.errors import StatisticsError
from stats.gold_rule import (
    CLICKERS,
    HONEST_ACCURACIES,
    gold_critical_failures,
    gold_excludes,
    gold_plan,
    gold_rule_row,
    gold_trials_for_power,
    honest_exclusion_rate,
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


# docs/protocol.md "Gold trials: the exclusion test", the table of honest raters excluded by the
# default rule (5 % honest error, 1 % level) at each accuracy on gold: {n: (90 %, 93 %, 95 %, 97 %)}.
HONEST_TABLE = {
    2: (0.0100, 0.0049, 0.0025, 0.0009),
    4: (0.0037, 0.0013, 0.0005, 0.0001),
    6: (0.0158, 0.0058, 0.0022, 0.0005),
    10: (0.0128, 0.0036, 0.0010, 0.0001),
    12: (0.0256, 0.0075, 0.0022, 0.0003),
    16: (0.0684, 0.0221, 0.0070, 0.0011),
    20: (0.0432, 0.0107, 0.0026, 0.0003),
}


def _by_hand(c: int, n: int, q: float) -> float:
    """P(X >= c) for X ~ Binomial(n, q), summed term by term from the binomial coefficients."""
    return sum(math.comb(n, x) * q**x * (1 - q) ** (n - x) for x in range(c, n + 1))


def test_the_honest_exclusion_table_of_the_protocol() -> None:
    for n, rates in HONEST_TABLE.items():
        c = gold_critical_failures(n)
        assert c is not None
        for accuracy, quoted in zip(HONEST_ACCURACIES, rates, strict=True):
            exact = honest_exclusion_rate(n, accuracy)
            assert exact == pytest.approx(_by_hand(c, n, 1 - accuracy), abs=1e-12)
            assert exact == pytest.approx(quoted, abs=5e-5), (n, accuracy)
    # Calibrated at 5 %, the rule keeps its 1 % promise at 95 % accuracy and above only.
    assert all(honest_exclusion_rate(n, 0.95) <= 0.01 for n in range(1, 60))
    assert honest_exclusion_rate(12, 0.90) > 0.02 and honest_exclusion_rate(16, 0.90) > 0.06


@pytest.mark.parametrize("accuracy", HONEST_ACCURACIES)
def test_honest_raters_of_each_accuracy_are_excluded_at_the_exact_rate(accuracy: float) -> None:
    """Simulated honest raters right on each of 12 gold trials with the stated accuracy, answering
    one trial at a time; the share the default rule excludes matches the exact figure within 4
    binomial standard errors."""
    rng = np.random.default_rng([46, int(accuracy * 100)])
    raters, n = 200_000, 12
    failures = (rng.random((raters, n)) >= accuracy).sum(axis=1)
    verdict = np.array([gold_excludes(f, n) for f in range(n + 1)])
    excluded = verdict[failures].mean()
    exact = honest_exclusion_rate(n, accuracy)
    se = max(np.sqrt(exact * (1 - exact) / raters), 1 / raters)
    assert abs(excluded - exact) <= 4 * se, (accuracy, excluded, exact)


@pytest.mark.parametrize("accuracy", HONEST_ACCURACIES)
def test_the_gold_plan_keeps_its_promise_at_the_stated_accuracy(accuracy: float) -> None:
    """The planner's suggestion: the rule calibrated at the stated accuracy, the fewest gold trials
    from which it catches 90 % of A/B clickers at every larger number, and at most 1 % of honest
    raters of that accuracy excluded (checked by hand and by simulation)."""
    plan = gold_plan(accuracy)
    n, c = plan.gold_trials, plan.critical_failures
    assert plan.honest_error == pytest.approx(1 - accuracy)
    assert plan.false_exclusion == pytest.approx(_by_hand(c, n, 1 - accuracy), abs=1e-12) and plan.false_exclusion <= 0.01
    assert plan.power["A/B"] == pytest.approx(_by_hand(c, n, 0.5), abs=1e-12) and plan.power["A/B"] >= 0.9
    for m in range(n, n + 40):
        assert gold_rule_row(m, honest_error=plan.honest_error).power["A/B"] >= 0.9
    assert gold_rule_row(n - 1, honest_error=plan.honest_error).power["A/B"] < 0.9
    rng = np.random.default_rng([46, n])
    honest = (rng.random((100_000, n)) >= accuracy).sum(axis=1)
    assert (honest >= c).mean() <= 0.01 + 4 * np.sqrt(0.01 * 0.99 / 100_000)
    assert {a: gold_plan(a).gold_trials for a in HONEST_ACCURACIES} == {0.90: 17, 0.93: 14, 0.95: 12, 0.97: 9}


def test_bad_levels_are_refused() -> None:
    with pytest.raises(StatisticsError, match="honest error"):
        gold_critical_failures(5, honest_error=0.6)
    with pytest.raises(StatisticsError, match="false-exclusion"):
        gold_critical_failures(5, false_exclusion=0.0)
    with pytest.raises(StatisticsError, match="failures"):
        gold_excludes(6, 5)
