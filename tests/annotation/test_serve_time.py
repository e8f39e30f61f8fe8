"""Serve-time adaptive allocation (issue 39 item 1; docs/protocol.md "Serve-time choice"): after the
uniform start, each data trial of an adaptive ``pairwise_reference`` study gets its comparison when
the rater reaches it. Raters are driven through the services the rater pages call, and every
guarantee of a scheduled block is asserted on what they were served: plan order, hidden repeats at
their gap on the original's side, no comparison twice to a rater, quotas never passed, display sides
balanced per comparison, gold at the study's rate, the floor in every served probability, and the
probability stored. The probabilities are checked against ``stats.allocation.serve_time_choice``."""

from __future__ import annotations

import secrets
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test import TestCase
from django.test.utils import override_settings

from annotation.models import GOLD_EXPECTED, Block, BlockItem, Comparison, ServeWeights, Study, Trial, Vote
from annotation.services.adaptive_allocation import study_allocation_set
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.participants import StudyFull, participant_claim, participant_rater_get_or_create
from annotation.services.scheduling import blocks_schedule
from annotation.services.serve_time import _probabilities, serve_block_create
from annotation.services.serve_weights import serve_weights_refit
from tests.annotation.rater_factories import make_rater_study
from tests.annotation.test_adaptive_allocation import (
    BLOCK,
    GAP,
    RATERS,
    REPEATS,
    THETA,
    Served,
    _run_raters,
    _study,
)
from tests.annotation.test_concurrency import run_together

pytestmark = pytest.mark.django_db

FLOOR_MIN = 0.25 / 10  # the floor spread over the ten pairs of five systems


def _serving(study: Study, k: int = 2) -> None:
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": k})
    study.refresh_from_db()
    assert study.options["adaptation"] == "serve"


def _systems(trial: Trial) -> tuple[str, str]:
    c = trial.comparison
    return tuple(sorted((c.candidate_a.system.external_id, c.candidate_b.system.external_id)))  # type: ignore[return-value]


@dataclass(frozen=True)
class ServedStudy:
    study: Study
    served: Served


