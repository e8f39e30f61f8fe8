"""Sample-size planning by seeded simulation (docs/protocol.md "Planning a study's size").

Pure module: numpy in, frozen dataclasses out, no Django, no project app.

A plan answers "how many votes (raters, blocks, judge calls) does this target need?" from stated
assumptions (``stats.study_simulation.StudyAssumptions``, possibly estimated from a pilot) by
simulating the study many times with the project's own estimators:

- ranking targets (``top_k``: the top-k set identified with a given probability; ``adjacent``:
  every adjacent pair's 95 % interval narrower than a width, with a given probability) play the
  study forward with ``run_sequential`` (uniform or adaptive allocation) and fit
  docs/protocol.md "Deployment leaderboard" Bradley–Terry at every look; the curve is the share of simulated
  studies meeting the target, with its Wilson interval;
- agreement targets (``kappa``, ``alpha``: the 95 % interval half-width of
docs/protocol.md "Human reference and agreement" Fleiss κ or
  ordinal Krippendorff α) simulate n comparisons rated by r raters each, compute κ / α and their
  stratified page-block bootstrap interval (``stats.agreement.bootstrap_agreement`` on
  ``stats.bootstrap.bootstrap_page_blocks``, blocks as strata, as the agreement report does), and
  average the half-width over the simulated studies (interval: 2.5 / 97.5 % of a bootstrap of the
  studies);
- the judge target (``brier``: the 95 % interval half-width of the calibrated judge's out-of-fold
  Brier score, docs/protocol.md "Judges and calibration") simulates n human-labelled comparisons rated by r
  raters each and judged by the stated judges (``JudgeAssumptions``: each output equals the comparison's most
  likely human answer with the judge's accuracy, else one of the two other labels), fits the judge weights
  leave-one-block-out (the OLS of ``stats.judge_weights.leave_one_block_out``, no intercept) and
  takes the Brier interval of the stratified page-block bootstrap with the weights re-fitted on
  every resample (``refitted_brier_bootstrap``: the calibration report holds the predictions
  fixed, which leaves out the noise of fitting them); the curve averages the half-width as for
  κ / α.

The votes needed is the smallest size after which the curve stays at the target (log-linear
interpolation), with a percentile interval over a bootstrap of the simulated studies: the
simulation's own uncertainty. A ranking plan reads its curve one standard error low
(``assured_share``), so that fresh studies of its size meet the target, and answers in the votes its
raters hold (uniform) or its blocks hold (adaptive, which simulates the study's own blocks).
κ / α plans read, by default, the share of studies reaching the half-width (``assurance``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from stats.agreement import bootstrap_agreement, fleiss_kappa, krippendorff_alpha_ordinal, wilson_interval
from stats.allocation import Target, adaptive_rule, pair_indices
from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.defaults import ALLOCATIONS, PLAN_KINDS
from stats.errors import StatisticsError
from stats.gold_rule import CLICKERS, HONEST_ACCURACIES, gold_plan, gold_trials_for_power
from stats.study_simulation import (
    SimulatedTruth,
    StudyAssumptions,
    look_grid,
    run_sequential,
    simulated_truth,
)

PLAN_BOOTSTRAP = 400
#: The smallest study a κ / α / Brier plan simulates (comparisons).
MIN_PLAN_COMPARISONS = 5


@dataclass(frozen=True)
class PlanTarget:
    """A planning target. ``probability`` is for ranking targets, ``half_width`` for κ / α / Brier."""

    kind: str
    k: int = 3
    probability: float = 0.9
    width_elo: float = 50.0
    half_width: float = 0.05
    #: κ / α: the share of studies that must reach the half-width (None: the mean half-width).
    assurance: float | None = 0.8

    def __post_init__(self) -> None:
        if self.kind not in PLAN_KINDS:
            raise StatisticsError(f"target must be one of {', '.join(PLAN_KINDS)}, got {self.kind!r}")
        if not 0.0 < self.probability < 1.0:
            raise StatisticsError(
                f"target probability must lie strictly between 0 and 1, got {self.probability!r}"
            )
        if not 0.0 < self.half_width < 1.0:
            raise StatisticsError(
                f"target half-width must lie strictly between 0 and 1, got {self.half_width!r}"
            )
        if not (self.width_elo > 0 and math.isfinite(self.width_elo)):
            raise StatisticsError(
                f"target width must be a positive number of Elo points, got {self.width_elo!r}"
            )
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise StatisticsError(f"target k must be a positive integer, got {self.k!r}")
        if self.assurance is not None and not 0.0 < self.assurance < 1.0:
            raise StatisticsError(
                f"target assurance must lie strictly between 0 and 1, got {self.assurance!r}"
            )
        if self.kind == "brier" and not self.half_width < 0.5:
            raise StatisticsError(
                f"target Brier half-width {self.half_width!r} is impossible: a Brier score lies in [0, 1], "
                "so its interval's half-width is below 0.5"
            )

    @property
    def is_ranking(self) -> bool:
        return self.kind in ("top_k", "adjacent")

    def describe(self) -> str:
        if self.kind == "top_k":
            return f"P(top-{self.k} identified) >= {self.probability:g}"
        if self.kind == "adjacent":
            return f"P(every adjacent 95% width < {self.width_elo:g} Elo) >= {self.probability:g}"
        if self.kind == "brier":
            return f"95% half-width of the calibrated judge's Brier score <= {self.half_width:g}"
        name = "Fleiss kappa" if self.kind == "kappa" else "ordinal Krippendorff alpha"
        if self.uses_assurance:
            return f"P(95% half-width of {name} <= {self.half_width:g}) >= {self.assurance:g}"
        return f"mean 95% half-width of {name} <= {self.half_width:g}"

    @property
    def uses_assurance(self) -> bool:
        """κ / α planned for the share of studies reaching the half-width (not its mean)."""
        return self.kind in ("kappa", "alpha") and self.assurance is not None


@dataclass(frozen=True)
class StudyDesign:
    """How votes become raters, blocks and judge calls."""

    trials_per_rater: int = 240  # one assignment: its block's comparisons plus hidden repeats
    hidden_repeats: int = 6  # per assignment (docs/protocol.md "Planning the human study")
    raters_per_block: int = 5
    # judge calls: one primary-order call per comparison and judge (docs/protocol.md "Deployment leaderboard")
    n_judges: int = 1
    #: Adaptive ranking plans: uniform blocks scheduled before the allocator takes over, and the
    #: votes of each adaptive round (None: a whole block, how a study re-allocates today).
    start_blocks: int = 1
    round_votes: int | None = None

    def __post_init__(self) -> None:
        if self.trials_per_rater < 2:
            raise StatisticsError(f"trials per rater must be at least 2, got {self.trials_per_rater!r}")
        if not 0 <= self.hidden_repeats < self.trials_per_rater:
            raise StatisticsError(
                f"hidden repeats must lie in [0, {self.trials_per_rater - 1}], got {self.hidden_repeats!r}"
            )
        if self.raters_per_block < 2:
            raise StatisticsError(f"raters per block must be at least 2, got {self.raters_per_block!r}")
        if self.n_judges < 0:
            raise StatisticsError(f"judges must be non-negative, got {self.n_judges!r}")
        if self.start_blocks < 1:
            raise StatisticsError(f"uniform start blocks must be at least 1, got {self.start_blocks!r}")
        if self.round_votes is not None and self.round_votes < 1:
            raise StatisticsError(f"round votes must be positive, got {self.round_votes!r}")

    @property
    def block_votes(self) -> int:
        """Main votes of one block: its raters times the main trials of each."""
        return self.main_per_rater * self.raters_per_block

    @property
    def main_per_rater(self) -> int:
        return self.trials_per_rater - self.hidden_repeats


@dataclass(frozen=True)
class JudgeAssumptions:
    """The judges of a Brier plan: each judge's accuracy (share of its outputs equal to the human
    majority label) and its outputs per comparison (orders × repeats; the paper: 2 × 2)."""

    accuracy: tuple[float, ...] = (0.7,)
    outputs_per_comparison: int = 4

    def __post_init__(self) -> None:
        if not self.accuracy:
            raise StatisticsError("the Brier target needs at least one judge")
        for a in self.accuracy:
            if not (isinstance(a, int | float) and 0.0 < a <= 1.0):
                raise StatisticsError(f"judge accuracy must lie in (0, 1], got {a!r}")
        if isinstance(self.outputs_per_comparison, bool) or not (
            isinstance(self.outputs_per_comparison, int) and self.outputs_per_comparison >= 1
        ):
            raise StatisticsError(
                f"judge outputs per comparison must be a positive integer, got {self.outputs_per_comparison!r}"
            )

    @property
    def n_judges(self) -> int:
        return len(self.accuracy)


@dataclass(frozen=True)
class PlanPoint:
    """One point of the curve: the target's statistic at ``votes`` main votes, and its interval."""

    votes: int
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class StudyPlan:
    target: PlanTarget
    allocation: str
    assumptions: StudyAssumptions
    design: StudyDesign
    n_studies: int
    seed: int
    points: tuple[PlanPoint, ...]
    votes_needed: float
    votes_interval: tuple[float, float]
    judges: JudgeAssumptions | None = None
    #: κ / α / Brier: the votes at which the *mean* half-width reaches the target (beside the
    #: assurance answer of ``votes_needed``).
    mean_votes_needed: float | None = None

    @property
    def comparisons_needed(self) -> int | None:
        """κ / α / Brier: human-labelled comparisons, each rated by ``raters_per_block`` raters."""
        if self.target.is_ranking:
            return None
        return math.ceil(self.votes_needed / self.design.raters_per_block)

    @property
    def trials_needed(self) -> int:
        """Trials served: main votes plus the hidden repeats that come with them."""
        d = self.design
        return math.ceil(self.votes_needed * d.trials_per_rater / d.main_per_rater)

    @property
    def raters_needed(self) -> int:
        return math.ceil(self.votes_needed / self.design.main_per_rater)

    @property
    def blocks_needed(self) -> int:
        return max(1, math.ceil(self.raters_needed / self.design.raters_per_block))

    @property
    def last_block_raters(self) -> int:
        """Raters of the plan's last block (fewer than ``raters_per_block`` when a uniform plan's
        votes end part-way through a block)."""
        return self.raters_needed - (self.blocks_needed - 1) * self.design.raters_per_block

    @property
    def judge_calls(self) -> int:
        if self.judges is not None and self.comparisons_needed is not None:
            # Calibration: every judge's outputs (orders × repeats) on every human-labelled comparison.
            return self.comparisons_needed * self.judges.n_judges * self.judges.outputs_per_comparison
        return math.ceil(self.votes_needed) * self.design.n_judges

    def gold_suggestion(self, power: float = 0.9) -> dict[str, int]:
        """Gold trials per rater after which the default gold rule catches ``power`` of random
        clickers (docs/protocol.md "Gold trials: the exclusion test"), per kind of clicker."""
        return {name: gold_trials_for_power(power, clicker_failure=p) for name, p in CLICKERS.items()}

    def to_dict(self) -> dict:
        return {
            "target": {**asdict(self.target), "description": self.target.describe()},
            "allocation": self.allocation,
            "allocation_rule": adaptive_rule(self.target.kind)
            if self.allocation == "adaptive" and self.target.is_ranking
            else "uniform",
            "assumptions": {
                k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.assumptions).items()
            },
            "design": asdict(self.design),
            "simulated_studies": self.n_studies,
            "seed": self.seed,
            "votes_needed": math.ceil(self.votes_needed),
            "votes_ci95": [math.floor(self.votes_interval[0]), _ceil_or_none(self.votes_interval[1])],
            "comparisons_needed": self.comparisons_needed,
            "trials_needed": self.trials_needed,
            "raters_needed": self.raters_needed,
            "blocks_needed": self.blocks_needed,
            "judge_calls": self.judge_calls,
            "curve": [asdict(p) for p in self.points],
            "gold_trials_for_90pct_clickers": self.gold_suggestion(),
            # The rule calibrated at each stated accuracy on gold (docs/protocol.md "Gold trials: the exclusion test").
            "gold_plans": [gold_plan(a).to_dict() for a in HONEST_ACCURACIES],
            "mean_half_width_votes_needed": None
            if self.mean_votes_needed is None
            else _ceil_or_none(self.mean_votes_needed),
            "judges": None
            if self.judges is None
            else {**asdict(self.judges), "accuracy": list(self.judges.accuracy)},
        }


