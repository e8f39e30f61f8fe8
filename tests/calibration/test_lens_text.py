"""The lens's "more text" (docs/protocol.md "The disagreement lens"): the visible characters of the
text blocks of a candidate's kept page (``CandidateBlocks``) when every candidate with blocks kept
one, else the area of its text blocks. The study is built so the two measures disagree: on every
page the candidate with more characters has the smaller text area."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import Candidate, CandidateBlocks, Comparison, ComparisonSet, Page, Study, System
from calibration.services.lens import lens_comparisons
from judges.models import JudgeOutput
from tests.calibration.test_lens import ScriptedJudge
from tests.judges.factories import image_bytes, make_judge, store
from tests.judges.fake_provider import REFERENCE_COLOUR, SYSTEM_COLOURS

SLUG = "lens-text"
N_PAGES = 4
POINTS = {"A": 1.0, "TIE": 0.5, "B": 0.0}


def _candidate(page: Page, system: System, *, height: int, words: int, depth: int) -> Candidate:
    """A candidate ``height`` px tall whose one text block covers ``depth`` thousandths of the page
    and holds ``words`` five-letter words (a figure block's text does not count)."""
    image, _ = store(image_bytes(SYSTEM_COLOURS[system.external_id], (400, height)))
    candidate = Candidate.objects.create(
        page=page, system=system, image=image,
        blocks=[
            {"type": "text", "bbox_1000": [0, 0, 1000, depth]},
            {"type": "figure", "bbox_1000": [0, 900, 1000, 1000]},
        ],
    )
    text = " ".join(["words"] * words)
    CandidateBlocks.objects.create(
        candidate=candidate,
        blocks={
            "page": {"width": 400, "height": height},
            "blocks": [
                {"type": "text", "text": text, "bbox": [0, 0, 400, height * depth / 1000]},
                {"type": "figure", "text": "a caption that is not counted at all", "bbox": [0, 0, 10, 10]},
            ],
        },
    )
    return candidate


def build_study() -> Study:
    """Per page: alpha is taller with many characters in a thin text block; beta shorter with few
    characters in a deep one. Canonical A alternates between them."""
    study = Study.objects.create(slug=SLUG, title="Lens text", neutralize_media=False, seed=3)
    alpha, beta = (
        System.objects.create(study=study, external_id=s, name=s, position=i) for i, s in enumerate(("alpha", "beta"))
    )
    reference, _ = store(image_bytes(REFERENCE_COLOUR, (400, 500)))
    for p in range(N_PAGES):
        page = Page.objects.create(study=study, external_id=f"p{p}", image=reference, position=p)
        more = _candidate(page, alpha, height=600 + 20 * p, words=40 + p, depth=100)
        less = _candidate(page, beta, height=450, words=5, depth=800)
        a, b = (more, less) if p % 2 else (less, more)
        Comparison.objects.create(
            study=study, external_id=f"c{p}", page=page, candidate_a=a, candidate_b=b, set=ComparisonSet.HUMAN
        )
    return study


def characters(candidate: Candidate) -> int:
    page = CandidateBlocks.objects.get(candidate=candidate).blocks
    return sum(len("".join(b["text"].split())) for b in page["blocks"] if b["type"] != "figure")


def text_area(candidate: Candidate) -> float:
    image = candidate.image
    assert image is not None
    return sum(
        (b["bbox_1000"][2] - b["bbox_1000"][0]) * (b["bbox_1000"][3] - b["bbox_1000"][1])
        for b in candidate.blocks
        if b["type"] != "figure"
    ) / 1e6 * image.width * image.height


@pytest.fixture
def judged(settings, tmp_path, researcher, monkeypatch) -> APIClient:  # type: ignore[no-untyped-def]
    """The study and a judge that names the taller candidate: here, the one with more characters."""
    settings.MEDIA_ROOT = tmp_path
    settings.ARBITER_JUDGE_BACKOFF_BASE = 0.01
    settings.ARBITER_JUDGE_BACKOFF_CAP = 0.05
    monkeypatch.setenv("ARBITER_TEST_JUDGE_KEY", "sk-test-secret-0123456789")
    study = build_study()
    server = ScriptedJudge("taller").start()
    try:
        make_judge("more-chars", base_url=server.url, concurrency=1, max_invalid_retries=0)
        call_command("run_judges", SLUG, "--judge", "more-chars", "--set", "human", stdout=io.StringIO())
        assert server.problems == []
    finally:
        server.stop()
    study.researchers.add(researcher)
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def report_of(client: APIClient) -> dict[str, Any]:
    response = client.get(f"/api/studies/{SLUG}/disagreement/", {"judge": "more-chars"})
    assert response.status_code == 200, response.content
    return response.json()


def judge_p(favoured: dict[str, str]) -> tuple[float, int]:
    """P(the judge's answer names the favoured candidate), recomputed from the stored outputs."""
    points = [
        POINTS[winner] if favoured[c] == "A" else 1 - POINTS[winner]
        for c, winner in JudgeOutput.objects.filter(judge__name="more-chars", status="valid").values_list(
            "comparison__external_id", "winner"
        )
    ]
    return sum(points) / len(points), len(points)


@pytest.mark.django_db
def test_more_text_counts_the_characters_when_the_page_text_is_kept(judged: APIClient, researcher) -> None:  # type: ignore[no-untyped-def]
    report = report_of(judged)
    assert report["text_measure"] == "characters"
    comparisons = list(
        Comparison.objects.filter(study__slug=SLUG).select_related("candidate_a__image", "candidate_b__image")
    )
    more_chars = {
        c.external_id: "A" if characters(c.candidate_a) > characters(c.candidate_b) else "B" for c in comparisons
    }
    more_area = {
        c.external_id: "A" if text_area(c.candidate_a) > text_area(c.candidate_b) else "B" for c in comparisons
    }
    assert all(more_chars[c] != more_area[c] for c in more_chars)  # the two measures disagree everywhere
    p, n = judge_p(more_chars)
    assert (p, n) == (1.0, 2 * N_PAGES)
    text = next(r for r in report["conditioned"] if r["attribute"] == "text")
    assert text["judge"] == {"p": p, "n": n, "n_comparisons": N_PAGES}
    assert text["people"] == {"p": None, "n": 0, "n_comparisons": 0}
    # Each candidate's attribute is its character count (no votes: no drill-down to read it from).
    for lens_row in lens_comparisons(study=Study.objects.get(slug=SLUG)):
        comparison = next(c for c in comparisons if c.external_id == lens_row.external_id)
        assert lens_row.attributes["text_a"] == characters(comparison.candidate_a)
        assert lens_row.attributes["text_b"] == characters(comparison.candidate_b)
    # The page names the measure.
    client = Client()
    client.force_login(researcher)
    body = client.get(f"/studies/{SLUG}/disagreement/", {"judge": "more-chars", "part": "body"}).content.decode()
    assert "the page with more text (visible characters of its text blocks)" in body


@pytest.mark.django_db
def test_more_text_falls_back_to_the_area_when_a_page_text_is_missing(judged: APIClient, researcher) -> None:  # type: ignore[no-untyped-def]
    CandidateBlocks.objects.filter(candidate__page__external_id="p2", candidate__system__external_id="beta").delete()
    report = report_of(judged)
    assert report["text_measure"] == "area"
    more_area = {
        c.external_id: "A" if text_area(c.candidate_a) > text_area(c.candidate_b) else "B"
        for c in Comparison.objects.filter(study__slug=SLUG).select_related("candidate_a__image", "candidate_b__image")
    }
    p, n = judge_p(more_area)
    text = next(r for r in report["conditioned"] if r["attribute"] == "text")
    assert (p, n) == (0.0, 2 * N_PAGES) and text["judge"]["p"] == p and text["judge"]["n"] == n
    client = Client()
    client.force_login(researcher)
    body = client.get(f"/studies/{SLUG}/disagreement/", {"judge": "more-chars", "part": "body"}).content.decode()
    assert "the page with more text (area of its text blocks: the page text was not kept)" in body


@pytest.mark.django_db
def test_a_candidate_without_blocks_leaves_the_characters_measure(judged: APIClient) -> None:
    """A candidate given as an image (no blocks, no page text) has no known amount of text: its
    comparison leaves the row, and the others keep counting characters."""
    candidate = Candidate.objects.get(page__external_id="p3", system__external_id="beta")
    Candidate.objects.filter(pk=candidate.pk).update(blocks=[])
    CandidateBlocks.objects.filter(candidate=candidate).delete()
    report = report_of(judged)
    assert report["text_measure"] == "characters"
    text = next(r for r in report["conditioned"] if r["attribute"] == "text")
    assert text["judge"] == {"p": 1.0, "n": 2 * (N_PAGES - 1), "n_comparisons": N_PAGES - 1}
    assert text["n_equal"] == 0
