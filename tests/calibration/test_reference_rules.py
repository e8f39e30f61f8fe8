"""Issue 17: the exclusion rules for the reference kind (pairwise_reference) — pure adapter,
``agreement_report --rules`` / ``calibrate --rules``, and the flags of the rater-quality page."""

from __future__ import annotations

import io
import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command

from annotation.models import Vote
from annotation.selectors.progress import QUALITY_RULE_DEFAULTS, rater_quality
from annotation.selectors.votes import votes_frame
from stats.hygiene import HygieneRules
from stats.reference_hygiene import reference_hygiene_frame, reference_rules_apply
from tests.annotation.factories import make_rated_study
from tests.calibration.cal_factories import make_calibration_study

OFF = {"min_median_response_ms": None, "straightline_share": None}


def votes(rows: list[tuple[str, int, str, str, bool, bool, float]]) -> pd.DataFrame:
    """(rater, position, comparison, label, swapped, is_repeat, response_ms) → a votes frame."""
    return pd.DataFrame({
        "rater": [r[0] for r in rows], "position": np.array([r[1] for r in rows], dtype=np.int64),
        "comparison": [r[2] for r in rows], "label": [r[3] for r in rows],
        "swapped": np.array([r[4] for r in rows], dtype=bool), "is_repeat": np.array([r[5] for r in rows], dtype=bool),
        "response_ms": np.array([r[6] for r in rows], dtype=float),
    })


def test_frame_uses_displayed_answers_repeat_pairs_and_sides() -> None:
    v = votes([
        ("r1", 1, "c1", "A", True, False, 900.0),   # displayed B
        ("r1", 2, "c2", "TIE", False, False, 900.0),
        ("r1", 3, "c1", "B", True, True, 900.0),    # repeat of c1, canonical B != A
        ("r2", 1, "c1", "A", False, False, 900.0),
        ("r2", 2, "c1", "A", False, True, 900.0),   # repeat agrees
    ])
    f = reference_hygiene_frame(v)
    assert f["answer"].tolist() == ["B", "TIE", "A", "A", "A"]
    assert f["repeat_agreed"].tolist() == [None, None, False, None, True]
    assert f["chose_left"].tolist() == [False, None, True, True, True]


def test_hidden_repeat_and_position_bias_rules_remove_whole_raters() -> None:
    rows = []
    for i in range(12):  # r1 always picks the left candidate; r2 is balanced
        rows.append(("r1", i + 1, f"c{i}", "A" if i % 2 == 0 else "B", i % 2 == 1, False, 2000.0))
        rows.append(("r2", i + 1, f"c{i}", "A" if i % 3 else "B", False, False, 2000.0))
    rows.append(("r2", 13, "c0", "A", False, True, 2000.0))  # r2's repeat of c0 (original B): disagrees
    v = votes(rows)
    kept, result = reference_rules_apply(v, HygieneRules(**OFF, max_position_bias=0.3, min_repeat_agreement=0.5))
    assert set(kept["rater"]) == set()
    assert result.report("position_bias").participants_first == 1 and result.report("position_bias").answers_first == 12
    assert result.report("hidden_repeats").participants_first == 1 and result.report("hidden_repeats").answers_first == 13
    kept, result = reference_rules_apply(v, HygieneRules(**OFF, max_position_bias=0.3))
    assert set(kept["rater"]) == {"r2"} and len(kept) == 13  # the repeat row stays for the agreement report


def test_quality_page_defaults_mirror_the_hygiene_rules() -> None:
    defaults = {f.name: f.default for f in fields(HygieneRules)}
    assert {k: defaults[k] for k in QUALITY_RULE_DEFAULTS} == QUALITY_RULE_DEFAULTS


@pytest.fixture
def rated(tmp_path: Path, db: None):  # type: ignore[no-untyped-def]
    return make_rated_study("rated-rules", tmp_dir=tmp_path, seed=11)


def straight_line(study, rater: str) -> None:  # type: ignore[no-untyped-def]
    """Make one rater press the left button on every trial."""
    for vote in Vote.objects.filter(trial__assignment__rater__external_id=rater, trial__assignment__block__study=study):
        vote.label = "B" if vote.trial.swapped else "A"
        vote.axis_scores = {}
        vote.save()


def test_agreement_report_applies_the_rules_when_asked(rated, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rater = str(votes_frame(study=rated)["rater"].iloc[0])
    straight_line(rated, rater)
    plain = tmp_path / "plain.json"
    call_command("agreement_report", rated.slug, "--json", str(plain), "--bootstrap", "20", stdout=io.StringIO())
    assert "exclusions" not in json.loads(plain.read_text())
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"min_median_response_ms": None, "straightline_share": 0.9, "max_position_bias": 0.4}))
    out = tmp_path / "ruled.json"
    stdout = io.StringIO()
    call_command("agreement_report", rated.slug, "--json", str(out), "--bootstrap", "20", "--rules", str(rules),
                 stdout=stdout)
    report = json.loads(out.read_text())
    ex = report["exclusions"]
    by_rule = {r["rule"]: r for r in ex["rules"]}
    n_votes = int((votes_frame(study=rated)["rater"] == rater).sum())
    assert by_rule["straight_lining_share"]["participants_first"] == 1
    assert by_rule["straight_lining_share"]["answers_first"] == n_votes
    assert ex["excluded_raters"][0]["participant"] == rater
    assert ex["n_kept_raters"] == ex["n_raters"] - 1
    before = json.loads(plain.read_text())
    assert report["n_main_annotations"] < before["n_main_annotations"]
    assert "exclusion rules kept" in stdout.getvalue() and "straight_lining_share 1 raters" in stdout.getvalue()
    # The stored settings apply with a bare --rules.
    call_command("agreement_report", rated.slug, "--json", str(out), "--bootstrap", "20", "--rules", stdout=io.StringIO())
    assert "exclusions" in json.loads(out.read_text())


