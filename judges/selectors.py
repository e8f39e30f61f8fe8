"""Reads of the judges app: the outputs frame for calibration (docs/protocol.md "Judges and calibration") and
run progress."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Q, QuerySet, Sum

from annotation.models import ComparisonSet, Study
from annotation.selectors.candidate_versions import (
    ComparisonVersions,
    labelled_versions,
    replaced_comparisons,
    version_timeline,
)
from judges.costs import Prices, cost_usd
from judges.models import Judge, JudgeOutput, OutputStatus

if TYPE_CHECKING:
    import pandas as pd

UNKNOWN_TEMPLATE = "unknown"  # outputs imported without a prompt_sha256
FRAME_COLUMNS = ("comparison", "judge", "family", "order", "repeat", "status", "winner", "confidence")


def judge_outputs_frame(*, study: Study, set: str | None = None) -> pd.DataFrame:
    """One row per judge output of the study (optionally one comparison set), canonical values.

    Columns: comparison (bundle id), judge (name), family, order, repeat, status, winner and
    confidence (canonical; None unless status is valid).
    """
    import pandas as pd

    rows = JudgeOutput.objects.filter(comparison__study=study)
    if set:
        rows = rows.filter(comparison__set=set)
    values = rows.order_by("comparison_id", "judge__name", "order", "repeat").values_list(
        "comparison__external_id", "judge__name", "judge__family", "order", "repeat", "status", "winner", "confidence"
    )
    records = [
        (c, j, f, o, r, s, w if s == OutputStatus.VALID else None, k if s == OutputStatus.VALID else None)
        for c, j, f, o, r, s, w, k in values
    ]
    frame = pd.DataFrame.from_records(records, columns=list(FRAME_COLUMNS))
    frame["repeat"] = frame["repeat"].astype("int64")
    frame["confidence"] = frame["confidence"].astype("Int64")
    frame["winner"] = frame["winner"].astype(object)
    return frame


def judge_prompt_templates(
    *, study: Study, judges: Sequence[str], comparisons: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Per judge: how many of its valid outputs on ``comparisons`` each prompt template produced.

    Keyed by the template's sha256 (``JudgeOutput.prompt_sha256``); imported outputs that did not
    say which template they answered count under ``"unknown"``.
    """
    rows = (
        JudgeOutput.objects.filter(
            comparison__study=study, comparison__external_id__in=list(comparisons), judge__name__in=list(judges),
            status=OutputStatus.VALID,
        )
        .values("judge__name", "prompt_sha256")
        .annotate(n=Count("pk"))
        .order_by("judge__name", "prompt_sha256")
    )
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row["judge__name"], {})[row["prompt_sha256"] or UNKNOWN_TEMPLATE] = row["n"]
    return out


