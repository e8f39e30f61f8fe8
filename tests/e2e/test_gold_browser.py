"""Issue 30 item 4 (gold trials) in a real browser (Chromium through Playwright), by accessible names.

A small ``pairwise_reference`` study scheduled with gold trials; one browser rater walks the whole
assignment and answers every gold trial wrongly (the degraded side: the test knows which trials are
gold from the Trial rows, by position, never from the page), two more raters (the test client)
answer normally. The gold pages look like every other trial (same accessible controls, image slots
and URLs), and ``agreement_report`` excludes the wrong-gold rater by default and keeps them with
``--no-rules``.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.test import Client

from annotation.models import GOLD_EXPECTED, Trial, Vote
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study
from tests.e2e.test_rater_browser import app_url, browser, progress, wait_for_next  # noqa: F401
from tests.e2e.test_trial_page_browser import axis_groups, open_trial, ready

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

BLOCK, GOLD = 4, 2  # four comparisons and two gold trials per assignment: six trials


@pytest.fixture
def gold_study():  # type: ignore[no-untyped-def]
    """One block of four comparisons with two gold trials, for three raters; every page has the same axes."""
    rs = make_rater_study(slug="gold-browser", pages=3, failed_render=False, targets_every=0)
    blocks_schedule(study=rs.study, blocks=1, block_size=BLOCK, repeats=0, min_gap=1, raters=[3], seed=4, gold=GOLD)
    rs.study.refresh_from_db()
    # Scripted raters answer in well under a second; the saved rules switch "too fast" off, so the
    # gold rule is the one that decides (the reports apply saved rules by default).
    rs.study.options = {**(rs.study.options or {}), "exclusion_rules": {"min_median_response_ms": None}}
    rs.study.save(update_fields=["options"])
    return rs.study


def trial_look(page: Any) -> dict[str, Any]:
    """What a rater sees of a trial, with the opaque per-trial tokens and the progress count masked."""
    token = re.compile(r"/t/[^/\"']+/")
    page.wait_for_function("() => [...document.querySelectorAll('[data-trial] img')].every(i => i.complete && i.naturalWidth)")
    # The time-left estimate appears once there are answers to time: masked, like the count.
    snapshot = re.sub(r"\n- text: about [^\n]* left", "", page.locator("[data-trial]").aria_snapshot())
    images = page.eval_on_selector_all(
        "[data-trial] img", "els => els.map(e => [e.alt, e.getAttribute('src'), e.naturalWidth, e.naturalHeight])")
    return {
        "url": page.url,
        "controls": re.sub(r"\d+ of \d+", "N of M", token.sub("/t/T/", snapshot)),
        "buttons": sorted(page.get_by_role("button").all_inner_texts()),
        "images": [(alt, token.sub("/t/T/", src)) for alt, src, _, _ in images],
        "sizes": [(w, h) for _, _, w, h in images],
        "action": token.sub("/t/T/", page.locator("[data-answer-form]").get_attribute("action") or ""),
    }


def degraded_side(trial: Trial) -> str:
    """The displayed side of a gold trial's degraded image (canonical A is the identical one)."""
    return "A" if trial.swapped else "B"


def answer_by_mouse(page: Any, verdict: str) -> None:
    """Verdict, confidence, "All axes as the verdict", Submit, by accessible names."""
    radio = page.get_by_role("radio", name=verdict, exact=True)
    page.locator(f"label[for='{radio.get_attribute('id')}']").click()
    page.get_by_role("group", name="Confidence").locator("label", has_text="4").click()
    page.get_by_role("button", name="All axes as the verdict").click()
    for i in range(axis_groups(page).count()):
        assert axis_groups(page).nth(i).get_by_role("radio", name=f"{verdict} better", exact=True).is_checked()
    before = progress(page)
    page.get_by_role("button", name="Submit", exact=True).click()
    wait_for_next(page, before)


def answer_by_client(study: Any, participant: str) -> None:
    """A rater through the test client: gold trials right, the others alternating A and B."""
    client = Client()
    r = client.get(f"/s/{study.link_token}/?participant={participant}")
    html = client.get(r["Location"]).content.decode()
    n = 0
    while m := re.search(r'action="/t/([^/"]+)/vote/"', html):
        trial = Trial.objects.get(token=m.group(1))
        if trial.attention_expected == GOLD_EXPECTED:
            verdict = "B" if trial.swapped else "A"  # the identical side
        else:
            verdict = "AB"[n % 2]
        n += 1
        axes = re.findall(r'name="axis:([A-Z_]+)" value="0"', html)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', html).group(1)
        r = client.post(f"/t/{trial.token}/vote/", {"verdict": verdict, "confidence": "3", "idempotency_key": key,
                                                    **{f"axis:{a}": "0" for a in axes}}, HTTP_HX_REQUEST="true")
        html = r.content.decode()
    assert "Thank you" in html and n == BLOCK + GOLD