def test_agreement_report_rules_errors_are_one_line(rated, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from django.core.management import CommandError

    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"max_position_bias": 0.7}))
    with pytest.raises(CommandError, match="max_position_bias"):
        call_command("agreement_report", rated.slug, "--json", str(tmp_path / "x.json"), "--rules", str(rules),
                     stdout=io.StringIO())
    assert not (tmp_path / "x.json").exists()


def test_calibrate_applies_the_rules_when_asked(tmp_path: Path, db: None) -> None:
    cal = make_calibration_study("cal-rules")
    frame = votes_frame(study=cal.study)
    rater = str(frame["rater"].iloc[0])
    straight_line(cal.study, rater)
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"min_median_response_ms": None, "straightline_share": 0.9,
                                 "straightline_min_trials": 1}))
    out = tmp_path / "cal.json"
    stdout = io.StringIO()
    call_command("calibrate", cal.study.slug, "--json", str(out), "--bootstrap", "50", "--rules", str(rules), stdout=stdout)
    report = json.loads(out.read_text())
    ex = report["exclusions"]
    assert ex["excluded_raters"][0]["participant"] == rater and ex["n_kept_raters"] == ex["n_raters"] - 1
    assert "exclusion rules kept" in stdout.getvalue()
    plain = tmp_path / "plain.json"
    call_command("calibrate", cal.study.slug, "--json", str(plain), "--bootstrap", "50", stdout=io.StringIO())
    assert "exclusions" not in json.loads(plain.read_text())
    assert json.loads(plain.read_text())["fit_data"]["h"] != report["fit_data"]["h"]


def test_quality_page_flags_raters_beyond_the_thresholds(rated, client, admin_user) -> None:  # type: ignore[no-untyped-def]
    rater = str(votes_frame(study=rated)["rater"].iloc[0])
    straight_line(rated, rater)
    rated.options = {**(rated.options or {}), "exclusion_rules": {"max_position_bias": 0.3, "min_median_response_ms": None}}
    rated.save()
    flagged = {q.assignment.rater.external_id: q.flags for q in rater_quality(rated)}
    assert any("position bias" in f for f in flagged[rater]) and any("straight-lining" in f for f in flagged[rater])
    assert sum(1 for f in flagged.values() if f) == 1
    client.force_login(admin_user)
    html = client.get(f"/research/studies/{rated.slug}/raters/quality/").content.decode()
    assert "<th>Flags</th>" in html and "position bias (left share beyond 0.5 ± 0.3)" in html
    # Issue 40: the footnote says the rules apply by default, not only with --rules.
    footnote = " ".join(html.split("Flags: raters beyond", 1)[1].split("</p>", 1)[0].split())
    assert "reports apply them by default" in footnote and "--no-rules" in footnote and "--rules<" not in footnote


def test_the_commands_rules_help_names_the_gold_rule_and_the_default() -> None:
    """Issue 40: ``agreement_report --help`` listed the --rules rules without gold."""
    from calibration.management.commands.agreement_report import Command as AgreementReport
    from calibration.management.commands.calibrate import Command as Calibrate

    for command, name in ((AgreementReport(), "agreement_report"), (Calibrate(), "calibrate")):
        text = " ".join(command.create_parser("manage.py", name).format_help().split())
        assert "(gold trials, hidden repeats, too fast, straight-lining, position bias)" in text
        assert "A study with saved rules or gold trials has them applied by default" in text


def test_quality_page_sets_the_reference_rules(rated, client, admin_user) -> None:  # type: ignore[no-untyped-def]
    client.force_login(admin_user)
    page = client.get(f"/research/studies/{rated.slug}/raters/quality/").content.decode()
    assert 'name="max_position_bias"' in page and 'name="min_repeat_agreement"' in page
    assert "<title>Rater quality · " in page and page.count("<details class=\"card\" id=\"exclusion-rules\">") == 1
    r = client.post(f"/research/studies/{rated.slug}/kind-report/rules/", {
        "next": "quality", "min_median_response_ms": "", "straightline_share": "0.9", "straightline_min_trials": "10",
        "min_repeat_agreement": "0.5", "max_position_bias": "0.3", "position_min_trials": "10",
    })
    assert r.status_code == 302 and r["Location"] == f"/research/studies/{rated.slug}/raters/quality/"
    rated.refresh_from_db()
    stored = rated.options["exclusion_rules"]
    assert stored["max_position_bias"] == 0.3 and stored["min_median_response_ms"] is None
    assert "comprehension_max_attempts" not in stored  # left at its default
    r = client.post(f"/research/studies/{rated.slug}/kind-report/rules/", {
        "next": "quality", "max_position_bias": "0.7", "straightline_min_trials": "10", "position_min_trials": "10"},
        follow=True)
    assert "Exclusion rules not saved" in r.content.decode()