def _ceil_or_none(x: float) -> int | None:
    return math.ceil(x) if math.isfinite(x) else None


def ranking_looks(m: int, allocation: str, design: StudyDesign, max_votes_per_pair: float) -> np.ndarray:
    """The sizes a ranking plan reads. Uniform: a fine geometric grid (its allocation does not
    depend on when the fit is read). Adaptive: the study's own granularity (``study_looks``)."""
    if allocation != "adaptive":
        return look_grid(m, start_per_pair=1.0, stop_per_pair=max_votes_per_pair, ratio=1.15)
    return study_looks(design, math.ceil(max_votes_per_pair * m * (m - 1) / 2))


def study_looks(design: StudyDesign, stop: int, *, max_looks: int = 2000) -> np.ndarray:
    """An adaptive study's looks up to ``stop`` votes: its uniform start blocks as one fixed-design
    look, then one re-allocation per round (``round_votes``, or a block), and every block's end
    (a round that spans a block's end is read there too: a plan answers in whole blocks)."""
    start = design.start_blocks * design.block_votes
    step = design.round_votes or design.block_votes
    looks = {start}
    votes = start
    while votes < stop and len(looks) < max_looks:
        votes = min(votes + step, stop)
        looks.add(votes)
    blocks = start
    while blocks < votes:
        blocks += design.block_votes
        looks.add(blocks)
    return np.array(sorted(looks), dtype=np.int64)


