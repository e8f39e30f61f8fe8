"""An adaptive study's reported scores through the real served path (issue 46 item 2;
docs/protocol.md "Scores of an adaptive study", "Serve-time choice").

A small study (5 systems, every pair on 12 pages in one A/B order) is scheduled as
``schedule_blocks --allocation adaptive`` does and played by raters with a left-pane bias, ties and
random clickers through ``participant_claim``, ``trial_next`` and ``vote_submit``
(``tests/annotation/served_study.py``). The many-seed bias and coverage are
``benchmarks/bench_served_adaptive.py``'s and ``benchmarks/bench_adaptive.py --debias-only``'s; here,
one seed, the checks that can fail on one study: the reported scores are the debiased fit of what
the raters answered with the probabilities they were served with, their errors against the target
are of the size their intervals state, and the start is refused below the smallest honest one.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Block, Study
from annotation.selectors.allocation import adaptive_scores
from stats.adaptive_estimation import debiased_bradley_terry, ipw_bradley_terry
from stats.bradley_terry import SCORE_SCALE
from stats.planning import MIN_START_VOTES_PER_PAIR
from tests.annotation.served_study import (
    RaterModel,
    study_build,
    study_play,
    study_unscheduled,
    truth_of,
    uniform_votes,
)

pytestmark = pytest.mark.django_db

#: 5 systems (10 pairs), a start of 30 comparisons × 3 raters = 9 votes per pair, two serve-time blocks.
SMALL = RaterModel(
    n_systems=5,
    pages=12,
    block_size=30,
    raters=3,
    repeats=1,
    min_gap=5,
    serve_blocks=2,
    clicker_share=0.05,
    refit_votes=20,
)
SEED = 4601


def test_the_reported_scores_of_a_served_study_are_the_debiased_fit_and_as_precise_as_they_say(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    truth = truth_of(SMALL, SEED)
    study = study_build(SMALL, "served-scores", SEED)
    with django_capture_on_commit_callbacks(execute=True):  # the weights' refits, queued on commit
        served = study_play(SMALL, study, truth, SEED)
    start = np.isnan(served.propensity)
    assert start.sum() == SMALL.start_votes and len(served.first) == SMALL.total_votes
    # Every served vote carries its draw's probability, the floor's share at least.
    assert np.all(served.propensity[~start] >= 0.25 / SMALL.k_pairs - 1e-12)
    # What is reported is the debiased fit of the raters' own answers (recorded here, not read back),
    # each weighted by its stored probability (1 / K for the start).
    propensity = np.where(start, 1.0 / SMALL.k_pairs, served.propensity)
    expected = debiased_bradley_terry(
        served.first, served.second, served.points, propensity, SMALL.n_systems, seed=int(study.seed)
    )
    reported = adaptive_scores(study)
    assert reported is not None and reported["votes"] == len(served.first)
    by_system = {row["system"]: row for row in reported["systems"]}
    scores = np.array([by_system[f"s{i}"]["score"] for i in range(SMALL.n_systems)])
    half = np.array([np.diff(by_system[f"s{i}"]["ci95"])[0] / 2 for i in range(SMALL.n_systems)])
    assert scores == pytest.approx(expected.scores[0], abs=0.01)
    # Against the target (the population's Bradley–Terry limit under the uniform design): the errors
    # in units of the stated standard errors. Honest intervals give a mean square near 1; 4 is the
    # 0.1 % tail of a chi-square with 5 degrees of freedom over 5. A biased or too narrow interval
    # fails; so does one four times too wide (mean square below 1 / 16).
    se = half / 1.959963984540054
    z = (scores - scores.mean() - SCORE_SCALE * truth.target) / se
    assert 1 / 16 < float(np.mean(z**2)) < 4.0, z
    # The intervals are not bought by width: at most twice the uniform design's model intervals
    # at the same number of votes, with the same raters.
    a, b, y = uniform_votes(SMALL, truth, SEED, len(served.first))
    uniform = ipw_bradley_terry(a, b, y, np.full(len(a), 1.0 / SMALL.k_pairs), SMALL.n_systems)
    assert np.median(se / uniform.standard_errors[0]) < 2.0


def test_an_adaptive_start_below_two_votes_per_pair_is_refused_in_one_line() -> None:
    """docs/protocol.md "Scores of an adaptive study": 5 systems have 10 pairs, so a start under 20
    votes is refused before anything is written; 20 are accepted; a uniform study is not asked."""
    model = RaterModel(n_systems=5, pages=4)
    assert model.k_pairs * MIN_START_VOTES_PER_PAIR == 20
    study = study_unscheduled(model, "small-start", 1)
    with pytest.raises(CommandError) as refused:
        call_command(
            "schedule_blocks",
            study.slug,
            *[
                "--blocks",
                "1",
                "--block-size",
                "19",
                "--repeats",
                "0",
                "--raters",
                "1",
                "--allocation",
                "adaptive",
            ],
        )
    message = str(refused.value)
    assert (
        "\n" not in message
        and "1.9 votes per system pair" in message
        and "from 2 per pair (20 votes" in message
    )
    assert not Block.objects.filter(study=study).exists()
    assert "allocation" not in (Study.objects.get(pk=study.pk).options or {})
    call_command(
        "schedule_blocks",
        study.slug,
        *[
            "--blocks",
            "1",
            "--block-size",
            "20",
            "--repeats",
            "0",
            "--raters",
            "1",
            "--allocation",
            "adaptive",
        ],
    )
    assert Block.objects.filter(study=study).count() == 1
    uniform = study_unscheduled(model, "small-uniform", 1)
    call_command(
        "schedule_blocks",
        uniform.slug,
        *["--blocks", "1", "--block-size", "5", "--repeats", "0", "--raters", "1"],
    )
    assert Block.objects.filter(study=uniform).count() == 1
