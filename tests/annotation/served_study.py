"""An adaptive study played through the real served path (issue 46 item 2; docs/protocol.md
"Serve-time choice", "Scores of an adaptive study").

Shared by ``tests/annotation/test_served_scores.py`` (a small study, seconds) and
``benchmarks/bench_served_adaptive.py`` (the docs' study, minutes). A ``pairwise_reference`` study
with every system pair compared on each page, in one A/B order (the bundle's ``combinations``), is
scheduled by ``study_schedule`` (the ``schedule_blocks`` command's one way in) with its uniform start,
and simulated participants join through ``participant_claim`` and answer through ``trial_next`` and
``vote_submit``, the services the rater pages call: the serve-time blocks, the pair drawn per trial
with its stored probability, the quota per comparison, the display side and the refits of the
weights are the study's own.

The raters (``RaterModel``): true scores at the normal quantiles of ``elo_sd``, permuted per seed;
each participant has a noise scale (log-normal, ``rater_noise``; ``sloppy_share`` of them three
times noisier) and a position bias (logit, ``position_bias_sd``) towards the left pane; a TIE when
the displayed difference falls within a band set so that ``tie_rate`` of all answers are ties; and
``clicker_share`` of the participants click left or right at random, whatever is shown. A hidden
repeat replays the participant's answer to its original. The target the scores are held to is the
Bradley–Terry limit of the whole population's answer probabilities under the uniform design
(``stats.study_simulation.bradley_terry_limit`` of a 4,000-rater panel with both display orders).

The uniform arm is the same raters answering the fixed design (every pair's count equal ±1, sides
alternating per pair); a uniform study's trials are fixed before anyone starts, so nothing is served
and it is simulated outside the database.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from django.test.utils import override_settings
from scipy.special import expit

from annotation.models import Comparison, ComparisonSet, Study, Trial
from annotation.services.adaptive_allocation import study_schedule
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.participants import StudyFull, participant_claim, participant_rater_get_or_create
from stats.allocation import fit_pairs, pair_column
from stats.bradley_terry import SCORE_SCALE
from stats.study_simulation import StudyAssumptions, bradley_terry_limit, simulated_truth
from tests.ranking.rank_factories import make_basic_study

SWAP = {"A": "B", "B": "A"}


@dataclass(frozen=True)
class RaterModel:
    """The raters and the study design of one simulated study (module docstring)."""

    n_systems: int = 10
    elo_sd: float = 100.0
    tie_rate: float = 0.10
    rater_noise: float = 0.3
    sloppy_share: float = 0.1
    position_bias_sd: float = 0.25
    clicker_share: float = 0.05
    pages: int = 40  # comparisons per system pair: the pool
    block_size: int = 234
    raters: int = 5  # rater target of every block, and so each comparison's quota
    start_blocks: int = 1
    serve_blocks: int = 2
    repeats: int = 6
    min_gap: int = 20
    refit_votes: int = 50
    look_every: int = 90  # votes between two looks of the top-k curve

    @property
    def k_pairs(self) -> int:
        return self.n_systems * (self.n_systems - 1) // 2

    @property
    def start_votes(self) -> int:
        return self.start_blocks * self.block_size * self.raters

    @property
    def total_votes(self) -> int:
        return (self.start_blocks + self.serve_blocks) * self.block_size * self.raters

    def assumptions(self, panel: int = 4000) -> StudyAssumptions:
        return StudyAssumptions(
            n_systems=self.n_systems,
            elo_sd=self.elo_sd,
            tie_rate=self.tie_rate,
            rater_noise=self.rater_noise,
            sloppy_share=self.sloppy_share,
            position_bias_sd=self.position_bias_sd,
            n_raters=panel,
            clicker_share=self.clicker_share,
        )


@dataclass(frozen=True)
class Truth:
    """One seed's true scores (Elo, by system index), the target θ* (logit, centred) and the tie band."""

    elo: np.ndarray
    target: np.ndarray
    tie_band: float


def truth_of(model: RaterModel, seed: int) -> Truth:
    truth = simulated_truth(model.assumptions(), [seed])
    target = bradley_terry_limit(truth)[0]
    return Truth(elo=truth.elo[0], target=target - target.mean(), tie_band=float(truth.tie_band[0]))


@dataclass(frozen=True)
class Rater:
    noise: float
    bias: float
    clicker: bool


def rater_draw(model: RaterModel, rng: np.random.Generator) -> Rater:
    noise = math.exp(model.rater_noise * rng.standard_normal())
    if rng.random() < model.sloppy_share:
        noise *= 3.0
    return Rater(
        noise=noise,
        bias=model.position_bias_sd * rng.standard_normal(),
        clicker=bool(rng.random() < model.clicker_share),
    )