def block_ends(design: StudyDesign, looks: np.ndarray) -> np.ndarray:
    """Which of an adaptive study's ``looks`` end a block (the sizes a study is scheduled in)."""
    start = design.start_blocks * design.block_votes
    return (looks >= start) & ((looks - start) % design.block_votes == 0)


#: One-sided margin of a ranking plan, in standard errors of its own simulated share: the plan is
#: the smallest size at which the share *less one standard error* stays at the target, so that a
#: fresh simulation of that size (``verify_plan``) reaches the target (issue 46: a plan read where
#: its own 100 studies' share crossed 0.9 verified at 0.855 ± 0.025).
PLAN_MARGIN_SE = 1.0
#: The smallest uniform start (votes per system pair) at which the debiased scores of an adaptive
#: study were measured within the protocol's bias and coverage
#: (docs/protocol.md "Scores of an adaptive study"): an adaptive plan with a smaller start is refused.
MIN_START_VOTES_PER_PAIR = 2
#: Simulated studies of a ranking plan by default (one run of 10 systems takes seconds).
RANKING_STUDIES = 1000


def assured_share(reached: np.ndarray, *, margin_se: float = PLAN_MARGIN_SE) -> np.ndarray:
    """The share of simulated studies meeting the target at each look, ``reached`` (looks, studies),
    made non-decreasing in the votes (isotonic regression, scikit-learn: it pools the noise of
    neighbouring looks) and lowered to its Wilson bound ``margin_se`` standard errors below."""
    from sklearn.isotonic import IsotonicRegression

    n = reached.shape[1]
    share = IsotonicRegression(increasing=True, y_min=0.0, y_max=1.0).fit_transform(
        np.arange(reached.shape[0]), np.asarray(reached, dtype=np.float64).mean(axis=1)
    )
    z = margin_se
    den = 1 + z * z / n
    centre = (share + z * z / (2 * n)) / den
    half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / den
    return np.clip(centre - half, 0.0, 1.0)


def _ranking_reached(
    truth: SimulatedTruth, target: PlanTarget, allocation: str, looks: np.ndarray, seed: int
) -> np.ndarray:
    """(looks, studies): whether each simulated study meets the ranking target at each look."""
    m = truth.n_systems
    sim_target = Target(kind=target.kind, k=min(target.k, m - 1), width_elo=target.width_elo)
    rule = adaptive_rule(target.kind) if allocation == "adaptive" else "uniform"
    run = run_sequential(truth, rule, sim_target, looks, seed=seed)
    return run.top_correct if target.kind == "top_k" else run.max_adjacent_width <= target.width_elo


