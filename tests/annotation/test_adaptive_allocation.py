"""Adaptive allocation on a real study (docs/protocol.md "Adaptive allocation and stopping"): the
next block is built from the current fit when every place is taken, and every block keeps the
protocol's guarantees (counterbalanced display, hidden repeats at rate and gap, exact block size
and quotas, disjoint blocks); the served order does not follow the standings; a uniform study is
unchanged; the stopping rule stops building blocks."""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import combinations

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone
from scipy.stats import spearmanr

from annotation.models import (
    Assignment,
    AssignmentState,
    AuditEvent,
    Block,
    Comparison,
    ComparisonSet,
    Trial,
    Vote,
)
from annotation.selectors.allocation import allocation_state
from annotation.services.adaptive_allocation import study_allocation_set
from annotation.services.participants import StudyFull, participant_claim, participant_rater_get_or_create
from annotation.services.scheduling import blocks_schedule
from tests.ranking.rank_factories import make_basic_study

pytestmark = pytest.mark.django_db

SYSTEMS = ("s0", "s1", "s2", "s3", "s4")
BLOCK, RATERS, REPEATS, GAP = 40, 4, 2, 5


def _study(slug: str, n_pages: int = 40):  # type: ignore[no-untyped-def]
    study, _systems, pages, candidates = make_basic_study(slug, systems=SYSTEMS, n_pages=n_pages)
    rows = []
    for pid in pages:
        for a, b in combinations(SYSTEMS, 2):
            rows.append(
                Comparison(
                    study=study,
                    external_id=f"{pid}-{a}-{b}",
                    page=pages[pid],
                    candidate_a=candidates[(pid, a)],
                    candidate_b=candidates[(pid, b)],
                    set=ComparisonSet.HUMAN,
                )
            )
    Comparison.objects.bulk_create(rows)
    blocks_schedule(
        study=study, blocks=1, block_size=BLOCK, repeats=REPEATS, min_gap=GAP, raters=[RATERS], seed=1
    )
    return study


def _answer(assignment: Assignment, theta: dict[str, float], rng: np.random.Generator) -> None:
    """Canonical votes from Bradley–Terry strengths; a hidden repeat replays its original."""
    trials = list(
        assignment.trials.select_related(
            "comparison__candidate_a__system", "comparison__candidate_b__system"
        ).order_by("position")
    )
    labels: dict[int, str] = {}
    for trial in trials:
        if trial.is_repeat:
            label = labels[trial.repeat_of_id]
        else:
            a = trial.comparison.candidate_a.system.external_id
            b = trial.comparison.candidate_b.system.external_id
            p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
            u = rng.random()
            label = "TIE" if u < 0.1 else ("A" if u < 0.1 + 0.9 * p else "B")
        labels[trial.pk] = label
        Vote.objects.create(trial=trial, label=label, confidence=3)
    Assignment.objects.filter(pk=assignment.pk).update(
        state=AssignmentState.FINISHED, finished_at=timezone.now()
    )


def _run_raters(study, n: int, theta: dict[str, float], seed: int = 2) -> int:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    served = 0
    for r in range(n):
        rater = participant_rater_get_or_create(study=study, external_id=f"p{r:03d}")
        try:
            assignment = participant_claim(study=study, rater=rater)
        except StudyFull:
            break
        _answer(assignment, theta, rng)
        served += 1
    return served


THETA = {"s0": 2.0, "s1": 0.9, "s2": 0.75, "s3": -0.8, "s4": -2.0}


