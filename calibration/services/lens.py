"""The disagreement lens of a study and judge (docs/protocol.md "The disagreement lens").

``disagreement_report`` reads the study's human-set comparisons, their candidates' renders, the
kept human votes (the study's saved exclusion rules apply by default, as in the agreement and
calibration reports) and every judge's outputs; runs ``stats.judge_lens``; and returns one JSON
object. The page, the REST endpoint and ``judge_disagreement`` all call it, so the command's file
and the endpoint's answer are the same object. ``drilldown_select`` filters and pages its
drill-down for the page and the endpoint.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db.models import Q
from django.urls import reverse

from annotation.errors import ValidationFailed
from annotation.files import output_path_check, write_texts_atomic
from annotation.models import Comparison, ComparisonSet, Study, StudyKind
from annotation.selectors.votes import votes_frame
from calibration.services.exclusion_rules import effective_rules
from judges.models import Judge, JudgeOutput

if TYPE_CHECKING:
    import pandas as pd

#: Block types that count as text (docs/protocol.md "Blocks from the DOM"); figures do not.
TEXT_BLOCKS = frozenset({"title", "text", "list", "table", "formula"})
#: How "more text" is measured (docs/protocol.md "The disagreement lens"): the visible characters of
#: the text blocks when every candidate with blocks kept its page's text, else their area.
TEXT_CHARACTERS, TEXT_AREA = "characters", "area"
#: Drill-down filters beside the pair: the condition names a row may carry.
CONDITIONS = ("inconsistent", "taller", "more_text", "more_media", "failed")
CONDITION_OF_ATTRIBUTE = {"height": "taller", "text": "more_text", "media": "more_media"}
PAGE_SIZE = 20
MAX_PAGE_SIZE = 200
REASON_CHARS = 300
LENS_KINDS = (StudyKind.PAIRWISE_REFERENCE, StudyKind.PAIRWISE)


def _area(boxes: Sequence[Mapping[str, Any]], width: int, height: int, keep: Any = None) -> float:
    """Summed area in display pixels of ``bbox_1000`` boxes (overlaps counted twice: a DOM's
    blocks do not overlap, and media regions are outermost elements)."""
    total = 0.0
    for box in boxes:
        if keep is not None and box.get("type") not in keep:
            continue
        b = box.get("bbox_1000")
        if isinstance(b, list) and len(b) == 4:
            total += max(0.0, float(b[2]) - float(b[0])) * max(0.0, float(b[3]) - float(b[1])) / 1e6
    return total * width * height


def _characters(page: Any) -> float:
    """Visible characters of a kept page's text blocks (``CandidateBlocks``: blocks with their
    text): every character of their ``text`` but whitespace."""
    total = 0
    for block in page.get("blocks") or [] if isinstance(page, Mapping) else []:
        if isinstance(block, Mapping) and block.get("type") in TEXT_BLOCKS and isinstance(block.get("text"), str):
            total += sum(1 for ch in block["text"] if not ch.isspace())
    return float(total)


def _candidate_attributes(
    image: Any, blocks: list[Any], media: list[Any], rendered: bool, characters: float | None = None
) -> dict[str, float]:
    """The render's height, text and media area of one candidate (NaN where unknown): text is the
    visible characters of its kept page (``characters``, :func:`_characters`) when given, else the
    area of its text blocks, which needs the render's blocks (a candidate given as an image has
    none); media is known from blocks or regions."""
    nan = float("nan")
    if not rendered or image is None:
        return {"height": nan, "text": nan, "media": nan}
    w, h = int(image.width), int(image.height)
    known = bool(blocks)
    area = _area(blocks, w, h, TEXT_BLOCKS) if known else nan
    text = characters if characters is not None else area
    return {"height": float(h), "text": text, "media": _area(media, w, h) if (known or media) else nan}


@dataclass(frozen=True)
class LensComparison:
    pk: int
    external_id: str
    page: str
    system_a: str
    system_b: str
    attributes: dict[str, Any]
    has_reference: bool = True  # a `pairwise` study's page has no reference image


def text_measure(*, study: Study) -> str:
    """``characters`` when every rendered candidate of the study's human-set comparisons whose
    render has blocks also kept its page's text (``CandidateBlocks``, a kind whose design
    ``keeps_page_text``), else ``area`` (docs/protocol.md "The disagreement lens"). One measure for
    the whole study, so no comparison weighs characters against an area."""
    from annotation.models import Candidate

    human = Comparison.objects.filter(study=study, set=ComparisonSet.HUMAN)
    shown = Candidate.objects.filter(
        Q(pk__in=human.values("candidate_a_id")) | Q(pk__in=human.values("candidate_b_id")),
        rendered=True, image__isnull=False,
    )
    if not shown.filter(objective_blocks__isnull=False).exists():
        return TEXT_AREA
    without_text = shown.filter(objective_blocks__isnull=True).exclude(blocks=[])
    return TEXT_AREA if without_text.exists() else TEXT_CHARACTERS


def lens_comparisons(*, study: Study, measure: str | None = None) -> list[LensComparison]:
    """The human-set comparisons with their candidates' render attributes (the display images'
    sizes: raters and judges see these); ``text`` by ``measure`` (:func:`text_measure` when None)."""
    from annotation.models import CandidateBlocks

    measure = measure or text_measure(study=study)
    # Counted row by row: a kept page is kilobytes of text, its count a number.
    characters: dict[int, float] = (
        {
            pk: _characters(page)
            for pk, page in CandidateBlocks.objects.filter(candidate__page__study=study)
            .values_list("candidate_id", "blocks")
            .iterator(chunk_size=200)
        }
        if measure == TEXT_CHARACTERS
        else {}
    )
    rows = (
        Comparison.objects.filter(study=study, set=ComparisonSet.HUMAN)
        .select_related(
            "page", "candidate_a__system", "candidate_b__system", "candidate_a__image", "candidate_b__image"
        )
        .order_by("external_id")
    )
    out = []
    for c in rows:
        attributes: dict[str, Any] = {}
        for side, candidate in (("a", c.candidate_a), ("b", c.candidate_b)):
            values = _candidate_attributes(
                candidate.image, candidate.blocks or [], candidate.media or [], candidate.rendered,
                characters.get(candidate.pk),
            )
            for name, value in values.items():
                attributes[f"{name}_{side}"] = value
            attributes[f"failed_{side}"] = not candidate.rendered
        out.append(
            LensComparison(
                pk=c.pk,
                external_id=c.external_id,
                page=c.page.external_id,
                system_a=c.candidate_a.system.external_id,
                system_b=c.candidate_b.system.external_id,
                attributes=attributes,
                has_reference=c.page.image_id is not None,
            )
        )
    return out


def kept_votes(
    *, study: Study, rules: Mapping[str, Any] | None = None, raw: bool = False
) -> tuple[pd.DataFrame, Any]:
    """The main votes the study's exclusion rules keep (saved rules by default), and ``exclusions``."""
    votes = votes_frame(study=study)
    exclusions = None
    chosen, by_default = effective_rules(study, rules, raw=raw)
    if chosen is not None:
        from calibration.services.agreement import reference_votes_filtered

        votes, exclusions = reference_votes_filtered(study=study, votes=votes, rules=chosen)
        exclusions["applied_by_default"] = by_default
    if len(votes):
        votes = votes[~votes["is_repeat"].to_numpy(dtype=bool)]
    return votes, exclusions