def _adaptive_reached(
    truth: SimulatedTruth, target: PlanTarget, design: StudyDesign, seed: int, max_votes_per_pair: float
) -> tuple[np.ndarray, np.ndarray]:
    """An adaptive plan's block ends and whether each study meets the target there. The study is
    played to one block past its start, then to twice as many blocks, … until the last block end's
    assured share meets the target (or ``max_votes_per_pair``): a study played further repeats the
    same draws up to where the shorter one stopped, so the answer does not depend on the windows."""
    m = truth.n_systems
    start = design.start_blocks * design.block_votes
    most = max(start, math.ceil(max_votes_per_pair * m * (m - 1) / 2))
    blocks = 1
    while True:
        stop = min(most, start + blocks * design.block_votes)
        looks = study_looks(design, stop)
        reached = _ranking_reached(truth, target, "adaptive", looks, seed)
        keep = block_ends(design, looks)
        looks, reached = looks[keep], reached[keep]
        if assured_share(reached)[-1] >= target.probability - 1e-12 or stop >= most or len(looks) < 2:
            return looks, reached
        blocks *= 2


def _bootstrap_crossing(
    votes: np.ndarray, reached: np.ndarray, level: float, rng: np.random.Generator, *, interpolate: bool = True
) -> tuple[float, float]:
    n = reached.shape[1]
    draws = [
        votes_staying(votes, assured_share(reached[:, rng.integers(0, n, n)]), level, interpolate=interpolate)
        for _ in range(PLAN_BOOTSTRAP)
    ]
    arr = np.array(draws)
    low = float(np.percentile(arr, 2.5)) if np.isfinite(arr).mean() >= 0.025 else math.inf
    high = float(np.percentile(arr, 97.5)) if np.isfinite(arr).mean() >= 0.975 else math.inf
    return low, high


def plan_ranking(
    assumptions: StudyAssumptions,
    target: PlanTarget,
    *,
    allocation: str = "uniform",
    design: StudyDesign | None = None,
    n_studies: int = RANKING_STUDIES,
    seed: int = 0,
    max_votes_per_pair: float = 400.0,
) -> StudyPlan:
    """Votes needed for a ranking target, by playing ``n_studies`` simulated studies forward.

    The answer is the smallest size from which the share of studies meeting the target, less one
    standard error (``assured_share``), stays at the target probability; in whole raters for a
    uniform plan (the votes its raters hold), in whole blocks for an adaptive one (the votes its
    blocks hold: a serve-time study builds blocks of the start's size)."""
    if not target.is_ranking:
        raise StatisticsError(f"target {target.kind} is not a ranking target")
    if allocation not in ALLOCATIONS:
        raise StatisticsError(f"allocation must be one of {', '.join(ALLOCATIONS)}, got {allocation!r}")
    if n_studies < 10:
        raise StatisticsError(f"at least 10 simulated studies are needed, got {n_studies}")
    design = design or StudyDesign()
    m = assumptions.n_systems
    if target.kind == "top_k" and not target.k < m:
        raise StatisticsError(
            f"target top-{target.k} is impossible with {m} systems (k must be below the system count)"
        )
    k_pairs = m * (m - 1) // 2
    start = design.start_blocks * design.block_votes
    if allocation == "adaptive" and start < MIN_START_VOTES_PER_PAIR * k_pairs:
        raise StatisticsError(
            f"the uniform start ({design.start_blocks} block(s), {start} votes) holds "
            f"{start / k_pairs:.1f} votes per system pair; the scores of an adaptive study are measured "
            f"unbiased from {MIN_START_VOTES_PER_PAIR} per pair ({MIN_START_VOTES_PER_PAIR * k_pairs} votes for "
            f"{m} systems): give more start blocks, or larger ones"
        )
    truth = simulated_truth(assumptions, [seed * 100_003 + i for i in range(n_studies)])
    whole = allocation == "adaptive"
    if whole:
        looks, reached = _adaptive_reached(truth, target, design, seed, max_votes_per_pair)
    else:
        looks = ranking_looks(m, allocation, design, max_votes_per_pair)
        reached = _ranking_reached(truth, target, allocation, looks, seed)
    points = []
    for t, votes in enumerate(looks):
        hits = int(reached[t].sum())
        low, high = wilson_interval(hits, n_studies)
        points.append(PlanPoint(int(votes), hits / n_studies, low, high))
    crossing = votes_staying(looks, assured_share(reached), target.probability, interpolate=not whole)
    if not math.isfinite(crossing):
        raise StatisticsError(
            f"target {target.describe()} not reached within {int(looks[-1])} votes "
            f"({max_votes_per_pair:g} per pair, {n_studies} simulated studies, less one standard error); "
            "lower the target"
        )
    interval = _bootstrap_crossing(
        looks, reached, target.probability, np.random.default_rng([seed, 31]), interpolate=not whole
    )
    if not whole:
        # Uniform: the whole raters that hold the votes (a study's last block may be part-filled).
        crossing = _whole_raters(crossing, design)
        interval = (_whole_raters(interval[0], design), _whole_raters(interval[1], design))
    needed = crossing
    return StudyPlan(
        target, allocation, assumptions, design, n_studies, seed, tuple(points), needed, interval
    )


def _whole_raters(votes: float, design: StudyDesign) -> float:
    """The votes of the fewest whole raters holding ``votes`` (inf stays inf)."""
    if not math.isfinite(votes):
        return votes
    return float(math.ceil(votes / design.main_per_rater - 1e-9) * design.main_per_rater)


