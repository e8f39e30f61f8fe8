"""Researcher pages of the other study kinds (docs/study-kinds.md "Scheduling"): study overview, schedule
form, progress, quality, plan CSV."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from annotation.services.bundles.importing import study_import_bundle
from annotation.services.scheduling import schedule_units

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("kind", "counter", "unit"), [
    ("pairwise", 'id="count-comparisons">4<', "comparisons"),
    ("checklist", 'id="count-predicates">5<', "predicates"),
    ("rating", 'id="count-dimensions">2<', "items"),
])
def test_kind_study_pages_show_the_kind_and_schedule_it(kind: str, counter: str, unit: str, admin_user) -> None:  # type: ignore[no-untyped-def]
    study = study_import_bundle(path=FIXTURES / kind)
    client = Client()
    client.force_login(admin_user)
    detail = client.get(f"/studies/{study.slug}/").content.decode()
    assert counter in detail and f"/research/studies/{study.slug}/kind-report/" in detail
    assert "Axes" not in detail and "Leaderboards" not in detail
    n = len(schedule_units(study))
    raters = client.get(f"/research/studies/{study.slug}/raters/").content.decode()
    assert f"{n} {unit} with an image can be scheduled." in raters and 'name="checks"' in raters
    response = client.post(f"/research/studies/{study.slug}/schedule/", {
        "blocks": 1, "block_size": n, "repeats": 0, "min_gap": 1, "raters": "", "seed": 4, "checks": 1,
    })
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.blocks.count() == 1 and study.options["attention_checks"] == 1
    expected_raters = 3  # checklist: the bundle's k (3); pairwise and rating: 3 per block
    assert study.blocks.get().assignments.count() == expected_raters
    for url in (f"/research/studies/{study.slug}/raters/", f"/research/studies/{study.slug}/raters/quality/",
                f"/research/studies/{study.slug}/blocks/1/"):
        assert client.get(url).status_code == 200
    plan = client.get(f"/research/studies/{study.slug}/schedule.csv").content.decode().splitlines()
    assert len(plan) == 1 + expected_raters * (n + 1)
    quality = client.get(f"/research/studies/{study.slug}/raters/quality/").content.decode()
    assert "No rater has started yet" in quality