def _judge_for(study: Study, name: str) -> Judge:
    judge = Judge.objects.filter(name=name).first()
    if judge is None:
        with_outputs = lens_judges(study=study)
        raise ValidationFailed(
            f"no judge named {name!r} (judges with calls on study {study.slug}: {', '.join(with_outputs) or 'none'})",
            field="judge",
        )
    return judge


def lens_judges(*, study: Study) -> list[str]:
    """The judges with calls on the study's human set (a checklist study: on its renderings), by name
    (the page's choice)."""

    calls = JudgeOutput.objects.filter(
        Q(comparison__study=study, comparison__set=ComparisonSet.HUMAN) | Q(candidate__page__study=study)
    )
    return sorted(set(calls.values_list("judge__name", flat=True)))


def _calibration_residuals(study: Study, votes: pd.DataFrame) -> tuple[dict[str, float], dict[str, Any]]:
    """``p̂ − h`` per comparison from the study's calibration (every judge with valid outputs on
    the human set, docs/protocol.md "Judges and calibration"): out of fold when the study has two
    blocks or more, else in sample; none, with the reason, when calibration is not possible."""
    import numpy as np

    from calibration.selectors.calibration import calibration_inputs
    from stats.judge_weights import calibrate

    try:
        inputs = calibration_inputs(study=study, votes=votes)
        result = calibrate(
            inputs.judge_outputs,
            inputs.human,
            judges=list(inputs.judges),
            resamples=1,
            seed=study.seed,
            families=None,
            ranking_interval=False,
        )
    except (ValidationFailed, ValueError) as exc:
        return {}, {"judges": [], "residual": None, "note": f"no calibration: {exc}"}
    pred = result.predictions
    oof = pred["p_oof"].to_numpy(dtype=float)
    out_of_fold = bool(len(oof)) and bool(np.all(np.isfinite(oof)))
    p = oof if out_of_fold else pred["p_full"].to_numpy(dtype=float)
    h = pred["h"].to_numpy(dtype=float)
    residuals = {str(c): float(v) for c, v in zip(pred["comparison"], p - h, strict=True)}
    return residuals, {
        "judges": list(result.judges),
        "residual": "out_of_fold" if out_of_fold else "in_sample",
        "note": "" if out_of_fold else "the study has one block: residuals are in sample",
    }


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _conditions(comparison: LensComparison, cases: pd.DataFrame, x: float, h: float) -> list[str]:
    from stats.judge_lens import favoured_side

    out = []
    if len(cases) and cases["case"].isin(["biased_first", "biased_second"]).any():
        out.append("inconsistent")
    judge_side = "A" if x > 0.5 else "B" if x < 0.5 else None
    people_side = "A" if h > 0.5 else "B" if h < 0.5 else None
    if judge_side and people_side and judge_side != people_side:
        for attribute, name in CONDITION_OF_ATTRIBUTE.items():
            if favoured_side(comparison.attributes, attribute) == judge_side:
                out.append(name)
    if comparison.attributes["failed_a"] or comparison.attributes["failed_b"]:
        out.append("failed")
    return out


