"""The gold exclusion rule: a binomial-tail test (docs/protocol.md "Gold trials: the exclusion test").

Pure module: scipy in, numbers and frozen dataclasses out, no Django, no project app.

A rater served n gold trials who fails f of them is excluded when f failures are improbable for an
*honest* rater, one who fails each gold trial independently with probability ``honest_error``
(default 5 %): when the upper binomial tail ``P(X ≥ f | n, honest_error)`` is at most
``false_exclusion`` (default 1 %). Equivalently, when f reaches the critical count
``c(n) = min {c : P(X ≥ c | n, honest_error) ≤ false_exclusion}``.

- **False exclusion**: an honest rater at exactly ``honest_error`` is excluded with probability
  ``P(X ≥ c(n))``, at most ``false_exclusion`` by construction (the test is discrete, so usually
  less); one with a lower error rate less often still.
- **Power** against a clicker that answers at random: an A/B clicker fails a gold trial with
  probability ½ (the identical side is one of two), an A/B/TIE clicker with probability ⅔ (a TIE
  on a gold trial is a failure: the known answer is the identical side). Power = ``P(X ≥ c(n))``
  at that failure probability.

With too few gold trials no count is improbable enough (c(n) > n): with the defaults a single
gold trial never excludes anyone; two exclude a rater who fails both.

The rule it replaced excluded a rater failing *more than half* of their gold trials: exactly an
A/B clicker's expected share, so it caught at most half of them however many trials were served.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import binom

from stats.defaults import GOLD_FALSE_EXCLUSION, GOLD_HONEST_ERROR
from stats.errors import StatisticsError

# GOLD_HONEST_ERROR: an honest rater's failure probability on a gold trial the rule is calibrated
# for; GOLD_FALSE_EXCLUSION: the largest share of honest raters (at that rate) it may exclude.
#: Failure probability of a gold trial for a random clicker: A/B (½) and A/B/TIE (⅔).
CLICKERS = {"A/B": 0.5, "A/B/TIE": 2.0 / 3.0}


def _check(honest_error: float, false_exclusion: float) -> None:
    if not (isinstance(honest_error, int | float) and 0.0 < honest_error < 0.5):
        raise StatisticsError(f"the honest error rate must lie strictly between 0 and 0.5, got {honest_error!r}")
    if not (isinstance(false_exclusion, int | float) and 0.0 < false_exclusion < 1.0):
        raise StatisticsError(
            f"the false-exclusion level must lie strictly between 0 and 1, got {false_exclusion!r}"
        )


def gold_critical_failures(
    served: int, *, honest_error: float = GOLD_HONEST_ERROR, false_exclusion: float = GOLD_FALSE_EXCLUSION
) -> int | None:
    """c(n): the fewest failures of ``served`` gold trials that exclude a rater; None when even
    failing all of them is not improbable enough (module docstring)."""
    _check(honest_error, false_exclusion)
    if served < 1:
        return None
    # binom.sf(c - 1) = P(X ≥ c), decreasing in c; the small relative slack absorbs rounding at a tie.
    tails = binom.sf(np.arange(served + 1) - 1, served, honest_error)
    improbable = np.flatnonzero(tails <= false_exclusion * (1 + 1e-9))
    return int(improbable[0]) if improbable.size else None


def gold_excludes(
    failures: int,
    served: int,
    *,
    honest_error: float = GOLD_HONEST_ERROR,
    false_exclusion: float = GOLD_FALSE_EXCLUSION,
) -> bool:
    """Whether a rater with ``failures`` failed gold trials out of ``served`` is excluded."""
    if failures < 0 or failures > served:
        raise StatisticsError(f"failures must lie in [0, {served}], got {failures!r}")
    c = gold_critical_failures(served, honest_error=honest_error, false_exclusion=false_exclusion)
    return c is not None and failures >= c


@dataclass(frozen=True)
class GoldRuleRow:
    """The rule at one number of gold trials: its critical count, exact false-exclusion rate (at
    the honest error rate) and exact power against each clicker of ``CLICKERS``."""

    served: int
    critical_failures: int | None
    false_exclusion: float
    power: dict[str, float]


def gold_rule_row(
    served: int, *, honest_error: float = GOLD_HONEST_ERROR, false_exclusion: float = GOLD_FALSE_EXCLUSION
) -> GoldRuleRow:
    """Exact operating characteristics of the rule with ``served`` gold trials (binomial tails)."""
    c = gold_critical_failures(served, honest_error=honest_error, false_exclusion=false_exclusion)
    if c is None:
        return GoldRuleRow(served, None, 0.0, {name: 0.0 for name in CLICKERS})
    return GoldRuleRow(
        served,
        c,
        float(binom.sf(c - 1, served, honest_error)),
        {name: float(binom.sf(c - 1, served, p)) for name, p in CLICKERS.items()},
    )


@lru_cache(maxsize=64)
def gold_trials_for_power(
    power: float = 0.9,
    *,
    clicker_failure: float = CLICKERS["A/B"],
    honest_error: float = GOLD_HONEST_ERROR,
    false_exclusion: float = GOLD_FALSE_EXCLUSION,
    max_trials: int = 200,
) -> int:
    """The fewest gold trials per rater after which the rule catches at least ``power`` of the
    clickers failing with probability ``clicker_failure``, at every larger number too (the power
    is not monotone in n: c(n) steps up by one now and then)."""
    if not 0.0 < power < 1.0:
        raise StatisticsError(f"power must lie strictly between 0 and 1, got {power!r}")
    if not honest_error < clicker_failure <= 1.0:
        raise StatisticsError(
            f"a clicker's failure rate must lie above the honest error rate {honest_error:g}, got {clicker_failure!r}"
        )
    answer: int | None = None
    for n in range(1, max_trials + 1):
        c = gold_critical_failures(n, honest_error=honest_error, false_exclusion=false_exclusion)
        met = c is not None and binom.sf(c - 1, n, clicker_failure) >= power
        if met and answer is None:
            answer = n
        elif not met:
            answer = None
    if answer is None:
        raise StatisticsError(f"no number of gold trials up to {max_trials} reaches power {power:g}")
    return answer


#: The accuracies on gold for which docs/protocol.md "Gold trials: the exclusion test" gives the rule's
#: false-exclusion rate, and the planner's default (an honest rater's share of gold trials right).
HONEST_ACCURACIES = (0.90, 0.93, 0.95, 0.97)
DEFAULT_GOLD_ACCURACY = 0.93


def _check_accuracy(accuracy: float) -> None:
    if not 0.5 < accuracy < 1.0:
        raise StatisticsError(f"the accuracy on gold must lie strictly between 0.5 and 1, got {accuracy!r}")


def honest_exclusion_rate(
    served: int, accuracy: float, *, honest_error: float = GOLD_HONEST_ERROR,
    false_exclusion: float = GOLD_FALSE_EXCLUSION,
) -> float:
    """Exactly the share of honest raters the rule (calibrated at ``honest_error``) excludes when
    they get each of ``served`` gold trials right with probability ``accuracy``, independently:
    ``P(X ≥ c(n) | n, 1 − accuracy)``. Above ``false_exclusion`` when ``1 − accuracy`` exceeds
    the rule's honest error rate (the audit of issue 46: 2.6 % at 90 % accuracy, 12 gold trials)."""
    _check_accuracy(accuracy)
    c = gold_critical_failures(served, honest_error=honest_error, false_exclusion=false_exclusion)
    return 0.0 if c is None else float(binom.sf(c - 1, served, 1.0 - accuracy))


