"""Candidate versions end to end (paper B.5): update → superseded outputs → counted refresh → report.

A small study is imported from a bundle (3 systems, 6 pages, every pair on every page: 18
comparisons, 6 of them in the human study), judged by two judges on a loopback fake server,
labelled by imported human votes, calibrated into a frozen coefficient set and ranked. Then one
candidate image is replaced with ``import_study --update``: exactly the comparisons touching it
lose their outputs (superseded, not deleted), ``run_judges`` calls exactly those again, the human
votes keep the version they were shown, the calibration inputs do not change, and the
``leaderboard --compare-to`` report counts refreshed and retained outputs and the rank changes.
"""

from __future__ import annotations

import io
import json
import shutil
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from PIL import Image, ImageDraw

from annotation.errors import ValidationFailed
from annotation.models import AuditEvent, Candidate, CandidateVersion, Comparison, Study, Trial
from calibration.models import CoefficientSet
from calibration.selectors.calibration import human_set_judge_outputs
from judges.models import JudgeOutput
from ranking.models import Leaderboard
from ranking.versions import ranks_unchanged, removed_systems, system_changes
from tests.judges.factories import make_judge
from tests.judges.fake_provider import REFERENCE_COLOUR, SYSTEM_COLOURS, FakeProvider

SYSTEMS = ("alpha", "beta", "gamma")
PAGES = [f"p{i}" for i in range(6)]
HUMAN_PAGES = ("p0", "p1")
AXES = [{"id": "GLOBAL_LAYOUT_FIDELITY", "scope": "fixed", "description": "layout"}]


@pytest.fixture
def provider(settings, monkeypatch):  # type: ignore[no-untyped-def]
    settings.ARBITER_JUDGE_BACKOFF_BASE = 0.01
    settings.ARBITER_JUDGE_BACKOFF_CAP = 0.05
    monkeypatch.setenv("ARBITER_TEST_JUDGE_KEY", "sk-test-secret-0123456789")
    server = FakeProvider().start()
    yield server
    server.stop()