def _image_urls(study: Study, comparison: LensComparison) -> dict[str, str | None]:
    return {
        slot: reverse("studies:comparison-image", args=[study.slug, comparison.pk, slot])
        if slot != "reference" or comparison.has_reference
        else None
        for slot in ("reference", "a", "b")
    }


def disagreement_report(
    *, study: Study, judge: str, rules: Mapping[str, Any] | None = None, raw: bool = False
) -> dict[str, Any]:
    """The lens of ``judge`` on ``study`` as one JSON-ready object (docs/protocol.md "The disagreement
    lens"; keys in "Report keys")."""
    import pandas as pd

    from judges.selectors import judge_outputs_frame
    from stats import judge_lens as lens

    the_judge = _judge_for(study, judge)
    if study.kind == StudyKind.CHECKLIST:
        from calibration.services.lens_checklist import checklist_disagreement_report

        return checklist_disagreement_report(study=study, judge=the_judge)
    if study.kind not in LENS_KINDS:
        raise ValidationFailed(
            f"study {study.slug} is a {study.kind} study: the lens covers the pairwise and checklist kinds",
            field="study",
        )
    measure = text_measure(study=study)
    comparisons = lens_comparisons(study=study, measure=measure)
    by_id = {c.external_id: c for c in comparisons}
    votes, exclusions = kept_votes(study=study, rules=rules, raw=raw)
    if len(votes):
        votes = votes[votes["comparison"].isin(list(by_id))]
    all_outputs = judge_outputs_frame(study=study, set=ComparisonSet.HUMAN)
    outputs = all_outputs[all_outputs["judge"] == the_judge.name].reset_index(drop=True)
    cases = lens.position_cases(outputs)
    n_valid_votes = int(votes["label"].isin(list(lens.POINTS)).sum()) if len(votes) else 0
    next_steps = []
    if outputs.empty:
        next_steps.append(
            f"judge {the_judge.name} has no calls on the human-set comparisons yet: run it in both orders from the "
            f"study's judges page or with run_judges {study.slug} --judge NAME --set human --orders primary swapped"
        )
    if not n_valid_votes:
        next_steps.append(
            "no human votes yet: schedule blocks and invite raters (the study's raters page), or import votes; "
            "agreement, the gap plot, the people's preferences and the drill-down need them"
        )
    if len(votes) == 0:
        votes = pd.DataFrame(columns=["comparison", "rater", "label", "system_a", "system_b"])
    systems = {c.external_id: (c.system_a, c.system_b) for c in comparisons}
    attributes = pd.DataFrame.from_records(
        [{"comparison": c.external_id, **c.attributes} for c in comparisons],
        columns=["comparison", *[f"{a}_{s}" for a in lens.ATTRIBUTES for s in "ab"]],
    )
    residuals, calibration = (
        _calibration_residuals(study, votes)
        if n_valid_votes and not outputs.empty
        else (
            {},
            {"judges": [], "residual": None, "note": "no calibration without judge calls and human votes"},
        )
    )
    report: dict[str, Any] = {
        "study": study.slug,
        "judge": the_judge.name,
        "kind": study.kind,
        "counts": {
            "comparisons": len(comparisons),
            "judge_outputs": len(outputs),
            "valid_outputs": int((outputs["status"] == "valid").sum()) if len(outputs) else 0,
            "human_votes": n_valid_votes,
        },
        "next_steps": next_steps,
        "text_measure": measure,
        "position": lens.position_summary(cases),
        "agreement": lens.agreement_tables(cases, votes),
        "agreement_by_gap": lens.agreement_by_gap(cases, votes, systems),
        "conditioned": lens.conditioned_preferences(attributes, outputs, votes),
        "calibration": calibration,
        "drilldown": _drilldown(study, comparisons, all_outputs, the_judge.name, cases, votes, residuals),
    }
    if exclusions is not None:
        report["exclusions"] = exclusions
    return report