def test_a_rater_who_fails_gold_in_the_browser_is_excluded_by_default(app_url, browser, gold_study, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, gold_study, "wrong-gold", {"width": 1440, "height": 900})
    trials = list(Trial.objects.filter(assignment__rater__external_id="wrong-gold").order_by("position"))
    assert len(trials) == BLOCK + GOLD and sum(t.attention_expected == GOLD_EXPECTED for t in trials) == GOLD
    looks: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for i, trial in enumerate(trials):
        ready(page)
        assert page.locator("[data-answer-form]").get_attribute("action") == f"/t/{trial.token}/vote/"  # by position
        is_gold = trial.attention_expected == GOLD_EXPECTED
        looks[is_gold].append({**trial_look(page), "first": i == 0})
        answer_by_mouse(page, degraded_side(trial) if is_gold else "AB"[i % 2])
    assert page.get_by_text("Thank you").first.is_visible()
    context.close()
    connections.close_all()
    # (1) Gold pages look like any other trial after the first (which alone has the instructions open and
    # no Undo; gold is never first): the same accessible controls, image slots (names, URL shape), page URL.
    assert len(looks[True]) == GOLD and len(looks[False]) == BLOCK and looks[False][0]["first"]

    def shown(look: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in look.items() if k not in ("sizes", "first")}, sort_keys=True)

    later = [look for look in looks[True] + looks[False] if not look["first"]]
    assert len(later) == BLOCK + GOLD - 1 and len({shown(look) for look in later}) == 1, [shown(x) for x in later]
    look = looks[True][0]
    assert look["url"] == f"{app_url}/s/{gold_study.link_token}/"  # the study page; trials are swapped in
    assert [alt for alt, _ in look["images"] if alt] == ["Reference page", "Candidate A", "Candidate B"]
    for name in ("All axes as the verdict", "Submit", "Undo last answer"):
        assert f'button "{name}"' in look["controls"]
    for name in ('radio "A"', 'radio "B"', 'group "Confidence"', 'group "Global layout fidelity"'):
        assert name in look["controls"]
    # A gold trial's candidates take real candidates' pixel sizes (never both the reference's), so
    # their size does not tell them apart (tests/annotation/test_gold.py checks the frequencies).
    from annotation.models import Candidate

    real = {(c.image.width, c.image.height) for c in Candidate.objects.filter(page__study=gold_study).exclude(
        image=None).select_related("image")}
    for g in looks[True]:
        size = {alt: wh for (alt, _), wh in zip(g["images"], g["sizes"], strict=True) if alt}
        shown = [size["Candidate A"], size["Candidate B"]]
        assert set(shown) <= real and shown != [size["Reference page"]] * 2, (size, real)
    # Every gold answer was the degraded side (wrong), stored as such.
    gold_votes = Vote.objects.filter(trial__in=[t for t in trials if t.attention_expected == GOLD_EXPECTED])
    assert gold_votes.count() == GOLD and set(gold_votes.values_list("label", flat=True)) == {"B"}
    for participant in ("steady-1", "steady-2"):
        answer_by_client(gold_study, participant)
    # (2) agreement_report applies the saved rules by default: the wrong-gold rater is out, by the gold rule.
    out, stdout = tmp_path / "default.json", io.StringIO()
    call_command("agreement_report", gold_study.slug, "--json", str(out), "--bootstrap", "20", stdout=stdout)
    report = json.loads(out.read_text())
    ex = report["exclusions"]
    assert ex["applied_by_default"] is True
    assert ex["excluded_raters"] == [{"participant": "wrong-gold", "rule": "gold", "rules": ["gold"]}], ex
    assert ex["n_raters"] == 3 and ex["n_kept_raters"] == 2
    assert "excluded: wrong-gold (gold)" in stdout.getvalue()
    raw_path = tmp_path / "raw.json"
    call_command("agreement_report", gold_study.slug, "--json", str(raw_path), "--bootstrap", "20", "--no-rules",
                 stdout=io.StringIO())
    raw = json.loads(raw_path.read_text())
    assert "exclusions" not in raw
    # The raw figures count all three raters' main answers (gold answers are never data); the default two.
    assert raw["n_main_annotations"] == 3 * BLOCK and report["n_main_annotations"] == 2 * BLOCK
    connections.close_all()  # else PostgreSQL's test database cannot be dropped (a session stays open)
