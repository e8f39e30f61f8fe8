"""The built-in local judge on any study (issue 45 item 6; docs/protocol.md "The built-in local
judge"), every failed call's reason grouped on the judges page and in the API, and a newcomer's
whole path with no API key: HTML outputs rendered into a new study, votes, the local judge with 0
failed calls, calibration, a judge leaderboard and the human votes' leaderboard."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from PIL import Image, ImageDraw

from demo.service import demo_judge_ensure
from judges.models import JudgeOutput, OutputStatus
from judges.providers.base import ProviderRefused
from judges.providers.demo import similarity_reply
from judges.services.runs import judge_run_start
from stats.image_similarity import structural_similarity

pytestmark = pytest.mark.django_db

BOXES = [(40, 30, 260, 80), (40, 120, 360, 200), (60, 220, 200, 270)]  # a heading, a table, a caption


def page_image(offset: int = 0, keep: int = 3, noise: float = 0.0, seed: int = 0) -> Image.Image:
    image = Image.new("L", (400, 300), 255)
    draw = ImageDraw.Draw(image)
    for k, (x0, y0, x1, y1) in enumerate(BOXES[:keep]):
        draw.rectangle((x0 + offset, y0 + offset, x1 + offset, y1 + offset), fill=40 + 60 * k)
    if noise:
        rng = np.random.default_rng(seed)
        pixels = np.clip(np.asarray(image, dtype=float) + rng.normal(0, noise, (300, 400)), 0, 255)
        image = Image.fromarray(pixels.astype(np.uint8))
    return image


def data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


AXES_PROMPT = 'ACTIVE_AXES: [{"id": "LAYOUT", "scope": "fixed"}]'


def test_the_candidate_more_like_the_reference_wins_with_its_similarities_as_the_reason() -> None:
    reference = page_image()
    close, far = page_image(offset=3), page_image(offset=25, keep=2)
    reply = json.loads(similarity_reply([data_url(reference), data_url(close), data_url(far)], AXES_PROMPT))
    assert reply["winner"] == "A" and reply["axes"] == [{"id": "LAYOUT", "score": 2}]
    want_a = structural_similarity(*(np.asarray(i.resize((160, 120), Image.Resampling.BILINEAR), dtype=float)
                                     for i in (reference, close)))
    assert f"A {want_a:.3f}" in reply["reason"]
    swapped = json.loads(similarity_reply([data_url(reference), data_url(far), data_url(close)], AXES_PROMPT))
    assert swapped["winner"] == "B"
    same = json.loads(similarity_reply([data_url(reference), data_url(close), data_url(close)], AXES_PROMPT))
    assert same["winner"] == "TIE" and same["axes"] == [{"id": "LAYOUT", "score": 0}]
    with pytest.raises(ProviderRefused, match="cannot decode"):
        similarity_reply([data_url(reference), "data:image/png;base64,AAAA", data_url(close)], AXES_PROMPT)


def test_failed_calls_show_their_reasons_grouped_on_the_page_and_in_the_api(admin_user) -> None:  # type: ignore[no-untyped-def]
    from tests.judges.factories import make_example_study

    study = make_example_study(slug="reasons", extra_pages=4)
    judge = demo_judge_ensure()
    comparisons = list(study.comparisons.order_by("pk"))
    for k, comparison in enumerate(comparisons):
        status = OutputStatus.FAILED if k < 5 else OutputStatus.INVALID
        error = "no ground truth for this study" if k < 4 else ("HTTP 429 after 5 attempts" if k < 5 else "")
        JudgeOutput.objects.create(judge=judge, comparison=comparison, order="primary", repeat=0,
                                   status=status, error=error)
    client = Client()
    client.force_login(admin_user)
    rows = client.get(reverse("judges:api-runs", args=["reasons"])).json()
    assert rows[0]["failed"] == 5 and rows[0]["reasons"] == [
        {"status": "failed", "reason": "no ground truth for this study", "calls": 4},
        {"status": "invalid", "reason": "no reason was stored", "calls": len(comparisons) - 5},
        {"status": "failed", "reason": "HTTP 429 after 5 attempts", "calls": 1},
    ]
    page = " ".join(client.get(reverse("judges:study", args=["reasons"])).content.decode().split())
    assert "no ground truth for this study: <strong>4</strong>" in page
    assert "HTTP 429 after 5 attempts: <strong>1</strong>" in page


PAGE_HTML = (
    "<body style='margin:0;background:#fff'>"
    + "".join(
        f"<div style='position:absolute;left:{{x{k}}}px;top:{{y{k}}}px;width:{x1 - x0}px;height:{y1 - y0}px;"
        f"background:rgb({40 + 60 * k},{40 + 60 * k},{40 + 60 * k})'></div>"
        for k, (x0, y0, x1, y1) in enumerate(BOXES)
    )
    + "</body>"
)


def html_of(offset: int, keep: int = 3) -> str:
    html = PAGE_HTML
    for k, (x0, y0, _x1, _y1) in enumerate(BOXES):
        html = html.replace(f"{{x{k}}}", str(x0 + offset if k < keep else -999)).replace(f"{{y{k}}}", str(y0 + offset))
    return html


@pytest.mark.browser
def test_a_newcomer_reaches_calibration_and_leaderboards_with_no_api_key(
    tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """HTML outputs of three systems rendered into a new (non-demo) study; raters vote through the
    rater services; the local judge answers every call (0 failed); calibration freezes its
    coefficient; the judge leaderboard and the human leaderboard both rank the faithful system first."""
    from annotation.services.scheduling import blocks_schedule
    from tests.annotation.render.conftest import browser_available
    from tests.annotation.test_adaptive_allocation import _run_raters

    browser_available()
    root = tmp_path / "in"
    systems = {"faithful": (0, 3), "shifted": (12, 3), "sparse": (30, 2)}
    for i in range(6):
        (root / "refs").mkdir(parents=True, exist_ok=True)
        page_image(offset=i).save(root / "refs" / f"p{i}.png")
        for name, (offset, keep) in systems.items():
            (root / name).mkdir(parents=True, exist_ok=True)
            (root / name / f"p{i}.html").write_text(html_of(offset + i, keep))
    render = json.dumps({"viewport": "400x300", "mode": "canvas", "timeout_s": 8, "max_height": 1000, "settle_ms": 100})
    call_command(
        "new_study", "pairwise_reference", "--reference", str(root / "refs"),
        *[arg for name in systems for arg in ("--system", f"{name}={root / name}")],
        "--option", f"render={render}", "--slug", "newcomer", stdout=io.StringIO(), stderr=io.StringIO(),
    )
    from annotation.models import Comparison, Study

    study = Study.objects.get(slug="newcomer")
    assert study.options.get("demo") is None and Comparison.objects.filter(study=study).count() == 18
    blocks_schedule(study=study, blocks=1, block_size=18, repeats=0, min_gap=5, raters=[4], seed=1, checks=None)
    _run_raters(study, 4, {"faithful": 1.5, "shifted": 0.0, "sparse": -1.5})

    judge = demo_judge_ensure()
    with django_capture_on_commit_callbacks(execute=True):  # the calls' tasks, as after the page's commit
        plan = judge_run_start(study=study, judge=judge, orders=["primary", "swapped"], repeats=1)
    assert plan.calls == 36
    rows = JudgeOutput.objects.filter(judge=judge, comparison__study=study)
    outputs = {status: rows.filter(status=status).count() for status in ("valid", "invalid", "failed")}
    assert outputs["failed"] == 0 and outputs["invalid"] == 0 and outputs["valid"] == 36

    call_command("calibrate", "newcomer", "--json", str(tmp_path / "cal.json"), "--freeze", "local",
                 "--bootstrap", "50", stdout=io.StringIO())
    calibration = json.loads((tmp_path / "cal.json").read_text())
    assert calibration["n_comparisons"] == 18 and calibration["coefficients"][judge.name] > 0
    call_command("leaderboard", "newcomer", "--coefficients", "local", "--json", str(tmp_path / "lb.json"),
                 "--bootstrap", "50", stdout=io.StringIO())
    call_command("leaderboard", "newcomer", "--human", "--json", str(tmp_path / "human.json"),
                 "--bootstrap", "50", stdout=io.StringIO())
    judged = json.loads((tmp_path / "lb.json").read_text())
    human = json.loads((tmp_path / "human.json").read_text())
    assert judged["systems"][0]["system"] == "faithful" and judged["n_skipped"] == 0
    assert human["systems"][0]["system"] == "faithful" and human["n_votes"] > 0