def _drilldown(
    study: Study,
    comparisons: Sequence[LensComparison],
    all_outputs: pd.DataFrame,
    judge: str,
    cases: Any,
    votes: pd.DataFrame,
    residuals: Mapping[str, float],
) -> list[dict[str, Any]]:
    """Every comparison with a valid output of ``judge`` and a valid human vote, most disagreement
    first (``stats.judge_lens.disagreement_order``)."""
    import pandas as pd

    from stats import judge_lens as lens

    own = all_outputs[all_outputs["judge"] == judge]
    means = lens.judge_means(own)
    counts = lens.human_counts(votes)
    valid_votes = votes[votes["label"].isin(list(lens.POINTS))].sort_values(["comparison", "rater"])
    raters = {str(c): g[["rater", "label"]].to_dict("records") for c, g in valid_votes.groupby("comparison")}
    reasons = _reasons(study, [c.pk for c in comparisons if c.external_id in means])
    case_frame = cases.frame
    # One pass each: a comparison's cases and every judge's outputs on it.
    cases_of = {str(k): g for k, g in case_frame.groupby("comparison", sort=False)}
    outputs_of = {str(k): g for k, g in all_outputs.groupby("comparison", sort=False)}
    empty_cases = case_frame.iloc[0:0]
    rows = []
    for c in comparisons:
        x = means.get(c.external_id)
        h = lens.reference(counts.get(c.external_id, {}))
        if x is None or h is None:
            continue
        mine = cases_of.get(c.external_id, empty_cases)
        answers: dict[str, list[dict[str, Any]]] = {}
        theirs = outputs_of.get(c.external_id, all_outputs.iloc[0:0])
        for j, order, repeat, status, winner, confidence in theirs[
            ["judge", "order", "repeat", "status", "winner", "confidence"]
        ].itertuples(index=False):
            answers.setdefault(str(j), []).append(
                {
                    "order": order,
                    "repeat": int(repeat),
                    "status": status,
                    "winner": None if pd.isna(winner) else winner,
                    "confidence": None if pd.isna(confidence) else int(confidence),
                    "reason": reasons.get((c.pk, str(j), str(order), int(repeat)), ""),
                }
            )
        vote_counts = counts.get(c.external_id, dict.fromkeys(lens.LABELS, 0))
        rows.append(
            {
                "comparison": c.external_id,
                "page": c.page,
                "system_a": c.system_a,
                "system_b": c.system_b,
                "pair": pair_key(c.system_a, c.system_b),
                "h": h,
                "judge_mean": x,
                "disagreement": abs(x - h),
                "majority": lens.majority(vote_counts),
                "n_votes": sum(vote_counts.values()),
                "votes": vote_counts,
                "raters": [
                    {"rater": str(r["rater"]), "label": str(r["label"])}
                    for r in raters.get(c.external_id, [])
                ],
                "cases": [
                    {"repeat": int(r), "primary": p, "swapped": s, "case": k}
                    for r, p, s, k in mine[["repeat", "primary", "swapped", "case"]].itertuples(index=False)
                ],
                "judges": answers,
                "residual": residuals.get(c.external_id),
                "attributes": {k: _finite(v) for k, v in c.attributes.items()},
                "conditions": _conditions(c, mine, x, h),
                "images": _image_urls(study, c),
            }
        )
    return [dict(r) for r in lens.disagreement_order(rows)]


