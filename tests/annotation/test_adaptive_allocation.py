"""Adaptive allocation on a real study of either pairwise kind (docs/protocol.md "Adaptive allocation
and stopping"): the next block is built from the current fit when every place is taken. Raters are
driven through the services the rater pages call (comprehension check, ``participant_claim``,
``trial_next``, ``vote_submit``), and the properties are asserted on the trials they were served:
both display orders equally often, hidden repeats at rate and gap, exact quotas, no comparison twice
except as a designed repeat, the uniform floor in every block, the pairwise kind's counterbalanced
sections and attention checks, and a served order that does not follow the standings. A uniform
study is unchanged; the stopping rule stops building blocks; checklist and rating are refused."""

from __future__ import annotations

import json
import math
import secrets
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import combinations, groupby
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from scipy.stats import chisquare, spearmanr

from annotation.kinds import design_of
from annotation.models import AuditEvent, Block, BlockItem, Comparison, ComparisonSet, Study, Trial, Vote
from annotation.selectors.allocation import allocation_state
from annotation.services.adaptive_allocation import study_allocation_set
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.comprehension import (
    comprehension_question,
    comprehension_required,
    comprehension_submit,
)
from annotation.services.participants import StudyFull, participant_claim, participant_rater_get_or_create
from annotation.services.scheduling import blocks_schedule
from tests.kind_reports.kind_report_factories import kind_bundle
from tests.ranking.rank_factories import make_basic_study

pytestmark = pytest.mark.django_db

SYSTEMS = ("s0", "s1", "s2", "s3", "s4")
BLOCK, RATERS, REPEATS, GAP, CHECKS = 40, 4, 2, 5, 2
KINDS = ("pairwise_reference", "pairwise")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
THETA = {"s0": 2.0, "s1": 0.9, "s2": 0.75, "s3": -0.8, "s4": -2.0}
LOPSIDED = {"s0": 6.0, "s1": -1.0, "s2": -1.5, "s3": -2.0, "s4": -2.5}
# Rank 1 is best (THETA's order).
TRUE_RANK = {s: r + 1 for r, s in enumerate(sorted(THETA, key=lambda s: -THETA[s]))}
SWAP = {"A": "B", "B": "A"}


def _pairwise_bundle(target: Path, slug: str, n_briefs: int) -> Path:
    """A ``pairwise`` bundle with the five systems, one item each per brief (every pair compared)."""

    def edit(doc: dict[str, Any]) -> None:
        images = sorted({item["image"] for item in doc["items"]})
        doc["systems"] = [{"id": s, "name": f"System {s}"} for s in SYSTEMS]
        doc["briefs"] = [{"id": f"b{i:03d}", "text": f"Brief number {i}."} for i in range(n_briefs)]
        doc["items"] = [
            {
                "id": f"b{i:03d}-{s}",
                "image": images[(i + j) % len(images)],
                "brief": f"b{i:03d}",
                "system": s,
                "metrics": {"aesthetic": float(THETA[s] + 0.1 * ((i + j) % 3))},
            }
            for i in range(n_briefs)
            for j, s in enumerate(SYSTEMS)
        ]
        doc.pop("comparisons", None)

    return kind_bundle("pairwise", target, slug=slug, edit=edit)


def _study(
    slug: str, kind: str, tmp_path: Path, *, n_pages: int = 40, raters: int = RATERS, schedule: bool = True
) -> Study:
    """A study of ``kind`` with five systems and every pair compared on each page (brief)."""
    if kind == "pairwise":
        study = study_import_bundle(path=_pairwise_bundle(tmp_path / slug, slug, n_pages))
    else:
        study, _systems, pages, candidates = make_basic_study(slug, systems=SYSTEMS, n_pages=n_pages)
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
    if schedule:
        blocks_schedule(
            study=study,
            blocks=1,
            block_size=BLOCK,
            repeats=REPEATS,
            min_gap=GAP,
            raters=[raters],
            seed=1,
            checks=CHECKS if design_of(study).has_attention_checks else None,
        )
        study.refresh_from_db()
    return study


@dataclass
class Served:
    """What the simulated raters were shown, in order: trial ids per rater."""

    by_rater: dict[str, list[int]] = field(default_factory=dict)

    @property
    def n_raters(self) -> int:
        return len(self.by_rater)


