"""``kind_report`` for the SPEC §11 study kinds (``pairwise``, ``checklist``, ``rating``).

Stored votes → pandas frames (``kind_frames``) → hygiene rules (``calibration.kinds.hygiene``) →
the kind's analysis (``score_preference`` / ``checklist`` / ``rating``) and the inter-rater
agreement (``agreement_any.kind_agreement``) on the **kept data answers** → one plain-JSON dict.
The command, the researcher page, its downloads and the REST endpoint all call
``kind_report_build`` (or ``kind_report_compute`` when they also draw the figures).

What is read (docs/study-kinds.md):

- every answered trial of the kind's unit (comparison / predicate / item) in assignments that have
  a rater and are **not voided** (votes of voided assignments are excluded from everything);
- ``Trial.attention_expected`` non-blank marks an instructed-response attention check: it feeds
  only the hygiene rules (passed when the *displayed* answer equals the expected one; for ratings
  when every dimension's rating equals it) and is never data;
- hidden repeats stay in the frames with ``is_repeat``: the analyses leave them out of the
  statistics and the agreement uses them for hidden-repeat consistency.

Decisions (SPEC §11 and the docs are silent):

1. A participant is a rater. The hygiene ``trial`` order of a participant runs over all of their
   live assignments, by claim time (then assignment id) and trial position.
2. The comprehension rule applies only when at least one participant of the report took the check
   (``comprehension_attempts > 0``); a participant with no attempt (a rater account, imported
   votes) never took it and is treated as passed. When nobody took it the rule is reported as not
   applied. Participants screened out *before* claiming a block (two failed attempts, no
   assignment) have no answer to remove and are only counted (``n_screened_out``).
3. A hidden repeat is an answered data trial: it counts for the participant rules (speed,
   straight-lining) and is removed with its participant like any other answer.
4. Exclusion-rule settings: ``Study.options["exclusion_rules"]`` overridden key by key by the
   ``rules`` argument (``--rules PATH``); an unknown key or a value of the wrong type is refused.
5. ``rating`` compares two systems, ``system_a − system_b``: the ``systems`` argument, else the
   first two systems of the study by position. The dimensions reported are the study's
   dimensions (in their order) that have at least one kept rating.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from django.db.models import F

from annotation.errors import ValidationFailed
from annotation.files import output_path_check, write_texts_atomic
from annotation.models import AssignmentState, Candidate, Predicate, Rater, Study, StudyKind, System, Trial
from annotation.progress import progress_step
from calibration.kinds._common import json_safe
from calibration.kinds.agreement_any import kind_agreement
from calibration.kinds.checklist import DEFAULT_K, checklist_agreement
from calibration.kinds.hygiene import HygieneResult, apply_hygiene
from calibration.kinds.rating import DEFAULT_MARGIN, DEFAULT_SCALE, rating_comparison
from calibration.kinds.score_preference import score_preference
from calibration.services.agreement import check_bootstrap_options
from calibration.services.exclusion_rules import hygiene_rules, read_rules_file

DEFAULT_RESAMPLES = 2000  # the command's default, as agreement_report
PAGE_RESAMPLES = 1000  # the researcher page computes on request
MAX_RESAMPLES = 100_000
KINDS: tuple[str, ...] = (StudyKind.PAIRWISE, StudyKind.CHECKLIST, StudyKind.RATING)
#: The JSON key of each kind's own analysis.
ANALYSIS_KEY: dict[str, str] = {
    StudyKind.PAIRWISE: "score_preference",
    StudyKind.CHECKLIST: "checklist",
    StudyKind.RATING: "rating",
}

# Trial field → ORM path (every kind), then the unit's fields per kind.
_TRIAL_FIELDS: dict[str, str] = {
    "trial_id": "id",
    "assignment_id": "assignment_id",
    "position": "position",
    "swapped": "swapped",
    "is_repeat": "is_repeat",
    "attention_expected": "attention_expected",
    "rater": "assignment__rater__external_id",
    "comprehension_attempts": "assignment__rater__comprehension_attempts",
    "comprehension_passed": "assignment__rater__comprehension_passed",
    "label": "vote__label",
    "answers": "vote__answers",
    "response_ms": "vote__response_ms",
}
_UNIT_FIELDS: dict[str, dict[str, str]] = {
    StudyKind.PAIRWISE: {
        "unit": "comparison__external_id",
        "brief": "comparison__page__external_id",
        "item_a": "comparison__candidate_a__external_id",
        "item_b": "comparison__candidate_b__external_id",
    },
    StudyKind.CHECKLIST: {
        "unit": "predicate__external_id",
        "brief": "predicate__candidate__page__external_id",
    },
    StudyKind.RATING: {
        "unit": "candidate__external_id",
        "brief": "candidate__page__external_id",
        "system": "candidate__system__external_id",
    },
}
_UNIT_FK: dict[str, str] = {
    StudyKind.PAIRWISE: "comparison",
    StudyKind.CHECKLIST: "predicate",
    StudyKind.RATING: "candidate",
}
_SWAP = {"A": "B", "B": "A"}


class NoKindVotes(ValidationFailed):
    """The study has no answered trial yet: the page shows an empty state instead of an error."""


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindSettings:
    """The study options the analyses need, defaults filled in (docs/bundle-kinds.md)."""

    kind: str
    k: int
    dimensions: tuple[str, ...]
    scale: tuple[int, int]
    margin: float


def kind_settings(study: Study) -> KindSettings:
    options = study.options if isinstance(study.options, dict) else {}
    scale = options.get("scale") or list(DEFAULT_SCALE)
    return KindSettings(
        kind=study.kind,
        k=int(options.get("k") or DEFAULT_K),
        dimensions=tuple(str(d) for d in options.get("dimensions") or ()),
        scale=(int(scale[0]), int(scale[1])),
        margin=float(options.get("margin") or DEFAULT_MARGIN),
    )


def parse_systems(value: str | Sequence[str] | None) -> tuple[str, str] | None:
    """``"X,Y"`` (or a pair) → ``("X", "Y")``; None stays None."""
    if value is None:
        return None
    parts = (
        [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p).strip() for p in value]
    )
    parts = [p for p in parts if p]
    if not parts:
        return None
    if len(parts) != 2 or parts[0] == parts[1]:
        raise ValidationFailed(
            f"expected two different system ids like alpha,beta, got {','.join(parts)!r}", field="systems"
        )
    return parts[0], parts[1]


def rating_systems(study: Study, systems: str | Sequence[str] | None) -> tuple[str, str]:
    """The two systems a rating report compares (decision 5); unknown ids are refused."""
    known = list(
        System.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("external_id", flat=True)
    )
    chosen = parse_systems(systems)
    if chosen is None:
        if len(known) < 2:
            raise ValidationFailed(
                f"study '{study.slug}' has {len(known)} system(s); a rating report compares two",
                field="systems",
            )
        return known[0], known[1]
    for s in chosen:
        if s not in known:
            raise ValidationFailed(
                f"unknown system {s!r}; the study's systems are {', '.join(known)}", field="systems"
            )
    return chosen


# --------------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindFrames:
    """The stored votes of a kind study as the pure modules' input frames.

    ``hygiene``: one row per answered trial (attention checks included), the columns of
    ``calibration.kinds.hygiene`` plus ``trial_id``. ``data``: one row per answered data trial
    (not an attention check), with ``trial_id, rater, unit, brief, is_repeat, label`` and the
    kind's fields (``item_a, item_b``; ``system, ratings``). ``n_screened_out``: decision 2.
    """

    settings: KindSettings
    hygiene: pd.DataFrame
    data: pd.DataFrame
    n_screened_out: int


def _check_kind(study: Study) -> None:
    if study.kind == StudyKind.PAIRWISE_REFERENCE:
        raise ValidationFailed(
            f"study '{study.slug}' is of kind 'pairwise_reference': use agreement_report (SPEC §5) for it"
        )
    if study.kind not in KINDS:
        raise ValidationFailed(
            f"study '{study.slug}' is of kind {study.kind!r}, not one of {', '.join(KINDS)}"
        )


def _ratings_of(answers: Any) -> dict[str, Any]:
    ratings = answers.get("ratings") if isinstance(answers, dict) else None
    return ratings if isinstance(ratings, dict) else {}


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip())
    except (TypeError, ValueError):
        return None


def _displayed_answer(kind: str, row: Mapping[str, Any], dimensions: Sequence[str]) -> str:
    """The answer as the rater gave it on screen (hygiene input; docs/study-kinds.md)."""
    if kind == StudyKind.RATING:
        ratings = _ratings_of(row["answers"])
        return "|".join("" if ratings.get(d) is None else str(ratings.get(d)) for d in dimensions)
    label = str(row["label"])
    if kind == StudyKind.PAIRWISE and row["swapped"]:
        return _SWAP.get(label, label)
    return label


def _attention_passed(kind: str, row: Mapping[str, Any], displayed: str, dimensions: Sequence[str]) -> bool:
    expected = str(row["attention_expected"]).strip()
    if kind == StudyKind.RATING:
        value = _int_or_none(expected)
        ratings = _ratings_of(row["answers"])
        return value is not None and bool(dimensions) and all(ratings.get(d) == value for d in dimensions)
    return displayed == expected


def kind_frames(study: Study) -> KindFrames:
    """Read the study's answered trials into the hygiene and data frames (module docstring)."""
    _check_kind(study)
    settings = kind_settings(study)
    kind = study.kind
    unit_fields = _UNIT_FIELDS[kind]
    paths = {**_TRIAL_FIELDS, **unit_fields}
    qs = (
        Trial.objects.filter(
            assignment__block__study=study,
            assignment__rater__isnull=False,
            vote__isnull=False,
            **{f"{_UNIT_FK[kind]}__isnull": False},
        )
        .exclude(assignment__state=AssignmentState.VOIDED)
        .order_by(
            "assignment__rater__external_id",
            F("assignment__claimed_at").asc(nulls_last=True),
            "assignment_id",
            "position",
        )
    )
    rows = [dict(zip(paths, values, strict=True)) for values in qs.values_list(*paths.values())]
    dimensions = settings.dimensions
    if kind == StudyKind.RATING and not dimensions:  # a study without declared dimensions: what was answered
        dimensions = tuple(sorted({d for r in rows for d in _ratings_of(r["answers"])}))
        settings = KindSettings(kind, settings.k, dimensions, settings.scale, settings.margin)

    took_check = any(r["comprehension_attempts"] > 0 for r in rows)
    hygiene_rows = []
    data_rows = []
    sequence: dict[str, int] = {}
    for r in rows:
        number = sequence.get(r["rater"], 0)
        sequence[r["rater"]] = number + 1
        displayed = _displayed_answer(kind, r, dimensions)
        is_check = bool(str(r["attention_expected"]).strip())
        h: dict[str, Any] = {
            "participant": r["rater"],
            "trial": number,
            "trial_id": r["trial_id"],
            "is_attention_check": is_check,
            "attention_passed": _attention_passed(kind, r, displayed, dimensions) if is_check else None,
            "response_ms": math.nan if r["response_ms"] is None else float(r["response_ms"]),
            "answer": displayed,
        }
        if took_check:  # decision 2
            attempts = int(r["comprehension_attempts"])
            h["comprehension_attempts"] = attempts
            h["comprehension_passed"] = bool(r["comprehension_passed"]) or attempts == 0
        hygiene_rows.append(h)
        if not is_check:
            d = {
                "trial_id": r["trial_id"],
                "rater": r["rater"],
                "unit": r["unit"],
                "brief": r["brief"],
                "is_repeat": bool(r["is_repeat"]),
                "label": str(r["label"]),
            }
            if kind == StudyKind.PAIRWISE:
                d["item_a"], d["item_b"] = r["item_a"], r["item_b"]
            elif kind == StudyKind.RATING:
                d["system"] = r["system"]
                d["ratings"] = _ratings_of(r["answers"])
            data_rows.append(d)

    hygiene_columns = [
        "participant",
        "trial",
        "trial_id",
        "is_attention_check",
        "attention_passed",
        "response_ms",
        "answer",
    ]
    if took_check:
        hygiene_columns += ["comprehension_attempts", "comprehension_passed"]
    data_columns = ["trial_id", "rater", "unit", "brief", "is_repeat", "label"]
    if kind == StudyKind.PAIRWISE:
        data_columns += ["item_a", "item_b"]
    elif kind == StudyKind.RATING:
        data_columns += ["system", "ratings"]
    screened = Rater.objects.filter(
        study=study, comprehension_attempts__gte=2, comprehension_passed=False, assignments__isnull=True
    ).count()
    return KindFrames(
        settings=settings,
        hygiene=pd.DataFrame(hygiene_rows, columns=hygiene_columns),
        data=pd.DataFrame(data_rows, columns=data_columns),
        n_screened_out=screened,
    )