@pytest.fixture(scope="class")
def served_study(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[ServedStudy]:  # type: ignore[no-untyped-def]
    """One serve-time study answered by ``4 * RATERS`` simulated raters (the weights refitted every
    20 votes), built once for the class's tests (issue 46 item 8: 11 s on SQLite, ~20 s on
    PostgreSQL) inside a transaction rolled back after the class's last test; each test's own
    transaction nests in it, so every test reads the same study as it was served."""
    media = tmp_path_factory.mktemp("serve-media")
    with (
        django_db_blocker.unblock(),
        override_settings(MEDIA_ROOT=media, ARBITER_SERVE_REFIT_VOTES=20),
        transaction.atomic(),
    ):
        study = _study("serve-guarantees", "pairwise_reference", tmp_path_factory.mktemp("serve-bundle"))
        _serving(study)
        with TestCase.captureOnCommitCallbacks(execute=True):  # the refits queued after each commit
            served = _run_raters(study, 4 * RATERS, THETA)
        yield ServedStudy(study, served)
        transaction.set_rollback(True)


class TestOneServedStudy:
    """Two views of one served study: every guarantee of a scheduled block, and the display sides."""

    def test_served_trials_keep_every_guarantee_of_a_scheduled_block(self, served_study: ServedStudy) -> None:
        _served_trials_keep_every_guarantee_of_a_scheduled_block(served_study.study, served_study.served)

    def test_display_sides_are_balanced_per_pair_and_per_comparison(self, served_study: ServedStudy) -> None:
        _display_sides_are_balanced_per_pair_and_per_comparison(served_study.study)


def _served_trials_keep_every_guarantee_of_a_scheduled_block(study: Study, served: Served) -> None:
    assert served.n_raters == 4 * RATERS
    blocks = list(Block.objects.filter(study=study).order_by("position"))
    assert [(b.position, b.serve_time) for b in blocks] == [(1, False), (2, True), (3, True), (4, True)]
    start_items = set(BlockItem.objects.filter(block=blocks[0]).values_list("comparison_id", flat=True))
    assert not BlockItem.objects.filter(block__in=blocks[1:]).exists()
    trials = {
        t.pk: t
        for t in Trial.objects.filter(assignment__block__study=study).select_related(
            "assignment__block", "comparison__candidate_a__system", "comparison__candidate_b__system"
        )
    }
    per_comparison: Counter[int] = Counter()
    sides: dict[int, Counter[bool]] = defaultdict(Counter)
    pairs: Counter[tuple[str, str]] = Counter()
    for order in served.by_rater.values():
        sequence = [trials[pk] for pk in order]
        if not sequence[0].assignment.block.serve_time:
            assert all(t.allocation_probability is None for t in sequence)  # the uniform start
            continue
        assert [t.position for t in sequence] == list(range(1, len(sequence) + 1))  # the plan's order
        assert Trial.objects.filter(assignment=sequence[0].assignment).count() == len(sequence)  # all answered
        main = [t for t in sequence if not t.is_repeat and not t.attention_expected]
        repeats = [t for t in sequence if t.is_repeat]
        assert len(main) == BLOCK and len(repeats) == REPEATS and len(sequence) == BLOCK + REPEATS
        assert len({t.comparison_id for t in main}) == BLOCK  # no comparison twice to a rater
        assert not {t.comparison_id for t in main} & start_items  # only the pool is served
        for t in repeats:
            original = trials[int(t.repeat_of_id or 0)]
            assert (t.comparison_id, t.swapped) == (original.comparison_id, original.swapped)
            assert t.position - original.position >= GAP and t.allocation_probability is None
        for t in main:
            assert t.allocation_probability is not None and FLOOR_MIN - 1e-12 <= t.allocation_probability <= 1.0
            per_comparison[int(t.comparison_id or 0)] += 1
            sides[int(t.comparison_id or 0)][t.swapped] += 1
            pairs[_systems(t)] += 1
    # Quotas: never past the block's rater target, and the counter agrees with what was served.
    assert max(per_comparison.values()) <= RATERS
    assert dict(Comparison.objects.filter(served__gt=0).values_list("pk", "served")) == dict(per_comparison)
    # Display sides alternate per comparison: balanced to one.
    assert all(abs(c[True] - c[False]) <= 1 for c in sides.values())
    # The allocator favours the pair that decides the top two (uniform would give it a tenth)...
    total = sum(pairs.values())
    assert pairs[("s1", "s2")] / total > 0.2
    # ...and the floor keeps far pairs served.
    assert len(pairs) == 10
    # The weights were refitted as votes came in (every 20 serves).
    weights = ServeWeights.objects.get(study=study)
    assert weights.votes > BLOCK * RATERS


def _first_system_left(trial: Trial) -> bool:
    """Whether the pair's first system (``SYSTEMS``' order, the systems' positions) is on the left."""
    c = trial.comparison
    a_first = c.candidate_a.system.position < c.candidate_b.system.position
    return a_first != trial.swapped


def _display_sides_are_balanced_per_pair_and_per_comparison(study: Study) -> None:
    """docs/protocol.md "Serve-time choice": the bundle lists every pair in the same A/B order
    (``combinations``), and raters go through the served path (one statement on PostgreSQL, the
    steps on SQLite). Per pair of systems, the served data trials show its first system on the left
    and on the right equally often (±1), in the uniform start and in the serve-time blocks, the
    floor's serves included; so does every comparison served more than once; a single-serve
    comparison's side comes from its pair's alternation. Hidden repeats keep their original's side."""
    trials = list(Trial.objects.filter(assignment__block__study=study).select_related(
        "assignment__block", "repeat_of", "comparison__candidate_a__system", "comparison__candidate_b__system"))
    served = [t for t in trials if not t.is_repeat and not t.attention_expected and t.comparison_id is not None]
    assert {t.assignment.block.serve_time for t in served} == {False, True}
    for serve_time in (False, True):
        per_pair: dict[tuple[str, str], Counter[bool]] = defaultdict(Counter)
        per_comparison: dict[int, Counter[bool]] = defaultdict(Counter)
        for t in served:
            if t.assignment.block.serve_time is serve_time:
                per_pair[_systems(t)][_first_system_left(t)] += 1
                per_comparison[int(t.comparison_id or 0)][_first_system_left(t)] += 1
        assert len(per_pair) == 10
        assert max(abs(c[True] - c[False]) for c in per_pair.values()) <= 1, dict(per_pair)
        assert all(abs(c[True] - c[False]) <= 1 for c in per_comparison.values())
        if serve_time:  # the favoured pairs were served many times, most comparisons more than once
            assert sum(1 for c in per_comparison.values() if c.total() > 1) > 20
            assert max(c.total() for c in per_pair.values()) > 60
    # The whole study: each pair within one of half in each part, so within two over both.
    whole: dict[tuple[str, str], Counter[bool]] = defaultdict(Counter)
    for t in served:
        whole[_systems(t)][_first_system_left(t)] += 1
    assert all(abs(c[True] - c[False]) <= 2 for c in whole.values())
    for t in trials:
        if t.is_repeat:
            assert (t.comparison_id, t.swapped) == (t.repeat_of.comparison_id, t.repeat_of.swapped)


def test_served_probabilities_match_the_statistics_module(tmp_path: Path) -> None:
    """An independent computation: ``stats.allocation.serve_time_choice`` on the same fit gives the
    same probability for every pair available."""
    from annotation.selectors.allocation import allocation_state
    from stats.allocation import serve_time_choice

    study = _study("serve-probabilities", "pairwise_reference", tmp_path, raters=2)
    _serving(study)
    _run_raters(study, 2, THETA)  # the uniform start's votes
    weights = serve_weights_refit(study_id=study.pk)
    assert weights is not None
    state = allocation_state(study=study)
    assert state is not None
    k = len(weights.rule_shares)
    for available in ([0, 3, 4, 9], list(range(k)), [7]):
        mask = np.zeros(k, dtype=bool)
        mask[available] = True
        expected = serve_time_choice(state.rule, state.fit, state.target, rng=np.random.default_rng([int(study.seed),
                                     state.votes, 31]), available=mask, floor=state.floor).probabilities
        mine = _probabilities(weights, available)
        assert np.allclose([mine[c] for c in available], expected[available], atol=1e-9)
        # The protocol's formula written out here: f / K' + (1 - f) w / sum(w) over the available pairs.
        w = np.asarray(weights.rule_shares)[available]
        rule = w / w.sum() if w.sum() > 0 else np.full(len(w), 1 / len(w))
        by_hand = state.floor / len(available) + (1 - state.floor) * rule
        assert np.allclose([mine[c] for c in available], by_hand, atol=1e-12)
        assert abs(sum(mine.values()) - 1.0) < 1e-12
        assert min(mine.values()) >= state.floor / len(available) - 1e-12


def _answer_all(study: Study, external_id: str) -> int:
    rater = participant_rater_get_or_create(study=study, external_id=external_id)
    assignment = participant_claim(study=study, rater=rater)
    answered = 0
    while (view := trial_next(assignment=assignment, study=study)) is not None:
        vote_submit(VoteInput(trial_token=view.trial.token, rater_id=rater.pk, verdict="A", confidence=3,
                    axes={a["id"]: 1 for a in view.axes}, rationale="", idempotency_key=secrets.token_urlsafe(12)))
        answered += 1
    return answered


def test_gold_trials_are_served_at_the_study_rate() -> None:
    study = make_rater_study(slug="serve-gold", pages=20).study
    blocks_schedule(study=study, blocks=1, block_size=10, repeats=1, min_gap=2, raters=[2], seed=1, gold=3)
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 1})
    for i in range(4):
        _answer_all(study, f"gold-{i}")
    serve_blocks = Block.objects.filter(study=study, serve_time=True)
    assert serve_blocks.count() == 1
    for trials in (list(a.trials.order_by("position")) for a in serve_blocks[0].assignments.all()):
        gold = [t for t in trials if t.attention_expected == GOLD_EXPECTED]
        assert len(gold) == 3 and trials[0] not in gold
        assert all(t.gold_image_id and t.gold_match_image_id and t.allocation_probability is None for t in gold)
        assert Vote.objects.filter(trial__in=gold).count() == 3
        assert len([t for t in trials if not t.is_repeat and not t.attention_expected]) == 10


