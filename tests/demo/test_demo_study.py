"""The synthetic demo study (``make_demo_study``): drawing, plan, simulation and the full command.

Pure parts (drawing, plan, simulation) need no database; the command tests build small demos
(16 pages) through the real import, scheduling, rater and judge-output services.
"""

from __future__ import annotations

import io
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image, ImageChops
from scipy.stats import spearmanr

from annotation.models import Assignment, Axis, Candidate, Comparison, Page, Study, Trial, Vote
from demo.bundle import AXES, demo_bundle_write, demo_plan_make
from demo.drawing import Defects, content_generate, page_draw
from demo.service import demo_researcher_ensure, demo_study_create
from demo.simulation import (
    JUDGE_PROFILES,
    JudgeProfile,
    PairEvidence,
    call_rng,
    evidence_for,
    judge_reply,
    rater_answer,
    rater_profiles,
)
from judges.models import JudgeOutput
from judges.validation import InvalidReply, canonical_answer, unwrap_fence

SMALL = 16  # pages of the database demo: 112 images, a few seconds


def changed_share(a: Image.Image, b: Image.Image) -> float:
    """Share of pixels that differ by more than a faint anti-aliasing step."""
    diff = np.asarray(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).max(axis=2)
    return float((diff > 24).mean())


# --- drawing ---------------------------------------------------------------------------------


def test_reference_page_looks_like_a_document() -> None:
    content = content_generate("p001", random.Random(4), page_number=1)
    drawn = page_draw(content)
    pixels = np.asarray(drawn.image.convert("L"))
    assert drawn.image.size == (612, 792)
    ink = (pixels < 200).mean()
    assert 0.03 < ink < 0.5, "a page is mostly paper with some ink"
    for region in drawn.regions:
        x0, y0, x1, y1 = region.bbox_1000
        assert 0 <= x0 < x1 <= 1000 and 0 <= y0 < y1 <= 1000
        crop = pixels[round(y0 * 0.792) : round(y1 * 0.792), round(x0 * 0.612) : round(x1 * 0.612)]
        assert (crop < 200).mean() > 0.01, f"the {region.role} box outlines something drawn"


def test_each_defect_changes_the_page_visibly() -> None:
    rng = random.Random(11)
    content = next(
        c for c in (content_generate(f"p{k}", rng) for k in range(200))
        if c.table is not None and c.formula and c.photo_seed is not None and c.chart_values is not None
    )
    reference = page_draw(content).image
    for defects in (
        Defects(merged_columns=True),
        Defects(column_shift=26),
        Defects(font_scale=1.22),
        Defects(dropped_table_rows=2),
        Defects(table_grid_lost=True),
        Defects(formula_lost=True),
        Defects(formula_flattened=True),
        Defects(photo_missing=True),
        Defects(chart_missing=True),
        Defects(colour_shift=(60, -40, 0)),
        Defects(jitter=(2, 1)),
    ):
        assert changed_share(reference, page_draw(content, defects).image) > 0.002, defects.names()
    assert changed_share(reference, page_draw(content).image) == 0.0


def test_missing_photo_removes_its_media_region() -> None:
    rng = random.Random(3)
    content = next(c for c in (content_generate(f"p{k}", rng) for k in range(100)) if c.photo_seed is not None)
    assert any(m["kind"] == "photo" for m in page_draw(content).media())
    assert not any(m["kind"] == "photo" for m in page_draw(content, Defects(photo_missing=True)).media())


# --- plan and bundle ---------------------------------------------------------------------------


def test_plan_covers_all_pairs_and_never_uses_failed_renders() -> None:
    plan = demo_plan_make(seed=5)
    assert len(plan.systems) == 6 and len(plan.pages) == 40
    assert len(plan.human()) == 48 and len(plan.deployment()) == 300
    failed = {(c.page, c.system) for c in plan.candidates.values() if not c.rendered}
    assert 2 <= len(failed) <= 12
    pairs = defaultdict(int)
    seen = set()
    for c in plan.comparisons:
        assert (c.page, c.a) not in failed and (c.page, c.b) not in failed
        key = (c.page, frozenset((c.a, c.b)))
        assert key not in seen, "no (page, pair) twice"
        seen.add(key)
        pairs[frozenset((c.a, c.b))] += 1
    assert len(pairs) == 15
    assert max(pairs.values()) - min(pairs.values()) <= 1
    assert abs(np.mean(list(plan.abilities.values()))) < 1e-9