def pairwise_votes_frame(data: pd.DataFrame) -> pd.DataFrame:
    """Data answers → ``score_preference`` votes (canonical labels)."""
    return pd.DataFrame(
        {
            "comparison": data["unit"],
            "brief": data["brief"],
            "item_a": data["item_a"],
            "item_b": data["item_b"],
            "rater": data["rater"],
            "label": data["label"],
            "is_repeat": data["is_repeat"].astype(bool),
        }
    )


def scores_frame(study: Study) -> pd.DataFrame:
    """Every item's imported metric scores (``item, metric, score``; the metric range is over all)."""
    rows = [
        {"item": item, "metric": str(metric), "score": score}
        for item, metrics in Candidate.objects.filter(page__study=study)
        .order_by("page__position", "system__position", "id")
        .values_list("external_id", "metrics")
        for metric, score in (metrics or {}).items()
    ]
    return pd.DataFrame(rows, columns=["item", "metric", "score"])


def checklist_answers_frame(data: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "predicate": data["unit"],
            "rater": data["rater"],
            "answer": data["label"],
            "is_repeat": data["is_repeat"].astype(bool),
        }
    )


def checklist_predicates_frame(study: Study) -> pd.DataFrame:
    """Every predicate of the study: its brief (cluster), question type and automatic answer."""
    rows = [
        {
            "predicate": external_id,
            "brief": brief,
            "question_type": question_type or None,
            "automatic": automatic or None,
        }
        for external_id, brief, question_type, automatic in Predicate.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("external_id", "candidate__page__external_id", "question_type", "automatic")
    ]
    return pd.DataFrame(rows, columns=["predicate", "brief", "question_type", "automatic"])