def _reasons(study: Study, comparison_pks: Sequence[int]) -> dict[tuple[int, str, str, int], str]:
    """Each output's reason (or its error), cut to ``REASON_CHARS``."""
    rows = JudgeOutput.objects.filter(comparison_id__in=list(comparison_pks)).values_list(
        "comparison_id", "judge__name", "order", "repeat", "reason", "error"
    )
    return {
        (c, j, o, r): " ".join((reason or error or "").split())[:REASON_CHARS]
        for c, j, o, r, reason, error in rows
    }


def pair_key(a: str, b: str) -> str:
    """The unordered pair of two systems as one filter value."""
    return " | ".join(sorted((a, b)))


@dataclass(frozen=True)
class DrilldownPage:
    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    page_size: int
    pair: str
    condition: str


def drilldown_select(
    report: Mapping[str, Any],
    *,
    pair: str = "",
    condition: str = "",
    page: Any = 1,
    page_size: Any = PAGE_SIZE,
) -> DrilldownPage:
    """One page of the drill-down, filtered by pair and condition (order kept)."""
    from calibration.services.lens_checklist import CHECKLIST_CONDITIONS

    known = CHECKLIST_CONDITIONS if report.get("kind") == StudyKind.CHECKLIST else CONDITIONS
    if condition and condition not in known:
        raise ValidationFailed(f"expected one of {', '.join(known)}, got {condition!r}", field="condition")
    try:
        number, size = int(str(page)), int(str(page_size))
    except ValueError:
        raise ValidationFailed("page and page_size must be positive integers", field="page") from None
    if number < 1 or not 1 <= size <= MAX_PAGE_SIZE:
        raise ValidationFailed(f"page ≥ 1 and page_size 1–{MAX_PAGE_SIZE}", field="page")
    rows = [
        r
        for r in report["drilldown"]
        if (not pair or r["pair"] == pair) and (not condition or condition in r["conditions"])
    ]
    pages = max(1, math.ceil(len(rows) / size))
    number = min(number, pages)
    return DrilldownPage(
        rows=rows[(number - 1) * size : number * size],
        total=len(rows),
        page=number,
        pages=pages,
        page_size=size,
        pair=pair,
        condition=condition,
    )


def disagreement_report_write(
    *, study: Study, judge: str, json_path: Path, raw: bool = False
) -> dict[str, Any]:
    output_path_check(json_path)
    report = disagreement_report(study=study, judge=judge, raw=raw)
    write_texts_atomic([(Path(json_path), json.dumps(report, indent=2, allow_nan=False) + "\n")])
    return report