def test_worse_systems_show_more_defects() -> None:
    plan = demo_plan_make(seed=2)
    defects = defaultdict(list)
    for c in plan.candidates.values():
        if c.defects is not None:
            defects[c.system].append(len(c.defects.names()))
    ids = sorted(plan.abilities)
    rho = spearmanr([plan.abilities[s] for s in ids], [-np.mean(defects[s]) for s in ids])[0]
    assert rho > 0.8


def test_bundle_has_targets_for_conditional_axes(tmp_path: Path) -> None:
    plan = demo_plan_make(seed=3, n_pages=10)
    demo_bundle_write(plan, tmp_path / "b")
    doc = json.loads((tmp_path / "b" / "study.json").read_text())
    conditional = {a["id"] for a in AXES if a["scope"] == "conditional"}
    assert conditional == {"TABLE", "FORMULA", "MEDIA"}
    by_axis = defaultdict(int)
    for page, content in zip(doc["pages"], plan.pages, strict=True):
        targeted = {t["axis"] for t in page["targets"]}
        assert targeted <= conditional
        assert ("TABLE" in targeted) == (content.table is not None)
        assert ("FORMULA" in targeted) == content.formula
        assert ("MEDIA" in targeted) == content.has_figures
        assert {m["kind"] for m in page["media"]} <= {"photo", "chart"}
        for axis in targeted:
            by_axis[axis] += 1
    assert by_axis["TABLE"] and by_axis["MEDIA"], "conditional axes are active on some pages"
    assert any(not {t["axis"] for t in p["targets"]} >= {"TABLE"} for p in doc["pages"]), "and inactive on others"
    failed = [c for c in doc["candidates"] if not c["rendered"]]
    assert failed and all(c["image"] is None for c in failed)
    assert "judge_prompt" not in doc


def test_candidates_differ_visibly_between_systems(tmp_path: Path) -> None:
    plan = demo_plan_make(seed=1, n_pages=6)
    folder = tmp_path / "b"
    demo_bundle_write(plan, folder)
    ranked = sorted(plan.systems, key=lambda s: s.ability)
    worst, best = ranked[0].id, ranked[-1].id
    worse_share, better_share = [], []
    for content in plan.pages:
        reference = Image.open(folder / "images" / f"{content.page_id}.png")
        for system, out in ((worst, worse_share), (best, better_share)):
            path = folder / "images" / f"{content.page_id}-{system}.png"
            if path.exists():
                share = changed_share(reference, Image.open(path))
                assert share > 0.002, "every candidate differs from its reference"
                out.append(share)
        a, b = (folder / "images" / f"{content.page_id}-{s}.png" for s in (worst, best))
        if a.exists() and b.exists():
            assert changed_share(Image.open(a), Image.open(b)) > 0.002
    assert np.mean(worse_share) > np.mean(better_share), "the worst system strays further from the reference"


def test_plan_and_bundle_are_deterministic_in_the_seed(tmp_path: Path) -> None:
    one, two, other = (demo_plan_make(seed=s, n_pages=6) for s in (9, 9, 10))
    assert one.comparisons == two.comparisons and one.abilities == two.abilities
    assert {k: c.quality for k, c in one.candidates.items()} == {k: c.quality for k, c in two.candidates.items()}
    assert (one.comparisons, one.abilities) != (other.comparisons, other.abilities)
    demo_bundle_write(one, tmp_path / "one")
    demo_bundle_write(two, tmp_path / "two")
    assert (tmp_path / "one" / "study.json").read_bytes() == (tmp_path / "two" / "study.json").read_bytes()
    for path in sorted((tmp_path / "one" / "images").iterdir()):
        a = np.asarray(Image.open(path))
        b = np.asarray(Image.open(tmp_path / "two" / "images" / path.name))
        assert np.array_equal(a, b), path.name


# --- simulation ---------------------------------------------------------------------------------


def _evidence(diff: float) -> PairEvidence:
    axes = ("GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION", "TABLE")
    return evidence_for(quality_a=diff, quality_b=0.0, penalty_a={}, penalty_b={"TABLE": 2.0}, active_axes=axes)