def answer(rater: Rater, left_elo: float, right_elo: float, tie_band: float, rng: np.random.Generator) -> str:
    """The displayed answer: "A" the left pane, "B" the right one, or "TIE"."""
    u = rng.random()
    if rater.clicker:
        return "A" if u < 0.5 else "B"
    d = (left_elo - right_elo) / SCORE_SCALE / rater.noise
    left = float(expit(d + rater.bias - tie_band))
    right = float(expit(-d - rater.bias - tie_band))
    return "A" if u < left else ("B" if u < left + right else "TIE")


@dataclass(frozen=True)
class ServedVotes:
    """A study's valid main votes in the order they were stored: the canonical systems (indices),
    the first system's points and the stored allocation probability (NaN: the uniform start)."""

    first: np.ndarray
    second: np.ndarray
    points: np.ndarray
    propensity: np.ndarray
    panel: tuple[Rater, ...] = ()  # the participants who answered, in order


def study_unscheduled(model: RaterModel, slug: str, seed: int) -> Study:
    """The study and its comparisons (every pair on every page, one A/B order), not scheduled."""
    systems = [f"s{i}" for i in range(model.n_systems)]
    study, _systems, pages, candidates = make_basic_study(slug, systems=systems, n_pages=model.pages)
    study.seed = seed
    study.save(update_fields=["seed"])
    Comparison.objects.bulk_create(
        Comparison(
            study=study,
            external_id=f"{pid}-{a}-{b}",
            page=pages[pid],
            candidate_a=candidates[(pid, a)],
            candidate_b=candidates[(pid, b)],
            set=ComparisonSet.HUMAN,
        )
        for pid in pages
        for a, b in combinations(systems, 2)
    )
    return study


def study_build(model: RaterModel, slug: str, seed: int) -> Study:
    """``study_unscheduled`` with its uniform start, scheduled as ``schedule_blocks --allocation
    adaptive`` does."""
    study = study_unscheduled(model, slug, seed)
    study_schedule(
        study=study,
        allocation="adaptive",
        target_k=3,
        blocks=model.start_blocks,
        block_size=model.block_size,
        repeats=model.repeats,
        min_gap=model.min_gap,
        raters=[model.raters] * model.start_blocks,
        seed=seed,
        checks=None,
        gold=0,
    )
    study.refresh_from_db()
    return study


def study_play(model: RaterModel, study: Study, truth: Truth, seed: int) -> ServedVotes:
    """Participants answer through the rater services until the start and ``serve_blocks``
    serve-time blocks are full (or the pool runs out)."""
    rng = np.random.default_rng([46, seed])
    index = {f"s{i}": i for i in range(model.n_systems)}
    systems = {
        pk: (index[a], index[b])
        for pk, a, b in Comparison.objects.filter(study=study).values_list(
            "pk", "candidate_a__system__external_id", "candidate_b__system__external_id"
        )
    }
    first, second, points, propensity = [], [], [], []
    panel: list[Rater] = []
    n_participants = (model.start_blocks + model.serve_blocks) * model.raters
    with override_settings(ARBITER_SERVE_REFIT_VOTES=model.refit_votes):
        for r in range(n_participants):
            person = rater_draw(model, rng)
            rater = participant_rater_get_or_create(study=study, external_id=f"p{r:04d}")
            try:
                assignment = participant_claim(study=study, rater=rater)
            except StudyFull:
                break
            panel.append(person)
            shown: dict[int, str] = {}
            while (view := trial_next(assignment=assignment, study=study)) is not None:
                trial = view.trial
                if trial.is_repeat:
                    verdict = shown[int(trial.repeat_of_id or 0)]
                else:
                    a, b = systems[int(trial.comparison_id or 0)]
                    left, right = (b, a) if trial.swapped else (a, b)
                    verdict = answer(person, truth.elo[left], truth.elo[right], truth.tie_band, rng)
                    canonical = SWAP.get(verdict, verdict) if trial.swapped else verdict
                    first.append(a)
                    second.append(b)
                    points.append({"A": 1.0, "TIE": 0.5, "B": 0.0}[canonical])
                    stored = Trial.objects.filter(pk=trial.pk).values_list(
                        "allocation_probability", flat=True
                    )[0]
                    propensity.append(math.nan if stored is None else float(stored))
                shown[trial.pk] = verdict
                vote_submit(
                    VoteInput(
                        trial_token=trial.token,
                        rater_id=rater.pk,
                        verdict=verdict,
                        confidence=3,
                        axes={},
                        rationale="",
                        idempotency_key=secrets.token_urlsafe(12),
                    )
                )
    return ServedVotes(
        np.array(first, dtype=np.int64),
        np.array(second, dtype=np.int64),
        np.array(points),
        np.array(propensity),
        tuple(panel),
    )