def _run_raters(study: Study, n: int, theta: dict[str, float], seed: int = 2) -> Served:
    """Participants answer through the rater services until ``n`` have finished or the study is full.

    A data trial is answered from Bradley–Terry strengths (10 % ties), a hidden repeat replays the
    displayed answer of its original, an attention check gets the answer it asks for."""
    rng = np.random.default_rng(seed)
    systems = {
        pk: (a, b)
        for pk, a, b in Comparison.objects.filter(study=study).values_list(
            "pk", "candidate_a__system__external_id", "candidate_b__system__external_id"
        )
    }
    served = Served()
    for r in range(n):
        rater = participant_rater_get_or_create(study=study, external_id=f"p{r:03d}")
        if comprehension_required(study):
            assert comprehension_submit(rater=rater, answer=comprehension_question(study).answer) == "passed"
        try:
            assignment = participant_claim(study=study, rater=rater)
        except StudyFull:
            break
        shown: dict[int, str] = {}
        order: list[int] = []
        while (view := trial_next(assignment=assignment, study=study)) is not None:
            trial = view.trial
            if trial.attention_expected:
                verdict = trial.attention_expected
            elif trial.is_repeat:
                verdict = shown[int(trial.repeat_of_id or 0)]
            else:
                a, b = systems[int(trial.comparison_id or 0)]
                u = rng.random()
                canonical = (
                    "TIE"
                    if u < 0.1
                    else ("A" if u < 0.1 + 0.9 / (1.0 + np.exp(theta[b] - theta[a])) else "B")
                )
                verdict = SWAP.get(canonical, canonical) if trial.swapped else canonical
            shown[trial.pk] = verdict
            order.append(trial.pk)
            vote_submit(VoteInput(
                trial_token=trial.token,
                rater_id=rater.pk,
                verdict=verdict,
                confidence=3,
                axes={},
                rationale="",
                idempotency_key=secrets.token_urlsafe(12)),
            )
        served.by_rater[rater.external_id] = order
    return served


def _adaptive(study: Study, k: int) -> None:
    """Block adaptation (whole blocks from the fit); serve-time choice: tests/annotation/test_serve_time.py."""
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": k}, adaptation="block")