def test_judge_reply_speaks_in_display_terms_and_canonicalizes_back() -> None:
    sharp = JudgeProfile("sharp", "x", "m", noise=0.05, position_bias=0.0, tie_band=0.3, prose_rate=0.0,
                         fence_rate=0.0, axis_error_rate=0.0, note="")
    evidence = _evidence(3.0)
    primary = json.loads(judge_reply(profile=sharp, evidence=evidence, order="primary", rng=random.Random(1)))
    swapped = json.loads(judge_reply(profile=sharp, evidence=evidence, order="swapped", rng=random.Random(1)))
    assert primary["winner"] == "A" and swapped["winner"] == "B"
    assert [a["id"] for a in primary["axes"]] == list(evidence.active_axes)
    assert all(a["score"] >= 0 for a in primary["axes"]) and all(a["score"] <= 0 for a in swapped["axes"])
    for order, reply in (("primary", primary), ("swapped", swapped)):
        answer = canonical_answer(json.dumps(reply), active_axes=evidence.active_axes, order=order)
        assert answer.winner == "A"
        assert dict(answer.axes)["TABLE"] > 0


def test_judge_profiles_produce_some_invalid_replies_and_all_families() -> None:
    assert len(JUDGE_PROFILES) >= 4 and len({j.family for j in JUDGE_PROFILES}) >= 3
    chatty = next(j for j in JUDGE_PROFILES if j.prose_rate > 0)
    outcomes = []
    for k in range(300):
        raw = judge_reply(profile=chatty, evidence=_evidence(0.5), order="primary", rng=call_rng(1, "t", k))
        try:
            canonical_answer(raw, active_axes=_evidence(0.5).active_axes, order="primary")
            outcomes.append(True)
        except InvalidReply:
            outcomes.append(False)
    assert 0 < outcomes.count(False) < 60


def test_position_biased_judge_prefers_the_left_image() -> None:
    biased = next(j for j in JUDGE_PROFILES if j.position_bias >= 0.5)
    evidence = _evidence(0.0)
    left = [json.loads(unwrap_fence(judge_reply(profile=biased, evidence=evidence, order="primary", rng=call_rng(2, k))))["winner"]
            for k in range(400)]
    assert left.count("A") > 1.5 * left.count("B")


def test_simulated_raters_recover_the_abilities() -> None:
    """Empirical win rates from simulated answers order the systems like their abilities."""
    plan = demo_plan_make(seed=4, n_pages=40)
    raters = rater_profiles(10, 4)
    wins: dict[str, float] = defaultdict(float)
    shown: dict[str, int] = defaultdict(int)
    for k, c in enumerate(plan.comparisons):
        ca, cb = plan.candidates[(c.page, c.a)], plan.candidates[(c.page, c.b)]
        evidence = evidence_for(quality_a=ca.quality, quality_b=cb.quality, penalty_a=ca.axis_penalty,
                                penalty_b=cb.axis_penalty, active_axes=plan.active_axes(c.page))
        rater = raters[k % len(raters)]
        swapped = k % 2 == 1
        answer = rater_answer(profile=rater, evidence=evidence, swapped=swapped, rng=call_rng(4, k))
        if answer.verdict == "CANNOT_JUDGE":
            continue
        label = {"A": "B", "B": "A"}.get(answer.verdict, answer.verdict) if swapped else answer.verdict
        x = {"A": 1.0, "TIE": 0.5, "B": 0.0}[label]
        wins[c.a] += x
        wins[c.b] += 1 - x
        shown[c.a] += 1
        shown[c.b] += 1
    ids = sorted(plan.abilities)
    rho = spearmanr([plan.abilities[s] for s in ids], [wins[s] / shown[s] for s in ids])[0]
    assert rho > 0.8


# --- the command, through the real services -------------------------------------------------------


def test_demo_study_through_the_services(db: None) -> None:
    """One demo (16 pages) built by the command, checked from every side (it takes a few seconds)."""
    out = io.StringIO()
    call_command("make_demo_study", "--slug", "demo-test", "--seed", "1", "--pages", str(SMALL), stdout=out)
    demo = Study.objects.get(slug="demo-test")
    assert "study: demo-test" in out.getvalue()
    assert "participant link: http" in out.getvalue() and demo.link_token in out.getvalue()
    check_shape(demo)
    check_votes(demo)
    check_judge_outputs(demo)
    check_recovery(demo)


def _system_pair(comparison: Comparison) -> tuple[str, str]:
    return comparison.candidate_a.system.external_id, comparison.candidate_b.system.external_id


