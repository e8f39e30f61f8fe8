"""The disagreement lens of a checklist judge (docs/protocol.md "The disagreement lens"): per question,
the judge's stored answers against the people's YES/NO majority, recomputed here from the rows."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import (
    Assignment,
    AssignmentState,
    Block,
    Candidate,
    Page,
    Predicate,
    Rater,
    Study,
    StudyKind,
    System,
    Trial,
    Vote,
)
from judges.models import Judge, JudgeChecklistAnswer, JudgeOutput, Provider
from tests.judges.factories import image_bytes, store
from tests.judges.fake_provider import SYSTEM_COLOURS

pytestmark = pytest.mark.django_db
SLUG = "lens-check"
TYPES = ("Content", "Layout", "Style")


def people(k: int, r: int) -> str:
    """Three raters a question: the majority is YES unless k % 4 == 1; rater 2 says UNCLEAR on k % 5 == 0."""
    if r == 2 and k % 5 == 0:
        return "UNCLEAR"
    truth = "NO" if k % 4 == 1 else "YES"
    if r == 1 and k % 7 == 3:
        return "NO" if truth == "YES" else "YES"
    return truth


def build(researcher) -> tuple[Study, Judge]:  # type: ignore[no-untyped-def]
    study = Study.objects.create(slug=SLUG, title="Checklist lens", kind=StudyKind.CHECKLIST)
    study.researchers.add(researcher)
    block = Block.objects.create(study=study, name="b", position=0, target_raters=3)
    assignments = [
        Assignment.objects.create(
            block=block,
            slot=r,
            rater=Rater.objects.create(study=study, external_id=f"r{r}"),
            state=AssignmentState.FINISHED,
        )
        for r in range(3)
    ]
    judge = Judge.objects.create(name="checker", provider=Provider.IMPORTED, model="m")
    k = 0
    for b in range(2):
        page = Page.objects.create(study=study, external_id=f"brief{b}", position=b)
        for i, sid in enumerate(("alpha", "beta")):
            system, _ = System.objects.get_or_create(
                study=study, external_id=sid, defaults={"name": sid, "position": i}
            )
            image, _ = store(image_bytes(SYSTEM_COLOURS[sid]))
            candidate = Candidate.objects.create(
                page=page, system=system, image=image, external_id=f"item-{b}-{sid}"
            )
            output = JudgeOutput.objects.create(
                judge=judge, candidate=candidate, order="primary", status="valid"
            )
            for q in range(6):
                predicate = Predicate.objects.create(
                    study=study,
                    external_id=f"q{k:03d}",
                    candidate=candidate,
                    question=f"Is part {q} there?",
                    question_type=TYPES[q % 3],
                    position=q,
                )
                for r, assignment in enumerate(assignments):
                    trial = Trial.objects.create(assignment=assignment, position=k, predicate=predicate)
                    Vote.objects.create(trial=trial, label=people(k, r))
                # The judge: UNCLEAR on every third question, else the truth, with evidence.
                truth = "NO" if k % 4 == 1 else "YES"
                answer = "UNCLEAR" if k % 3 == 0 else truth
                JudgeChecklistAnswer.objects.create(
                    output=output,
                    predicate=predicate,
                    answer=answer,
                    evidence="the heading reads so",
                    passed=answer == "YES",
                )
                k += 1
    return study, judge


def majority(k: int) -> str | None:
    labels = [people(k, r) for r in range(3)]
    yes, no = labels.count("YES"), labels.count("NO")
    return "YES" if yes > no else "NO" if no > yes else None


def test_checklist_lens_recomputed_from_the_rows(researcher, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    build(researcher)
    api = APIClient()
    api.force_authenticate(researcher)
    response = api.get(f"/api/studies/{SLUG}/disagreement/", {"judge": "checker"})
    assert response.status_code == 200, response.content
    report = response.json()
    expected = []
    agree = n = 0
    for k in range(24):
        label = majority(k)
        if label is None:
            continue
        passed = k % 3 != 0 and k % 4 != 1
        n += 1
        agree += ("YES" if passed else "NO") == label
        expected.append((-abs(float(passed) - (label == "YES")), f"q{k:03d}"))
    assert (report["agreement"]["agree"], report["agreement"]["n"]) == (agree, n)
    # The drill-down: most disagreement first, then the question id (every question has 3 votes here,
    # fewer when one is UNCLEAR: recomputed with that key too).
    votes_of = {f"q{k:03d}": sum(people(k, r) != "UNCLEAR" for r in range(3)) for k in range(24)}
    order = sorted(expected, key=lambda e: (e[0], -votes_of[e[1]], e[1]))
    assert [r["predicate"] for r in report["drilldown"]] == [q for _, q in order]
    # The judge's UNCLEAR answers are exactly the condition's rows.
    unclear = api.get(
        f"/api/studies/{SLUG}/disagreement/", {"judge": "checker", "condition": "judge_unclear"}
    ).json()
    assert sorted(r["predicate"] for r in unclear["drilldown"]) == sorted(
        f"q{k:03d}" for k in range(24) if k % 3 == 0 and majority(k) is not None
    )
    # The command writes the same object.
    out = tmp_path / "lens.json"
    call_command("judge_disagreement", SLUG, "--judge", "checker", "--json", str(out), stdout=io.StringIO())
    assert json.loads(out.read_text()) == report
    # The page shows the question with its rendering, which a researcher can open.
    client = Client()
    client.force_login(researcher)
    html = client.get(f"/studies/{SLUG}/disagreement/", {"judge": "checker", "part": "body"}).content.decode()
    first = report["drilldown"][0]
    assert first["question"] in html and first["image"] in html
    image = client.get(first["image"])
    assert image.status_code == 200 and b"".join(image.streaming_content).startswith(b"\x89PNG")


HUMAN_PATTERN = [  # three raters' answers to a question, by question position mod 5
    ("YES", "YES", "NO"),
    ("NO", "NO", "UNCLEAR"),
    ("YES", "UNCLEAR", "UNCLEAR"),
    ("YES", "NO", "UNCLEAR"),  # no majority: left out
    ("NO", "YES", "NO"),
]


def test_a_judge_unclear_on_a_third_through_the_emulated_provider(
    researcher, tmp_path: Path, settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The checklist judge answers over HTTP on loopback (issue 49's scripted judge); the lens's
    per-question figures are recomputed from its stored answers and the votes."""
    from judges.services.runs import judge_outputs_run_local, judge_run_start
    from tests.judges.factories import make_judge
    from tests.judges.fake_provider import FakeProvider
    from tests.judges.test_checklist_judges import checklist_study
    from tests.kind_reports.kind_report_factories import VoteWriter

    settings.ARBITER_JUDGE_BACKOFF_BASE = 0.01
    monkeypatch.setenv("ARBITER_TEST_JUDGE_KEY", "sk-test-secret-0123456789")
    study = checklist_study(tmp_path, slug="lens-clj")
    study.researchers.add(researcher)
    preds = list(Predicate.objects.filter(study=study).order_by("position"))
    unclear = {p.question for i, p in enumerate(preds) if (i // 3 + i % 3) % 3 == 0}
    server = FakeProvider().start()
    try:
        server.inspect = False
        server.checklist_answer = lambda qid, q: (
            ("unclear", "too small") if q in unclear else ("yes", "top left")
        )
        judge = make_judge("clj-judge", base_url=server.url)
        plan = judge_run_start(study=study, judge=judge, dispatch=False)
        assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": 12}
        assert server.problems == []
    finally:
        server.stop()
    w = VoteWriter(study)
    assignments = [w.assignment(w.rater(f"h{k}")) for k in range(3)]
    human: dict[str, list[str]] = {}
    for i, p in enumerate(preds):
        human[p.external_id] = list(HUMAN_PATTERN[i % len(HUMAN_PATTERN)])
        for assignment, label in zip(assignments, human[p.external_id], strict=True):
            w.trial(assignment, p, label=label, rationale="seen")

    api = APIClient()
    api.force_authenticate(researcher)
    report = api.get("/api/studies/lens-clj/disagreement/", {"judge": "clj-judge"}).json()
    rows = []
    for p in preds:
        labels = human[p.external_id]
        yes, no = labels.count("YES"), labels.count("NO")
        if yes == no:
            continue
        majority = "YES" if yes > no else "NO"
        passed = p.question not in unclear
        rows.append((-abs(float(passed) - (majority == "YES")), -(yes + no), p.external_id, majority, passed))
    agree = sum(("YES" if passed else "NO") == m for *_, m, passed in rows)
    assert (report["agreement"]["agree"], report["agreement"]["n"]) == (agree, len(rows))
    assert [r["predicate"] for r in report["drilldown"]] == [r[2] for r in sorted(rows)]
    marked = api.get(
        "/api/studies/lens-clj/disagreement/", {"judge": "clj-judge", "condition": "judge_unclear"}
    ).json()["drilldown"]
    assert {r["question"] for r in marked} == {
        p.question for p in preds if p.question in unclear and p.external_id in {r[2] for r in rows}
    }
    assert all(a["answer"] == "UNCLEAR" and not a["passed"] for r in marked for a in r["answers"])
