"""The disagreement lens of a checklist judge (docs/protocol.md "The disagreement lens", "For a checklist
judge"): per question, the judge's answers against the human majority, with the rendering.

A question's human majority is YES or NO by the non-UNCLEAR main votes (``stats.checklist.human_majority``:
a human UNCLEAR is missing). A judge answer passes only as a YES with evidence (a NO, an UNCLEAR or a
YES without evidence fails, as ``JudgeChecklistAnswer.passed`` stores it). A question's disagreement
is ``|pass share − [majority is YES]|`` over the judge's valid calls on its rendering (decision 0078).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from django.urls import reverse

from annotation.models import AssignmentState, Predicate, Study, Vote
from judges.models import Judge, JudgeChecklistAnswer, JudgeOutput, OutputStatus

CHECKLIST_CONDITIONS = ("judge_passes_people_no", "judge_fails_people_yes", "judge_unclear", "no_evidence")
EVIDENCE_CHARS = 300


def _human_counts(study: Study) -> dict[int, Counter[str]]:
    """Per predicate: its main votes' labels (no hidden repeat, attention trial or voided assignment)."""
    rows = (
        Vote.objects.filter(
            trial__predicate__study=study, trial__is_repeat=False, trial__attention_expected=""
        )
        .exclude(trial__assignment__state=AssignmentState.VOIDED)
        .values_list("trial__predicate_id", "label")
    )
    out: dict[int, Counter[str]] = defaultdict(Counter)
    for predicate_id, label in rows:
        out[predicate_id][label] += 1
    return out


def checklist_disagreement_report(*, study: Study, judge: Judge) -> dict[str, Any]:
    from stats.checklist import human_majority

    predicates = list(
        Predicate.objects.filter(study=study)
        .select_related("candidate__system", "candidate__page")
        .order_by("external_id")
    )
    answers: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = (
        JudgeChecklistAnswer.objects.filter(
            output__judge=judge, output__candidate__page__study=study, output__status=OutputStatus.VALID
        )
        .order_by("predicate_id", "output__repeat", "output__order")
        .values_list("predicate_id", "output__order", "output__repeat", "answer", "evidence", "passed")
    )
    for predicate_id, order, repeat, answer, evidence, passed in rows:
        answers[predicate_id].append(
            {
                "order": order,
                "repeat": int(repeat),
                "answer": answer,
                "evidence": " ".join((evidence or "").split())[:EVIDENCE_CHARS],
                "passed": bool(passed),
            }
        )
    n_calls = JudgeOutput.objects.filter(judge=judge, candidate__page__study=study).count()
    humans = _human_counts(study)
    n_votes = sum(c["YES"] + c["NO"] + c["UNCLEAR"] for c in humans.values())
    next_steps = []
    if not n_calls:
        next_steps.append(
            f"judge {judge.name} has no calls on this checklist study yet: run it from the study's judges page "
            f"or with run_judges {study.slug} --judge NAME"
        )
    if not n_votes:
        next_steps.append(
            "no human votes yet: schedule blocks and invite raters (three a question, as AesCode §E.3), or "
            "import votes; the per-question comparison needs them"
        )
    questions = []
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    agree = n = 0
    for p in predicates:
        counts = humans.get(p.pk, Counter())
        majority = human_majority(counts["YES"], counts["NO"])
        mine = answers.get(p.pk, [])
        if majority is None or not mine:
            continue
        share = sum(a["passed"] for a in mine) / len(mine)
        judge_says = "YES" if share > 0.5 else "NO" if share < 0.5 else None
        target = 1.0 if majority == "YES" else 0.0
        kind = p.question_type or "untyped"
        if judge_says is not None:
            n += 1
            agree += judge_says == majority
            by_type[kind][1] += 1
            by_type[kind][0] += judge_says == majority
        conditions = []
        if share > 0.5 and majority == "NO":
            conditions.append("judge_passes_people_no")
        if share < 0.5 and majority == "YES":
            conditions.append("judge_fails_people_yes")
        if any(a["answer"] == "UNCLEAR" for a in mine):
            conditions.append("judge_unclear")
        if any(a["answer"] == "YES" and not a["passed"] for a in mine):
            conditions.append("no_evidence")
        questions.append(
            {
                "predicate": p.external_id,
                "question": p.question,
                "question_type": p.question_type,
                "item": p.candidate.external_id,
                "brief": p.candidate.page.external_id,
                "system": p.candidate.system.external_id,
                "pair": p.candidate.system.external_id,  # the drill-down's first filter: the system
                "votes": {k: int(counts[k]) for k in ("YES", "NO", "UNCLEAR")},
                "majority": majority,
                "judge_pass_share": share,
                "disagreement": abs(share - target),
                "n_votes": int(counts["YES"] + counts["NO"]),
                "answers": mine,
                "conditions": conditions,
                "image": reverse("studies:candidate-image", args=[study.slug, p.candidate_id]),
            }
        )
    questions.sort(key=lambda r: (-r["disagreement"], -r["n_votes"], r["predicate"]))
    return {
        "study": study.slug,
        "judge": judge.name,
        "kind": study.kind,
        "counts": {"questions": len(predicates), "judge_calls": n_calls, "human_votes": n_votes},
        "next_steps": next_steps,
        "agreement": {
            "agree": agree,
            "n": n,
            "value": agree / n if n else None,
            "by_type": [
                {"question_type": t, "agree": a, "n": k, "value": a / k if k else None}
                for t, (a, k) in sorted(by_type.items())
            ],
        },
        "drilldown": questions,
    }
