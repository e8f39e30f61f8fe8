"""The ``plan_study`` command: stated assumptions or a pilot study -> table, JSON, CSV, figure;
one-line errors; it never writes to a study."""

from __future__ import annotations

import csv
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment, Study, Trial, Vote
from annotation.selectors.votes import votes_frame
from tests.ranking.rank_factories import make_ranked_study

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("plan_study", *args, stdout=out)
    return out.getvalue()


def test_stated_assumptions_give_a_table_json_csv_and_figure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = _run(
        "--target",
        "top_k",
        "--k",
        "2",
        "--systems",
        "5",
        "--studies",
        "30",
        "--seed",
        "3",
        "--json",
        str(tmp_path / "plan.json"),
        "--csv",
        str(tmp_path / "plan.csv"),
        "--plot",
        str(tmp_path / "plan.svg"),
    )
    report = json.loads((tmp_path / "plan.json").read_text())
    assert report["writes_to_study"] is False and report["target"]["k"] == 2
    assert report["votes_ci95"][0] <= report["votes_needed"] <= report["votes_ci95"][1]
    assert report["raters_needed"] == -(-report["votes_needed"] // 234)
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert len(rows) == len(report["curve"]) and float(rows[-1]["probability"]) >= 0.9
    assert (tmp_path / "plan.svg").read_text().lstrip().startswith("<?xml")
    assert f"needed: {report['votes_needed']} main votes" in out
    # Counts agree with their noun ("1 rater, 1 block", never "1 raters, 1 blocks").
    assert "1 raters" not in out and "1 blocks" not in out
    raters = report["raters_needed"]
    assert f"{raters} rater{'' if raters == 1 else 's'}," in out
    assert report["gold_trials_for_90pct_clickers"] == {"A/B": 12, "A/B/TIE": 7}
    # The gold suggestion at the default accuracy on gold (93 %), and the four accuracies in the JSON.
    assert "gold: 14 gold trials per rater for raters 93% right on gold (gold_honest_error 0.07)" in out
    assert [(g["accuracy"], g["gold_trials"]) for g in report["gold_plans"]] == [(0.9, 17), (0.93, 14), (0.95, 12), (0.97, 9)]
    assert all(g["false_exclusion"] <= 0.01 and g["ab_clickers_caught"] >= 0.9 for g in report["gold_plans"])
    # Seeded: the same command gives the same plan.
    again = _run("--target", "top_k", "--k", "2", "--systems", "5", "--studies", "30", "--seed", "3")
    assert f"needed: {report['votes_needed']} main votes" in again


def test_a_pilot_study_plans_from_its_votes_and_is_left_untouched(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("pilot-plan", n_pages=10, n_human_pages=8)
    from tests.ranking.rank_factories import add_votes

    add_votes(ranked, rng=np.random.default_rng(1), n_raters=3)
    before = (Study.objects.count(), Assignment.objects.count(), Trial.objects.count(), Vote.objects.count())
    study = Study.objects.get(slug="pilot-plan")
    settings_before = dict(study.settings) if hasattr(study, "settings") else None
    _run(
        "--target",
        "top_k",
        "--k",
        "1",
        "--pilot",
        "pilot-plan",
        "--studies",
        "20",
        "--json",
        str(tmp_path / "p.json"),
    )
    report = json.loads((tmp_path / "p.json").read_text())
    assert report["pilot"]["study"] == "pilot-plan" and report["pilot"]["valid_main_votes"] > 20
    scores = dict(zip(report["pilot"]["systems"], report["pilot"]["scores_elo"], strict=True))
    assert max(scores, key=scores.__getitem__) == "alpha"  # the strongest system of the factory
    after = (Study.objects.count(), Assignment.objects.count(), Trial.objects.count(), Vote.objects.count())
    assert after == before
    if settings_before is not None:
        study.refresh_from_db()
        assert dict(study.settings) == settings_before


def test_a_pilot_is_read_after_its_saved_exclusion_rules(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A straight-lining rater the pilot's saved rules exclude is not in the plan's assumptions (as in
    every report of the study); the JSON and the command's output say what was left out."""
    ranked = make_ranked_study("pilot-rules", with_votes=True)
    junk = Vote.objects.filter(trial__assignment__rater__external_id="r00", trial__is_repeat=False)
    junk.filter(trial__swapped=False).update(label="A")  # "A" shown on every trial
    junk.filter(trial__swapped=True).update(label="B")
    frame = votes_frame(study=ranked.study)  # voided assignments already left out
    main = frame[~frame["is_repeat"] & frame["label"].isin(["A", "TIE", "B"])]
    kept_votes = int((main["rater"] != "r00").sum())
    args = ("--target", "top_k", "--k", "1", "--pilot", "pilot-rules", "--studies", "10")
    _run(*args, "--json", str(tmp_path / "raw.json"))
    raw = json.loads((tmp_path / "raw.json").read_text())["pilot"]
    assert raw["exclusions"] is None  # no saved rules and no gold: every vote
    all_votes = raw["valid_main_votes"]
    study = ranked.study
    study.options = {**(study.options or {}), "exclusion_rules": {
        "straightline_share": 0.9, "straightline_min_trials": 5, "min_median_response_ms": None}}
    study.save(update_fields=["options"])
    out = _run(*args, "--json", str(tmp_path / "p.json"))
    pilot = json.loads((tmp_path / "p.json").read_text())["pilot"]
    assert pilot["valid_main_votes"] == kept_votes < all_votes
    ex = pilot["exclusions"]
    assert ex["applied_by_default"] is True and [r["participant"] for r in ex["excluded_raters"]] == ["r00"]
    assert "pilot: the study's saved exclusion rules (default; --no-rules for the raw figures) kept 2 of 3" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "top_k", "--systems", "3", "--k", "3"], "impossible with 3 systems"),
        (["--target", "top_k", "--pilot", "nope"], "no study with slug 'nope'"),
        (["--target", "top_k"], "give a pilot study or the stated assumptions"),
        (["--target", "kappa", "--systems", "4", "--probability", "1.5"], "strictly between 0 and 1"),
        (["--target", "top_k", "--systems", "4", "--plot", "/tmp/x.pdf"], "written as .svg or .png"),
        (
            ["--target", "brier", "--systems", "4", "--half-width", "0.5"],
            "Brier half-width 0.5 is impossible",
        ),
        (["--target", "brier", "--systems", "4", "--judge-accuracy", "0.7,x"], "one per judge"),
        (["--target", "top_k", "--pilot", "a", "--systems", "4"], "not both"),
        (["--target", "top_k", "--systems", "4", "--gold-accuracy", "1.2"], "accuracy on gold must lie strictly"),
    ],
)
def test_bad_input_is_one_line(args, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError) as excinfo:
        _run(*args)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_a_pilot_without_votes_is_too_small_to_fit() -> None:
    make_ranked_study("empty-pilot", n_pages=4, n_human_pages=2)
    with pytest.raises(CommandError, match=r"pilot 'empty-pilot'.*too few to fit"):
        _run("--target", "top_k", "--pilot", "empty-pilot")