def judge_usage(*, study: Study, judges: Sequence[str], comparisons: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per judge: tokens and cost of its outputs on ``comparisons`` (every attempt, as billed).

    For the calibration report: ``{judge: {comparisons, input_tokens, output_tokens, cached_tokens,
    cost_usd, cost_per_comparison_usd}}``; cost is None when the judge has no prices.
    """
    progress = judge_progress(study=study, comparisons=comparisons, judge_names=judges)
    return {
        p.judge: {k: v for k, v in p.as_dict().items() if k in USAGE_REPORT_KEYS} | {"comparisons": p.comparisons}
        for p in progress
    }


USAGE_REPORT_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd", "cost_per_comparison_usd")


@dataclass(frozen=True)
class JudgeProgress:
    judge_id: int
    judge: str
    family: str
    provider: str
    total: int
    valid: int
    invalid: int
    failed: int
    pending: int  # pending + running
    # Usage summed over every attempt (what was billed), and its cost at the judge's prices.
    comparisons: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    # Why calls failed or came back invalid, grouped: (status, reason, calls), most calls first.
    reasons: tuple[tuple[str, str, int], ...] = ()

    @property
    def cost_per_comparison(self) -> float | None:
        return self.cost_usd / self.comparisons if self.cost_usd is not None and self.comparisons else None

    @property
    def done(self) -> int:
        return self.valid + self.invalid + self.failed

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

    def as_dict(self) -> dict[str, object]:
        return {
            "judge": self.judge,
            "family": self.family,
            "provider": self.provider,
            "total": self.total,
            "done": self.done,
            "valid": self.valid,
            "invalid": self.invalid,
            "failed": self.failed,
            "pending": self.pending,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "cost_per_comparison_usd": None if self.cost_per_comparison is None else round(self.cost_per_comparison, 6),
            "reasons": [{"status": st, "reason": reason, "calls": n} for st, reason, n in self.reasons],
        }


def _usage_cost(judge: Judge | None, row: dict[str, Any]) -> float | None:
    """Dollars for a judge's summed usage; batch calls at the batch discount."""
    if judge is None:
        return None
    prices = Prices(judge.price_input_per_mtok, judge.price_output_per_mtok, judge.batch_discount)
    if not prices.known or row["sum_input"] is None:
        return None
    live = cost_usd(prices, row["input_live"] or 0, row["output_live"] or 0) or 0.0
    batch = cost_usd(prices, row["input_batch"] or 0, row["output_batch"] or 0, batch=True) or 0.0
    return live + batch


def judge_progress(
    *, study: Study, judge: Judge | None = None, comparisons: Sequence[str] | None = None,
    judge_names: Sequence[str] | None = None,
) -> list[JudgeProgress]:
    """Per judge with outputs in the study: done (valid / invalid / failed) and pending counts, usage, cost."""
    from judges.units import study_outputs

    rows = JudgeOutput.objects.filter(study_outputs(study))
    if judge is not None:
        rows = rows.filter(judge=judge)
    if comparisons is not None:
        rows = rows.filter(comparison__external_id__in=list(comparisons))
    if judge_names is not None:
        rows = rows.filter(judge__name__in=list(judge_names))
    counts = (
        rows.values("judge_id", "judge__name", "judge__family", "judge__provider")
        .annotate(
            total=Count("pk"),
            valid=Count("pk", filter=Q(status=OutputStatus.VALID)),
            invalid=Count("pk", filter=Q(status=OutputStatus.INVALID)),
            failed=Count("pk", filter=Q(status=OutputStatus.FAILED)),
            pending=Count("pk", filter=Q(status__in=[OutputStatus.PENDING, OutputStatus.RUNNING])),
            # The units judged: a call is about one comparison or one rendering (a checklist's).
            comparisons=Count("comparison_id", distinct=True) + Count("candidate_id", distinct=True),
            sum_input=Sum("input_tokens"),
            sum_output=Sum("output_tokens"),
            sum_cached=Sum("cached_tokens"),
            input_live=Sum("input_tokens", filter=Q(batch_id="")),
            output_live=Sum("output_tokens", filter=Q(batch_id="")),
            input_batch=Sum("input_tokens", filter=~Q(batch_id="")),
            output_batch=Sum("output_tokens", filter=~Q(batch_id="")),
        )
        .order_by("judge__name")
    )
    rows_by_judge: list[dict[str, Any]] = [dict(r) for r in counts]
    judges = Judge.objects.in_bulk([r["judge_id"] for r in rows_by_judge])
    reasons = _failure_reasons(rows)
    return [
        JudgeProgress(
            judge_id=r["judge_id"],
            judge=r["judge__name"],
            family=r["judge__family"],
            provider=r["judge__provider"],
            total=r["total"],
            valid=r["valid"],
            invalid=r["invalid"],
            failed=r["failed"],
            pending=r["pending"],
            comparisons=r["comparisons"],
            input_tokens=r["sum_input"],
            output_tokens=r["sum_output"],
            cached_tokens=r["sum_cached"],
            cost_usd=_usage_cost(judges.get(r["judge_id"]), r),
            reasons=tuple(reasons.get(r["judge_id"], ())),
        )
        for r in rows_by_judge
    ]


def _failure_reasons(rows: QuerySet[JudgeOutput]) -> dict[int, list[tuple[str, str, int]]]:
    """Per judge: its failed and invalid calls grouped by their stored reason (one query), most
    calls first; a call stored without a reason is counted as such."""
    grouped: dict[int, list[tuple[str, str, int]]] = {}
    found = (
        rows.filter(status__in=[OutputStatus.FAILED, OutputStatus.INVALID])
        .values("judge_id", "status", "error")
        .annotate(n=Count("pk"))
        .order_by("judge_id", "-n", "status", "error")
    )
    for row in found:
        reason = " ".join(str(row["error"] or "").split()) or "no reason was stored"
        grouped.setdefault(row["judge_id"], []).append((str(row["status"]), reason, int(row["n"])))
    return grouped


def judges_callable() -> list[Judge]:
    return list(Judge.objects.exclude(provider="imported").order_by("name"))


def judge_outputs_frame_as_labelled(*, study: Study) -> pd.DataFrame:
    """The human-set outputs frame with, on each comparison whose candidates were replaced after
    its votes (paper B.5), the outputs that judged the versions the raters saw instead of the
    current ones: the calibration set stays what it was (labels and outputs of the same images).

    An output judged the versions in force when it was made (``import_study --update`` refuses
    while calls run on a touched comparison). A comparison keeps its current outputs when most of
    its votes are on the current versions, or when it has no votes.
    """
    import pandas as pd

    frame = judge_outputs_frame(study=study, set=ComparisonSet.HUMAN)
    replaced = replaced_comparisons(study=study, set=ComparisonSet.HUMAN)
    if not replaced:
        return frame
    labels = labelled_versions(comparison_ids=[r.pk for r in replaced])
    earlier: dict[int, tuple[ComparisonVersions, tuple[int, int]]] = {}
    for one in replaced:
        counts = labels.get(one.pk)
        if counts and counts.most_common(1)[0][0] != one.now:
            earlier[one.pk] = (one, counts.most_common(1)[0][0])
    if not earlier:
        return frame
    timeline = version_timeline(candidate_ids=[x for r, _ in earlier.values() for x in (r.candidate_a, r.candidate_b)])
    records = []
    rows = JudgeOutput.all_versions.filter(comparison_id__in=list(earlier)).order_by(
        "comparison_id", "judge__name", "order", "repeat", "created_at"
    ).values_list(
        "comparison_id", "created_at", "comparison__external_id", "judge__name", "judge__family", "order", "repeat",
        "status", "winner", "confidence",
    )
    for comparison_id, created_at, c, j, f, o, r, s, w, k in rows:
        replaced_one, wanted = earlier[comparison_id]
        judged = (timeline.at(replaced_one.candidate_a, created_at), timeline.at(replaced_one.candidate_b, created_at))
        if judged == wanted:
            valid = s == OutputStatus.VALID
            records.append((c, j, f, o, r, s, w if valid else None, k if valid else None))
    relabelled = {replaced_one.external_id for replaced_one, _ in earlier.values()}
    kept = frame[~frame["comparison"].astype(str).isin(relabelled)]
    extra = pd.DataFrame.from_records(records, columns=list(FRAME_COLUMNS))
    combined = pd.concat([kept, extra], ignore_index=True) if len(extra) else kept.reset_index(drop=True)
    combined["repeat"] = combined["repeat"].astype("int64")
    combined["confidence"] = combined["confidence"].astype("Int64")
    combined["winner"] = combined["winner"].astype(object)
    return combined


CHECKLIST_ANSWER_COLUMNS = (
    "judge", "predicate", "brief", "system", "item", "question_type", "answer", "evidence", "passed", "output_id",
    "input_tokens", "output_tokens", "questions_in_call",
)


def checklist_judge_answers(*, study: Study, judges: Sequence[str] | None = None) -> pd.DataFrame:
    """Every question a checklist judge answered in the study (docs/protocol.md "Checklist judges"): one
    row per judge and predicate, from the current valid calls of repeat 0, with the call's usage
    (``input_tokens``, ``output_tokens``, shared by its ``questions_in_call`` questions: decision 0076).

    Columns ``CHECKLIST_ANSWER_COLUMNS``; ``item`` is the rendering's external id, or ``brief/system``
    when it has none.
    """
    import pandas as pd

    from judges.models import JudgeChecklistAnswer

    rows = JudgeChecklistAnswer.objects.filter(
        output__candidate__page__study=study, output__status=OutputStatus.VALID, output__superseded=False,
        output__repeat=0,
    )
    if judges is not None:
        rows = rows.filter(output__judge__name__in=list(judges))
    values = list(
        rows.annotate(questions_in_call=Count("output__checklist_answers"))
        .order_by("output__judge__name", "predicate__position", "predicate__external_id")
        .values_list(
            "output__judge__name", "predicate__external_id", "output__candidate__page__external_id",
            "output__candidate__system__external_id", "output__candidate__external_id", "predicate__question_type",
            "answer", "evidence", "passed", "output_id", "output__input_tokens", "output__output_tokens",
            "questions_in_call",
        )
    )
    records = [
        (j, p, b, s, item or f"{b}/{s}", qt or None, a, e, bool(ok), oid, it, ot, n)
        for j, p, b, s, item, qt, a, e, ok, oid, it, ot, n in values
    ]
    return pd.DataFrame.from_records(records, columns=list(CHECKLIST_ANSWER_COLUMNS))