def _agreement_half_widths(
    probabilities: np.ndarray,
    n_comparisons: int,
    raters: int,
    block_size: int,
    resamples: int,
    rng: np.random.Generator,
) -> tuple[float, float, float, float]:
    """One simulated study: (κ, α, κ half-width, α half-width) of n comparisons × r raters."""
    k_pairs = probabilities.shape[0]
    pairs = rng.integers(0, k_pairs, n_comparisons)
    counts = rng.multinomial(raters, probabilities[pairs]).astype(float)  # columns A, TIE, B
    ordinal = counts[:, ::-1]  # B = 0 < TIE = 1 < A = 2
    blocks = np.arange(n_comparisons) // block_size
    units = bootstrap_units([str(i) for i in range(n_comparisons)], [str(b) for b in blocks])
    weights = bootstrap_page_blocks(units, resamples=resamples, seed=int(rng.integers(0, 2**31)))
    boot = bootstrap_agreement(ordinal, weights[:, units.unit_of])
    k_lo, k_hi = (float(x) for x in percentile_interval(boot.fleiss_kappa))
    a_lo, a_hi = (float(x) for x in percentile_interval(boot.krippendorff_alpha_ordinal))
    return (
        float(fleiss_kappa(ordinal)),
        float(krippendorff_alpha_ordinal(ordinal)),
        (k_hi - k_lo) / 2,
        (a_hi - a_lo) / 2,
    )


Progress = Callable[[float], None]


def plan_agreement(
    assumptions: StudyAssumptions,
    target: PlanTarget,
    *,
    design: StudyDesign | None = None,
    n_studies: int = 40,
    seed: int = 0,
    resamples: int = 400,
    max_comparisons: int = 20_000,
    progress: Progress | None = None,
) -> StudyPlan:
    """Votes needed for a κ / α half-width: comparisons rated by ``raters_per_block`` raters each."""
    if target.is_ranking or target.kind == "brier":
        raise StatisticsError(f"target {target.kind} is not an agreement target")
    design = design or StudyDesign()
    column = 2 if target.kind == "kappa" else 3

    def half_width(probabilities: np.ndarray, n_comparisons: int, rng: np.random.Generator) -> float:
        return _agreement_half_widths(
            probabilities, n_comparisons, design.raters_per_block, design.main_per_rater, resamples, rng
        )[column]

    return _plan_half_width(
        assumptions, target, design, n_studies, seed, half_width, max_comparisons, [seed, 32], progress
    )


_LABEL_VALUE = np.array([1.0, 0.5, 0.0])  # A, TIE, B (docs/protocol.md "Canonical answers")