@dataclass(frozen=True)
class GoldPlan:
    """The planner's gold suggestion for raters of a stated accuracy on gold: the rule calibrated
    at that accuracy (``honest_error = 1 − accuracy``, the exclusion rules' ``gold_honest_error``),
    the fewest gold trials per rater from which it catches ``power`` of A/B clickers at every larger
    number, and at that number its critical count, its exact false-exclusion rate at that accuracy
    and its power against each clicker of ``CLICKERS``."""

    accuracy: float
    honest_error: float
    gold_trials: int
    critical_failures: int
    false_exclusion: float
    power: dict[str, float]

    def to_dict(self) -> dict[str, object]:
        """Its fields, and the A/B clickers caught under a key a template can name."""
        return {**asdict(self), "ab_clickers_caught": self.power["A/B"]}

    def describe(self) -> str:
        return (
            f"{self.gold_trials} gold trials per rater for raters {self.accuracy:.0%} right on gold "
            f"(gold_honest_error {self.honest_error:.2f}): excluded from {self.critical_failures} failures, "
            f"{self.false_exclusion:.2%} of such honest raters excluded, "
            f"{self.power['A/B']:.1%} of A/B and {self.power['A/B/TIE']:.1%} of A/B/TIE clickers caught"
        )


def gold_plan(
    accuracy: float = DEFAULT_GOLD_ACCURACY, *, power: float = 0.9, false_exclusion: float = GOLD_FALSE_EXCLUSION
) -> GoldPlan:
    """The gold trials to plan for raters ``accuracy`` right on gold (``GoldPlan``)."""
    _check_accuracy(accuracy)
    honest = round(1.0 - accuracy, 10)
    n = gold_trials_for_power(power, honest_error=honest, false_exclusion=false_exclusion)
    row = gold_rule_row(n, honest_error=honest, false_exclusion=false_exclusion)
    assert row.critical_failures is not None  # the power is reached, so some count excludes
    return GoldPlan(accuracy, honest, n, row.critical_failures, row.false_exclusion, row.power)


def describe_gold_rule(
    *, honest_error: float = GOLD_HONEST_ERROR, false_exclusion: float = GOLD_FALSE_EXCLUSION
) -> str:
    """One line naming the rule and its levels (reports, the quality page)."""
    _check(honest_error, false_exclusion)
    return (
        f"failed gold trials improbable for an honest rater ({honest_error:.0%} error; "
        f"at most {false_exclusion:.0%} of honest raters excluded)"
    )


__all__ = [
    "CLICKERS",
    "DEFAULT_GOLD_ACCURACY",
    "GOLD_FALSE_EXCLUSION",
    "GOLD_HONEST_ERROR",
    "HONEST_ACCURACIES",
    "GoldPlan",
    "GoldRuleRow",
    "describe_gold_rule",
    "gold_critical_failures",
    "gold_excludes",
    "gold_plan",
    "gold_rule_row",
    "gold_trials_for_power",
    "honest_exclusion_rate",
]
