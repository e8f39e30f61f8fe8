"""``make_demo_study --kind pairwise|checklist|rating`` (demo.kinds): plan, posters and the full command.

The command tests build small demos through the real import, scheduling, comprehension, rater and
vote services, then check the result from the database with plain loops, independently of the
simulation's own bookkeeping: shapes and counts, canonical storage, attention checks, the open slot,
the screened-out participant, that the planted truth can be read back from the answers, and that
nothing a rater is shown names a system.
"""

from __future__ import annotations

import io
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.kinds import DESIGNS
from annotation.models import (
    Assignment,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    Predicate,
    Rater,
    Study,
    Trial,
    Vote,
)
from annotation.services.answers import VoteInput, trial_image, trial_next, vote_submit
from annotation.services.comprehension import (
    ComprehensionRequired,
    comprehension_question,
    comprehension_submit,
)
from annotation.services.participants import participant_claim, participant_rater_get_or_create
from demo.kinds import DEMOS, POSTER_KINDS
from demo.kinds.drawing import poster_draw, poster_layout
from demo.kinds.plan import DIMENSIONS

SMALL = {
    "pairwise": ["--pages", "4", "--systems", "4"],  # 16 items, 24 comparisons, blocks of 12
    "checklist": ["--pages", "4"],  # 8 items, 48 predicates, blocks of 24
    "rating": ["--pages", "8"],  # 16 items, blocks of 8
}
UNITS = {"pairwise": 24, "checklist": 48, "rating": 16}
FLIP = {"A": "B", "B": "A"}


def build(kind: str, *extra: str) -> tuple[Study, str]:
    out = io.StringIO()
    call_command("make_demo_study", "--kind", kind, *SMALL[kind], *extra, stdout=out)
    return Study.objects.get(slug=f"demo-{kind}"), out.getvalue()


def displayed(vote: Vote) -> Any:
    """The answer as the rater gave it on screen (canonical pairwise labels flip back when swapped)."""
    kind = vote.trial.assignment.block.study.kind
    if kind == "rating":
        return vote.answers["ratings"]
    if kind == "pairwise" and vote.trial.swapped:
        return FLIP.get(vote.label, vote.label)
    return vote.label


def rater_of(vote: Vote) -> str:
    rater = vote.trial.assignment.rater
    assert rater is not None
    return rater.external_id


def check_passed(vote: Vote) -> bool:
    shown = displayed(vote)
    expected = vote.trial.attention_expected
    if isinstance(shown, dict):
        return all(v == int(expected) for v in shown.values())
    return bool(shown == expected)


def study_votes(study: Study) -> list[Vote]:
    return list(
        Vote.objects.filter(trial__assignment__block__study=study).select_related(
            "trial__assignment__rater",
            "trial__assignment__block__study",
            "trial__comparison__candidate_a",
            "trial__comparison__candidate_b",
            "trial__predicate",
            "trial__candidate",
        )
    )


# --- pure parts --------------------------------------------------------------------------------


def test_every_study_kind_has_one_demo() -> None:
    assert set(DEMOS) == set(DESIGNS)
    assert set(POSTER_KINDS) == {kind for kind, design in DESIGNS.items() if not design.has_reference}


def test_plan_is_deterministic_in_the_seed() -> None:
    for kind in ("pairwise", "checklist", "rating"):
        one, two, other = (POSTER_KINDS[kind].plan_make(slug="x", seed=s) for s in (3, 3, 4))
        assert one == two
        assert one.items != other.items


def test_poster_boxes_outline_what_is_drawn() -> None:
    plan = POSTER_KINDS["checklist"].plan_make(slug="x", seed=1)
    item = plan.items[0]
    brief = next(b for b in plan.briefs if b.id == item.brief)
    look = replace(item.look, clutter=0, contrast=0.95, date_shown=False, button_shown=False)
    pixels = np.asarray(poster_draw(brief, look).convert("RGB")).astype(int)
    background = pixels[5 + 10, 240]  # just inside the frame band
    for name, box in poster_layout(brief, look).items():
        x0, y0, x1, y1 = (round(v * s / 1000) for v, s in zip(box, (480, 360, 480, 360), strict=True))
        crop = pixels[y0:y1, x0:x1]
        assert (np.abs(crop - background).sum(axis=2) > 60).mean() > 0.05, name
    # The date and the button appear exactly when the look says so.
    with_both = np.asarray(
        poster_draw(brief, replace(look, date_shown=True, button_shown=True)).convert("RGB")
    )
    changed = np.abs(with_both.astype(int) - pixels).sum(axis=2) > 30
    assert changed[300:340, 20:200].any() and changed[296:340, 318:452].any()
    assert not changed[:290].any()
    # Warm palettes have more red than blue in the background, cool ones the other way round.
    for warm in (True, False):
        bg = np.asarray(poster_draw(brief, replace(look, warm=warm)).convert("RGB"))[15, 240].astype(int)
        assert (bg[0] > bg[2]) == warm