def picture(colour: tuple[int, int, int], *, mark: int = 0) -> bytes:
    """A 400×520 image of one colour; ``mark`` draws a small corner box (a re-rendered version)
    away from the points the fake provider samples, so it still reads as the same system."""
    image = Image.new("RGB", (400, 520), colour)
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, 380, 60), fill=(40, 40, 40))
    if mark:
        draw.rectangle((330, 470, 330 + 10 * mark, 500), fill=(0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_bundle(folder: Path) -> Path:
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "ref.png").write_bytes(picture(REFERENCE_COLOUR))
    for system in SYSTEMS:
        (folder / "images" / f"{system}.png").write_bytes(picture(SYSTEM_COLOURS[system]))
    comparisons = [
        {
            "id": f"{page}-{a}-{b}",
            "page": page,
            "a": a,
            "b": b,
            "set": "human" if page in HUMAN_PAGES else "deployment",
        }
        for page in PAGES
        for a, b in combinations(SYSTEMS, 2)
    ]
    doc = {
        "slug": "versions",
        "title": "Candidate versions",
        "kind": "pairwise_reference",
        "instructions_md": "Pick the more faithful rendering.",
        "axes": AXES,
        "systems": [{"id": s, "name": f"System {s}"} for s in SYSTEMS],
        "pages": [{"id": p, "image": "images/ref.png"} for p in PAGES],
        "candidates": [
            {"page": p, "system": s, "image": f"images/{s}.png", "rendered": True}
            for p in PAGES
            for s in SYSTEMS
        ],
        "comparisons": comparisons,
    }
    (folder / "study.json").write_text(json.dumps(doc, indent=1))
    return folder


def replace_candidate(
    bundle: Path, target: Path, *, page: str, system: str, mark: int = 1, **extra: Any
) -> Path:
    shutil.copytree(bundle, target)
    name = f"images/{system}-{page}-v{mark}.png"
    (target / name).write_bytes(picture(SYSTEM_COLOURS[system], mark=mark))
    doc = json.loads((target / "study.json").read_text())
    for candidate in doc["candidates"]:
        if (candidate["page"], candidate["system"]) == (page, system):
            candidate["image"] = name
            candidate.update(extra)
    (target / "study.json").write_text(json.dumps(doc, indent=1))
    return target


def command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def votes_csv(path: Path) -> Path:
    """Three raters vote on every human comparison: canonical A always (axis score +1)."""
    lines = [
        "comparison,page,system_a,system_b,block,rater,position,swapped,repeat,label,confidence,rationale,"
        "response_ms,axis:GLOBAL_LAYOUT_FIDELITY"
    ]
    human = [(p, a, b) for p in HUMAN_PAGES for a, b in combinations(SYSTEMS, 2)]
    for r in range(3):
        for position, (page, a, b) in enumerate(human, start=1):
            label = "A" if (r + position) % 3 else "TIE"
            lines.append(f"{page}-{a}-{b},{page},{a},{b},block-1,r{r},{position},0,0,{label},4,,5000,1")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def judged(tmp_path: Path, provider: FakeProvider) -> dict[str, Any]:
    bundle = write_bundle(tmp_path / "bundle")
    assert command("import_study", str(bundle)).strip() == "versions"
    make_judge("judge-x", base_url=provider.url, family="acme", concurrency=1)
    make_judge("judge-y", base_url=provider.url, family="other", concurrency=1)
    for judge in ("judge-x", "judge-y"):
        command(
            "run_judges",
            "versions",
            "--judge",
            judge,
            "--set",
            "human",
            "--orders",
            "primary,swapped",
            "--repeats",
            "2",
        )
        command("run_judges", "versions", "--judge", judge, "--set", "deployment", "--orders", "primary")
    command("import_votes", "versions", str(votes_csv(tmp_path / "votes.csv")))
    study = Study.objects.get(slug="versions")
    CoefficientSet.objects.create(
        study=study,
        name="v1",
        coefficients={"judge-x": 0.6, "judge-y": 0.4},
        report={"judges": ["judge-x", "judge-y"]},
        source="import",
    )
    return {"study": study, "bundle": bundle, "tmp": tmp_path, "provider": provider}


def touching(study: Study, page: str, system: str) -> set[str]:
    return {
        c.external_id
        for c in Comparison.objects.filter(study=study, page__external_id=page).select_related(
            "candidate_a__system", "candidate_b__system"
        )
        if system in (c.candidate_a.system.external_id, c.candidate_b.system.external_id)
    }


@pytest.mark.django_db
def test_a_candidate_update_supersedes_exactly_the_touched_outputs_and_run_judges_refreshes_them(
    judged: dict[str, Any],
) -> None:
    study, provider, tmp = judged["study"], judged["provider"], judged["tmp"]
    # Human set: 6 comparisons × 2 orders × 2 repeats; deployment: 12 × primary; per judge.
    assert JudgeOutput.objects.filter(status="valid").count() == 2 * (6 * 4 + 12)
    calls_before = len(provider.requests)
    calibration_before = human_set_judge_outputs(study=study).sort_values(
        ["comparison", "judge", "order", "repeat"]
    )

    # beta on p0 (human) is re-rendered; it is in 2 comparisons (alpha-beta, beta-gamma).
    update = replace_candidate(
        judged["bundle"],
        tmp / "update",
        page="p0",
        system="beta",
        version_date="2026-11-30",
        version_note="fonts fixed",
    )
    out = command("import_study", str(update), "--update")
    assert out.strip() == (
        "versions: 1 candidate(s) replaced, 2 comparison(s) touched (2 of the human study), 16 outputs superseded"
    )
    touched = touching(study, "p0", "beta")
    assert touched == {"p0-alpha-beta", "p0-beta-gamma"}
    superseded = JudgeOutput.all_versions.filter(superseded=True)
    assert set(superseded.values_list("comparison__external_id", flat=True)) == touched
    assert superseded.count() == 2 * 2 * 4  # kept, not deleted: 2 comparisons × 2 judges × 4 calls
    assert not JudgeOutput.objects.filter(comparison__external_id__in=touched).exists()
    candidate = Candidate.objects.get(page__study=study, page__external_id="p0", system__external_id="beta")
    assert candidate.version == 2
    versions = list(CandidateVersion.objects.filter(candidate=candidate).order_by("number"))
    assert [(v.number, v.note, str(v.date)) for v in versions] == [
        (1, "", "None"),
        (2, "fonts fixed", "2026-11-30"),
    ]
    assert versions[0].image_id != versions[1].image_id == candidate.image_id
    # Pair identities, orientations and the other candidates stay.
    assert Comparison.objects.filter(study=study).count() == 18
    assert Candidate.objects.filter(page__study=study, version=1).count() == 17
    assert AuditEvent.objects.filter(action="study.update_candidates").count() == 1

    # Human votes stay on the version their trial showed; the calibration set is unchanged.
    trials = Trial.objects.filter(comparison__external_id__in=touched, vote__isnull=False)
    assert trials.count() == 6 and set(trials.values_list("version_a", "version_b")) == {(1, 1)}
    calibration_after = human_set_judge_outputs(study=study).sort_values(
        ["comparison", "judge", "order", "repeat"]
    )
    assert calibration_after.reset_index(drop=True).equals(calibration_before.reset_index(drop=True))

    # run_judges makes exactly the successors: 8 calls per judge (2 comparisons × 2 orders × 2 repeats).
    for judge in ("judge-x", "judge-y"):
        out = command("run_judges", "versions", "--judge", judge, "--refresh")
        assert "8 calls, 8 new, 0 already done, 8 to run" in out
    new_calls = provider.requests[calls_before:]
    assert len(new_calls) == 16 and provider.problems == []
    assert JudgeOutput.objects.filter(comparison__external_id__in=touched, status="valid").count() == 16
    # A second refresh has nothing left to call; the usual run sees nothing missing either.
    assert "8 calls, 0 new, 8 already done, 0 to run" in command(
        "run_judges", "versions", "--judge", "judge-x", "--refresh"
    )
    out = command("run_judges", "versions", "--judge", "judge-x", "--set", "human", "--repeats", "2")
    assert "24 calls, 0 new, 24 already done" in out
    assert len(provider.requests) == calls_before + 16
    # Still: calibration reads the outputs on the versions the raters saw.
    again = human_set_judge_outputs(study=study).sort_values(["comparison", "judge", "order", "repeat"])
    assert again.reset_index(drop=True).equals(calibration_before.reset_index(drop=True))


@pytest.mark.django_db
def test_without_refresh_a_usual_run_also_makes_only_the_superseded_calls(judged: dict[str, Any]) -> None:
    provider, tmp = judged["provider"], judged["tmp"]
    command(
        "import_study",
        str(replace_candidate(judged["bundle"], tmp / "u", page="p3", system="gamma")),
        "--update",
    )
    before = len(provider.requests)
    out = command(
        "run_judges", "versions", "--judge", "judge-x", "--set", "deployment", "--orders", "primary"
    )
    assert "12 calls, 2 new, 10 already done, 2 to run" in out
    assert len(provider.requests) == before + 2


@pytest.mark.django_db
def test_leaderboard_compare_to_reports_refreshed_retained_human_changes_and_rank_moves(
    judged: dict[str, Any],
) -> None:
    study, provider, tmp = judged["study"], judged["provider"], judged["tmp"]
    first = json.loads(_leaderboard(tmp / "lb1.json"))
    earlier = Leaderboard.objects.get(study=study)
    assert earlier.status == "done" and earlier.result["systems"] == first["systems"]
    # The deployment comparisons came with the bundle, before any judge ran: nothing to reuse.
    assert first["judge_outputs"] == {
        "scoring_outputs": 36,
        "reused": 0,
        "new": 36,
        "deployment_scheduled_at": first["judge_outputs"]["deployment_scheduled_at"],
    }

    # Replace gamma on three pages; the refreshed judges now prefer gamma's new renders strongly.
    bundle = judged["bundle"]
    for k, page in enumerate(("p0", "p2", "p4")):
        bundle = replace_candidate(bundle, tmp / f"u{k}", page=page, system="gamma", mark=k + 1)
        command("import_study", str(bundle), "--update")
    touched = set().union(*(touching(study, p, "gamma") for p in ("p0", "p2", "p4")))
    assert len(touched) == 6
    provider.winner = "B"  # gamma is canonical B in every pair it is in (alpha-gamma, beta-gamma)
    for judge in ("judge-x", "judge-y"):
        command("run_judges", "versions", "--judge", judge, "--refresh")

    out = _leaderboard(tmp / "lb2.json", "--compare-to", str(earlier.pk), stdout=True)
    report = json.loads((tmp / "lb2.json").read_text())
    vs = report["version_sensitivity"]
    assert vs["compared_to"]["leaderboard"] == earlier.pk
    assert vs["comparisons_touched"] == 6
    assert {row["comparison"] for row in vs["touched"]} == touched
    assert vs["outputs"] == {"refreshed": 12, "retained": 24, "new": 0, "superseded": 2 * 2 * 4 + 4 * 2}
    # p0 is a human page: its two gamma comparisons changed version, their 3 votes each on v1.
    assert vs["n_human_comparisons_changed"] == 2
    assert {
        row["comparison"]: (row["votes_on_earlier_versions"], row["votes_on_current_versions"])
        for row in vs["human_comparisons_changed"]
    } == {"p0-alpha-gamma": (3, 0), "p0-beta-gamma": (3, 0)}
    # Rank changes and score deltas, computed from the two reports.
    expected = system_changes(first["systems"], report["systems"])
    assert vs["systems"] == expected
    by_system = {row["system"]: row for row in vs["systems"]}
    before = {row["system"]: row for row in first["systems"]}
    after = {row["system"]: row for row in report["systems"]}
    for system in SYSTEMS:
        assert by_system[system]["score_delta"] == pytest.approx(
            after[system]["score"] - before[system]["score"]
        )
        assert by_system[system]["rank_change"] == before[system]["rank"] - after[system]["rank"]
    # Before: gamma lost every comparison (the judges said A, gamma is always B); now it wins 6.
    assert [(r["system"], r["rank_before"], r["rank"], r["rank_change"]) for r in vs["systems"]] == [
        ("alpha", 1, 1, 0),
        ("gamma", 3, 2, 1),
        ("beta", 2, 3, -1),
    ]
    assert by_system["gamma"]["score_delta"] > 0 > by_system["alpha"]["score_delta"]
    assert vs["ranks_unchanged"] is False
    assert "6 comparisons touched (2 of the human study), outputs refreshed 12, retained 24, new 0" in out


def _leaderboard(json_path: Path, *extra: str, stdout: bool = False) -> str:
    out = command(
        "leaderboard",
        "versions",
        "--coefficients",
        "v1",
        "--json",
        str(json_path),
        "--bootstrap",
        "50",
        "--seed",
        "3",
        *extra,
    )
    return out if stdout else json_path.read_text()


@pytest.mark.django_db
def test_a_deployment_scoring_reuses_the_calibration_outputs_and_counts_them(
    tmp_path: Path, provider: FakeProvider
) -> None:
    bundle = write_bundle(tmp_path / "bundle")
    doc = json.loads((bundle / "study.json").read_text())
    doc["comparisons"] = [c for c in doc["comparisons"] if c["set"] == "human"]
    (bundle / "study.json").write_text(json.dumps(doc))
    command("import_study", str(bundle))
    study = Study.objects.get(slug="versions")
    make_judge("judge-x", base_url=provider.url, concurrency=1)
    command(
        "run_judges",
        "versions",
        "--judge",
        "judge-x",
        "--set",
        "human",
        "--orders",
        "primary,swapped",
        "--repeats",
        "2",
    )
    calls = len(provider.requests)
    assert calls == 24
    command("make_schedule", "versions", "--comparisons", "18", "--seed", "5")
    out = command("run_judges", "versions", "--judge", "judge-x", "--orders", "primary")
    # The 6 human comparisons' primary outputs exist: only the 12 new deployment ones are called.
    assert "18 calls, 12 new, 6 already done, 12 to run" in out
    assert len(provider.requests) == calls + 12
    CoefficientSet.objects.create(study=study, name="v1", coefficients={"judge-x": 1.0}, source="import")
    report = json.loads(_leaderboard(tmp_path / "lb.json"))
    assert report["judge_outputs"]["scoring_outputs"] == 18
    assert report["judge_outputs"]["reused"] == 6 and report["judge_outputs"]["new"] == 12


@pytest.mark.django_db
def test_compare_to_bad_input_is_one_line(judged: dict[str, Any]) -> None:
    tmp = judged["tmp"]
    for value, message in (("abc", "expected a leaderboard id"), ("999", "has no leaderboard 999")):
        with pytest.raises(CommandError, match=message):
            _leaderboard(tmp / "x.json", "--compare-to", value)
    assert not (tmp / "x.json").exists()
    queued = Leaderboard.objects.create(
        study=judged["study"], coefficient_set=CoefficientSet.objects.get(name="v1")
    )
    with pytest.raises(CommandError, match="only a finished leaderboard"):
        _leaderboard(tmp / "x.json", "--compare-to", str(queued.pk))


def test_system_changes_signs_and_new_systems() -> None:
    before = [{"system": "a", "rank": 1, "score": 10.0}, {"system": "b", "rank": 2, "score": -10.0}]
    after = [
        {"system": "b", "rank": 1, "score": 5.0},
        {"system": "a", "rank": 2, "score": -4.0},
        {"system": "c", "rank": 3, "score": -1.0},
    ]
    assert system_changes(before, after, earlier="leaderboard 7") == [
        {
            "system": "b",
            "rank_before": 2,
            "rank": 1,
            "rank_change": 1,
            "score_before": -10.0,
            "score": 5.0,
            "score_delta": 15.0,
            "reason": None,
        },
        {
            "system": "a",
            "rank_before": 1,
            "rank": 2,
            "rank_change": -1,
            "score_before": 10.0,
            "score": -4.0,
            "score_delta": -14.0,
            "reason": None,
        },
        {
            "system": "c",
            "rank_before": None,
            "rank": 3,
            "rank_change": None,
            "score_before": None,
            "score": -1.0,
            "score_delta": None,
            "reason": "not ranked by leaderboard 7: new since then, so it has no earlier rank or score to compare",
        },
    ]


def test_removed_systems_are_noted_and_ranks_unchanged_says_why_not() -> None:
    """Issue 29: a removed system gets a note, a new one a reason, and an empty comparison is not
    "unchanged"."""
    before = [
        {"system": "a", "rank": 1, "score": 10.0},
        {"system": "b", "rank": 2, "score": 0.0},
        {"system": "d", "rank": 3, "score": -10.0},
    ]
    same = [{"system": "a", "rank": 1, "score": 9.0}, {"system": "b", "rank": 2, "score": 1.0}]
    removed = removed_systems(before, same, earlier=7)
    assert removed == [
        {
            "system": "d",
            "rank_before": 3,
            "score_before": -10.0,
            "note": "ranked by leaderboard 7, not by this one (it has no scored comparison now)",
        }
    ]
    unchanged, why = ranks_unchanged(system_changes(before, same), removed, earlier=7)
    assert unchanged is False and why == "1 system(s) of leaderboard 7 not ranked now: d"
    # Same systems, same ranks: true with no reason.
    assert ranks_unchanged(system_changes(before, before), [], earlier=7) == (True, None)
    # A new system: false, named.
    grown = [*before, {"system": "e", "rank": 4, "score": -20.0}]
    unchanged, why = ranks_unchanged(system_changes(before, grown), removed_systems(before, grown, earlier=7), earlier=7)
    assert unchanged is False and why == "1 system(s) not in leaderboard 7: e"
    # Nothing to compare: null with a reason, never true.
    unchanged, why = ranks_unchanged([], [], earlier=7)
    assert unchanged is None and why is not None and "nothing to compare" in why


def test_the_version_sensitivity_card_shows_reasons_and_removed_systems() -> None:
    from django.template.loader import render_to_string

    before = [{"system": "a", "rank": 1, "score": 10.0}, {"system": "gone", "rank": 2, "score": -10.0}]
    after = [{"system": "a", "rank": 2, "score": 1.0}, {"system": "fresh", "rank": 1, "score": 3.0}]
    systems = system_changes(before, after, earlier="leaderboard 7")
    removed = removed_systems(before, after, earlier=7)
    unchanged, why = ranks_unchanged(systems, removed, earlier=7)
    vs = {
        "compared_to": {"leaderboard": 7, "computed_at": "2026-12-03T00:00:00"},
        "comparisons_touched": 0,
        "outputs": {"refreshed": 0, "retained": 0, "new": 0, "superseded": 0},
        "n_human_comparisons_changed": 0,
        "ranks_unchanged": unchanged,
        "ranks_unchanged_reason": why,
        "systems": systems,
        "removed_systems": removed,
    }
    html = render_to_string("ranking/version_sensitivity.html", {"vs": vs})
    assert "Ranks differ: 1 system(s) changed rank: a; 1 system(s) not in leaderboard 7: fresh" in html
    assert "No longer ranked (in leaderboard 7 only)" in html and "<code>gone</code> (rank 2" in html
    assert "(new)" in html and "All point ranks are unchanged" not in html
    vs.update(systems=[], removed_systems=[], ranks_unchanged=None, ranks_unchanged_reason="nothing here")
    html = render_to_string("ranking/version_sensitivity.html", {"vs": vs})
    assert "No ranks to compare: nothing here." in html and "All point ranks are unchanged" not in html


@pytest.mark.django_db
def test_the_leaderboard_page_shows_the_version_sensitivity_report(
    judged: dict[str, Any], researcher: Any
) -> None:
    from django.test import Client

    study, tmp = judged["study"], judged["tmp"]
    _leaderboard(tmp / "lb1.json")
    command(
        "import_study",
        str(replace_candidate(judged["bundle"], tmp / "u", page="p3", system="gamma")),
        "--update",
    )
    for judge in ("judge-x", "judge-y"):
        command("run_judges", "versions", "--judge", judge, "--refresh")
    _leaderboard(tmp / "lb2.json")
    first, second = Leaderboard.objects.filter(study=study).order_by("pk")
    study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    url = f"/studies/versions/leaderboards/{second.pk}/"
    page = client.get(url).content.decode()
    assert 'name="compare_to"' in page and f'value="{first.pk}"' in page and "version-sensitivity" not in page
    assert "36 judge outputs" not in page and "of which 0 reused" in page
    page = client.get(url, {"compare_to": first.pk}).content.decode()
    assert f"Version sensitivity against leaderboard {first.pk}" in page
    assert "touched\n    <strong>2</strong> comparisons" in page
    assert "refreshed\n    <strong>4</strong>, retained <strong>32</strong>" in page
    response = client.get(url, {"compare_to": "nope"})
    assert response.status_code == 400 and "expected a leaderboard id" in response.content.decode()
    # Another researcher's study does not exist for them.
    other = Client()
    other.force_login(type(researcher).objects.create_user("someone-else"))
    assert other.get(url, {"compare_to": first.pk}).status_code in (302, 403, 404)


@pytest.mark.django_db
def test_queued_leaderboards_carry_the_reuse_counts_and_compare_like_the_command(
    judged: dict[str, Any],
) -> None:
    from ranking.tasks import leaderboard_run_task
    from ranking.versions import leaderboard_version_sensitivity

    study, tmp = judged["study"], judged["tmp"]
    cset = CoefficientSet.objects.get(study=study, name="v1")
    first = Leaderboard.objects.create(study=study, coefficient_set=cset, resamples=50, seed=3)
    assert leaderboard_run_task(first.pk) == "done"
    first.refresh_from_db()
    assert first.result["judge_outputs"]["scoring_outputs"] == 36
    command(
        "import_study",
        str(replace_candidate(judged["bundle"], tmp / "u", page="p1", system="alpha")),
        "--update",
    )
    for judge in ("judge-x", "judge-y"):
        command("run_judges", "versions", "--judge", judge, "--refresh")
    second = Leaderboard.objects.create(study=study, coefficient_set=cset, resamples=50, seed=3)
    assert leaderboard_run_task(second.pk) == "done"
    second.refresh_from_db()
    vs = leaderboard_version_sensitivity(study=study, leaderboard=second, compare_to=first.pk)
    assert vs["comparisons_touched"] == 2 and vs["n_human_comparisons_changed"] == 2
    assert vs["outputs"] == {"refreshed": 4, "retained": 32, "new": 0, "superseded": 2 * 2 * 4}
    # The same report from the command, against the same earlier leaderboard.
    report = json.loads(_leaderboard(tmp / "lb.json", "--compare-to", str(first.pk)))
    assert report["version_sensitivity"]["outputs"] == vs["outputs"]
    assert report["version_sensitivity"]["systems"] == vs["systems"]
    # A leaderboard is compared with an earlier one only.
    with pytest.raises(ValidationFailed, match=f"leaderboard {second.pk} is not older than this one"):
        leaderboard_version_sensitivity(study=study, leaderboard=first, compare_to=second.pk)