@pytest.mark.parametrize(
    ("kind", "raters"), [("pairwise_reference", RATERS), ("pairwise", RATERS), ("pairwise", 3)]
)
def test_the_served_trials_of_an_adaptive_study_keep_every_protocol_guarantee(
    kind: str, raters: int, tmp_path: Path, researcher, other_researcher, rater_user  # type: ignore[no-untyped-def]
) -> None:
    """One simulated study per kind (issue 46 item 8): the same served study is also checked by
    ``_the_allocator_favours_the_undecided_boundary`` and
    ``_the_study_pages_show_the_allocation_to_researchers_only`` (the default rater target)."""
    study = _study(f"adaptive-served-{kind}-{raters}", kind, tmp_path, raters=raters)
    _adaptive(study, 2)
    design = design_of(study)
    served = _run_raters(study, 4 * raters, THETA)
    assert served.n_raters == 4 * raters
    blocks = list(Block.objects.filter(study=study).order_by("position"))
    assert [b.position for b in blocks] == [1, 2, 3, 4]
    trials = {
        t.pk: t
        for t in Trial.objects.filter(assignment__block__study=study).select_related(
            "assignment__block", "comparison__candidate_a__system", "comparison__candidate_b__system"
        )
    }
    items_of = {
        b.pk: set(BlockItem.objects.filter(block=b).values_list("comparison_id", flat=True)) for b in blocks
    }
    assert all(len(items) == BLOCK for items in items_of.values())  # exact block size
    assert not set.intersection(*items_of.values())

    per_block_raters: Counter[int] = Counter()
    sides: dict[int, Counter[bool]] = defaultdict(Counter)
    for rater, order in served.by_rater.items():
        sequence = [trials[pk] for pk in order]
        assert [t.position for t in sequence] == list(range(1, len(sequence) + 1))  # served in plan order
        assignment = sequence[0].assignment
        assert assignment.rater.external_id == rater and all(
            t.assignment_id == assignment.pk for t in sequence
        )
        per_block_raters[assignment.block_id] += 1
        checks = [t for t in sequence if t.attention_expected]
        repeats = [t for t in sequence if t.is_repeat]
        main = [t for t in sequence if not t.is_repeat and not t.attention_expected]
        # Per-rater quota exact: every comparison of the block once, plus the designed extras.
        assert sorted(t.comparison_id for t in main) == sorted(items_of[assignment.block_id])
        assert len(sequence) == BLOCK + REPEATS + len(checks)
        # No comparison twice except as a designed repeat (attention checks are designed trials too,
        # placed by the schedule, never data).
        assert max(Counter(t.comparison_id for t in main).values()) == 1
        # Hidden repeats at the designed rate and gap, with the original's orientation.
        assert len(repeats) == REPEATS
        for t in repeats:
            original = trials[int(t.repeat_of_id or 0)]
            assert original.assignment_id == t.assignment_id and not original.is_repeat
            assert t.comparison_id == original.comparison_id and t.swapped == original.swapped
            assert t.position - original.position >= GAP
        if design.counterbalanced:
            # The pairwise kind's crowd design: attention checks at the scheduled count, never first.
            assert len(checks) == CHECKS and sequence[0].attention_expected == ""
            # Sections (briefs) contiguous in the data trials.
            runs = [key for key, _ in groupby(t.comparison.page_id for t in main)]
            assert len(runs) == len(set(runs))
        else:
            assert not checks
        for t in main:
            sides[t.comparison_id][t.swapped] += 1
    # Quotas per block exact; every comparison shown in both display orders equally often (±1 when odd).
    assert all(per_block_raters[b.pk] == b.target_raters == raters for b in blocks)
    assert all(sum(c.values()) == raters and abs(c[True] - c[False]) == raters % 2 for c in sides.values())

    if design.counterbalanced:
        # Section order counterbalanced per participant in every block (Williams rows differ by slot).
        for block in blocks:
            first_briefs = set()
            for order in served.by_rater.values():
                main = [
                    trials[pk]
                    for pk in order
                    if not trials[pk].is_repeat and not trials[pk].attention_expected
                ]
                if main[0].assignment.block_id == block.pk:
                    first_briefs.add(main[0].comparison.page_id)
            assert len(first_briefs) == raters

    # The uniform floor: drawn first, in every adaptive block, at least a quarter of what each rater is served.
    events = {
        e.details["block"]: e.details for e in AuditEvent.objects.filter(study=study, action="adaptive_block")
    }
    assert sorted(events) == [2, 3, 4]
    external = dict(Comparison.objects.filter(study=study).values_list("external_id", "pk"))
    floor_pairs: Counter[tuple[str, str]] = Counter()
    for block in blocks[1:]:
        floor = {external[e] for e in events[block.position]["floor_items"]}
        assert len(floor) >= math.ceil(0.25 * BLOCK) and floor <= items_of[block.pk]
        for order in served.by_rater.values():
            main = [
                trials[pk] for pk in order if not trials[pk].is_repeat and not trials[pk].attention_expected
            ]
            if main[0].assignment.block_id == block.pk:
                assert sum(t.comparison_id in floor for t in main) / len(main) >= 0.25
        for pk in floor:
            c = next(t.comparison for t in trials.values() if t.comparison_id == pk)
            floor_pairs[
                tuple(sorted((c.candidate_a.system.external_id, c.candidate_b.system.external_id)))
            ] += 1
    # The floor is uniform over the ten pairs whatever the fit says (a loose bound on 30 draws).
    observed = [floor_pairs[p] for p in combinations(SYSTEMS, 2)]
    assert chisquare(observed).pvalue > 0.001

    # Blinding: in what each rater is served, the position does not follow the standings of the pair.
    positions, ranks = [], []
    for order in served.by_rater.values():
        for t in (trials[pk] for pk in order):
            if t.assignment.block.position > 1 and not t.attention_expected:
                a, b = (
                    t.comparison.candidate_a.system.external_id,
                    t.comparison.candidate_b.system.external_id,
                )
                positions.append(t.position)
                ranks.append((TRUE_RANK[a] + TRUE_RANK[b]) / 2)
    assert abs(spearmanr(positions, ranks).statistic) < 0.15
    if raters == RATERS:
        _the_allocator_favours_the_undecided_boundary(study)
        _the_study_pages_show_the_allocation_to_researchers_only(
            study, kind, researcher, other_researcher, rater_user, tmp_path)


def _the_allocator_favours_the_undecided_boundary(study: Study) -> None:
    """Of a study served by ``_run_raters(study, 4 * RATERS, THETA)`` after ``_adaptive(study, 2)``."""
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
    assert len(pairs) >= 6  # far pairs still appear: the uniform floor
    state = allocation_state(study=study)
    # The fit reads valid main votes only: no hidden repeat, no attention check.
    main_votes = Vote.objects.filter(
        trial__assignment__block__study=study,
        trial__is_repeat=False,
        trial__attention_expected="",
        label__in=["A", "B", "TIE"],
    )
    assert state is not None and state.votes == main_votes.count() > 0
    favoured = state.favoured(3)
    assert {favoured[0].system_a, favoured[0].system_b} == {"s1", "s2"}