def panel_target(model: RaterModel, truth: Truth, panel: tuple[Rater, ...]) -> np.ndarray:
    """θ (logit, centred) the study's own participants answer towards: the Bradley–Terry limit of
    their answer probabilities, each participant weighted alike, both display orders. Against it the
    error of a study's scores is the estimator's alone; against ``Truth.target`` (the population's)
    it also holds the draw of a panel of a few raters, which no interval of either design covers."""
    from stats.allocation import pair_indices
    from stats.bradley_terry import fit_pair_points_batch
    from stats.study_simulation import rater_mixture_probabilities

    first, second = pair_indices(model.n_systems)
    diff = (truth.elo[first] - truth.elo[second]) / SCORE_SCALE
    answering = [r for r in panel if not r.clicker]
    probabilities = np.zeros((len(first), 3))
    if answering:
        mixed = rater_mixture_probabilities(
            diff[None, :],
            np.array([[r.noise for r in answering]]),
            np.array([[r.bias for r in answering]]),
            np.array([truth.tie_band]),
        )[0]
        probabilities += len(answering) * mixed
    probabilities += (len(panel) - len(answering)) * np.array([0.5, 0.0, 0.5])
    probabilities /= max(len(panel), 1)
    first_points = probabilities[:, 0] + 0.5 * probabilities[:, 1]
    theta, _ = fit_pair_points_batch(1e9 * first_points[None, :], 1e9 * (1.0 - first_points[None, :]))
    return theta[0] - theta[0].mean()


def uniform_votes(
    model: RaterModel, truth: Truth, seed: int, total: int, panel: tuple[Rater, ...] = ()
) -> tuple[np.ndarray, ...]:
    """The uniform arm: (first, second, points) of ``total`` votes of the fixed design (module
    docstring), ``block_size`` votes per participant: those of ``panel`` in order (the adaptive
    study's, so both arms answer towards the same ``panel_target``), then fresh ones."""
    rng = np.random.default_rng([4646, seed])
    m, k = model.n_systems, model.k_pairs
    pair_first, pair_second = np.triu_indices(m, 1)
    rounds = math.ceil(total / k)
    order = np.concatenate([rng.permutation(k) for _ in range(rounds)])[:total]
    served = np.zeros(k, dtype=np.int64)
    first, second, points = [], [], []

    def participant(n: int) -> Rater:
        return panel[n] if n < len(panel) else rater_draw(model, rng)

    person = participant(0)
    for t, column in enumerate(order):
        if t and t % model.block_size == 0:
            person = participant(t // model.block_size)
        a, b = int(pair_first[column]), int(pair_second[column])
        swapped = served[column] % 2 == 1
        served[column] += 1
        left, right = (b, a) if swapped else (a, b)
        verdict = answer(person, truth.elo[left], truth.elo[right], truth.tie_band, rng)
        canonical = SWAP.get(verdict, verdict) if swapped else verdict
        first.append(a)
        second.append(b)
        points.append({"A": 1.0, "TIE": 0.5, "B": 0.0}[canonical])
    return np.array(first, dtype=np.int64), np.array(second, dtype=np.int64), np.array(points)


def top_right_at(
    first: np.ndarray,
    second: np.ndarray,
    points: np.ndarray,
    looks: np.ndarray,
    truth: Truth,
    m: int,
    k: int = 3,
) -> np.ndarray:
    """Whether the plain fit of the first ``looks[t]`` votes (what the allocator and the stopping
    rule read) names the true top-k, per look (False past the votes there are)."""
    columns = pair_column(np.minimum(first, second), np.maximum(first, second), m)
    y_low = np.where(first < second, points, 1.0 - points)
    n_pairs = m * (m - 1) // 2
    true_top = set(np.argsort(-truth.elo, kind="stable")[:k].tolist())
    reached = []
    for n in looks:
        if n > len(first):
            reached.append(False)
            continue
        votes = np.bincount(columns[:n], minlength=n_pairs)[None, :].astype(float)
        pts = np.bincount(columns[:n], weights=y_low[:n], minlength=n_pairs)[None, :]
        theta = fit_pairs(votes, pts).theta[0]
        reached.append(set(np.argsort(-theta, kind="stable")[:k].tolist()) == true_top)
    return np.array(reached)