def test_a_rater_with_nothing_left_to_serve_finishes_early(tmp_path: Path) -> None:
    """A serve-time block larger than what the pool still holds: the open trials that cannot be
    filled are dropped (with their repeats) and the assignment finishes on its last served trial."""
    study = _study("serve-short", "pairwise_reference", tmp_path, n_pages=2, schedule=False)
    _serving(study)
    serve_block_create(study=study, position=1, size=25, target_raters=1, seed=3, repeats=0, min_gap=1)
    answered = _answer_all(study, "only")
    assignment = Block.objects.get(study=study).assignments.get()
    assert answered == 2 * 10 == Trial.objects.filter(assignment=assignment).count()  # two pages × ten pairs
    assert assignment.state == "finished"
    with pytest.raises(StudyFull):
        participant_claim(study=study, rater=participant_rater_get_or_create(study=study, external_id="late"))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_raters_at_once_are_never_served_past_a_quota(tmp_path: Path) -> None:
    """50 raters answer at once, each on its own connection, in ten serve-time blocks of five places
    over a pool of 30 comparisons with a quota of 5: 250 asks for 150 places."""
    assert connection.vendor == "postgresql"
    study = _study("serve-concurrent", "pairwise_reference", tmp_path, n_pages=3, schedule=False)
    _serving(study)
    for position in range(1, 11):
        serve_block_create(study=study, position=position, size=5, target_raters=5, seed=position, repeats=1,
                           min_gap=2)
    serve_weights_refit(study_id=study.pk)

    def rate(i: int) -> int:
        rater = participant_rater_get_or_create(study=study, external_id=f"crowd-{i}")
        assignment = participant_claim(study=study, rater=rater)
        n = 0
        while (view := trial_next(assignment=assignment, study=study)) is not None:
            vote_submit(VoteInput(trial_token=view.trial.token, rater_id=rater.pk, verdict="B", confidence=3, axes={},
                        rationale="", idempotency_key=secrets.token_urlsafe(12)))
            n += 1
        return n

    results = run_together(50, rate)
    assert all(isinstance(r, int) for r in results), [r for r in results if not isinstance(r, int)][:3]
    main = Trial.objects.filter(assignment__block__study=study, is_repeat=False, attention_expected="")
    per_comparison = Counter(main.values_list("comparison_id", flat=True))
    assert None not in per_comparison  # no open trial left behind
    assert max(per_comparison.values()) <= 5  # no quota passed
    assert dict(Comparison.objects.filter(study=study, served__gt=0).values_list("pk", "served")) == dict(per_comparison)
    assert 140 <= sum(per_comparison.values()) <= 150  # the places were used, none twice
    per_rater = main.values_list("assignment_id", "comparison_id")
    assert len(set(per_rater)) == len(per_rater)  # no comparison twice to a rater
    assert Vote.objects.filter(trial__assignment__block__study=study).count() == sum(r for r in results if isinstance(r, int))
    for t in Trial.objects.filter(assignment__block__study=study, is_repeat=True).select_related("repeat_of"):
        assert (t.comparison_id, t.swapped) == (t.repeat_of.comparison_id, t.repeat_of.swapped)