def check_shape(demo: Study) -> None:
    assert demo.systems.count() == 6 and demo.pages.count() == SMALL
    assert list(Axis.objects.filter(study=demo).values_list("axis_id", flat=True)) == [a["id"] for a in AXES]
    assert demo.judge_prompt == ""
    truth = demo.options["demo"]
    assert truth["seed"] == 1 and set(truth["abilities"]) == set(demo.systems.values_list("external_id", flat=True))
    # Failed renders exist, have no image and are in no comparison or trial.
    failed = Candidate.objects.filter(page__study=demo, rendered=False)
    assert failed.exists() and not failed.filter(image__isnull=False).exists()
    assert not Comparison.objects.filter(study=demo, candidate_a__rendered=False).exists()
    assert not Comparison.objects.filter(study=demo, candidate_b__rendered=False).exists()
    # Conditional axes are active exactly where the page has a target for them.
    pages = list(Page.objects.filter(study=demo))
    axes = list(Axis.objects.filter(study=demo))
    active_sets = [set(p.active_axis_ids(axes)) for p in pages]
    assert all({"GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION"} <= s for s in active_sets)
    assert any("TABLE" in s for s in active_sets) and any("TABLE" not in s for s in active_sets)
    # Both sets, every pair of systems in the deployment set.
    assert Comparison.objects.filter(study=demo, set="human").count() == 2 * SMALL
    deployment = Comparison.objects.filter(study=demo, set="deployment").select_related(
        "candidate_a__system", "candidate_b__system")
    assert len({frozenset(_system_pair(c)) for c in deployment}) == 15


def check_votes(demo: Study) -> None:
    for block in demo.blocks.all():
        states = sorted(Assignment.objects.filter(block=block).values_list("state", flat=True))
        assert states == ["finished"] * 5 + ["open"] * 3
    votes = Vote.objects.filter(trial__assignment__block__study=demo).select_related("trial__comparison__page")
    assert Trial.objects.filter(assignment__block__study=demo, assignment__state="finished", vote__isnull=True).count() == 0
    labels = [v.label for v in votes]
    assert labels.count("CANNOT_JUDGE") >= 1 and labels.count("TIE") >= 1
    assert votes.filter(trial__is_repeat=True).count() == 10 * 3
    assert all(v.response_ms and v.response_ms >= 1000 for v in votes)
    axes = list(Axis.objects.filter(study=demo))
    quality = demo.options["demo"]["candidate_quality"]
    agree = defaultdict(list)
    for vote in votes:
        comparison = vote.trial.comparison
        active = comparison.page.active_axis_ids(axes)
        if vote.label == "CANNOT_JUDGE":
            assert vote.axis_scores == {}
            continue
        assert sorted(vote.axis_scores) == sorted(active)
        if vote.label == "A":
            assert all(s >= 0 for s in vote.axis_scores.values())
        a, b = _system_pair(comparison)
        diff = quality[f"{comparison.page.external_id}/{a}"] - quality[f"{comparison.page.external_id}/{b}"]
        if abs(diff) > 0.8 and vote.label != "TIE":
            agree[vote.trial.swapped].append((vote.label == "A") == (diff > 0))
    # Canonical storage: clear-cut votes agree with the latent qualities whichever side was shown first.
    for swapped, hits in agree.items():
        assert len(hits) >= 10 and np.mean(hits) > 0.75, swapped


def check_judge_outputs(demo: Study) -> None:
    outputs = JudgeOutput.objects.filter(comparison__study=demo).select_related("judge", "comparison")
    judges = {o.judge.name: o.judge.family for o in outputs}
    assert len(judges) >= 4 and len(set(judges.values())) >= 3
    calls = defaultdict(set)
    for o in outputs:
        calls[(o.comparison_id, o.judge.name)].add((o.order, o.repeat))
    for comparison in Comparison.objects.filter(study=demo):
        for judge in judges:
            got = calls[(comparison.pk, judge)]
            if comparison.set == "human":
                assert got == {("primary", 0), ("primary", 1), ("swapped", 0), ("swapped", 1)}
            else:
                assert ("primary", 0) in got
    statuses = [o.status for o in outputs]
    assert statuses.count("invalid") >= 1 and statuses.count("valid") > 0.9 * len(statuses)
    # Canonical answers: the strong judge agrees with the latent qualities in both orders.
    quality = demo.options["demo"]["candidate_quality"]
    strong = min(JUDGE_PROFILES, key=lambda j: j.noise).name
    for order in ("primary", "swapped"):
        hits = []
        for o in outputs.filter(judge__name=strong, order=order, status="valid").select_related(
            "comparison__page", "comparison__candidate_a__system", "comparison__candidate_b__system"
        ):
            a, b = _system_pair(o.comparison)
            page = o.comparison.page.external_id
            diff = quality[f"{page}/{a}"] - quality[f"{page}/{b}"]
            if abs(diff) > 0.8 and o.winner != "TIE":
                hits.append((o.winner == "A") == (diff > 0))
        assert len(hits) >= 10 and np.mean(hits) > 0.8, order


