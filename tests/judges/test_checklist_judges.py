"""Checklist judges end to end (docs/protocol.md "Checklist judges", "Judge reliability against people"):
a scripted judge behind the loopback provider emulation answers a checklist study; what is stored, the
scores, the reliability against three-person majorities and the Visual-vs-human-pairwise figure are
recomputed here from the stored answers, independently of ``stats``."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command

from annotation.models import Candidate, Comparison, Predicate, Study
from judges.models import Judge, JudgeChecklistAnswer, JudgeOutput
from judges.providers.demo import LOCAL_UNCLEAR_EVIDENCE
from judges.selectors import checklist_judge_answers
from judges.services.batches import judge_batch_submit, judge_batches_poll
from judges.services.budget import judge_budget_resolve, judge_run_budget
from judges.services.runs import judge_outputs_run_local, judge_run_estimate, judge_run_start
from kind_reports.rendering import render_kind_report_html
from kind_reports.services import kind_report_build
from tests.judges.factories import make_judge
from tests.judges.fake_provider import FakeProvider
from tests.kind_reports.kind_report_factories import VoteWriter, import_kind_study

pytestmark = pytest.mark.django_db

RESAMPLES = 300
SEED = 11
TYPES = ("Layout", "Content", None)  # the factory's question types, by question of an item


def _opaque_questions(doc: dict[str, Any]) -> None:
    """Question texts that name no item or system (the factory's name the item)."""
    for n, p in enumerate(doc["predicates"]):
        p["question"] = f"Is element number {n + 1} drawn as the brief asks?"


def checklist_study(
    tmp_path: Path, *, slug: str = "clj", briefs: int = 6, edit: Any = _opaque_questions
) -> Study:
    """``briefs`` × {alpha, beta} renderings × 3 questions (Layout, Content, untyped)."""
    return import_kind_study("checklist", tmp_path, slug=slug, briefs=briefs, edit=edit)


def run_judge(study: Study, judge: Judge) -> dict[str, int]:
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    return judge_outputs_run_local(output_ids=plan.output_ids)


def brief_counts(briefs: list[str], resamples: int, seed: int) -> np.ndarray:
    """The brief bootstrap's count matrix, drawn here as docs/protocol.md "Checklist judges" says: each
    resample draws as many briefs (sorted) as there are, with replacement, from default_rng(seed)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(briefs), size=(resamples, len(briefs)))
    counts = np.zeros((resamples, len(briefs)))
    for r in range(resamples):
        for j in draws[r]:
            counts[r, j] += 1
    return counts


def ratio_ci(
    counts: np.ndarray, briefs: list[str], obs: list[tuple[str, float, float]]
) -> tuple[float, float]:
    num = np.zeros(len(briefs))
    den = np.zeros(len(briefs))
    for brief, n, d in obs:
        num[briefs.index(brief)] += n
        den[briefs.index(brief)] += d
    with np.errstate(invalid="ignore", divide="ignore"):
        values = (counts @ num) / (counts @ den)
    lo, hi = np.nanpercentile(values, [2.5, 97.5])
    return float(lo), float(hi)


# --------------------------------------------------------------------------------------------
# A judge unclear on a third of the questions loses exactly those
# --------------------------------------------------------------------------------------------


HUMAN_PATTERN = [  # three raters' answers to a question, by question position mod 5
    ("YES", "YES", "NO"),
    ("NO", "NO", "UNCLEAR"),
    ("YES", "UNCLEAR", "UNCLEAR"),
    ("YES", "NO", "UNCLEAR"),  # no majority: left out
    ("NO", "YES", "NO"),
]


def test_unclear_on_a_third_of_the_questions_loses_exactly_those(
    tmp_path: Path, provider: FakeProvider
) -> None:
    study = checklist_study(tmp_path)
    preds = list(
        Predicate.objects.filter(study=study)
        .select_related("candidate__page", "candidate__system")
        .order_by("position")
    )
    assert len(preds) == 36
    # One question of each rendering, rotating over the three types: exactly a third.
    unclear = {p.question for i, p in enumerate(preds) if (i // 3 + i % 3) % 3 == 0}
    assert len(unclear) == 12
    provider.inspect = False
    provider.checklist_answer = lambda qid, q: (
        ("unclear", "too small to tell") if q in unclear else ("yes", "drawn top left")
    )
    judge = make_judge(base_url=provider.url)

    assert run_judge(study, judge) == {"valid": 12}  # one call per rendering, one order
    assert provider.problems == []
    for got in provider.requests:  # one image, its own questions, nothing naming a system or a predicate
        assert got.labels == ["IMAGE"] and len(got.questions) == 3
        assert [q["id"] for q in got.questions] == ["Q1", "Q2", "Q3"]
        for word in ("alpha", "beta", "Alpha Design Agent", "b1-alpha", '"p1"'):
            assert word not in got.prompt
        assert "unclear" in got.prompt and "evidence" in got.prompt
    rows = list(JudgeChecklistAnswer.objects.select_related("predicate", "output"))
    assert len(rows) == 36
    assert {r.predicate.question for r in rows if not r.passed} == unclear
    assert {r.answer for r in rows if not r.passed} == {"UNCLEAR"}
    assert {r.answer for r in rows if r.passed} == {"YES"}
    assert {r.output.input_tokens for r in rows} == {1200}  # the call's usage, on every question's call
    # Before any human answer the report already gives the judge's scores (no reliability yet).
    early_report = kind_report_build(study=study, resamples=50, seed=SEED)
    early = early_report["checklist"]["judges"]
    assert early[0]["n_passed"] == 24 and early[0]["reliability"] is None
    assert "Checklist judges" in render_kind_report_html(study=study, report=early_report)
    frame = checklist_judge_answers(study=study)
    assert len(frame) == 36 and set(frame["questions_in_call"]) == {3} and set(frame["input_tokens"]) == {1200}
    assert set(frame.loc[~frame["passed"], "predicate"]) == {p.external_id for p in preds if p.question in unclear}

    # Human answers, three raters a question.
    w = VoteWriter(study)
    raters = [w.rater(f"h{k}") for k in range(3)]
    assignments = [w.assignment(r) for r in raters]
    human: dict[str, list[str]] = {}
    for i, p in enumerate(preds):
        labels = HUMAN_PATTERN[i % len(HUMAN_PATTERN)]
        human[p.external_id] = list(labels)
        for asg, label in zip(assignments, labels, strict=True):
            w.trial(asg, p, label=label, rationale="seen")

    report = kind_report_build(study=study, resamples=RESAMPLES, seed=SEED)
    (entry,) = report["checklist"]["judges"]
    assert entry["judge"] == judge.name
    assert entry["n_questions"] == 36 and entry["n_unclear"] == 12 and entry["n_passed"] == 24

    # Scores, recomputed: per rendering and type 0 or 100 (one question each), mean over renderings.
    briefs = sorted({p.candidate.page.external_id for p in preds})
    counts = brief_counts(briefs, RESAMPLES, SEED)
    scores = {s["system"]: s for s in entry["scores"]["systems"]}
    for system in ("alpha", "beta"):
        per_type: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for i, p in enumerate(preds):
            if p.candidate.system.external_id == system:
                per_type[TYPES[i % 3] or "(untyped)"].append(
                    (p.candidate.page.external_id, 0.0 if p.question in unclear else 100.0)
                )
        got = {d["dimension"]: d for d in scores[system]["dimensions"]}
        assert set(got) == set(per_type)
        for dim, values in per_type.items():
            assert got[dim]["value"] == pytest.approx(sum(v for _, v in values) / len(values))
            assert got[dim]["n_items"] == 6
            ci = ratio_ci(counts, briefs, [(b, v, 1.0) for b, v in values])
            assert got[dim]["ci95"] == pytest.approx(list(ci))
        assert scores[system]["visual"] == pytest.approx(np.mean([got[d]["value"] for d in per_type]))

    # Reliability: the judge's pass (YES) / fail (NO) against the strict human majority, human UNCLEAR missing.
    def majority(labels: list[str]) -> str | None:
        yes, no = labels.count("YES"), labels.count("NO")
        return "YES" if yes > no else "NO" if no > yes else None

    reliability = entry["reliability"]
    compared = [
        (p, majority(human[p.external_id]), "NO" if p.question in unclear else "YES")
        for p in preds
        if majority(human[p.external_id]) is not None
    ]
    agree = [(p.candidate.page.external_id, float(m == j), 1.0) for p, m, j in compared]
    assert reliability["overall"]["n_predicates"] == len(compared)
    assert reliability["overall"]["value"] == pytest.approx(sum(a for _, a, _ in agree) / len(agree))
    assert reliability["overall"]["ci95"]["bootstrap"] == pytest.approx(list(ratio_ci(counts, briefs, agree)))
    assert reliability["n_automatic_unclear"] == 12
    by_type = {t["question_type"]: t for t in reliability["by_type"]}
    for k, qtype in enumerate(TYPES):
        sel = [(p, m, j) for p, m, j in compared if preds.index(p) % 3 == k]
        assert by_type[qtype]["n_predicates"] == len(sel)
        assert by_type[qtype]["value"] == pytest.approx(sum(m == j for _, m, j in sel) / len(sel))


# --------------------------------------------------------------------------------------------
# Replies that are not valid: repaired, or the call fails with its reason and nothing is stored
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("cl_malformed", "not strict JSON"),
        ("cl_no_evidence", "missing key(s): evidence"),
        ("cl_unknown_answer", "must be one of yes, no, unclear"),
        ("cl_extra_key", "unexpected key(s): confidence"),
    ],
)
def test_an_invalid_reply_is_repaired_once_then_stored_whole(
    tmp_path: Path, provider: FakeProvider, behaviour: str, reason: str
) -> None:
    study = checklist_study(tmp_path, briefs=1)
    provider.inspect = False
    provider.script.append(behaviour)
    judge = make_judge(base_url=provider.url, concurrency=1)
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    first = plan.output_ids[0]
    judge_outputs_run_local(output_ids=[first])
    output = JudgeOutput.objects.get(pk=first)
    assert output.status == "valid" and output.invalid_attempts == 1 and output.calls == 2
    assert output.checklist_answers.count() == 3
    repair = json.loads(provider.requests[1].body)["messages"]
    assert (
        reason in repair[-1]["content"]
        if isinstance(repair[-1]["content"], str)
        else str(repair[-1]["content"])
    )


@pytest.mark.parametrize("behaviour", ["cl_no_evidence", "cl_missing_question", "cl_malformed"])
def test_a_reply_invalid_every_time_fails_with_its_reason_and_stores_no_question(
    tmp_path: Path, provider: FakeProvider, behaviour: str
) -> None:
    study = checklist_study(tmp_path, briefs=1)
    provider.inspect = False
    provider.default = behaviour
    judge = make_judge(base_url=provider.url, max_invalid_retries=2)
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    assert judge_outputs_run_local(output_ids=plan.output_ids) == {"invalid": 2}
    for output in JudgeOutput.objects.all():
        assert output.invalid_attempts == 3 and output.raw and "\n" not in output.error
        assert output.error.startswith(("$.answers", "the reply"))
    assert JudgeChecklistAnswer.objects.count() == 0


# --------------------------------------------------------------------------------------------
# Retries, budgets, batches, the estimate
# --------------------------------------------------------------------------------------------


def test_transport_failures_are_retried_and_counted(tmp_path: Path, provider: FakeProvider) -> None:
    study = checklist_study(tmp_path, briefs=1)
    provider.inspect = False
    provider.script.extend(["500", "429"])
    judge = make_judge(base_url=provider.url, concurrency=1)
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    judge_outputs_run_local(output_ids=plan.output_ids[:1])
    output = JudgeOutput.objects.get(pk=plan.output_ids[0])
    assert output.status == "valid" and output.transport_failures == 2 and output.calls == 3
    assert [a["outcome"] for a in output.attempt_log] == ["transport", "transport", "valid"]
    assert output.checklist_answers.count() == 3


def test_a_call_budget_takes_whole_briefs_first(tmp_path: Path, provider: FakeProvider) -> None:
    study = checklist_study(tmp_path, briefs=4)
    provider.inspect = False
    judge = make_judge(base_url=provider.url)
    budget = judge_budget_resolve(
        study=study, judge=judge, set=None, orders=("primary", "swapped"), repeats=1, max_calls=5
    )
    run = judge_run_budget(
        study=study,
        judge=judge,
        budget=budget,
        orders=("primary", "swapped"),
        run_round=lambda ids: judge_outputs_run_local(output_ids=ids),
    )
    assert run.calls == 5 and run.allocation == "brief order"
    called = list(
        JudgeOutput.objects.filter(status="valid")
        .order_by("candidate__page__position", "candidate__system__position")
        .values_list("candidate__page__external_id", "candidate__system__external_id", "order")
    )
    assert called == [
        ("b1", "alpha", "primary"),
        ("b1", "beta", "primary"),
        ("b2", "alpha", "primary"),
        ("b2", "beta", "primary"),
        ("b3", "alpha", "primary"),
    ]
    assert JudgeChecklistAnswer.objects.count() == 15
    # The rest is spent by a second budget; then nothing is left.
    judge_run_budget(
        study=study, judge=judge, budget=budget, run_round=lambda ids: judge_outputs_run_local(output_ids=ids)
    )
    assert JudgeOutput.objects.count() == 8
    with pytest.raises(Exception, match="every rendering"):
        judge_run_budget(study=study, judge=judge, budget=budget, run_round=lambda ids: None)


def test_a_dollar_budget_buys_calls_at_the_estimated_price(tmp_path: Path, provider: FakeProvider) -> None:
    study = checklist_study(tmp_path, briefs=2)
    judge = make_judge(base_url=provider.url, price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    estimate = judge_run_estimate(study=study, judge=judge)
    assert estimate.calls == 4 and estimate.image_tokens > 0 and estimate.output_tokens > 0
    per_call = estimate.cost_usd / 4  # type: ignore[operator]
    budget = judge_budget_resolve(
        study=study, judge=judge, set=None, orders=("primary",), repeats=1, budget_usd=per_call * 2.5
    )
    assert budget.max_calls == 2


def test_batch_calls_store_every_question(tmp_path: Path, provider: FakeProvider) -> None:
    study = checklist_study(tmp_path, briefs=2)
    provider.inspect = False
    provider.checklist_answer = lambda qid, q: ("no", "absent") if qid == "Q2" else ("yes", "present")
    judge = make_judge(base_url=provider.url, provider="openai", model="gpt-5-mini")
    batch = judge_batch_submit(study=study, judge=judge)
    assert batch is not None and batch.calls == 4
    for _ in range(3):
        judge_batches_poll(study=study, judge=judge)
    assert provider.problems == []
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}
    rows = JudgeChecklistAnswer.objects.select_related("predicate")
    assert rows.count() == 12
    assert {r.passed for r in rows if r.predicate.question_type == "Content"} == {
        False
    }  # Q2 of each rendering
    assert {r.passed for r in rows if r.predicate.question_type != "Content"} == {True}


def test_run_judges_command_runs_a_checklist_study(tmp_path: Path, provider: FakeProvider) -> None:
    study = checklist_study(tmp_path, briefs=1)
    provider.inspect = False
    make_judge(base_url=provider.url)
    out = StringIO()
    call_command("run_judges", study.slug, "--judge", "judge-x", "--concurrency", "1", stdout=out)
    assert "valid 2, invalid 0, failed 0" in out.getvalue()
    assert JudgeChecklistAnswer.objects.count() == 6


# --------------------------------------------------------------------------------------------
# The local judge
# --------------------------------------------------------------------------------------------


def test_the_local_judge_answers_unclear_where_it_knows_no_truth(tmp_path: Path) -> None:
    study = checklist_study(tmp_path, briefs=1)
    judge = Judge.objects.create(name="local", provider="demo", model="demo")
    assert run_judge(study, judge) == {"valid": 2}
    rows = list(JudgeChecklistAnswer.objects.all())
    assert len(rows) == 6 and {r.answer for r in rows} == {"UNCLEAR"} and not any(r.passed for r in rows)
    assert {r.evidence for r in rows} == {LOCAL_UNCLEAR_EVIDENCE}


def test_the_local_judge_answers_the_demo_truth(tmp_path: Path) -> None:
    study = checklist_study(tmp_path, briefs=1)
    # Each rendering has its own image (the local judge finds a rendering by its image); the recorded
    # truth of each question.
    preds = list(Predicate.objects.filter(study=study).order_by("position"))
    images = {c.image_id for c in Candidate.objects.filter(page__study=study)}
    assert len(images) == 2
    truth = {p.external_id: ("YES" if i % 2 == 0 else "NO") for i, p in enumerate(preds)}
    del truth[preds[-1].external_id]  # one question without a recorded truth: unclear
    study.options = {**study.options, "demo": {"predicate_truth": truth}}
    study.save(update_fields=["options"])
    judge = Judge.objects.create(name="local", provider="demo", model="demo")
    assert run_judge(study, judge) == {"valid": 2}
    got = {
        r.predicate.external_id: r.answer for r in JudgeChecklistAnswer.objects.select_related("predicate")
    }
    assert got == {**truth, preds[-1].external_id: "UNCLEAR"}


# --------------------------------------------------------------------------------------------
# The Visual score against direct human pairwise choices (AesCode §4.4, Table E5)
# --------------------------------------------------------------------------------------------

# Passing questions of 40 (all Content) per rendering: Visual = 2.5 points a question.
PASSES = {"b1": (40, 39), "b2": (30, 27), "b3": (20, 36), "b4": (10, 10), "b5": (40, 0), "b6": (22, 24)}
PAIR_VOTES = ["A", "B", "TIE", "A", "CANNOT_JUDGE", "B", "A", "A", "B", "TIE", "B", "A"]


def _forty_content_questions(doc: dict[str, Any]) -> None:
    doc["options"] = {"k": 3, "preference_study": "pw"}  # the bundle names the linked pairwise study
    doc["predicates"] = [
        {"id": f"p{m}-{k}", "item": item["id"], "question": f"Check {k} of poster {m}?", "type": "Content"}
        for m, item in enumerate(doc["items"])
        for k in range(40)
    ]


def test_visual_against_human_pairwise_choices_by_score_gap(tmp_path: Path, provider: FakeProvider) -> None:
    study = checklist_study(tmp_path, slug="clv", briefs=6, edit=_forty_content_questions)
    pairwise = import_kind_study("pairwise", tmp_path, slug="pw", briefs=6)
    assert study.options["preference_study"] == "pw"
    poster = {
        f"poster {m}": c
        for m, c in enumerate(
            Candidate.objects.filter(page__study=study)
            .order_by("page__position", "system__position")
            .values_list("page__external_id", "system__external_id")
        )
    }

    def answer(qid: str, question: str) -> tuple[str, str]:
        k = int(question.split()[1])
        brief, system = poster[question.split(" of ")[1].rstrip("?")]
        passes = PASSES[brief][0 if system == "alpha" else 1]
        return ("yes", "seen") if k < passes else ("no", "missing")

    provider.inspect = False
    provider.checklist_answer = answer
    judge = make_judge(base_url=provider.url)
    assert run_judge(study, judge) == {"valid": 12}

    # Human choices on the pairwise study: four raters on every comparison.
    w_cl = VoteWriter(study)  # a checklist report needs human answers of its own
    a = w_cl.assignment(w_cl.rater("h0"))
    for p in Predicate.objects.filter(study=study)[:3]:
        w_cl.trial(a, p, label="YES", rationale="seen")
    w = VoteWriter(pairwise)
    comparisons = list(
        Comparison.objects.filter(study=pairwise)
        .select_related("page", "candidate_a__system", "candidate_b__system")
        .order_by("page__position", "external_id")
    )
    votes: list[tuple[Comparison, str]] = []
    for r in range(4):
        asg = w.assignment(w.rater(f"r{r}"))
        for n, c in enumerate(comparisons):
            label = PAIR_VOTES[(n + 3 * r) % len(PAIR_VOTES)]
            w.trial(asg, c, label=label, confidence=None if label == "CANNOT_JUDGE" else 3)
            votes.append((c, label))

    report = kind_report_build(study=study, resamples=RESAMPLES, seed=SEED)
    (entry,) = report["checklist"]["judges"]
    pref = entry["score_preference"]
    assert pref["study"] == "pw"
    (metric,) = pref["metrics"]
    assert metric["metric"] == f"visual:{judge.name}" and metric["range"] == {
        "min": 0.0,
        "max": 100.0,
        "width": 100.0,
    }

    # Recomputed from the stored answers: each rendering's Visual, then each vote on a scored pair.
    visual: dict[tuple[str, str], float] = {}
    for row in JudgeChecklistAnswer.objects.select_related(
        "output__candidate__page", "output__candidate__system"
    ):
        key = (row.output.candidate.page.external_id, row.output.candidate.system.external_id)
        visual.setdefault(key, 0.0)
        visual[key] += 100.0 * row.passed / 40
    bins: dict[str, list[float]] = {"< 5": [], "5–15": [], "≥ 15": []}
    equal: list[str] = []
    for c, label in votes:
        ka = (c.page.external_id, c.candidate_a.system.external_id)
        kb = (c.page.external_id, c.candidate_b.system.external_id)
        if ka not in visual or kb not in visual or label == "CANNOT_JUDGE":
            continue
        if visual[ka] == visual[kb]:
            equal.append(label)
            continue
        gap = abs(visual[ka] - visual[kb])
        higher = "A" if visual[ka] > visual[kb] else "B"
        score = 0.5 if label == "TIE" else float(label == higher)
        bins["< 5" if gap < 5 - 1e-9 else "5–15" if gap < 15 - 1e-9 else "≥ 15"].append(score)
    assert all(bins.values()) and equal  # every bin and the equal pairs are exercised
    by_gap = {b["bin"]: b for b in metric["by_gap"]}
    for name, scores in bins.items():
        assert by_gap[name]["n_votes"] == len(scores)
        assert by_gap[name]["value"] == pytest.approx(sum(scores) / len(scores))
    everything = [s for scores in bins.values() for s in scores]
    assert metric["overall"]["value"] == pytest.approx(sum(everything) / len(everything))
    assert metric["equal_score"]["n_votes"] == len(equal)
    assert metric["equal_score"]["n_TIE"] == equal.count("TIE")
    assert not math.isnan(metric["overall"]["ci95"][0])

    # The report page shows the judge's scores, its agreement and this figure.
    html = render_kind_report_html(study=study, report=report)
    assert "Checklist judges" in html and f"<code>{judge.name}</code>" in html
    assert "Visual vs choices in <code>pw</code>" in html and "≥ 15" in html


def test_the_judges_page_runs_a_checklist_study_and_shows_its_progress(
    tmp_path: Path, provider: FakeProvider, researcher: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from django.test import Client

    study = import_kind_study(
        "checklist", tmp_path, slug="clp", briefs=1, edit=_opaque_questions, researchers=(researcher,)
    )
    provider.inspect = False
    judge = make_judge(base_url=provider.url, concurrency=1)
    client = Client()
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/studies/{study.slug}/judges/run/", {"judge": judge.pk, "repeats": "1"})
    assert response.status_code == 302
    assert set(JudgeOutput.objects.values_list("candidate__external_id", "status")) == {
        ("b1-alpha", "valid"),
        ("b1-beta", "valid"),
    }
    page = client.get(f"/studies/{study.slug}/judges/").content.decode()
    assert judge.name in page
    # Cost is per unit judged: the two renderings (a checklist call has no comparison).
    from judges.selectors import judge_progress

    [progress] = judge_progress(study=study)
    assert progress.comparisons == 2
    if progress.cost_usd is not None:
        assert "per rendering" in page and "per comparison" not in page
    refused = client.post(
        f"/studies/{study.slug}/judges/run/", {"judge": judge.pk, "set": "human"}, follow=True
    )
    assert "renderings, which have no set" in refused.content.decode()
