"""The defaults and choices of the statistics that views, forms, the API and commands show or pass.

Kept apart from the modules that compute (NumPy, SciPy, statsmodels) so that a process that only
shows a form or parses a request does not load the scientific stack to read a number.
"""

from __future__ import annotations

# Judge weights (stats.judge_weights): the paper's 5,000 page-block resamples for proxy alignment.
CALIBRATION_RESAMPLES = 5000
CALIBRATION_SEED = 20260830  # the paper's seed for proxy alignment

# Judge-subset ablation (stats.judge_ablation), paper B.4.
ABLATION_RESAMPLES = 10_000
ABLATION_SEED = 20260830

# Study planning (stats.planning): its targets and allocation rules.
PLAN_KINDS = ("top_k", "adjacent", "kappa", "alpha", "brier")
ALLOCATIONS = ("uniform", "adaptive")

# The gold rule (stats.gold_rule): an honest rater's error rate on gold trials, and the largest
# share of honest raters the binomial test may exclude.
GOLD_HONEST_ERROR = 0.05
GOLD_FALSE_EXCLUSION = 0.01
