"""The built-in demo judge (issue 17): "Run judges" on the demo study works with no network."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from demo.service import DEMO_JUDGE, demo_study_create
from judges.models import Judge, JudgeOutput, OutputStatus
from judges.services.runs import judge_run_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db: None):  # type: ignore[no-untyped-def]
    return demo_study_create(slug="demo-j", seed=3, n_pages=6, n_systems=3, votes=False, participant_link=False).study


def test_demo_study_registers_the_demo_judge(demo) -> None:  # type: ignore[no-untyped-def]
    judge = Judge.objects.get(name=DEMO_JUDGE)
    assert judge.provider == "demo" and judge.base_url == "" and judge.api_key_env == ""


def test_demo_judge_answers_every_call_validly_from_the_ground_truth(demo, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    judge = Judge.objects.get(name=DEMO_JUDGE)
    with django_capture_on_commit_callbacks(execute=True):
        plan = judge_run_start(study=demo, judge=judge, set="human", orders=["primary", "swapped"], repeats=1)
    outputs = list(JudgeOutput.objects.filter(judge=judge).select_related(
        "comparison__page", "comparison__candidate_a__system", "comparison__candidate_b__system"))
    assert len(outputs) == len(plan.output_ids) > 0
    assert all(o.status == OutputStatus.VALID for o in outputs), [o.error for o in outputs if o.error][:3]
    quality = demo.options["demo"]["candidate_quality"]
    for o in outputs:
        c = o.comparison
        diff = quality[f"{c.page.external_id}/{c.candidate_a.system.external_id}"] - \
            quality[f"{c.page.external_id}/{c.candidate_b.system.external_id}"]
        expected = "TIE" if abs(diff) < 0.15 else ("A" if diff > 0 else "B")
        # Canonical: the swapped order's answer is mapped back, so both orders agree.
        assert o.winner == expected, (o.order, diff, o.raw)
        assert {a["score"] for a in o.axis_scores} <= ({0} if expected == "TIE" else {1, 2} if expected == "A" else {-1, -2})


def test_run_judges_button_on_the_demo(demo, admin_user, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(admin_user)
    page = client.get(reverse("judges:study", args=[demo.slug])).content.decode()
    judge = Judge.objects.get(name=DEMO_JUDGE)
    assert f'<option value="{judge.pk}">{DEMO_JUDGE}' in page
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("judges:run", args=[demo.slug]),
                        {"judge": judge.pk, "set": "human", "orders": ["primary"], "repeats": "1"}, follow=True)
    assert "calls queued" in r.content.decode()
    assert JudgeOutput.objects.filter(judge=judge, status=OutputStatus.VALID).count() > 0
    assert not JudgeOutput.objects.filter(judge=judge).exclude(status=OutputStatus.VALID).exists()


def test_on_a_study_that_is_not_a_demo_it_answers_by_image_similarity(django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    """docs/protocol.md "The built-in local judge": no ground truth, so each candidate is compared with
    the reference (SSIM); every call answers (issue 45: it used to fail them all with no reason shown)."""
    from demo.service import demo_judge_ensure
    from tests.judges.factories import make_example_study

    study = make_example_study()
    judge = demo_judge_ensure()
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_start(study=study, judge=judge, orders=["primary", "swapped"])
    outputs = list(JudgeOutput.objects.filter(judge=judge))
    assert outputs and all(o.status == OutputStatus.VALID for o in outputs), [o.error for o in outputs]
    assert all("Structural similarity with the reference" in o.raw for o in outputs)
    # Canonical answers: both orders of a comparison agree.
    by_comparison: dict[int, set[str]] = {}
    for o in outputs:
        by_comparison.setdefault(o.comparison_id, set()).add(o.winner)
    assert all(len(winners) == 1 for winners in by_comparison.values())
