"""What the agreement and calibration pages say when their figures cannot be trusted as shown
(issue 45 point 7): every rater excluded by the saved rules, and a stored calibration report older
than the votes or judge outputs it should include."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Vote
from judges.models import Judge, JudgeOutput, OutputStatus
from tests.ranking.rank_factories import make_ranked_study

pytestmark = pytest.mark.django_db


def test_the_agreement_page_says_when_every_rater_is_excluded_and_what_to_do(researcher) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("all-out", n_pages=10, researchers=[researcher], with_votes=True)
    client = Client()
    client.force_login(researcher)
    url = reverse("agreement:page", args=["all-out"]) + "?part=body&bootstrap=20&seed=1"
    assert 'id="every-rater-excluded"' not in client.get(url).content.decode()
    Vote.objects.filter(trial__assignment__block__study=ranked.study).update(response_ms=200)  # every rater fast
    study = ranked.study
    study.options = {**(study.options or {}), "exclusion_rules": {"min_median_response_ms": 1000}}
    study.save(update_fields=["options"])
    body = " ".join(client.get(url).content.decode().split())
    assert 'id="every-rater-excluded"' in body and "Every rater was excluded" in body
    assert "quality page" in body and "min_median_response_ms" in body and "--no-rules" in body


def test_the_calibration_page_says_when_its_report_is_older_than_the_data(researcher) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("stale", n_pages=10, researchers=[researcher], with_votes=True)
    client = Client()
    client.force_login(researcher)
    url = reverse("calibration:page", args=["stale"])
    first = client.get(url).content.decode()  # computes and stores the first report
    assert 'id="calibration-stale"' not in first
    judge = Judge.objects.get(name=ranked.judges[0])
    comparison = ranked.study.comparisons.order_by("pk").first()
    JudgeOutput.objects.create(judge=judge, comparison=comparison, order="primary", repeat=7,
                               status=OutputStatus.VALID, winner="A",
                               finished_at=timezone.now())
    page = " ".join(client.get(url).content.decode().split())
    assert 'id="calibration-stale"' in page and "1 judge output was stored that it does not include" in page
    client.post(url, {"action": "recompute", "bootstrap": "20", "seed": "1"})
    assert 'id="calibration-stale"' not in client.get(url).content.decode()
