"""``run_judges --max-calls / --budget-usd``: a judge's call budget spent adaptively
(docs/protocol.md "A judge's call budget"), against a real loopback provider that answers by the
systems' known strengths."""

from __future__ import annotations

import base64
import io
import json
import math
import random
import threading
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum
from PIL import Image

from annotation.models import AuditEvent, Axis, Candidate, Comparison, Page, Study, System
from calibration.models import CoefficientSet
from judges.models import JudgeOutput
from judges.services.budget import judge_budget_report_section
from judges.services.runs import judge_run_estimate
from ranking.leaderboard import leaderboard_compute
from tests.judges.factories import REFERENCE_COLOUR, image_bytes, make_judge, store
from tests.judges.fake_provider import FakeProvider, _user_parts

# Four systems told apart by colour; strengths on the logit scale: s0 and s1 close, s3 far from s0.
COLOURS = {"s0": (200, 40, 40), "s1": (40, 40, 200), "s2": (40, 160, 40), "s3": (160, 40, 160)}
STRENGTH = {"s0": 0.0, "s1": 0.1, "s2": 1.2, "s3": 2.4}


class StrengthProvider(FakeProvider):
    """Answers A with probability σ(θ_A − θ_B) for the systems whose colours it is shown (seeded)."""

    def __init__(self) -> None:
        super().__init__(inspect=False)
        self._rng = random.Random(31)
        self._shown = threading.local()

    def _parse(self, path: str, headers: dict[str, str], body: bytes) -> Any:
        got = super()._parse(path, headers, body)
        names = []
        for part in _user_parts(path, json.loads(body)):
            if part.get("type") == "image_url":
                data = base64.b64decode(part["image_url"]["url"].split(";base64,", 1)[1])
                with Image.open(io.BytesIO(data)) as image:
                    pixel = image.convert("RGB").getpixel((image.width // 3, image.height // 2))
                palette = {"reference": REFERENCE_COLOUR, **COLOURS}
                names.append(
                    min(
                        palette,
                        key=lambda k: sum((a - b) ** 2 for a, b in zip(palette[k], pixel, strict=True)),
                    )
                )
        self._shown.names = names
        return got

    def reply_text(self, behaviour: str, axes: list[str]) -> str:
        _, a, b = self._shown.names
        with self._lock:
            draw = self._rng.random()
        self.winner = "A" if draw < 1.0 / (1.0 + math.exp(STRENGTH[b] - STRENGTH[a])) else "B"
        return super().reply_text(behaviour, axes)


@pytest.fixture
def strength_provider():  # type: ignore[no-untyped-def]
    server = StrengthProvider().start()
    yield server
    server.stop()


def make_deployment(pages: int = 30) -> Study:
    """Every pair of the four systems on every page, all in the deployment set."""
    study = Study.objects.create(slug="budget", title="Budget study", neutralize_media=False)
    Axis.objects.create(
        study=study, axis_id="GLOBAL_LAYOUT_FIDELITY", scope="fixed", description="Layout.", position=0
    )
    systems = {
        sid: System.objects.create(study=study, external_id=sid, name=f"System {sid}", position=i)
        for i, sid in enumerate(COLOURS)
    }
    reference, _ = store(image_bytes(REFERENCE_COLOUR, (120, 160)))
    images = {sid: store(image_bytes(colour, (120, 160)))[0] for sid, colour in COLOURS.items()}
    ids = list(COLOURS)
    for p in range(pages):
        page = Page.objects.create(
            study=study, external_id=f"p{p:03d}", image=reference, targets=[], media=[], position=p
        )
        cands = {
            sid: Candidate.objects.create(page=page, system=systems[sid], image=images[sid], rendered=True)
            for sid in ids
        }
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                first, second = (a, b) if p % 2 else (b, a)
                Comparison.objects.create(
                    study=study,
                    external_id=f"c{p:03d}{first}{second}",
                    page=page,
                    candidate_a=cands[first],
                    candidate_b=cands[second],
                    set="deployment",
                )
    return study


def run(*args: str) -> str:
    out = StringIO()
    call_command("run_judges", "budget", "--judge", "judge-x", "--set", "deployment", *args, stdout=out)
    return out.getvalue()


def pair_comparisons(a: str, b: str) -> int:
    called = JudgeOutput.objects.filter(order="primary").values_list(
        "comparison__candidate_a__system__external_id", "comparison__candidate_b__system__external_id"
    )
    return sum(1 for x, y in called if {x, y} == {a, b})


@pytest.mark.django_db
def test_a_call_budget_is_respected_and_spent_on_close_pairs(strength_provider: StrengthProvider) -> None:
    make_deployment(pages=30)
    make_judge(base_url=strength_provider.url, concurrency=1)
    out = run("--max-calls", "161")
    # Both orders of every chosen comparison: 80 comparisons, 160 calls; never more than the budget.
    outputs = JudgeOutput.objects.all()
    assert outputs.count() == 160
    assert outputs.filter(status="valid").count() == 160
    assert outputs.aggregate(n=Sum("calls"))["n"] == len(strength_provider.requests) == 160
    assert strength_provider.problems == []
    assert "round 1: 6 comparisons, 12 calls, spent 12/161" in out
    assert "adaptive with a budget of 161 calls: 160 spent in" in out and "1 unspent" in out
    # Every pair once in the uniform start; then the adjacent pairs, the close s0–s1 one above all,
    # get far more than s0–s3, which is never adjacent (it gets the uniform floor).
    close, far = pair_comparisons("s0", "s1"), pair_comparisons("s0", "s3")
    assert far >= 1
    assert close >= 2 * far, (close, far)
    event = AuditEvent.objects.get(action="judges.run_budget")
    assert event.details["allocation"] == "adaptive" and event.details["calls"] == 160
    assert event.details["max_calls"] == 161 and event.details["uniform_floor"] == 0.25
    section = judge_budget_report_section(study=Study.objects.get(slug="budget"))
    assert section is not None and section[0]["judge"] == "judge-x" and section[0]["calls"] == 160
    # The leaderboard on those outputs says its judge calls were allocated adaptively.
    study = Study.objects.get(slug="budget")
    CoefficientSet.objects.create(study=study, name="v1", coefficients={"judge-x": 1.0}, source="import")
    report = leaderboard_compute(study=study, coefficient_set="v1", resamples=50, seed=1)
    assert report["n_comparisons"] == 80 and report["n_skipped"] == 30 * 6 - 80
    assert report["judge_allocation"][0]["allocation"] == "adaptive"
    assert report["judge_allocation"][0]["max_calls"] == 161


@pytest.mark.django_db
def test_a_dollar_budget_buys_the_dry_runs_calls(strength_provider: StrengthProvider) -> None:
    study = make_deployment(pages=4)
    judge = make_judge(
        base_url=strength_provider.url, concurrency=1, price_input_per_mtok=2.0, price_output_per_mtok=8.0
    )
    estimate = judge_run_estimate(study=study, judge=judge, set="deployment")
    per_call = estimate.cost_usd / estimate.calls
    out = run("--budget-usd", f"{per_call * 20.5:.6f}")
    assert JudgeOutput.objects.count() == 20
    assert "budget 20 calls" in out and "20 spent in 2 rounds" in out


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--max-calls", "11"],
            "below one call per comparison of the uniform start: 6 system pairs x 2 calls "
            "(2 orders x 1 repeats) = 12 calls at least",
        ),
        (["--max-calls", "0"], "--max-calls must be a positive integer"),
        (["--budget-usd", "-1"], "--budget-usd must be a positive amount"),
        (["--max-calls", "20", "--budget-usd", "1"], "not both"),
        (["--budget-usd", "0.000001"], "below one call per comparison of the uniform start"),
        (["--max-calls", "20", "--batch"], "do not combine with --batch"),
    ],
)
def test_bad_budgets_are_refused_in_one_line(
    strength_provider: StrengthProvider, args: list[str], message: str
) -> None:
    make_deployment(pages=2)
    make_judge(
        base_url=strength_provider.url, concurrency=1, price_input_per_mtok=2.0, price_output_per_mtok=8.0
    )
    with pytest.raises(CommandError) as info:
        run(*args)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert JudgeOutput.objects.count() == 0 and strength_provider.requests == []


