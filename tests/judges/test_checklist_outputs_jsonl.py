"""Checklist judge calls in the judge outputs JSONL and under superseding (docs/protocol.md "Files",
"Checklist judges"; paper B.5): one line per call with ``item`` and its ``answers``, read back by the
import as a live reply is validated; a replaced rendering's calls are superseded and remade."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from annotation.errors import Conflict, ValidationFailed
from annotation.models import Candidate, Study
from annotation.signals import candidates_replaced, candidates_replacing
from demo.service import demo_judge_ensure
from judges.models import JudgeChecklistAnswer, JudgeOutput, OutputStatus
from judges.selectors import checklist_judge_answers
from judges.services.outputs import judge_outputs_export_jsonl, judge_outputs_import_jsonl
from judges.services.runs import judge_outputs_run_local, judge_run_start
from tests.judges.test_local_checklist_judge import KEPT
from tests.kind_reports.kind_report_factories import import_kind_study


def judged_study(tmp_path: Path, slug: str, *, run: bool = True) -> Study:
    """A checklist study whose first rendering kept its page (the local judge answers from it) and
    whose second did not (every answer unclear); with ``run``, the local judge's calls made."""

    def with_page(doc: dict[str, Any]) -> None:
        doc["items"][0]["dom_blocks"] = KEPT

    study = import_kind_study("checklist", tmp_path, slug=slug, briefs=1, edit=with_page)
    if run:
        plan = judge_run_start(study=study, judge=demo_judge_ensure(), dispatch=False)
        assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": 2}
    return study


def stored_answers(study: Study) -> list[tuple[str, str, str, str, str, bool]]:
    return sorted(
        JudgeChecklistAnswer.objects.filter(output__candidate__page__study=study, output__superseded=False)
        .values_list(
            "output__judge__name", "output__candidate__external_id", "predicate__external_id", "answer", "evidence",
            "passed",
        )
    )


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.django_db
def test_checklist_calls_are_exported_and_imported_back(tmp_path: Path) -> None:
    source = judged_study(tmp_path, "src")
    first = tmp_path / "first.jsonl"
    assert judge_outputs_export_jsonl(study=source, path=first) == 2
    lines = lines_of(first)
    items = {c.pk: c.external_id for c in Candidate.objects.filter(page__study=source)}
    for line, output in zip(
        lines, JudgeOutput.objects.filter(candidate__page__study=source).order_by("candidate__external_id"), strict=True
    ):
        assert output.candidate_id is not None
        assert "comparison" not in line and line["item"] == items[output.candidate_id]
        assert (line["judge"], line["order"], line["repeat"], line["raw"], line["status"]) == (
            output.judge.name, output.order, output.repeat, output.raw, "valid"
        )
        # Its answers, question by question in the order asked, as stored.
        stored = list(
            JudgeChecklistAnswer.objects.filter(output=output).order_by("predicate__position", "predicate__external_id")
            .values_list("predicate__external_id", "answer", "evidence", "passed")
        )
        assert [(a["predicate"], a["answer"], a["evidence"], a["passed"]) for a in line["answers"]] == stored
        assert stored
    assert {a["answer"] for a in lines[1]["answers"]} == {"UNCLEAR"}  # the rendering without a kept page

    target = judged_study(tmp_path, "dst", run=False)
    counts = judge_outputs_import_jsonl(study=target, path=first)
    assert counts == {"lines": 2, "created": 2, "valid": 2, "invalid": 0, "failed": 0, "judges_created": 0}
    assert [row[1:] for row in stored_answers(target)] == [row[1:] for row in stored_answers(source)]
    assert JudgeOutput.objects.filter(candidate__page__study=target, imported=True).count() == 2
    second = tmp_path / "second.jsonl"
    judge_outputs_export_jsonl(study=target, path=second)
    assert second.read_text() == first.read_text()
    # The kind report's reader sees the imported calls like the live ones.
    assert len(checklist_judge_answers(study=target)) == len(checklist_judge_answers(study=source)) > 0


@pytest.mark.django_db
def test_item_lines_are_validated_as_live_replies(tmp_path: Path) -> None:
    source = judged_study(tmp_path, "src")
    exported = tmp_path / "out.jsonl"
    judge_outputs_export_jsonl(study=source, path=exported)
    good, other = lines_of(exported)
    target = judged_study(tmp_path, "dst", run=False)

    def write(*lines: dict[str, Any]) -> Path:
        path = tmp_path / "judges.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path

    # A reply without an evidence key is an invalid call with its reason, and no question rows.
    reply = json.loads(good["raw"])
    del reply["answers"][0]["evidence"]
    counts = judge_outputs_import_jsonl(study=target, path=write({**good, "raw": json.dumps(reply)}, other))
    assert counts["invalid"] == 1 and counts["valid"] == 1
    invalid = JudgeOutput.objects.get(candidate__page__study=target, status=OutputStatus.INVALID)
    assert "missing key(s): evidence" in invalid.error
    assert not JudgeChecklistAnswer.objects.filter(output=invalid).exists()
    # Already there, unknown, repeated: refused whole, nothing written.
    before = JudgeOutput.objects.count()
    for lines, message in (
        ((other,), r"judges.jsonl line 1: an output for judge .* item .* already exists"),
        (({**good, "item": "nope"},), r"judges.jsonl line 1, field .item.: unknown item \"nope\""),
        (({**good, "repeat": 1}, {**good, "repeat": 1}), r"judges.jsonl line 2: the output \(judge, item, order, repeat\)"),
    ):
        with pytest.raises(ValidationFailed, match=message):
            judge_outputs_import_jsonl(study=target, path=write(*lines))
    assert JudgeOutput.objects.count() == before