def test_checklist_truth_follows_the_look() -> None:
    plan = POSTER_KINDS["checklist"].plan_make(slug="x", seed=2)
    items = {i.id: i for i in plan.items}
    for p in plan.predicates:
        look = items[p.item].look
        expected = {
            "headline_top": look.headline_top,
            "date": look.date_shown,
            "warm": look.warm,
            "shape_right": look.shape_right,
            "readable": look.contrast >= 0.5,
            "button": look.button_shown,
        }[p.topic]
        assert p.truth == ("YES" if expected else "NO")
    agreement = np.mean([p.automatic == p.truth for p in plan.predicates])
    assert 0.75 < agreement < 0.95
    assert {p.type for p in plan.predicates} == {"Content", "Layout", "Style"}
    assert any(p.boxes for p in plan.predicates) and any(not p.boxes for p in plan.predicates)


# --- through the services -----------------------------------------------------------------------


def check_common(study: Study, out: str, kind: str) -> list[Vote]:
    """Blocks, open slots, attention checks, comprehension, response times; returns the votes."""
    assert study.kind == kind and study.options["demo"]["kind"] == kind
    assert f"study: demo-{kind}" in out and "participant link: http" in out
    blocks = list(Block.objects.filter(study=study).order_by("position"))
    assert len(blocks) == 2
    for block in blocks:
        assert BlockItem.objects.filter(block=block).count() == UNITS[kind] // 2
        assert block.target_raters == 4
        states = sorted(Assignment.objects.filter(block=block).values_list("state", flat=True))
        assert states == ["finished"] * 3 + ["open"]
    finished = Assignment.objects.filter(block__study=study, state="finished")
    for assignment in finished:
        trials = list(Trial.objects.filter(assignment=assignment))
        assert sum(1 for t in trials if t.attention_expected) == 2
        assert sum(1 for t in trials if t.is_repeat) == 2
        assert not any(t.attention_expected and t.is_repeat for t in trials)
    assert not Trial.objects.filter(assignment__in=finished, vote__isnull=True).exists()
    votes = study_votes(study)
    assert len(votes) == Trial.objects.filter(assignment__in=finished).count()
    assert re.search(rf"votes: {len(votes)}\b", out)
    # Attention checks: careful raters pass all of theirs, the careless one fails exactly one.
    careless = set(study.options["demo"]["careless"])
    assert len(careless) == 1
    failed: Counter[str] = Counter()
    times: dict[str, list[int]] = defaultdict(list)
    for vote in votes:
        rater = rater_of(vote)
        if vote.trial.attention_expected:
            failed[rater] += not check_passed(vote)
        else:
            times[rater].append(int(vote.response_ms or 0))
    assert len(times) == 6
    assert {r: failed[r] for r in times} == {r: int(r in careless) for r in times}
    # Only the careless rater is "too fast" (median below one second, the hygiene default).
    assert {r for r, ms in times.items() if statistics.median(ms) < 1000} == careless
    # Comprehension: every simulated rater passed, one at the second attempt.
    passed = Rater.objects.filter(study=study, comprehension_passed=True)
    assert passed.count() == 6
    assert sorted(passed.values_list("comprehension_attempts", flat=True)) == [1] * 5 + [2]
    return votes


def check_screened_out(study: Study, expected: bool) -> None:
    screened = Rater.objects.filter(study=study, comprehension_passed=False)
    assert [r.external_id for r in screened] == (["sim-screened-01"] if expected else [])
    for rater in screened:
        assert rater.comprehension_attempts == 2
        assert not Assignment.objects.filter(rater=rater).exists()
        with pytest.raises(ComprehensionRequired):
            participant_claim(study=study, rater=rater)