def test_an_adaptive_study_builds_blocks_that_keep_every_protocol_guarantee() -> None:
    study = _study("adaptive-guarantees")
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 2})
    served = _run_raters(study, 4 * RATERS, THETA)
    assert served == 4 * RATERS
    blocks = list(Block.objects.filter(study=study).order_by("position"))
    assert [b.position for b in blocks] == [1, 2, 3, 4]
    seen: set[int] = set()
    for block in blocks:
        items = list(block.items.values_list("comparison_id", flat=True))
        assert len(items) == BLOCK and len(set(items)) == BLOCK  # exact block size
        assert not seen & set(items)  # disjoint blocks: no rater sees a comparison twice
        seen |= set(items)
        assignments = list(block.assignments.all())
        assert len(assignments) == block.target_raters == RATERS  # exact quotas
        swapped: dict[int, Counter] = defaultdict(Counter)
        for assignment in assignments:
            trials = list(assignment.trials.order_by("position"))
            main = [t for t in trials if not t.is_repeat]
            repeats = [t for t in trials if t.is_repeat]
            assert sorted(t.comparison_id for t in main) == sorted(items)
            assert len(repeats) == REPEATS  # designed rate
            by_id = {t.pk: t for t in trials}
            for t in repeats:
                original = by_id[t.repeat_of_id]
                assert t.position - original.position >= GAP and t.swapped == original.swapped
                assert t.comparison_id == original.comparison_id
            for t in main:
                swapped[t.comparison_id][t.swapped] += 1
        # Every comparison shown in both display orders equally often (4 raters: 2 and 2).
        assert all(c[True] == c[False] == RATERS // 2 for c in swapped.values())
    events = AuditEvent.objects.filter(action="adaptive_block")
    assert events.count() == 3


def test_the_allocator_favours_the_undecided_boundary_and_the_served_order_hides_the_standings() -> None:
    study = _study("adaptive-favours")
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 2})
    _run_raters(study, 4 * RATERS, THETA)
    adaptive_items = Comparison.objects.filter(
        block_items__block__study=study, block_items__block__position__gt=1
    )
    pairs = Counter(
        tuple(sorted((c.candidate_a.system.external_id, c.candidate_b.system.external_id)))
        for c in adaptive_items.select_related("candidate_a__system", "candidate_b__system")
    )
    total = sum(pairs.values())
    # s1 against s2 decides the top-2; under uniform allocation it would get a tenth of the votes.
    assert pairs[("s1", "s2")] / total > 0.25
    # Far pairs still appear: the uniform floor.
    assert len(pairs) >= 6
    # Blinding: in what a rater is served, the trial position does not follow the pair's gap.
    gaps, positions = [], []
    for trial in Trial.objects.filter(
        assignment__block__study=study, assignment__block__position__gt=1, is_repeat=False
    ).select_related("comparison__candidate_a__system", "comparison__candidate_b__system"):
        a = trial.comparison.candidate_a.system.external_id
        b = trial.comparison.candidate_b.system.external_id
        gaps.append(abs(THETA[a] - THETA[b]))
        positions.append(trial.position)
    rho = spearmanr(positions, gaps).statistic
    assert abs(rho) < 0.15
    state = allocation_state(study=study)
    assert (
        state is not None
        and state.votes
        == Vote.objects.filter(trial__assignment__block__study=study, trial__is_repeat=False).count()
    )
    favoured = state.favoured(3)
    assert {favoured[0].system_a, favoured[0].system_b} == {"s1", "s2"}


def test_an_adjacent_target_is_allocated_by_the_design_rule_towards_the_closest_neighbours() -> None:
    study = _study("adaptive-adjacent")
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "adjacent", "width_elo": 40.0})
    assert _run_raters(study, 3 * RATERS, THETA) == 3 * RATERS
    state = allocation_state(study=study)
    assert state is not None and state.rule == "design"
    blocks = list(Block.objects.filter(study=study).order_by("position"))
    assert len(blocks) == 3 and all(b.items.count() == BLOCK for b in blocks)
    items = [c for b in blocks for c in b.items.values_list("comparison_id", flat=True)]
    assert len(items) == len(set(items))  # disjoint blocks
    events = AuditEvent.objects.filter(study=study, action="adaptive_block")
    assert events.count() == 2 and all(e.details.get("rule") == "design" for e in events)
    # s1 and s2 (0.15 apart) are the neighbours hardest to separate: the rule favours their pair,
    # and the uniform floor keeps its share of every pair.
    favoured = state.favoured(1)[0]
    assert {favoured.system_a, favoured.system_b} == {"s1", "s2"}
    assert state.shares.min() >= 0.25 / len(state.shares) - 1e-12