@pytest.mark.parametrize("m", [2, 5, 9])
def test_the_pair_order_is_the_statistics_modules(m: int) -> None:
    from stats.allocation import pair_column as np_pair_column
    from stats.serving import pair_column_of

    for i in range(m):
        for j in range(m):
            if i != j:
                assert pair_column_of(i, j, m) == int(np_pair_column(np.array(i), np.array(j), m))


def test_the_scores_of_a_serve_time_study_are_debiased_with_the_stored_probabilities(
    tmp_path: Path, admin_user  # type: ignore[no-untyped-def]
) -> None:
    """docs/protocol.md "Scores of an adaptive study": the page and the reports name the estimator,
    and its figures are the weighted fit of the votes with the probabilities stored on their trials
    (recomputed here from the trials, independently of the selector's query)."""
    from django.test import Client
    from django.urls import reverse

    from annotation.selectors.allocation import adaptive_scores, allocation_report_section
    from stats.adaptive_estimation import IPW_ESTIMATOR, debiased_bradley_terry

    study = _study("serve-scores", "pairwise_reference", tmp_path, raters=2)
    _serving(study)
    _run_raters(study, 6, THETA)
    scores = adaptive_scores(study)
    assert scores is not None and scores["estimator"].startswith(IPW_ESTIMATOR)
    assert scores["systems"][0]["system"] == "s0" and scores["systems"][-1]["system"] == "s4"

    systems = ["s0", "s1", "s2", "s3", "s4"]  # make_basic_study's positions
    a, b, y, p = [], [], [], []
    for trial in Trial.objects.filter(assignment__block__study=study, is_repeat=False, attention_expected="",
                                      vote__isnull=False).select_related("vote", "comparison__candidate_a__system",
                                                                         "comparison__candidate_b__system"):
        a.append(systems.index(trial.comparison.candidate_a.system.external_id))
        b.append(systems.index(trial.comparison.candidate_b.system.external_id))
        y.append({"A": 1.0, "TIE": 0.5, "B": 0.0}[trial.vote.label])
        p.append(trial.allocation_probability if trial.assignment.block.serve_time else 0.1)
    assert sum(1 for v in p if v != 0.1) > 0  # served votes carry their own probability
    expected = debiased_bradley_terry(np.array(a), np.array(b), np.array(y), np.array(p), 5, seed=int(study.seed))
    by_system = {row["system"]: row["score"] for row in scores["systems"]}
    assert np.allclose([by_system[s] for s in systems], expected.scores[0], atol=0.01)

    section = allocation_report_section(study)
    assert section is not None and section["adaptation"] == "serve" and section["scores"] == scores
    page = Client()
    page.force_login(admin_user)
    html = page.get(reverse("research:study", args=[study.slug])).content.decode()
    assert 'id="adaptive-scores"' in html and "estimator: inverse-propensity-weighted" in html


