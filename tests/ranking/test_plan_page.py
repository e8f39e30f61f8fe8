"""The planner page and its REST endpoints (docs/protocol.md "Planning a study's size"): form
errors in one line, a quick plan through the task queue renders its table, figure and downloads,
htmx polling while it runs, researchers only, another researcher's plan is a 404."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Study, Vote
from ranking.models import StudyPlanRun
from ranking.planning import study_plan_run_execute
from tests.ranking.rank_factories import add_votes, make_ranked_study

pytestmark = pytest.mark.django_db

QUICK = {
    "source": "stated",
    "target": "kappa",
    "half_width": "0.1",
    "systems": "4",
    "studies": "10",
    "seed": "2",
    "verify": "20",
}
#: Where the plan's kind does not matter (the poll, the pilot picked): a Brier plan, computed in a
#: fraction of a second where the κ plan above takes seconds (its page is tested with QUICK).
CHEAP = {**QUICK, "target": "brier", "half_width": "0.04"}


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_empty_planner_page_explains_itself(researcher) -> None:  # type: ignore[no-untyped-def]
    page = login(researcher).get(reverse("ranking:plan"))
    text = page.content.decode()
    assert page.status_code == 200 and "No plan yet." in text
    assert 'name="target"' in text and 'value="brier"' in text and 'name="judge_accuracy"' in text
    assert 'docs/protocol.md "Planning a study\'s size"' in text and "SPEC \u00a7" not in text


def test_a_quick_plan_runs_on_the_queue_and_shows_table_figure_and_downloads(
    researcher, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("ranking:plan"), QUICK)
    run = StudyPlanRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "ranking:plan-detail", args=[run.pk]
    )
    assert run.status == StudyPlanRun.Status.DONE and run.progress == 1.0 and run.created_by == researcher
    page = client.get(response["Location"]).content.decode()
    assert f'id="votes-needed">{run.result["votes_needed"]}<' in page
    curve = page.split('aria-label="Target against votes"')[1].split("</table>")[0]
    assert curve.count("<tr>") == len(run.result["curve"]) + 1  # header + one row per point of the curve
    # The gold suggestion by honest raters' accuracy on gold (docs/protocol.md "Gold trials: the exclusion test").
    gold = page.split('aria-label="Gold trials per rater"')[1].split("</table>")[0]
    assert gold.count("<tr>") == 1 + 4 and "93% (default)</td><td class=\"num\">14</td>" in gold
    assert reverse("ranking:plan-download", args=[run.pk, "svg"]) in page and "hx-trigger" not in page
    svg = client.get(reverse("ranking:plan-download", args=[run.pk, "svg"]))
    assert svg["Content-Type"] == "image/svg+xml" and b"<svg" in svg.content
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("ranking:plan-download", args=[run.pk, "csv"])).content.decode())
        )
    )
    assert [int(r["votes"]) for r in rows] == [p["votes"] for p in run.result["curve"]]
    document = client.get(reverse("ranking:plan-download", args=[run.pk, "json"])).json()
    assert document["votes_needed"] == run.result["votes_needed"] and document["writes_to_study"] is False
    listing = client.get(reverse("ranking:plan")).content.decode()
    assert reverse("ranking:plan-detail", args=[run.pk]) in listing and "No plan yet." not in listing


def test_a_running_plan_polls_its_status_and_then_shows_the_result(researcher) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    response = client.post(reverse("ranking:plan"), CHEAP)  # on_commit callbacks not run: stays queued
    run = StudyPlanRun.objects.get()
    page = client.get(response["Location"]).content.decode()
    status_url = reverse("ranking:plan-status", args=[run.pk])
    assert f'hx-get="{status_url}"' in page and 'hx-trigger="every 2s"' in page and "<progress" in page
    assert client.get(reverse("ranking:plan-download", args=[run.pk, "csv"])).status_code == 404
    assert study_plan_run_execute(run_id=run.pk) == "done"
    assert study_plan_run_execute(run_id=run.pk) == "not queued"  # a second delivery is a no-op
    fragment = client.get(status_url)
    assert fragment["Cache-Control"] == "no-store"
    assert "hx-trigger" not in fragment.content.decode() and 'id="votes-needed"' in fragment.content.decode()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"target": "top_k", "k": "4", "systems": "4"}, "impossible with 4 systems"),
        ({"target": "brier", "half_width": "0.6"}, "Brier half-width 0.6 is impossible"),
        ({"target": "kappa", "half_width": "abc"}, "field 'half_width': expected a number"),
        ({"target": "brier", "judge_accuracy": "0.7,1.4"}, "judge accuracy must lie in (0, 1]"),
        ({"source": "pilot", "pilot": ""}, "give a pilot study or the stated assumptions"),
        ({"source": "pilot", "pilot": "someone-elses"}, "no study 'someone-elses' of yours"),
        ({"studies": "3"}, "field 'studies': expected 10…2000, got 3"),
    ],
)
def test_bad_input_is_a_one_line_form_error(researcher, fields, message) -> None:  # type: ignore[no-untyped-def]
    make_ranked_study("someone-elses", n_pages=4, n_human_pages=2)
    response = login(researcher).post(reverse("ranking:plan"), {**QUICK, **fields})
    text = response.content.decode()
    assert response.status_code == 400 and not StudyPlanRun.objects.exists()
    alert = text.split('role="alert">', 1)[1].split("</p>", 1)[0]
    assert message in alert.replace("&#x27;", "'").replace("&quot;", '"') and "\n" not in alert


def test_a_study_page_prefills_it_as_pilot_and_a_brier_plan_uses_its_judges(
    researcher, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("brier-pilot", n_pages=8, n_human_pages=8, researchers=[researcher])
    add_votes(ranked, rng=np.random.default_rng(4), n_raters=3)
    votes_before = Vote.objects.count()
    client = login(researcher)
    study_page = client.get(reverse("studies:detail", args=["brier-pilot"])).content.decode()
    assert reverse("ranking:plan-study", args=["brier-pilot"]) in study_page
    form = client.get(reverse("ranking:plan-study", args=["brier-pilot"])).content.decode()
    assert '<option value="brier-pilot" selected>pilot study brier-pilot</option>' in form
    assert 'name="source"' not in form  # one menu says where the assumptions come from
    fields = {
        "source": "pilot",
        "pilot": "brier-pilot",
        "target": "brier",
        "half_width": "0.03",
        "studies": "10",
    }
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("ranking:plan-study", args=["brier-pilot"]), fields)
    run = StudyPlanRun.objects.get()
    assert run.status == StudyPlanRun.Status.DONE, run.error
    assert (
        run.result["pilot"]["judges"] == ranked.judges and run.result["judges"]["outputs_per_comparison"] == 4
    )
    assert all(0.3 < a < 1 for a in run.result["judges"]["accuracy"])
    assert Vote.objects.count() == votes_before and run.pilot == Study.objects.get(slug="brier-pilot")


def test_raters_anonymous_and_other_researchers_cannot_reach_the_planner(
    researcher, other_researcher, rater_user
) -> None:  # type: ignore[no-untyped-def]
    run = StudyPlanRun.objects.create(parameters={"target": "kappa"}, created_by=researcher)
    urls = [
        reverse("ranking:plan"),
        reverse("ranking:plan-detail", args=[run.pk]),
        reverse("ranking:plan-status", args=[run.pk]),
        reverse("ranking:plan-download", args=[run.pk, "json"]),
    ]
    for url in urls:
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
        assert login(rater_user).get(url).status_code == 403
    assert login(rater_user).post(reverse("ranking:plan"), QUICK).status_code == 403
    assert login(rater_user).get(reverse("ranking:api-plans")).status_code == 403
    for url in urls[1:]:
        assert login(other_researcher).get(url).status_code == 404
    assert login(other_researcher).get(reverse("ranking:api-plan", args=[run.pk])).status_code == 404
    assert not StudyPlanRun.objects.exclude(pk=run.pk).exists()


def test_the_api_starts_a_plan_and_reports_it(researcher, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    body = {"target": "brier", "half_width": 0.04, "systems": 4, "judge_accuracy": [0.8], "studies": 10}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("ranking:api-plans"), body, content_type="application/json")
    assert response.status_code == 202
    detail = client.get(reverse("ranking:api-plan", args=[response.json()["id"]])).json()
    assert detail["status"] == "done" and detail["result"]["judges"]["accuracy"] == [0.8]
    assert detail["csv"].startswith("votes,half_width,")
    bad = client.post(
        reverse("ranking:api-plans"), {**body, "half_width": 0.7}, content_type="application/json"
    )
    assert bad.status_code == 400 and "impossible" in bad.content.decode()
    listed = client.get(reverse("ranking:api-plans")).json()
    assert listed["count"] == 1 and [p["id"] for p in listed["results"]] == [detail["id"]]


def test_the_api_lists_plans_newest_first_a_page_at_a_time(researcher, other_researcher) -> None:  # type: ignore[no-untyped-def]
    mine = [StudyPlanRun.objects.create(parameters={"target": "kappa", "n": n}, created_by=researcher) for n in range(5)]
    StudyPlanRun.objects.create(parameters={"target": "kappa"}, created_by=other_researcher)
    client = login(researcher)
    first = client.get(reverse("ranking:api-plans"), {"limit": 2}).json()
    assert first["count"] == 5 and [p["id"] for p in first["results"]] == [mine[4].pk, mine[3].pk]
    rest = client.get(first["next"]).json()
    assert [p["id"] for p in rest["results"]] == [mine[2].pk, mine[1].pk] and rest["previous"]
    last = client.get(reverse("ranking:api-plans"), {"limit": 2, "offset": 4}).json()
    assert [p["id"] for p in last["results"]] == [mine[0].pk] and last["next"] is None


@pytest.mark.parametrize("source", [None, "stated"])
def test_the_pilot_picked_on_the_planner_page_is_the_one_planned_from(
    researcher, django_capture_on_commit_callbacks, source
) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: /plan/ with a pilot picked planned from the stated assumptions (a radio stayed on them)."""
    ranked = make_ranked_study("picked-pilot", n_pages=8, n_human_pages=8, researchers=[researcher])
    add_votes(ranked, rng=np.random.default_rng(5), n_raters=3)
    client = login(researcher)
    form = client.get(reverse("ranking:plan")).content.decode()
    assert '<option value="" selected>' not in form and '<option value="picked-pilot">' in form
    fields = {**CHEAP, "pilot": "picked-pilot", "systems": "9"}
    if source is None:
        del fields["source"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("ranking:plan"), fields)
    run = StudyPlanRun.objects.get()
    assert response.status_code == 302 and run.status == StudyPlanRun.Status.DONE, run.error
    assert run.pilot == Study.objects.get(slug="picked-pilot") and run.parameters["systems"] is None


def test_the_planner_page_checks_every_plan_on_fresh_studies_by_default(
    researcher, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """Issue 46: ``--verify`` runs by default on the page: the form offers 200 fresh studies, and a
    plan started without the field is checked on 200, the verdict on the page and in the JSON."""
    client = login(researcher)
    form = client.get(reverse("ranking:plan")).content.decode()
    assert 'name="verify"' in form and 'value="200"' in form
    fields = {"source": "stated", "target": "top_k", "k": "1", "systems": "3", "studies": "40", "seed": "1"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("ranking:plan"), fields)
    run = StudyPlanRun.objects.get()
    check = run.result["verification"]
    assert run.status == StudyPlanRun.Status.DONE and check["n_studies"] == 200
    assert check["votes"] == run.result["votes_needed"] and check["statistic"] == "P(target met)"
    assert check["meets_target"] == (check["achieved"] >= 0.9 - check["mc_error"])
    page = client.get(response["Location"]).content.decode()
    assert 'id="plan-verification"' in page and "200 fresh simulated studies" in page
    # 0 turns the check off.
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("ranking:plan"), {**fields, "verify": "0"})
    assert StudyPlanRun.objects.order_by("-pk").first().result["verification"] is None