def test_a_uniform_study_is_unchanged_when_full() -> None:
    study = _study("uniform-full")
    assert _run_raters(study, RATERS + 1, THETA) == RATERS
    assert Block.objects.filter(study=study).count() == 1
    assert not AuditEvent.objects.filter(action="adaptive_block").exists()


def test_no_block_is_built_once_the_stopping_rule_declares_the_top_k() -> None:
    study = _study("adaptive-stops")
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 1})
    lopsided = {"s0": 6.0, "s1": -1.0, "s2": -1.5, "s3": -2.0, "s4": -2.5}
    served = _run_raters(study, 3 * RATERS, lopsided)
    state = allocation_state(study=study)
    assert state is not None and state.declared and state.top == ("s0",) and state.votes_needed == 0
    assert served < 3 * RATERS  # the study filled up instead of growing


def test_schedule_blocks_sets_adaptive_and_refuses_it_for_other_kinds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    study, _s, pages, candidates = make_basic_study("adaptive-cmd", systems=SYSTEMS, n_pages=8)
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
        for a, b in combinations(SYSTEMS, 2)
    )
    call_command(
        "schedule_blocks",
        "adaptive-cmd",
        "--blocks",
        "1",
        "--block-size",
        "30",
        "--repeats",
        "1",
        "--min-gap",
        "5",
        "--raters",
        "2",
        "--allocation",
        "adaptive",
        "--target-k",
        "2",
    )
    study.refresh_from_db()
    assert study.options["allocation"] == "adaptive" and study.options["allocation_target"]["k"] == 2


def test_the_schedule_page_shows_the_favoured_pairs_to_researchers_only(
    researcher, other_researcher, rater_user
) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client
    from django.urls import reverse

    study = _study("adaptive-pages")
    study.researchers.add(researcher)
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 2})
    _run_raters(study, RATERS, THETA)
    client = Client()
    client.force_login(researcher)
    schedule = client.get(reverse("research:study", args=[study.slug]))
    assert schedule.status_code == 200
    html = schedule.content.decode()
    assert (
        "Adaptive allocation" in html
        and "Pairs the allocator favours" in html
        and 'id="votes-needed"' in html
    )
    detail = client.get(reverse("studies:detail", args=[study.slug])).content.decode()
    assert "Votes still needed" in detail and "Pairs the allocator favours" not in detail
    for outsider in (other_researcher, rater_user):
        other = Client()
        other.force_login(outsider)
        response = other.get(reverse("research:study", args=[study.slug]))
        assert response.status_code in (403, 404) and b"allocator favours" not in response.content
    # A uniform study's pages have no allocation section.
    plain = _study("uniform-pages")
    plain.researchers.add(researcher)
    assert b"Adaptive allocation" not in client.get(reverse("research:study", args=[plain.slug])).content


def test_the_agreement_report_says_the_study_was_adaptive_and_stopped_early() -> None:
    from calibration.services.agreement import agreement_report_for_study

    study = _study("adaptive-report")
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 1})
    _run_raters(study, 3 * RATERS, {"s0": 6.0, "s1": -1.0, "s2": -1.5, "s3": -2.0, "s4": -2.5})
    section = agreement_report_for_study(study=study, resamples=20, seed=1)["allocation"]
    assert (
        section["allocation"] == "adaptive"
        and section["rule"] == "thompson"
        and section["uniform_floor"] == 0.25
    )
    assert section["stopped_early"] is True and section["declared_top"] == ["s0"]
    assert "alpha 0.05" in section["stopping_rule"]
    plain = _study("uniform-report")
    _run_raters(plain, RATERS, THETA)
    assert "allocation" not in agreement_report_for_study(study=plain, resamples=20, seed=1)