def test_an_adjacent_target_is_allocated_by_the_design_rule_towards_the_closest_neighbours(
    tmp_path: Path,
) -> None:
    study = _study("adaptive-adjacent", "pairwise_reference", tmp_path)
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "adjacent", "width_elo": 40.0},
                         adaptation="block")
    assert _run_raters(study, 3 * RATERS, THETA).n_raters == 3 * RATERS
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


@pytest.mark.parametrize("kind", KINDS)
def test_a_uniform_study_is_unchanged_when_full(kind: str, tmp_path: Path) -> None:
    study = _study(f"uniform-full-{kind}", kind, tmp_path)
    assert _run_raters(study, RATERS + 1, THETA).n_raters == RATERS
    assert Block.objects.filter(study=study).count() == 1
    assert not AuditEvent.objects.filter(action="adaptive_block").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_no_block_is_built_once_the_stopping_rule_declares_the_top_k_and_the_report_says_so(
    kind: str, tmp_path: Path
) -> None:
    """One simulated study per kind (issue 46 item 8): the study that stops is also the one whose
    report is read (``_the_report_says_the_study_was_adaptive_and_stopped_early``)."""
    study = _study(f"adaptive-stops-{kind}", kind, tmp_path)
    _adaptive(study, 1)
    served = _run_raters(study, 3 * RATERS, LOPSIDED)
    state = allocation_state(study=study)
    assert state is not None and state.declared and state.top == ("s0",) and state.votes_needed == 0
    assert served.n_raters < 3 * RATERS  # the study filled up instead of growing
    _the_report_says_the_study_was_adaptive_and_stopped_early(study, kind, tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_schedule_blocks_sets_adaptive_for_the_pairwise_kinds(kind: str, tmp_path: Path) -> None:
    study = _study(f"adaptive-cmd-{kind}", kind, tmp_path, n_pages=8, schedule=False)
    options = (
        "--blocks 1 --block-size 30 --repeats 1 --min-gap 5 --raters 2 --allocation adaptive --target-k 2"
    )
    call_command("schedule_blocks", study.slug, *options.split())
    study.refresh_from_db()
    assert study.options["allocation"] == "adaptive" and study.options["allocation_target"]["k"] == 2
    assert Block.objects.filter(study=study).count() == 1


@pytest.mark.parametrize("kind", ["checklist", "rating"])
def test_schedule_blocks_refuses_adaptive_for_the_other_kinds_in_one_line(kind: str) -> None:
    study = study_import_bundle(path=FIXTURES / kind)
    options = "--blocks 1 --block-size 1 --repeats 0 --raters 1 --allocation adaptive"
    with pytest.raises(CommandError) as raised:
        call_command("schedule_blocks", study.slug, *options.split())
    message = str(raised.value)
    assert "\n" not in message and f"is a {kind} study" in message and "pairwise" in message
    assert not Block.objects.filter(study=study).exists()
    study.refresh_from_db()
    assert "allocation" not in (study.options or {})


def _the_study_pages_show_the_allocation_to_researchers_only(
    study: Study, kind: str, researcher, other_researcher, rater_user, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """Of an adaptive study with votes, not yet stopped (``_adaptive(study, 2)``)."""
    from django.test import Client
    from django.urls import reverse

    study.researchers.add(researcher)
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
    plain = _study(f"uniform-pages-{kind}", kind, tmp_path)
    plain.researchers.add(researcher)
    assert b"Adaptive allocation" not in client.get(reverse("research:study", args=[plain.slug])).content


def _report(study: Study) -> dict[str, Any]:
    """The study's report: agreement_report for pairwise_reference, kind_report for pairwise."""
    if study.kind == "pairwise":
        from kind_reports.services import kind_report_build

        return json.loads(json.dumps(kind_report_build(study=study, resamples=20, seed=1)))
    from calibration.services.agreement import agreement_report_for_study

    return agreement_report_for_study(study=study, resamples=20, seed=1)


def _the_report_says_the_study_was_adaptive_and_stopped_early(study: Study, kind: str, tmp_path: Path) -> None:
    """Of a study that stopped on the rule (``_adaptive(study, 1)``, ``LOPSIDED``)."""
    section = _report(study)["allocation"]
    assert (
        section["allocation"] == "adaptive"
        and section["rule"] == "thompson"
        and section["uniform_floor"] == 0.25
    )
    assert section["stopped_early"] is True and section["declared_top"] == ["s0"]
    assert (
        section["adaptive_blocks"] == AuditEvent.objects.filter(study=study, action="adaptive_block").count()
    )
    assert "alpha 0.05" in section["stopping_rule"]
    plain = _study(f"uniform-report-{kind}", kind, tmp_path)
    _run_raters(plain, RATERS, THETA)
    assert "allocation" not in _report(plain)