@pytest.mark.django_db
def test_a_replaced_renderings_checklist_calls_are_superseded_and_remade(tmp_path: Path) -> None:
    study = judged_study(tmp_path, "sup")
    judge = demo_judge_ensure()
    first, second = Candidate.objects.filter(page__study=study).order_by("external_id")
    old = JudgeOutput.objects.get(candidate=first)
    n_answers = JudgeChecklistAnswer.objects.filter(output=old).count()
    assert n_answers > 0
    # A call still running on the rendering refuses the replacement.
    JudgeOutput.objects.filter(pk=old.pk).update(status=OutputStatus.RUNNING)
    with pytest.raises(Conflict, match="1 judge call\\(s\\) are queued or running on comparisons or renderings"):
        candidates_replacing.send(sender=Study, study=study, comparison_ids=[], candidate_ids=[first.pk])
    JudgeOutput.objects.filter(pk=old.pk).update(status=OutputStatus.VALID)

    effects = [r for _, r in candidates_replaced.send(sender=Study, study=study, comparison_ids=[], candidate_ids=[first.pk])]
    assert {"outputs_superseded": 1} in effects
    # Kept as history with its questions, out of every current reader and of the export.
    assert JudgeOutput.all_versions.get(pk=old.pk).superseded
    assert JudgeChecklistAnswer.objects.filter(output=old).count() == n_answers
    assert not JudgeOutput.objects.filter(candidate=first).exists()
    assert set(checklist_judge_answers(study=study)["item"]) == {second.external_id}
    exported = tmp_path / "out.jsonl"
    assert judge_outputs_export_jsonl(study=study, path=exported) == 1
    assert lines_of(exported)[0]["item"] == second.external_id
    # run_judges --refresh makes exactly its successor.
    plan = judge_run_start(study=study, judge=judge, dispatch=False, refresh=True)
    assert plan.created == 1
    assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": 1}
    successor = JudgeOutput.objects.get(candidate=first)
    assert successor.pk != old.pk and JudgeChecklistAnswer.objects.filter(output=successor).count() == n_answers


@pytest.mark.django_db
def test_ratings_calls_round_trip_too(tmp_path: Path) -> None:
    """A rating study's judge calls (one rendering, a score per dimension) are item lines with
    ``ratings`` and ``reason``; a score off the scale is an invalid call on import."""
    from judges.models import Judge

    def dimensions(doc: dict[str, Any]) -> None:
        doc["options"] = {"dimensions": ["clarity", "balance"], "scale": [1, 7]}

    source = import_kind_study("rating", tmp_path, slug="rt", edit=dimensions)
    judge = Judge.objects.create(name="rater-judge", family="acme", provider="openai", model="m")
    ratings = [{"id": "clarity", "score": 6}, {"id": "balance", "score": 2}]
    reply: dict[str, Any] = {"ratings": ratings, "reason": "clear, lopsided"}
    candidate = Candidate.objects.filter(page__study=source).order_by("external_id").first()
    assert candidate is not None
    JudgeOutput.objects.create(
        judge=judge, candidate=candidate, order="primary", status=OutputStatus.VALID, raw=json.dumps(reply),
        axis_scores=ratings, reason="clear, lopsided", input_tokens=10, output_tokens=5, cached_tokens=0,
    )
    first = tmp_path / "first.jsonl"
    assert judge_outputs_export_jsonl(study=source, path=first) == 1
    (line,) = lines_of(first)
    assert (line["item"], line["ratings"], line["reason"], line["usage"]) == (
        candidate.external_id, reply["ratings"], reply["reason"],
        {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0},
    )
    target = import_kind_study("rating", tmp_path, slug="rt2", edit=dimensions)
    assert judge_outputs_import_jsonl(study=target, path=first)["valid"] == 1
    second = tmp_path / "second.jsonl"
    judge_outputs_export_jsonl(study=target, path=second)
    assert second.read_text() == first.read_text()
    off_scale = {**reply, "ratings": [{"id": "clarity", "score": 9}, {"id": "balance", "score": 2}]}
    third = import_kind_study("rating", tmp_path, slug="rt3", edit=dimensions)
    path = tmp_path / "off.jsonl"
    path.write_text(json.dumps({**line, "raw": json.dumps(off_scale)}) + "\n")
    assert judge_outputs_import_jsonl(study=third, path=path)["invalid"] == 1
    assert "must be an integer 1..7" in JudgeOutput.objects.get(candidate__page__study=third).error