@pytest.mark.django_db
def test_a_dollar_budget_needs_prices_and_a_set_needs_comparisons(
    strength_provider: StrengthProvider,
) -> None:
    make_deployment(pages=2)
    make_judge(base_url=strength_provider.url)
    with pytest.raises(CommandError, match="has no prices") as info:
        run("--budget-usd", "5")
    assert "\n" not in str(info.value)
    out = StringIO()
    with pytest.raises(CommandError, match="has no human comparisons to judge"):
        call_command(
            "run_judges", "budget", "--judge", "judge-x", "--set", "human", "--max-calls", "50", stdout=out
        )
    assert JudgeOutput.objects.count() == 0


@pytest.mark.broker
@pytest.mark.serial
def test_a_budget_run_with_a_broker_waits_for_every_round(celery_worker_process, strength_provider) -> None:  # type: ignore[no-untyped-def]
    make_deployment(pages=4)
    make_judge(base_url=strength_provider.url, concurrency=2)
    out = run("--max-calls", "24", "--poll", "0.1", "--wait-timeout", "120")
    assert "each round queued and waited for" in out
    assert (
        "round 1: 6 comparisons, 12 calls, spent 12/24" in out
        and "round 2: 6 comparisons, 12 calls, spent 24/24" in out
    )
    # The command returned only once every round had finished: every output valid, none left pending.
    assert JudgeOutput.objects.count() == 24 and JudgeOutput.objects.filter(status="valid").count() == 24
    assert len(strength_provider.requests) == 24 and strength_provider.problems == []