def test_a_block_adaptive_study_names_its_plain_fit(tmp_path: Path) -> None:
    from annotation.selectors.allocation import adaptive_scores

    study = _study("block-scores", "pairwise_reference", tmp_path, raters=2)
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 2}, adaptation="block")
    _run_raters(study, 2, THETA)
    scores = adaptive_scores(study)
    assert scores is not None and scores["estimator"].startswith("Bradley–Terry, not debiased")


def test_the_votes_csv_carries_each_served_trials_probability(tmp_path: Path) -> None:
    """docs/protocol.md "Files": the optional last column; a uniform study's export has none, and the
    file imports again (the column is accepted and ignored)."""
    import csv

    from django.core.management import call_command

    study = _study("serve-csv", "pairwise_reference", tmp_path, raters=1)
    _serving(study)
    _run_raters(study, 3, THETA)
    out = tmp_path / "votes.csv"
    call_command("export_votes", study.slug, str(out))
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0])[-1] == "allocation_probability"
    by_key = {(r["comparison"], r["rater"], r["repeat"]): r["allocation_probability"] for r in rows}
    for trial in Trial.objects.filter(assignment__block__study=study, vote__isnull=False, attention_expected="",
                                      is_repeat=False).select_related("comparison", "assignment__rater"):
        cell = by_key[(trial.comparison.external_id, trial.assignment.rater.external_id, "0")]
        if trial.allocation_probability is None:
            assert cell == ""
        else:
            assert float(cell) == trial.allocation_probability  # exact: written with repr
    uniform = _study("uniform-csv", "pairwise_reference", tmp_path, raters=1)
    _run_raters(uniform, 1, THETA)
    plain = tmp_path / "plain.csv"
    call_command("export_votes", uniform.slug, str(plain))
    assert "allocation_probability" not in plain.read_text().splitlines()[0]


def _open_pairs(study: Study, seen: set[int], k_pairs: int) -> list[int]:
    """The pairs with a place this rater may take, read independently of the serving code."""
    columns = set(
        Comparison.objects.filter(study=study, served__lt=F("serve_quota"), serve_pair__lt=k_pairs)
        .exclude(pk__in=seen).values_list("serve_pair", flat=True)
    )
    return sorted(columns)