def check_rater_view(study: Study) -> None:
    """A person takes an open slot: nothing shown to them names a system; their answers are stored."""
    secrets = {s.lower() for s in study.systems.values_list("external_id", flat=True)}
    secrets |= {s.lower() for s in study.systems.values_list("name", flat=True)}
    assert len(secrets) == 2 * study.systems.count()
    rater = participant_rater_get_or_create(study=study, external_id="human-1")
    with pytest.raises(ComprehensionRequired):
        participant_claim(study=study, rater=rater)
    assert comprehension_submit(rater=rater, answer=comprehension_question(study).answer) == "passed"
    assignment = participant_claim(study=study, rater=rater)
    shown: list[str] = [study.title, study.instructions_md]
    n = 0
    while (view := trial_next(assignment=assignment)) is not None:
        trial = view.trial
        shown += [
            trial.token,
            view.brief,
            view.question,
            view.attention,
            " ".join(view.dimensions),
            str(view.boxes),
        ]
        slots = ("left", "right") if study.kind == "pairwise" else ("item",)
        for slot in slots:
            image = trial_image(trial_token=trial.token, slot=slot)
            assert image is not None and image.file and image.rater_id == rater.pk
            shown.append(image.file)
        if study.kind == "checklist":
            assert view.question
        expected = trial.attention_expected
        if study.kind == "rating":
            value = int(expected) if expected else 3
            answer: dict[str, Any] = {
                "verdict": "",
                "confidence": None,
                "rationale": "",
                "ratings": dict.fromkeys(view.dimensions, value),
            }
        elif study.kind == "checklist":
            answer = {
                "verdict": expected or "UNCLEAR",
                "confidence": None,
                "rationale": "hard to see",
                "ratings": None,
            }
        else:
            answer = {"verdict": expected or "TIE", "confidence": 3, "rationale": "", "ratings": None}
        vote_submit(VoteInput(
            trial_token=trial.token,
            rater_id=rater.pk,
            axes={},
            idempotency_key=view.idempotency_key,
            **answer,  # type: ignore[arg-type]
        ))
        n += 1
    assert n == Trial.objects.filter(assignment=assignment).count() > 0
    assert Assignment.objects.get(pk=assignment.pk).state == "finished"
    text = "\n".join(shown).lower()
    assert not [s for s in secrets if s in text]
    # Item ids (exported, in the schedule CSV) name no system either.
    ids = " ".join(Candidate.objects.filter(page__study=study).values_list("external_id", flat=True)).lower()
    assert not [s for s in secrets if s in ids]


def test_pairwise_demo(db: None) -> None:
    study, out = build("pairwise")
    assert "comparisons: 24" in out and "1 screened out" in out
    assert study.pages.count() == 4 and study.systems.count() == 4
    candidates = list(Candidate.objects.filter(page__study=study))
    assert len(candidates) == 16 and all(set(c.metrics) == {"aesthetic", "clip"} for c in candidates)
    comparisons = list(Comparison.objects.filter(study=study).select_related("candidate_a", "candidate_b"))
    assert len(comparisons) == 24
    assert all(c.candidate_a.page_id == c.candidate_b.page_id == c.page_id for c in comparisons)
    votes = check_common(study, out, "pairwise")
    check_screened_out(study, expected=True)
    careless = study.options["demo"]["careless"][0]
    quality = study.options["demo"]["item_quality"]
    metric_hits, quality_hits = [], []
    for vote in votes:
        trial = vote.trial
        if trial.attention_expected:
            continue
        if rater_of(vote) == careless:
            # Canonical storage: the straight-liner always pressed A (the left image).
            assert vote.label == ("B" if trial.swapped else "A")
            continue
        if vote.label not in ("A", "B"):
            continue
        comparison = trial.comparison
        assert comparison is not None
        a, b = comparison.candidate_a, comparison.candidate_b
        chosen, other = (a, b) if vote.label == "A" else (b, a)
        metric_hits.append(chosen.metrics["aesthetic"] > other.metrics["aesthetic"])
        quality_hits.append(quality[chosen.external_id] > quality[other.external_id])
    assert len(metric_hits) >= 30
    assert np.mean(metric_hits) > 0.6 and np.mean(quality_hits) > 0.7
    labels = Counter(v.label for v in votes)
    assert labels["TIE"] >= 1 and labels["A"] >= 10 and labels["B"] >= 10
    check_rater_view(study)


