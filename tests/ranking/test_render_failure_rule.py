"""The study's failure rule in the leaderboard (docs/protocol.md "Failed renders in the leaderboard"):
``ambihtmlbench`` scores only rendered outputs, ``aescode`` adds a failed output's losses to the
rendered ones of its page. Checked against outcomes listed by hand, soft preferences and
appearances counted by hand, and Bradley–Terry scores fitted by scipy from the hand-listed
outcomes; the report, its HTML page and the command's text say which rule was used."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from scipy import optimize

from annotation.models import Candidate, Comparison, Study
from calibration.models import CoefficientSet
from judges.models import Judge, JudgeOutput, OutputStatus
from ranking.leaderboard import leaderboard_compute
from ranking.rendering import leaderboard_html
from ranking.selectors import leaderboard_inputs
from tests.ranking.rank_factories import make_basic_study

pytestmark = pytest.mark.django_db

SYSTEMS = ("good", "fair", "bad")


def judge_everything(study: Study, *, strong: str = "bad", set_name: str = "one-judge") -> CoefficientSet:
    """One judge (β = 1) whose primary-order, repeat-0 output says ``strong`` wins each of its
    comparisons and calls every other one a tie."""
    judge, _ = Judge.objects.get_or_create(
        name="judge-one", defaults={"family": "one", "provider": "imported"}
    )
    outputs = []
    for comparison in Comparison.objects.filter(study=study).select_related(
        "candidate_a__system", "candidate_b__system"
    ):
        a, b = comparison.candidate_a.system.external_id, comparison.candidate_b.system.external_id
        winner = "A" if a == strong else "B" if b == strong else "TIE"
        outputs.append(
            JudgeOutput(
                judge=judge,
                comparison=comparison,
                order="primary",
                repeat=0,
                status=OutputStatus.VALID,
                winner=winner,
                confidence=3,
            )
        )
    JudgeOutput.objects.bulk_create(outputs)
    return CoefficientSet.objects.create(
        study=study,
        name=set_name,
        coefficients={"judge-one": 1.0},
        report={"judges": ["judge-one"]},
        source="import",
    )


def bradley_terry_by_scipy(outcomes: list[tuple[str, str, float]]) -> dict[str, float]:
    """The docs/protocol.md "Deployment leaderboard" objective maximized by scipy, centred, in Elo points."""
    names = sorted({s for a, b, _ in outcomes for s in (a, b)})
    index = {s: k for k, s in enumerate(names)}
    a = np.array([index[x] for x, _, _ in outcomes])
    b = np.array([index[y] for _, y, _ in outcomes])
    y = np.array([p for _, _, p in outcomes])

    def negative(theta: np.ndarray) -> float:
        d = theta[a] - theta[b]
        return -float(np.sum(-y * np.logaddexp(0, -d) - (1 - y) * np.logaddexp(0, d)) - 1e-3 * theta @ theta)

    theta = optimize.minimize(negative, np.zeros(len(names)), method="BFGS", options={"gtol": 1e-10}).x
    theta -= theta.mean()
    return {s: float(400 * theta[index[s]] / math.log(10)) for s in names}


# Four pages; "bad" failed to render p000, p001 and p002. The judge: "bad" beats each rendered
# opponent (on p003), good-fair is a tie on every page.
JUDGED = [("good", "fair", 0.5)] * 4 + [("good", "bad", 0.0), ("fair", "bad", 0.0)]
LOSSES = [("good", "bad", 1.0), ("fair", "bad", 1.0)] * 3  # aescode: p000..p002, a failed output loses


def study_with_failures(slug: str, rule: str | None) -> tuple[Study, CoefficientSet]:
    study, _, pages, candidates = make_basic_study(
        slug, systems=SYSTEMS, n_pages=4, failed=[(0, "bad"), (1, "bad"), (2, "bad")]
    )
    if rule is not None:
        study.options = {"render": {"viewport": "400x300", "failure_rule": rule}}
        study.save(update_fields=["options"])
    n = 0
    for page in pages:
        for i, first in enumerate(SYSTEMS):
            for second in SYSTEMS[i + 1 :]:
                if candidates[page, first].rendered and candidates[page, second].rendered:
                    n += 1
                    Comparison.objects.create(
                        study=study,
                        external_id=f"c{n}",
                        page=pages[page],
                        candidate_a=candidates[page, first],
                        candidate_b=candidates[page, second],
                    )
    return study, judge_everything(study)


def check_against_hand(report: dict, outcomes: list[tuple[str, str, float]]) -> None:
    rows = {row["system"]: row for row in report["systems"]}
    want = bradley_terry_by_scipy(outcomes)
    assert set(rows) == set(want)
    for system, score in want.items():
        points = [p if a == system else 1 - p for a, b, p in outcomes if system in (a, b)]
        assert rows[system]["appearances"] == len(points)
        assert rows[system]["soft_preference"] == pytest.approx(sum(points) / len(points), abs=1e-12)
        assert rows[system]["score"] == pytest.approx(score, abs=1e-3)
    assert report["n_comparisons"] == len(outcomes)


def test_the_two_rules_rank_a_system_that_fails_often_in_opposite_places(tmp_path: Path) -> None:
    scored_only, cset_a = study_with_failures("rule-ambi", "ambihtmlbench")
    with_losses, cset_b = study_with_failures("rule-aes", "aescode")
    ambi = leaderboard_compute(study=scored_only, coefficient_set=cset_a, resamples=40, seed=3)
    aes = leaderboard_compute(study=with_losses, coefficient_set=cset_b, resamples=40, seed=3)

    check_against_hand(ambi, JUDGED)
    check_against_hand(aes, JUDGED + LOSSES)
    # By hand: under AmbiHTMLBench "bad" won both comparisons it rendered for (soft preference 1)
    # and ranks first; under AesCode its six losses (2 wins of 8) put it last, behind good and fair
    # (soft preference (4 × 0.5 + 3) / 8 = 0.625).
    assert ambi["systems"][0]["system"] == "bad" and ambi["systems"][0]["soft_preference"] == 1.0
    assert aes["systems"][-1]["system"] == "bad" and aes["systems"][-1]["soft_preference"] == 0.25
    assert {r["system"]: r["soft_preference"] for r in aes["systems"]}["good"] == 0.625

    for report, rule, added in ((ambi, "ambihtmlbench", 0), (aes, "aescode", 6)):
        failures = report["render_failures"]
        assert (
            failures["rule"] == rule
            and failures["n_failure_outcomes"] == added
            and failures["n_left_out"] == 0
        )
        assert [(r["system"], r["outputs"], r["failed"], r["rate"]) for r in failures["systems"]] == [
            ("good", 4, 0, 0.0),
            ("fair", 4, 0, 0.0),
            ("bad", 4, 3, 0.75),
        ]
    html = leaderboard_html(study=with_losses, report=aes)
    assert "Render failures: <strong>AesCode</strong> rule" in html
    assert "<code>bad</code> 75% (3 of 4)" in html and "<code>good</code> 0% (0 of 4)" in html
    assert (
        "Render failures: <strong>AmbiHTMLBench</strong> rule: only rendered outputs are scored"
        in leaderboard_html(study=scored_only, report=ambi)
    )

    out = io.StringIO()
    call_command(
        "leaderboard",
        "rule-aes",
        "--coefficients",
        cset_b.name,
        "--json",
        str(tmp_path / "lb.json"),
        "--bootstrap",
        "20",
        stdout=out,
    )
    assert (
        "Render failures: aescode rule (6 losses of failed outputs added); failed to render: good 0/4 (0%), "
        "fair 0/4 (0%), bad 3/4 (75%)" in out.getvalue()
    )
    assert json.loads((tmp_path / "lb.json").read_text())["render_failures"]["rule"] == "aescode"


def test_a_study_made_before_the_rule_scores_only_rendered_outputs_and_a_failed_side_is_never_scored() -> (
    None
):
    study, cset = study_with_failures("rule-default", None)  # no render object: the default rule
    inputs = leaderboard_inputs(study=study, coefficient_set=cset)
    assert inputs.n_comparisons == len(JUDGED) and inputs.render_failures is not None
    assert inputs.render_failures["rule"] == "ambihtmlbench"
    # A candidate replaced by a failed render after its comparisons were made: they are left out
    # under either rule (not counted as skipped for want of a judge), and AesCode adds its losses.
    Candidate.objects.filter(page__study=study, page__external_id="p003", system__external_id="bad").update(
        rendered=False, image=None
    )
    inputs = leaderboard_inputs(study=study, coefficient_set=cset)
    assert inputs.n_comparisons == 4 and inputs.n_skipped == 0 and inputs.render_failures["n_left_out"] == 2
    assert inputs.systems == ("good", "fair")  # "bad" rendered nothing: not ranked under AmbiHTMLBench
    study.options = {"render": {"failure_rule": "aescode"}}
    study.save(update_fields=["options"])
    inputs = leaderboard_inputs(study=study, coefficient_set=cset)
    assert inputs.n_comparisons == 4 + 8 and inputs.systems == ("good", "fair", "bad")
    assert (
        inputs.p[4:].tolist() == [1.0] * 8 and inputs.from_render_failure.tolist() == [False] * 4 + [True] * 8
    )


def test_a_study_of_images_without_failures_has_no_render_failures_key() -> None:
    study, _, pages, candidates = make_basic_study("rule-none", systems=("x", "y"), n_pages=2)
    for page in pages:
        Comparison.objects.create(
            study=study,
            external_id=f"c-{page}",
            page=pages[page],
            candidate_a=candidates[page, "x"],
            candidate_b=candidates[page, "y"],
        )
    cset = judge_everything(study, strong="x")
    report = leaderboard_compute(study=study, coefficient_set=cset, resamples=20, seed=1)
    assert "render_failures" not in report and "Render failures" not in leaderboard_html(
        study=study, report=report
    )


def test_the_queued_leaderboard_in_chunks_equals_the_single_computation_with_the_rule(
    settings, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    from ranking.models import Leaderboard
    from ranking.tasks import leaderboard_start

    settings.ARBITER_LEADERBOARD_CHUNK_RESAMPLES = 15  # 40 resamples -> 3 chunks, merged from the snapshot
    study, cset = study_with_failures("rule-queued", "aescode")
    with django_capture_on_commit_callbacks(execute=True):
        leaderboard = leaderboard_start(study=study, coefficient_set=cset, resamples=40, seed=3)
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.DONE, leaderboard.error
    single = leaderboard_compute(study=study, coefficient_set=cset, resamples=40, seed=3)
    assert leaderboard.result["render_failures"] == single["render_failures"]
    assert leaderboard.result["render_failures"]["n_failure_outcomes"] == 6
    assert leaderboard.result["systems"] == single["systems"]
    assert leaderboard.inputs["from_render_failure"] == [False] * 6 + [True] * 6