def _brier_half_width(
    probabilities: np.ndarray,
    judges: JudgeAssumptions,
    n_comparisons: int,
    raters: int,
    block_size: int,
    resamples: int,
    rng: np.random.Generator,
) -> float:
    """One simulated calibration (docs/protocol.md "Judges and calibration"): the 95 % half-width of the
    out-of-fold Brier score."""
    pairs = rng.integers(0, probabilities.shape[0], n_comparisons)
    answer = probabilities[pairs]  # (n, 3): A, TIE, B
    counts = rng.multinomial(raters, answer)
    h = (counts[:, 0] + 0.5 * counts[:, 1]) / raters
    majority = answer.argmax(axis=1)[:, None]
    calls = judges.outputs_per_comparison
    x = np.empty((n_comparisons, judges.n_judges))
    for j, accuracy in enumerate(judges.accuracy):
        right = rng.random((n_comparisons, calls)) < accuracy
        other = (majority + 1 + rng.integers(0, 2, (n_comparisons, calls))) % 3
        x[:, j] = _LABEL_VALUE[np.where(right, majority, other)].mean(axis=1)
    # Leave-one-block-out needs two blocks: a study smaller than two blocks is split in halves.
    blocks = (np.arange(n_comparisons) // min(block_size, math.ceil(n_comparisons / 2))).astype(str)
    units = bootstrap_units([str(i) for i in range(n_comparisons)], blocks.tolist())
    weights = bootstrap_page_blocks(units, resamples=resamples, seed=int(rng.integers(0, 2**31)))
    low, high = percentile_interval(refitted_brier_bootstrap(h, x, blocks, weights[:, units.unit_of]))
    return (float(high) - float(low)) / 2


def refitted_brier_bootstrap(h: np.ndarray, x: np.ndarray, blocks: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Out-of-fold Brier score of every bootstrap resample with the judge weights **re-fitted** on
    the resample (issue 39: holding the predictions fixed leaves out the noise of fitting them, and
    made the interval about 25 % too narrow at 20 comparisons).

    ``counts`` (resamples, n): how often each comparison is drawn. Per resample and held-out block,
    the weights are the least-squares fit without intercept on the other blocks' drawn comparisons
    (``stats.judge_weights.fit_judge_weights``' model: ``β = (Xᵀ W X)⁺ Xᵀ W h``, the same OLS on the
    repeated rows), the held-out block is predicted (clipped to [0, 1]) and the resample's Brier is
    the drawn comparisons' mean squared error.
    """
    counts = np.asarray(counts, dtype=np.float64)
    errors = np.zeros(counts.shape[0])
    for name in np.unique(blocks):
        held = blocks == name
        w = counts[:, ~held]
        xt = x[~held]
        gram = np.einsum("rn,ni,nj->rij", w, xt, xt)
        rhs = np.einsum("rn,ni,n->ri", w, xt, h[~held])
        beta = np.einsum("rij,rj->ri", np.linalg.pinv(gram), rhs)
        prediction = np.clip(beta @ x[held].T, 0.0, 1.0)  # (resamples, held)
        errors += (counts[:, held] * (prediction - h[held]) ** 2).sum(axis=1)
    return errors / np.maximum(counts.sum(axis=1), 1.0)


def plan_brier(
    assumptions: StudyAssumptions,
    target: PlanTarget,
    *,
    judges: JudgeAssumptions | None = None,
    design: StudyDesign | None = None,
    n_studies: int = 40,
    seed: int = 0,
    resamples: int = 400,
    max_comparisons: int = 20_000,
    progress: Progress | None = None,
) -> StudyPlan:
    """Votes (human-labelled comparisons × raters) needed for the calibrated judge's Brier half-width."""
    if target.kind != "brier":
        raise StatisticsError(f"target {target.kind} is not the judge target")
    design = design or StudyDesign()
    judges = judges or JudgeAssumptions()

    def half_width(probabilities: np.ndarray, n_comparisons: int, rng: np.random.Generator) -> float:
        return _brier_half_width(
            probabilities,
            judges,
            n_comparisons,
            design.raters_per_block,
            design.main_per_rater,
            resamples,
            rng,
        )

    plan = _plan_half_width(
        assumptions, target, design, n_studies, seed, half_width, max_comparisons, [seed, 33], progress
    )
    return replace(plan, judges=judges)


def _plan_half_width(
    assumptions: StudyAssumptions,
    target: PlanTarget,
    design: StudyDesign,
    n_studies: int,
    seed: int,
    half_width: Callable[[np.ndarray, int, np.random.Generator], float],
    max_comparisons: int,
    rng_seed: list[int],
    progress: Progress | None,
) -> StudyPlan:
    """A half-width curve over a geometric grid of comparisons (κ, α, Brier), and its crossing."""
    if n_studies < 10:
        raise StatisticsError(f"at least 10 simulated studies are needed, got {n_studies}")
    raters = design.raters_per_block
    truth = simulated_truth(assumptions, [seed * 100_003 + i for i in range(n_studies)])
    rng = np.random.default_rng(rng_seed)
    # From 5 comparisons (two leave-one-block-out halves of a Brier plan need a few each), so a
    # target met at a small size is found there rather than at the grid's first size.
    grid: list[int] = []
    n = MIN_PLAN_COMPARISONS
    while n <= max_comparisons:
        grid.append(n)
        n = math.ceil(n * 1.4)
    points = []
    per_look = []
    per_look_mean = []
    settled = 0
    for look, n_comparisons in enumerate(grid):
        widths = np.array(
            [half_width(truth.answer_probabilities[s], n_comparisons, rng) for s in range(n_studies)]
        )
        widths = np.where(np.isfinite(widths), widths, 1.0)
        draws = rng.integers(0, n_studies, (PLAN_BOOTSTRAP, n_studies))
        boot_mean = widths[draws].mean(axis=1)
        per_look_mean.append(boot_mean)
        if target.uses_assurance:
            # The share of studies whose interval reaches the half-width, with its Wilson interval.
            reached = widths <= target.half_width
            lo, hi = wilson_interval(int(reached.sum()), n_studies)
            points.append(PlanPoint(n_comparisons * raters, float(reached.mean()), lo, hi))
            per_look.append(reached[draws].mean(axis=1))
            met = lo >= float(target.assurance or 0.0)
        else:
            lo, hi = (float(x) for x in np.percentile(boot_mean, [2.5, 97.5]))
            points.append(PlanPoint(n_comparisons * raters, float(widths.mean()), lo, hi))
            per_look.append(boot_mean)
            met = hi <= target.half_width
        if progress is not None:
            progress((look + 1) / len(grid))
        # Two sizes in a row clearly met: the curve has settled (the answer is where it stays).
        settled = settled + 1 if met else 0
        if settled >= 2:
            break
        # The half-width falls about as 1 / √n: stop early when even the largest study cannot reach it.
        if (
            len(points) >= 3
            and widths.mean() * math.sqrt(n_comparisons / max_comparisons) > 1.5 * target.half_width
        ):
            break
    votes = np.array([p.votes for p in points])
    curve = np.array([p.value for p in points])
    mean_curve = np.array([b.mean() for b in per_look_mean])
    mean_needed = _crossing_below(votes, mean_curve, target.half_width)

    def crossing(values: np.ndarray) -> float:
        if target.uses_assurance:
            return votes_staying(votes, values, float(target.assurance or 0.0))
        return _crossing_below(votes, values, target.half_width)

    needed = crossing(curve)
    if not math.isfinite(needed):
        raise StatisticsError(
            f"target {target.describe()} not reached within {int(votes[-1])} votes "
            f"(about {max_comparisons * raters} with {raters} raters per comparison); lower the target"
        )
    boot_matrix = np.array(per_look)  # (looks, PLAN_BOOTSTRAP)
    crossings = np.array([crossing(boot_matrix[:, b]) for b in range(PLAN_BOOTSTRAP)])
    finite = np.isfinite(crossings)
    interval = (
        float(np.percentile(crossings[finite], 2.5)) if finite.any() else math.inf,
        float(np.percentile(crossings, 97.5)) if finite.mean() >= 0.975 else math.inf,
    )
    return StudyPlan(
        target, "uniform", assumptions, design, n_studies, seed, tuple(points), needed, interval,
        mean_votes_needed=mean_needed,
    )


def _crossing_below(votes: np.ndarray, values: np.ndarray, level: float) -> float:
    """Votes from which a decreasing curve stays at or below ``level`` at every larger size (not its
    first crossing: a noisy curve may dip under and come back), log-log interpolated between the
    last size above and the first of that run; inf if it does not settle by the last size."""
    return votes_staying(votes, -np.log(np.maximum(values, 1e-12)), -math.log(level))


def votes_staying(votes: np.ndarray, curve: np.ndarray, level: float, *, interpolate: bool = True) -> float:
    """Votes from which ``curve`` (one value per size in ``votes``, increasing in the votes on
    average) stays at or above ``level`` at every larger size: the first size of that run,
    log-linearly interpolated from the size before it; inf if the last size is below the level."""
    above = np.asarray(curve, dtype=np.float64) >= level - 1e-12
    if not above[-1]:
        return math.inf
    below = np.flatnonzero(~above)
    if below.size == 0:
        return float(votes[0])
    t = int(below[-1]) + 1
    if not interpolate:
        return float(votes[t])
    c0, c1 = float(curve[t - 1]), float(curve[t])
    frac = (level - c0) / (c1 - c0) if c1 > c0 else 1.0
    return float(math.exp(math.log(votes[t - 1]) + frac * (math.log(votes[t]) - math.log(votes[t - 1]))))


def plan_study(
    assumptions: StudyAssumptions,
    target: PlanTarget,
    *,
    allocation: str = "uniform",
    design: StudyDesign | None = None,
    judges: JudgeAssumptions | None = None,
    n_studies: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> StudyPlan:
    """The plan for any target (ranking targets by sequential simulation, κ / α / Brier by bootstrap)."""
    if target.is_ranking:
        plan = plan_ranking(
            assumptions, target, allocation=allocation, design=design, n_studies=n_studies or RANKING_STUDIES,
            seed=seed,
        )
        if progress is not None:
            progress(1.0)
        return plan
    if allocation != "uniform":
        raise StatisticsError(f"{target.kind} targets are planned for uniform allocation only")
    if target.kind == "brier":
        return plan_brier(
            assumptions,
            target,
            judges=judges,
            design=design,
            n_studies=n_studies or 40,
            seed=seed,
            progress=progress,
        )
    return plan_agreement(
        assumptions, target, design=design, n_studies=n_studies or 40, seed=seed, progress=progress
    )


@dataclass(frozen=True)
class PlanCheck:
    """A plan checked on fresh simulated studies of its planned size: the achieved value (the share
    meeting the target, or the mean half-width) and its Monte Carlo standard error."""

    votes: int
    statistic: str
    achieved: float
    mc_error: float
    n_studies: int
    seed: int

    def meets(self, target: PlanTarget) -> bool:
        """The target is reached within one Monte Carlo standard error."""
        if self.statistic == "mean half-width":
            return self.achieved <= target.half_width + self.mc_error
        level = target.probability if target.is_ranking else float(target.assurance or 0.0)
        return self.achieved >= level - self.mc_error

    def to_dict(self, target: PlanTarget) -> dict:
        return {**asdict(self), "meets_target": self.meets(target), "description": self.describe()}

    def describe(self) -> str:
        return (
            f"verified on {self.n_studies} fresh simulated studies of {self.votes} votes (seed {self.seed}): "
            f"{self.statistic} = {self.achieved:.3f} ± {self.mc_error:.3f} (Monte Carlo standard error)"
        )


def verify_plan(
    plan: StudyPlan, *, n_studies: int = 200, seed: int | None = None, resamples: int = 400
) -> PlanCheck:
    """Simulate ``n_studies`` new studies (seeds the plan did not use) of the planned size from the
    plan's own assumptions and read what the target asks: P(met) for ranking targets, the share of
    studies whose half-width reaches the target for κ / α with an assurance, else the mean half-width.
    The planned size: adaptive ranking plans, the whole blocks they answered; uniform ranking
    plans, the whole raters they answered; κ / α / Brier, the comparisons needed. Adaptive studies
    are played through the plan's own rounds and blocks (``study_looks``)."""
    if n_studies < 10:
        raise StatisticsError(f"at least 10 simulated studies are needed, got {n_studies}")
    check_seed = plan.seed + 7_919 if seed is None else seed
    seeds = [check_seed * 100_003 + 50_000_000 + i for i in range(n_studies)]
    truth = simulated_truth(plan.assumptions, seeds)
    target = plan.target
    if target.is_ranking:
        votes = math.ceil(plan.votes_needed)
        if plan.allocation == "adaptive":
            looks = study_looks(plan.design, votes)
            looks = looks[looks <= votes]
        else:
            looks = np.array([votes], dtype=np.int64)
        reached = _ranking_reached(truth, target, plan.allocation, looks, check_seed)[-1]
        p = float(reached.mean())
        return PlanCheck(votes, "P(target met)", p, math.sqrt(p * (1 - p) / n_studies), n_studies, check_seed)
    comparisons = int(plan.comparisons_needed or 0)
    rng = np.random.default_rng([check_seed, 34])
    design = plan.design
    if target.kind == "brier":
        judges = plan.judges or JudgeAssumptions()
        widths = np.array([
            _brier_half_width(truth.answer_probabilities[s], judges, comparisons, design.raters_per_block,
                              design.main_per_rater, resamples, rng)
            for s in range(n_studies)
        ])
    else:
        column = 2 if target.kind == "kappa" else 3
        widths = np.array([
            _agreement_half_widths(truth.answer_probabilities[s], comparisons, design.raters_per_block,
                                   design.main_per_rater, resamples, rng)[column]
            for s in range(n_studies)
        ])
    widths = np.where(np.isfinite(widths), widths, 1.0)
    votes = comparisons * design.raters_per_block
    if target.uses_assurance:
        p = float((widths <= target.half_width).mean())
        return PlanCheck(votes, f"P(half-width <= {target.half_width:g})", p,
                         math.sqrt(p * (1 - p) / n_studies), n_studies, check_seed)
    return PlanCheck(votes, "mean half-width", float(widths.mean()),
                     float(widths.std(ddof=1) / math.sqrt(n_studies)), n_studies, check_seed)


def pilot_assumptions(
    system_a: np.ndarray,
    system_b: np.ndarray,
    outcome: np.ndarray,
    systems: tuple[str, ...],
    *,
    n_repeats: int = 0,
) -> tuple[StudyAssumptions, dict]:
    """Assumptions estimated from a pilot's valid main votes (outcome A = 1, TIE = ½, B = 0).

    Scores: the docs/protocol.md "Deployment leaderboard" Bradley–Terry fit of the votes; tie rate: the share
    of TIE. Rater noise and position bias keep their defaults (a pilot rarely holds enough votes per rater to
    estimate them). Refuses a pilot too small to fit: fewer than 5 valid votes per system on average, a
    system without votes, or a comparison graph in more than one piece.
    """
    from stats.bradley_terry import fit_bradley_terry

    m = len(systems)
    a = np.asarray(system_a, dtype=np.int64)
    b = np.asarray(system_b, dtype=np.int64)
    y = np.asarray(outcome, dtype=np.float64)
    if m < 2:
        raise StatisticsError(
            f"the pilot has valid votes on {m} system(s): too few to fit (planning needs at least 2)"
        )
    need = 5 * m
    if len(y) < need:
        raise StatisticsError(
            f"the pilot has {len(y)} valid main votes on {m} systems: too few to fit (need >= {need})"
        )
    seen = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
    if np.any(seen == 0):
        missing = ", ".join(systems[i] for i in np.flatnonzero(seen == 0))
        raise StatisticsError(f"the pilot has no valid vote on system(s) {missing}: too few to fit")
    parent = list(range(m))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(a, b, strict=True):
        parent[root(int(i))] = root(int(j))
    if len({root(i) for i in range(m)}) > 1:
        raise StatisticsError(
            "the pilot's comparisons fall into disconnected groups of systems: too few to fit"
        )
    fit = fit_bradley_terry(a, b, y, m)
    tie_rate = float(np.mean(y == 0.5))
    assumptions = StudyAssumptions(
        n_systems=m, tie_rate=min(tie_rate, 0.85), elo=tuple(float(s) for s in fit.scores)
    )
    first, _ = pair_indices(m)
    summary = {
        "valid_main_votes": len(y),
        "systems": list(systems),
        "scores_elo": [round(float(s), 1) for s in fit.scores],
        "tie_rate": round(tie_rate, 4),
        "hidden_repeat_rate": round(n_repeats / len(y), 4) if len(y) else 0.0,
        "pairs": len(first),
    }
    return assumptions, summary


#: Fewest valid outputs on comparisons with a human majority label that estimate a judge's accuracy.
PILOT_MIN_JUDGE_OUTPUTS = 20


def pilot_judges(
    judge_outputs: pd.DataFrame, *, comparisons: list[object], human_counts: np.ndarray, judges: list[str]
) -> tuple[JudgeAssumptions, dict]:
    """Judge assumptions from a pilot's judge outputs on its human-labelled comparisons.

    Accuracy: each judge's agreement with the human unique-plurality label, the calibration
    report's own diagnostic (``stats.judge_diagnostics.human_majority_agreement``); outputs per
    comparison: the judges' mean count of valid outputs per judged comparison, rounded. Refuses a
    pilot without judge outputs or with fewer than ``PILOT_MIN_JUDGE_OUTPUTS`` usable ones per judge.
    """
    from stats.judge_diagnostics import human_majority_agreement

    valid = judge_outputs[
        (judge_outputs["status"] == "valid") & judge_outputs["comparison"].isin(comparisons)
    ]
    if not judges or valid.empty:
        raise StatisticsError(
            "the pilot has no valid judge output on its human-labelled comparisons: the Brier target needs them"
        )
    shares = human_majority_agreement(
        valid, judges=judges, comparisons=comparisons, human_counts=human_counts
    )
    few = [f"{j} ({shares[j].n})" for j in judges if shares[j].n < PILOT_MIN_JUDGE_OUTPUTS]
    if few:
        raise StatisticsError(
            f"too few valid judge outputs on comparisons with a human majority to fit judge {', '.join(few)} "
            f"(need >= {PILOT_MIN_JUDGE_OUTPUTS} each)"
        )
    per_comparison = valid.groupby(["judge", "comparison"]).size()
    outputs = max(1, round(float(per_comparison.mean())))
    accuracy = tuple(max(shares[j].value, 1e-3) for j in judges)
    summary = {
        "judges": list(judges),
        "judge_accuracy": [round(a, 4) for a in accuracy],
        "judge_outputs_per_comparison": outputs,
        "judged_comparisons": int(valid["comparison"].nunique()),
    }
    return JudgeAssumptions(accuracy=accuracy, outputs_per_comparison=outputs), summary