def test_checklist_demo(db: None) -> None:
    study, out = build("checklist")
    assert "predicates: 48" in out and "0 screened out" in out
    assert study.options["k"] == 3
    predicates = list(Predicate.objects.filter(study=study))
    assert len(predicates) == 48 and Candidate.objects.filter(page__study=study).count() == 8
    assert {p.question_type for p in predicates} == {"Content", "Layout", "Style"}
    assert any(p.boxes for p in predicates) and all(p.automatic for p in predicates)
    votes = check_common(study, out, "checklist")
    check_screened_out(study, expected=False)
    truth = study.options["demo"]["predicate_truth"]
    assert all(v.rationale.strip() and v.confidence is None for v in votes)
    main: dict[str, list[str]] = defaultdict(list)
    for vote in votes:
        predicate = vote.trial.predicate
        if predicate is not None and not vote.trial.attention_expected and not vote.trial.is_repeat:
            main[predicate.external_id].append(vote.label)
    assert sorted(main) == sorted(p.external_id for p in predicates)
    assert all(len(answers) == 3 for answers in main.values())  # k = 3 raters per predicate
    assert sum(a.count("UNCLEAR") for a in main.values()) >= 1
    majorities = {}
    for pid, answers in main.items():
        yes, no = answers.count("YES"), answers.count("NO")
        if yes != no:
            majorities[pid] = "YES" if yes > no else "NO"
    assert len(majorities) >= 0.8 * len(main)
    assert np.mean([majorities[p] == truth[p] for p in majorities]) > 0.8
    automatic = {p.external_id: p.automatic for p in predicates}
    assert 0.6 < np.mean([automatic[p] == truth[p] for p in truth]) < 1.0
    check_rater_view(study)


def test_rating_demo(db: None) -> None:
    study, out = build("rating")
    assert "items: 16" in out
    assert study.options["dimensions"] == list(DIMENSIONS) and study.options["scale"] == [1, 5]
    votes = check_common(study, out, "rating")
    check_screened_out(study, expected=False)
    demo = study.options["demo"]
    for vote in votes:
        assert vote.label == "" and vote.confidence is None
        assert sorted(vote.answers["ratings"]) == sorted(DIMENSIONS)
        assert all(1 <= r <= 5 and isinstance(r, int) for r in vote.answers["ratings"].values())
    # Per brief and system, the careful raters' mean main rating; then the mean paired difference.
    first, second = demo["planted_difference"]["systems"]
    ratings: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for vote in votes:
        trial = vote.trial
        if trial.attention_expected or trial.is_repeat or rater_of(vote) in demo["careless"]:
            continue
        item = Candidate.objects.select_related("page", "system").get(pk=int(trial.candidate_id or 0))
        for dimension, value in vote.answers["ratings"].items():
            ratings[(dimension, item.page.external_id, item.system.external_id)].append(value)
    for dimension in DIMENSIONS:
        briefs = {b for d, b, _ in ratings if d == dimension}
        assert len(briefs) == 8
        diffs = [
            np.mean(ratings[(dimension, b, first)]) - np.mean(ratings[(dimension, b, second)]) for b in briefs
        ]
        assert abs(np.mean(diffs) - demo["planted_difference"][dimension]) < 0.4, dimension
    assert (
        abs(demo["planted_difference"]["aesthetics"])
        < 0.3
        < 0.8
        < demo["planted_difference"]["brief_fidelity"]
    )
    check_rater_view(study)


@pytest.mark.parametrize("kind", ["pairwise", "checklist", "rating"])
def test_no_votes_schedules_only(db: None, kind: str) -> None:
    study, out = build(kind, "--no-votes")
    assert "votes:" not in out
    assert list(Block.objects.filter(study=study).values_list("target_raters", flat=True)) == [1, 1]
    assert Assignment.objects.filter(block__study=study, state="open").count() == 2
    assert not Vote.objects.filter(trial__assignment__block__study=study).exists()
    assert not Rater.objects.filter(study=study).exists()
    assert study.options["demo"]["raters"] == {}


def test_command_refuses_bad_sizes_in_one_line(db: None) -> None:
    with pytest.raises(CommandError) as error:
        call_command("make_demo_study", "--kind", "rating", "--systems", "3")
    assert "--systems must be exactly 2" in str(error.value) and "\n" not in str(error.value)
    assert not Study.objects.filter(slug="demo-rating").exists()
    Study.objects.create(slug="demo-checklist", title="taken")
    with pytest.raises(CommandError, match="already exists"):
        call_command("make_demo_study", "--kind", "checklist", "--pages", "2")


def test_rater_quality_counts_a_finished_assignment_whole(db: None) -> None:
    """Issue 17: a finished pairwise assignment read 50 / 52 (attention checks on one side only)."""
    from annotation.models import AssignmentState
    from annotation.selectors.progress import rater_quality

    study, _out = build("pairwise")
    rows = [q for q in rater_quality(study) if q.assignment.state == AssignmentState.FINISHED]
    assert rows and all(q.attention_checks > 0 for q in rows)
    assert all(q.votes == q.trials for q in rows)
