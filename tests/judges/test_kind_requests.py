"""Each study kind's design says which judge request it builds (docs/protocol.md "Judge requests by study
kind"; decision 0077): a pairwise study without a reference, a rating study, and a kind added without
touching ``judges``."""

from __future__ import annotations

import ast
import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from annotation.kinds import DESIGNS
from annotation.kinds.judging import ONE_ORDER, REPLY_VERDICT, UNIT_COMPARISON, JudgeRequestPlan
from annotation.kinds.pairwise import PairwiseDesign
from annotation.models import Comparison, Study
from judges.models import Judge, JudgeOutput
from judges.services.runs import judge_outputs_run_local, judge_run_start
from tests.judges.factories import make_judge
from tests.judges.fake_provider import PAIRWISE_LABELS, FakeProvider
from tests.kind_reports.kind_report_factories import import_kind_study

pytestmark = pytest.mark.django_db
JUDGES = Path(__file__).resolve().parents[2] / "judges"


def _images(got: Any) -> list[bytes]:
    user = next(m for m in got.data["messages"] if m["role"] == "user")
    return [
        base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
        for p in user["content"]
        if p["type"] == "image_url"
    ]


def test_a_pairwise_study_without_a_reference_is_judged_in_both_orders(
    tmp_path: Path, provider: FakeProvider
) -> None:
    study = import_kind_study("pairwise", tmp_path, slug="pw")
    provider.inspect = False
    provider.expect_labels = list(PAIRWISE_LABELS)
    provider.winner = "A"
    judge = make_judge(base_url=provider.url, concurrency=1)
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    n = Comparison.objects.filter(study=study).count()
    assert plan.calls == 2 * n
    assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": 2 * n}
    assert provider.problems == []  # two images, CANDIDATE A then CANDIDATE B, the ACTIVE_AXES block
    outputs = {(o.comparison_id, o.order): o for o in JudgeOutput.objects.all()}
    # Canonical answers: the judge said "A" every time, which is canonical B in the swapped order.
    assert {o.winner for (_, order), o in outputs.items() if order == "primary"} == {"A"}
    assert {o.winner for (_, order), o in outputs.items() if order == "swapped"} == {"B"}
    by_output = {o.pk: o for o in outputs.values()}
    sent = dict(zip(sorted(by_output), provider.requests, strict=True))  # one worker: in output order
    for comparison in Comparison.objects.filter(study=study).select_related(
        "page", "candidate_a__system", "candidate_b__system", "candidate_a__image", "candidate_b__image"
    ):
        primary = sent[outputs[(comparison.pk, "primary")].pk]
        swapped = sent[outputs[(comparison.pk, "swapped")].pk]
        assert _images(primary) == _images(swapped)[::-1]  # the swapped call shows B first
        assert comparison.page.text.strip() and comparison.page.text.strip() in primary.prompt  # the brief
        assert "REFERENCE" not in primary.prompt.split("ACTIVE_AXES")[0].upper().replace("NO REFERENCE", "")
        for word in (comparison.candidate_a.system.external_id, comparison.candidate_a.system.name):
            assert word not in primary.prompt


def test_the_local_judge_refuses_a_pairwise_study_without_a_reference(tmp_path: Path) -> None:
    study = import_kind_study("pairwise", tmp_path, slug="pw")
    judge = Judge.objects.create(name="local", provider="demo", model="demo")
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    counts = judge_outputs_run_local(output_ids=plan.output_ids)
    assert counts == {"failed": len(plan.output_ids)}
    errors = set(JudgeOutput.objects.values_list("error", flat=True))
    assert len(errors) == 1 and "pairwise study without a reference" in errors.pop()


def _rating_options(doc: dict[str, Any]) -> None:
    doc["options"] = {"dimensions": ["clarity", "balance"], "scale": [1, 7]}


def test_a_rating_study_is_rated_on_its_dimensions_and_scale(tmp_path: Path, provider: FakeProvider) -> None:
    study = import_kind_study("rating", tmp_path, slug="rt", edit=_rating_options)
    judge = make_judge(base_url=provider.url, concurrency=1)
    # The emulator answers ratings only when told how: a reply the contract accepts.
    provider.inspect = False
    provider.default = "valid"
    provider.reply_text = lambda behaviour, axes: json.dumps(  # type: ignore[method-assign]
        {
            "ratings": [{"id": "clarity", "score": 6}, {"id": "balance", "score": 2}],
            "reason": "clear, lopsided",
        }
    )
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": len(plan.output_ids)}
    got = provider.requests[0]
    assert got.labels == ["IMAGE"] and "integers 1 to 7" in got.prompt and '"clarity"' in got.prompt
    schema = got.data["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["ratings"]["items"]["properties"]["score"]["enum"] == list(range(1, 8))
    output = JudgeOutput.objects.first()
    assert output is not None and output.candidate_id is not None and output.winner == ""
    assert output.axis_scores == [{"id": "clarity", "score": 6}, {"id": "balance", "score": 2}]


def test_a_rating_study_without_dimensions_says_why_it_cannot_be_judged(tmp_path: Path) -> None:
    study = import_kind_study("rating", tmp_path, slug="rt", edit=_rating_options)
    study.options = {**study.options, "dimensions": []}
    study.save(update_fields=["options"])
    judge = Judge.objects.create(name="local", provider="demo", model="demo")
    with pytest.raises(Exception, match="no rating dimensions"):
        judge_run_start(study=study, judge=judge, dispatch=False)


@dataclass(frozen=True)
class _OneOrderPairwise(PairwiseDesign):
    """A kind added in a test: pairwise without a reference, judged in one order only."""

    def judge_plan(self, study: Study) -> JudgeRequestPlan:
        return JudgeRequestPlan(
            unit=UNIT_COMPARISON,
            slots=(("CANDIDATE A", "first"), ("CANDIDATE B", "second")),
            reply=REPLY_VERDICT,
            orders=ONE_ORDER,
            default_prompt="Which image answers the brief? {{BRIEF}}",
        )


def test_a_new_kind_is_judged_without_any_judge_code(
    tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = import_kind_study("pairwise", tmp_path, slug="pw")
    monkeypatch.setitem(
        DESIGNS,
        "one_order_pairwise",
        _OneOrderPairwise(
            kind="one_order_pairwise",
            label="One-order pairwise",
            unit="comparison",
            has_reference=False,
            pairwise=True,
        ),
    )
    Study.objects.filter(pk=study.pk).update(kind="one_order_pairwise")
    study.refresh_from_db()
    provider.inspect = False
    provider.expect_labels = list(PAIRWISE_LABELS)
    judge = make_judge(base_url=provider.url, concurrency=1)
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    n = Comparison.objects.filter(study=study).count()
    assert plan.calls == n  # the kind's one order, whatever run_judges' default orders
    assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": n}
    assert provider.requests[0].prompt.startswith("Which image answers the brief?")
    assert provider.problems == []


def test_judges_never_name_a_study_kind() -> None:
    """No string in the judges app is a study kind's name: what differs by kind comes from its design."""
    kinds = set(DESIGNS)
    found = []
    for path in JUDGES.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kinds:
                found.append(f"{path.relative_to(JUDGES.parent)}:{node.lineno} {node.value!r}")
    assert found == []