def check_recovery(demo: Study) -> None:
    abilities = demo.options["demo"]["abilities"]
    ids = sorted(abilities)
    for rows in (
        [(v.trial.comparison, v.label) for v in Vote.objects.filter(
            trial__assignment__block__study=demo, trial__is_repeat=False).exclude(label="CANNOT_JUDGE").select_related(
            "trial__comparison__candidate_a__system", "trial__comparison__candidate_b__system")],
        [(o.comparison, o.winner) for o in JudgeOutput.objects.filter(
            comparison__study=demo, status="valid", order="primary", repeat=0).select_related(
            "comparison__candidate_a__system", "comparison__candidate_b__system")],
    ):
        wins: dict[str, float] = defaultdict(float)
        shown: dict[str, int] = defaultdict(int)
        for comparison, label in rows:
            a, b = _system_pair(comparison)
            x = {"A": 1.0, "TIE": 0.5, "B": 0.0}[label]
            wins[a] += x
            wins[b] += 1 - x
            shown[a] += 1
            shown[b] += 1
        rho = spearmanr([abilities[s] for s in ids], [wins[s] / shown[s] for s in ids])[0]
        assert rho > 0.8


def test_demo_is_deterministic_in_the_seed(db: None) -> None:
    def snapshot(slug: str) -> tuple[object, ...]:
        study = Study.objects.get(slug=slug)
        comparisons = sorted(
            (c.external_id, c.page.external_id, *_system_pair(c), c.set)
            for c in Comparison.objects.filter(study=study).select_related("page", "candidate_a__system", "candidate_b__system")
        )
        images = sorted(
            (c.page.external_id, c.system.external_id, c.image.sha256 if c.image else None)
            for c in Candidate.objects.filter(page__study=study).select_related("page", "system", "image")
        )
        votes = sorted(
            (v.trial.assignment.rater.external_id, v.trial.comparison.external_id, v.trial.is_repeat, v.label,
             json.dumps(v.axis_scores, sort_keys=True), v.confidence)
            for v in Vote.objects.filter(trial__assignment__block__study=study).select_related(
                "trial__assignment__rater", "trial__comparison")
        )
        outputs = sorted(
            (o.judge.name, o.comparison.external_id, o.order, o.repeat, o.raw, o.status)
            for o in JudgeOutput.objects.filter(comparison__study=study).select_related("judge", "comparison")
        )
        return comparisons, images, votes, outputs

    for slug in ("same-1", "same-2"):
        demo_study_create(slug=slug, seed=2, n_pages=4, participant_link=False)
    first, second = snapshot("same-1"), snapshot("same-2")
    assert first == second
    assert all(part for part in first)
    # (A different seed gives a different plan: test_plan_and_bundle_are_deterministic_in_the_seed.)


def test_with_users_creates_the_researcher_login(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARBITER_DEMO_PASSWORD", "demo-pass-123")
    result = demo_study_create(
        slug="with-users", seed=1, n_pages=4, votes=False, judges=False, with_users=True, participant_link=False
    )
    user = get_user_model().objects.get(username="researcher")
    assert user.is_staff and user.check_password("demo-pass-123")
    assert user.groups.filter(name="researcher").exists()
    assert result.study.researchers.filter(pk=user.pk).exists()
    assert result.logins == [("researcher", "(password from $ARBITER_DEMO_PASSWORD)")]
    assert not Vote.objects.filter(trial__assignment__block__study=result.study).exists()
    assert not JudgeOutput.objects.filter(comparison__study=result.study).exists()
    assert result.participant_url is None
    # Without the variable the password is reset to a new random one, printed once.
    monkeypatch.delenv("ARBITER_DEMO_PASSWORD")
    _, password = demo_researcher_ensure(study=result.study)
    user.refresh_from_db()
    assert password != "demo-pass-123" and user.check_password(password)
    assert get_user_model().objects.filter(username="researcher").count() == 1


def test_command_refuses_an_existing_slug_in_one_line(db: None) -> None:
    Study.objects.create(slug="demo-test", title="taken")
    with pytest.raises(CommandError) as error:
        call_command("make_demo_study", "--slug", "demo-test", "--pages", "6")
    assert "already exists" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(CommandError):
        call_command("make_demo_study", "--slug", "too-few", "--systems", "1")
    assert not Study.objects.filter(slug="too-few").exists()