def test_brier_target_from_stated_judges_and_from_a_pilot_with_judge_outputs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stated = ["--target", "brier", "--systems", "4", "--judge-accuracy", "0.8,0.6", "--raters-per-block", "3"]
    out = _run(*stated, "--half-width", "0.03", "--studies", "10", "--json", str(tmp_path / "b.json"))
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["judges"] == {"accuracy": [0.8, 0.6], "outputs_per_comparison": 4}
    assert report["comparisons_needed"] == -(-report["votes_needed"] // 3)
    assert report["judge_calls"] == report["comparisons_needed"] * 2 * 4
    assert f"{report['comparisons_needed']} comparisons" in out and "Brier" in out
    wider = _run(*stated, "--half-width", "0.06", "--studies", "10")
    assert int(wider.split("needed: ")[1].split()[0]) < report["votes_needed"]

    ranked = make_ranked_study("brier-cmd", n_pages=8, n_human_pages=8)
    from tests.ranking.rank_factories import add_votes

    add_votes(ranked, rng=np.random.default_rng(2), n_raters=3)
    before = (Vote.objects.count(), Trial.objects.count())
    _run(
        "--target",
        "brier",
        "--half-width",
        "0.04",
        "--pilot",
        "brier-cmd",
        "--studies",
        "10",
        "--json",
        str(tmp_path / "p.json"),
    )
    pilot = json.loads((tmp_path / "p.json").read_text())
    assert pilot["pilot"]["judges"] == ranked.judges and len(pilot["judges"]["accuracy"]) == 3
    assert (Vote.objects.count(), Trial.objects.count()) == before


def test_a_pilot_without_judge_outputs_is_refused_for_the_brier_target() -> None:
    from judges.models import JudgeOutput

    ranked = make_ranked_study("no-judges", n_pages=8, n_human_pages=8)
    from tests.ranking.rank_factories import add_votes

    add_votes(ranked, rng=np.random.default_rng(2), n_raters=3)
    JudgeOutput.objects.filter(comparison__study=ranked.study).delete()
    with pytest.raises(CommandError) as excinfo:
        _run("--target", "brier", "--pilot", "no-judges")
    message = str(excinfo.value)
    assert (
        "pilot 'no-judges': the Brier target needs its judge outputs" in message
        and "no judge output" in message
        and "\n" not in message
    )
