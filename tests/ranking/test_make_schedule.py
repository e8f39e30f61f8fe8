"""``make_schedule`` (docs/protocol.md "Deployment leaderboard", "Commands"): eligible pages only, human-study
comparisons kept and counted, quotas within one, seeded and reproducible, refused without writing anything
when it must be."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotation.models import AuditEvent, Comparison, ComparisonSet
from judges.models import Judge, JudgeOutput
from tests.ranking.rank_factories import make_basic_study

pytestmark = pytest.mark.django_db

SYSTEMS = ("s1", "s2", "s3", "s4", "s5")
FAILED = [(0, "s1"), (3, "s2"), (3, "s3"), (7, "s5")]


def build(slug: str = "sched", *, n_pages: int = 40, n_human: int = 6, researchers=()):  # type: ignore[no-untyped-def]
    study, _systems, pages, candidates = make_basic_study(
        slug, systems=SYSTEMS, n_pages=n_pages, failed=FAILED, researchers=researchers
    )
    # Human-study comparisons (kept and counted), on pages 10.. with rendered candidates.
    for k, (s, t) in enumerate(list(combinations(SYSTEMS, 2))[:n_human]):
        pid = f"p{10 + k:03d}"
        Comparison.objects.create(
            study=study,
            external_id=f"h{k}",
            page=pages[pid],
            candidate_a=candidates[(pid, s)],
            candidate_b=candidates[(pid, t)],
            set=ComparisonSet.HUMAN,
        )
    return study


def rows(study, set_: str | None = None) -> list[tuple[str, str, str, str, str]]:  # type: ignore[no-untyped-def]
    qs = Comparison.objects.filter(study=study)
    if set_:
        qs = qs.filter(set=set_)
    return sorted(
        qs.values_list(
            "external_id",
            "page__external_id",
            "candidate_a__system__external_id",
            "candidate_b__system__external_id",
            "set",
        )
    )


def test_schedule_meets_the_quotas_on_eligible_pages(capsys) -> None:  # type: ignore[no-untyped-def]
    study = build()
    call_command("make_schedule", study.slug, "--comparisons", "103", "--seed", "5")
    out = capsys.readouterr().out
    everything = rows(study)
    deployment = rows(study, ComparisonSet.DEPLOYMENT)
    assert len(everything) == 103 and len(deployment) == 97
    assert [r[0] for r in deployment] == [f"d{k:05d}" for k in range(1, 98)]
    assert len(rows(study, ComparisonSet.HUMAN)) == 6  # kept
    pairs = Counter(tuple(sorted(r[2:4])) for r in everything)
    assert len(pairs) == 10 and set(pairs.values()) == {10, 11} and sum(pairs.values()) == 103
    appear = Counter(s for r in everything for s in r[2:4])
    assert max(appear.values()) - min(appear.values()) <= 1
    failed = {(f"p{k:03d}", s) for k, s in FAILED}
    for _, page, a, b, _ in deployment:
        assert (page, a) not in failed and (page, b) not in failed
    slots = Counter((r[1], tuple(sorted(r[2:4]))) for r in everything)
    assert max(slots.values()) == 1  # no (page, pair) twice
    assert "created 97 deployment comparisons (d00001–d00097)" in out
    assert "pair counts 10–11 over 10 pairs (3 at 11)" in out
    assert f"appearances {min(appear.values())}–{max(appear.values())} per system" in out
    event = AuditEvent.objects.get(action="schedule.deployment", study=study)
    assert event.details["seed"] == 5 and event.details["quota"]["n_new"] == 97


def test_same_seed_same_schedule_other_seed_differs() -> None:
    one, two, three = build("one"), build("two"), build("three")
    call_command("make_schedule", "one", "--comparisons", "80", "--seed", "9")
    call_command("make_schedule", "two", "--comparisons", "80", "--seed", "9")
    call_command("make_schedule", "three", "--comparisons", "80", "--seed", "10")
    assert rows(one) == rows(two)
    assert rows(one) != rows(three)


def test_existing_deployment_is_refused_unless_replace_and_unused() -> None:
    study = build()
    call_command("make_schedule", study.slug, "--comparisons", "60")
    before = rows(study)
    with pytest.raises(CommandError) as info:
        call_command("make_schedule", study.slug, "--comparisons", "70")
    assert "already has 54 deployment comparisons" in str(info.value) and "\n" not in str(info.value)
    assert rows(study) == before
    call_command("make_schedule", study.slug, "--comparisons", "70", "--replace")
    assert len(rows(study, ComparisonSet.DEPLOYMENT)) == 64
    judge = Judge.objects.create(name="sched-judge")
    JudgeOutput.objects.create(
        judge=judge,
        comparison=Comparison.objects.filter(study=study, set=ComparisonSet.DEPLOYMENT).first(),
        order="primary",
        status="valid",
        winner="A",
    )
    after = rows(study)
    with pytest.raises(CommandError, match="in use cannot be replaced"):
        call_command("make_schedule", study.slug, "--comparisons", "60", "--replace")
    assert rows(study) == after


def test_ids_continue_after_existing_d_ids() -> None:
    study = build(n_human=0)
    page = study.pages.get(external_id="p020")
    a = page.candidates.get(system__external_id="s1")
    b = page.candidates.get(system__external_id="s2")
    Comparison.objects.create(study=study, external_id="d00041", page=page, candidate_a=a, candidate_b=b)
    call_command("make_schedule", study.slug, "--comparisons", "20")
    ids = [r[0] for r in rows(study, ComparisonSet.DEPLOYMENT)]
    assert ids == [f"d{k:05d}" for k in range(42, 61)]


@pytest.mark.parametrize(
    ("n", "needle"),
    [
        ("5", "smaller than the 6 human-study"),
        ("0", "positive integer"),
        ("x", "positive integer"),
        ("2000", "eligible pages"),
    ],
)
def test_infeasible_requests_write_nothing(n: str, needle: str) -> None:
    study = build()
    before = rows(study)
    with pytest.raises(CommandError) as info:
        call_command("make_schedule", study.slug, "--comparisons", n)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert rows(study) == before
    assert not AuditEvent.objects.filter(action="schedule.deployment").exists()


def test_schedule_page_creates_and_reports(researcher, other_researcher) -> None:  # type: ignore[no-untyped-def]
    study = build(researchers=[researcher])
    url = reverse("ranking:schedule", args=[study.slug])
    client = Client()
    client.force_login(researcher)
    page = client.get(url)
    assert page.status_code == 200 and b"Human-study comparisons" in page.content
    response = client.post(url, {"comparisons": "50", "seed": "3"}, follow=True)
    assert response.status_code == 200
    body = response.content.decode()
    assert "created 44 deployment comparisons" in body and "pair counts 5–5" in body
    again = client.post(url, {"comparisons": "50", "seed": "3"})
    assert again.status_code == 400 and b"already has 44" in again.content
    other = Client()
    other.force_login(other_researcher)
    assert other.post(url, {"comparisons": "60", "seed": "3"}).status_code == 404
    assert len(rows(study, ComparisonSet.DEPLOYMENT)) == 44