@override_settings(ARBITER_SERVE_REFIT_VOTES=10**9)
def test_each_served_probability_is_the_formula_over_the_pairs_open_at_that_moment(tmp_path: Path) -> None:
    """Before each answer, the pairs open to the rater and the weights are read here; the trial the
    answer serves next stores the protocol's probability of its pair over exactly those pairs (on
    PostgreSQL that trial is chosen by the one-statement serve, elsewhere step by step), and the
    answer that shows it marks it shown with its candidates' versions in the same request."""
    study = _study("serve-each-probability", "pairwise_reference", tmp_path, n_pages=2, schedule=False)
    _serving(study)
    serve_block_create(study=study, position=1, size=12, target_raters=2, seed=5, repeats=0, min_gap=1)
    weights = serve_weights_refit(study_id=study.pk)
    assert weights is not None
    k_pairs = len(weights.rule_shares)
    rater = participant_rater_get_or_create(study=study, external_id="one-by-one")
    assignment = participant_claim(study=study, rater=rater)
    view = trial_next(assignment=assignment, study=study)
    checked = 0
    while view is not None:
        seen = set(Trial.objects.filter(assignment=assignment, comparison__isnull=False, is_repeat=False)
                   .values_list("comparison_id", flat=True))
        available = _open_pairs(study, seen, k_pairs)
        expected = _probabilities(weights, available) if available else {}
        result = vote_submit(VoteInput(trial_token=view.trial.token, rater_id=rater.pk, verdict="A", confidence=3,
                             axes={a["id"]: 1 for a in view.axes}, rationale="",
                             idempotency_key=secrets.token_urlsafe(12)), show_next=True)
        next_id = result.progress.next_trial_id if result.progress else None
        if next_id is None:
            break
        served = Trial.objects.select_related("comparison__candidate_a", "comparison__candidate_b").get(pk=next_id)
        column = served.comparison.serve_pair
        assert column in available and served.comparison_id not in seen
        assert served.allocation_probability == pytest.approx(expected[column], abs=1e-12)
        assert served.shown_at is not None
        assert (served.version_a, served.version_b) == (served.comparison.candidate_a.version,
                                                        served.comparison.candidate_b.version)
        checked += 1
        view = trial_next(assignment=assignment, study=study, progress=result.progress)
    assert checked == 11


@pytest.mark.postgres
def test_the_one_statement_draws_each_pair_with_its_stored_probability(tmp_path: Path) -> None:
    """The statement's draw is the inverse of the cumulative probabilities: on a grid of ``u`` over
    [0, 1), each open pair is drawn in its probability's share of the grid (to one point), and the
    probability it returns is the protocol's formula."""
    from django.db import transaction

    from annotation.services.serve_time import _serve_in_one_statement

    assert connection.vendor == "postgresql"
    study = _study("serve-one-statement", "pairwise_reference", tmp_path, n_pages=2, schedule=False)
    _serving(study)
    block = serve_block_create(study=study, position=1, size=5, target_raters=1, seed=5, repeats=0, min_gap=1)
    # Weights far from uniform, and a pair closed: the formula renormalises over the open ones.
    ServeWeights.objects.filter(study=study).update(rule_shares=[0.5, 0.2, 0.1, 0.1, 0.05, 0.05, 0.0, 0.0, 0.0, 0.0])
    Comparison.objects.filter(study=study, serve_pair=1).update(served=F("serve_quota"))
    weights = ServeWeights.objects.get(study=study)
    available = _open_pairs(study, set(), 10)
    assert 1 not in available and len(available) == 9
    expected = _probabilities(weights, available)
    trial = Trial.objects.filter(assignment__block=block, comparison__isnull=True).order_by("position").first()
    assert trial is not None
    grid = 2000
    drawn: Counter[int] = Counter()
    for i in range(grid):
        with transaction.atomic():
            one = _serve_in_one_statement(study_id=study.pk, trial_id=trial.pk, seen=set(), u=(i + 0.5) / grid,
                                          shown_at=None)
            assert one is not None and one.column is not None and one.comparison_id is not None and one.filled
            assert one.probability == pytest.approx(expected[one.column], abs=1e-12)
            drawn[one.column] += 1
            transaction.set_rollback(True)
    assert set(drawn) == set(available)
    for column in available:
        assert abs(drawn[column] - expected[column] * grid) <= 1