def ratings_frame(data: pd.DataFrame, dimensions: Sequence[str]) -> pd.DataFrame:
    """Data answers → one row per rating (``brief, system, rater, dimension, rating, item, is_repeat``)."""
    rows = [
        {
            "brief": r.brief,
            "system": r.system,
            "rater": r.rater,
            "dimension": d,
            "rating": r.ratings[d],
            "item": r.unit,
            "is_repeat": bool(r.is_repeat),
            "trial_id": r.trial_id,
        }
        for r in data.itertuples(index=False)
        for d in dimensions
        if r.ratings.get(d) is not None
    ]
    return pd.DataFrame(
        rows, columns=["brief", "system", "rater", "dimension", "rating", "item", "is_repeat", "trial_id"]
    )


def agreement_answers_frame(
    kind: str, data: pd.DataFrame, ratings: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The ``kind_agreement`` input: ``unit, rater, answer, brief, is_repeat`` (+ ``dimension``)."""
    if kind == StudyKind.RATING:
        assert ratings is not None
        return pd.DataFrame(
            {
                "unit": ratings["item"],
                "rater": ratings["rater"],
                "answer": ratings["rating"],
                "brief": ratings["brief"],
                "is_repeat": ratings["is_repeat"].astype(bool),
                "dimension": ratings["dimension"],
            }
        )
    return pd.DataFrame(
        {
            "unit": data["unit"],
            "rater": data["rater"],
            "answer": data["label"],
            "brief": data["brief"],
            "is_repeat": data["is_repeat"].astype(bool),
        }
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def hygiene_section(result: HygieneResult, frames: KindFrames) -> dict[str, Any]:
    """The report's ``hygiene`` object, built on ``HygieneResult.to_dict()``."""
    h = result.to_dict()
    checks = frames.hygiene[frames.hygiene["is_attention_check"].astype(bool)]
    failed = int((~checks["attention_passed"].astype(bool)).sum()) if len(checks) else 0
    return {
        "rules": h["settings"],
        "rule_order": h["rule_order"],
        "n_participants": h["n_participants"],
        "n_answers": h["n_data_answers"],
        "kept_participants": h["n_kept_participants"],
        "kept_answers": h["n_kept_answers"],
        "n_attention_checks": h["n_attention_answers"],
        "n_attention_failed": failed,
        "n_screened_out": frames.n_screened_out,
        "removed": h["rules"],
        "excluded_participants": h["excluded_participants"],
        "participants": h["participants"],
    }


@dataclass(frozen=True)
class KindReport:
    """A computed report and its study (the figures and templates read only ``report``)."""

    study: Study
    report: dict[str, Any]


def kind_report_compute(
    *,
    study: Study,
    resamples: Any,
    seed: Any = None,
    systems: str | Sequence[str] | None = None,
    rules: Mapping[str, Any] | None = None,
    rules_where: str = "",
) -> KindReport:
    """SPEC §11 report of a ``pairwise`` / ``checklist`` / ``rating`` study; ``seed=None``: the study's seed.

    Order: hygiene frame → exclusion rules → kept data answers → the kind's analysis and the
    agreement → the hygiene report. Raises ``ValidationFailed`` (one line) on bad input and
    ``NoKindVotes`` when nothing has been answered yet.
    """
    _check_kind(study)
    resamples, seed = check_bootstrap_options(
        resamples, study.seed if seed is None else seed, max_resamples=MAX_RESAMPLES
    )
    chosen = rating_systems(study, systems) if study.kind == StudyKind.RATING else None
    if study.kind != StudyKind.RATING and parse_systems(systems) is not None:
        raise ValidationFailed("only a rating study compares two systems", field="systems")
    hygiene_settings = hygiene_rules(study, rules, where=rules_where)
    frames = kind_frames(study)
    if frames.hygiene.empty:
        raise NoKindVotes(
            f"study '{study.slug}' has no votes yet: schedule its blocks (schedule_blocks {study.slug}), share the "
            f"participant link (study_link {study.slug}) and run the report again once raters have answered trials"
        )
    settings = frames.settings
    progress_step(f"exclusion rules and the {study.kind} analysis ({resamples:,} bootstrap resamples)")
    try:
        hygiene = apply_hygiene(frames.hygiene, hygiene_settings)
        kept_ids = set(hygiene.kept["trial_id"].tolist())
        data = frames.data[frames.data["trial_id"].isin(kept_ids)].reset_index(drop=True)
        report: dict[str, Any] = {
            "study": study.slug,
            "kind": study.kind,
            "title": study.title,
            "bootstrap": {"resamples": resamples, "seed": seed},
        }
        analysis: dict[str, Any]
        if study.kind == StudyKind.PAIRWISE:
            analysis = score_preference(
                pairwise_votes_frame(data), scores_frame(study), resamples=resamples, seed=seed
            ).to_dict()
            agreement = kind_agreement(
                agreement_answers_frame(study.kind, data), kind=study.kind, resamples=resamples, seed=seed
            )
        elif study.kind == StudyKind.CHECKLIST:
            analysis = checklist_agreement(
                checklist_answers_frame(data),
                checklist_predicates_frame(study),
                resamples=resamples,
                seed=seed,
                k=settings.k,
            ).to_dict()
            agreement = kind_agreement(
                agreement_answers_frame(study.kind, data), kind=study.kind, resamples=resamples, seed=seed
            )
        else:
            assert chosen is not None
            ratings = ratings_frame(data, settings.dimensions)
            for system in chosen:
                if not (ratings["system"] == system).any():
                    raise ValidationFailed(
                        f"study '{study.slug}': no kept rating of system {system!r} (not rated yet, or every rating "
                        "of it was excluded); choose two rated systems",
                        field="systems",
                    )
            rated = set(ratings["dimension"])
            analysis = rating_comparison(
                ratings,
                system_a=chosen[0],
                system_b=chosen[1],
                resamples=resamples,
                seed=seed,
                margin=settings.margin,
                scale=settings.scale,
                dimensions=[d for d in settings.dimensions if d in rated],
            ).to_dict()
            analysis["dimensions_declared"] = list(settings.dimensions)
            agreement = kind_agreement(
                agreement_answers_frame(study.kind, data, ratings),
                kind=study.kind,
                resamples=resamples,
                seed=seed,
                scale=settings.scale,
            )
    except ValidationFailed:
        raise
    except ValueError as exc:  # stored data the statistics refuse: say so in one line
        raise ValidationFailed(f"study '{study.slug}' votes: {exc}") from None
    report["hygiene"] = hygiene_section(hygiene, frames)
    report["agreement"] = agreement.to_dict()
    report[ANALYSIS_KEY[study.kind]] = analysis
    return KindReport(study=study, report=json_safe(report))


def kind_report_build(
    *,
    study: Study,
    resamples: Any,
    seed: Any = None,
    systems: str | Sequence[str] | None = None,
    rules: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``kind_report`` JSON object (plain types, NaN as null). See ``kind_report_compute``."""
    return kind_report_compute(
        study=study, resamples=resamples, seed=seed, systems=systems, rules=rules
    ).report


def kind_report_html(computed: KindReport) -> str:
    """The self-contained HTML page (inline CSS, figures as SVG data URIs, no script)."""
    # Imported here: matplotlib is only needed when a page or an HTML file is rendered.
    from calibration.kind_plots import render_kind_report_html

    return render_kind_report_html(study=computed.study, report=computed.report)


def kind_report_write(
    *,
    study: Study,
    json_path: Path,
    html_path: Path | None = None,
    resamples: Any,
    seed: Any = None,
    systems: str | Sequence[str] | None = None,
    rules_path: Path | None = None,
) -> dict[str, Any]:
    """Compute once; render the HTML first, then write the JSON (and the HTML) whole; return the report."""
    output_path_check(json_path)
    output_path_check(html_path)
    rules = read_rules_file(rules_path) if rules_path is not None else None
    computed = kind_report_compute(
        study=study,
        resamples=resamples,
        seed=seed,
        systems=systems,
        rules=rules,
        rules_where=str(rules_path) if rules_path is not None else "",
    )
    html = kind_report_html(computed) if html_path is not None else None
    files = [(Path(json_path), json.dumps(computed.report, indent=2, ensure_ascii=False, allow_nan=False) + "\n")]
    if html_path is not None and html is not None:
        files.append((Path(html_path), html))
    write_texts_atomic(files)
    return computed.report


__all__ = [
    "DEFAULT_RESAMPLES",
    "PAGE_RESAMPLES",
    "KindFrames",
    "KindReport",
    "NoKindVotes",
    "hygiene_rules",
    "kind_frames",
    "kind_report_build",
    "kind_report_compute",
    "kind_report_html",
    "kind_report_write",
]
