"""The stored votes of a kind study as the pure modules' input frames (docs/study-kinds.md "The kind report";
``kind_reports.services`` decisions 1–3). Kept apart from the services so that a kind's report can read
another study's frames (the checklist's linked pairwise study) without importing the report registry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from annotation.kinds import design_of
from annotation.models import Study
from kind_reports.kinds.base import KindReportSpec, KindSettings
from kind_reports.selectors import answered_trial_rows, screened_out_count

if TYPE_CHECKING:
    import pandas as pd

_HYGIENE_COLUMNS = [
    "participant",
    "trial",
    "trial_id",
    "is_attention_check",
    "attention_passed",
    "response_ms",
    "answer",
]
_COMPREHENSION_COLUMNS = ["comprehension_attempts", "comprehension_passed"]
_DATA_COLUMNS = ["trial_id", "rater", "unit", "brief", "is_repeat", "label"]


def kind_settings(study: Study, spec: KindReportSpec) -> KindSettings:
    from stats.checklist import DEFAULT_K
    from stats.rating import DEFAULT_MARGIN, DEFAULT_SCALE

    options = study.options if isinstance(study.options, dict) else {}
    scale = options.get("scale") or list(DEFAULT_SCALE)
    return KindSettings(
        kind=spec.kind,
        k=int(options.get("k") or DEFAULT_K),
        dimensions=tuple(str(d) for d in options.get("dimensions") or ()),
        scale=(int(scale[0]), int(scale[1])),
        margin=float(options.get("margin") or DEFAULT_MARGIN),
    )


# --------------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindFrames:
    """The stored votes of a kind study as the pure modules' input frames.

    ``hygiene``: one row per answered trial (attention checks included), the columns of
    ``stats.hygiene`` plus ``trial_id``. ``data``: one row per answered data trial
    (not an attention check), with ``trial_id, rater, unit, brief, is_repeat, label`` and the
    kind's fields (``item_a, item_b``; ``system, ratings``). ``n_screened_out``: decision 2.
    """

    settings: KindSettings
    hygiene: pd.DataFrame
    data: pd.DataFrame
    n_screened_out: int


def kind_frames_of(study: Study, spec: KindReportSpec) -> KindFrames:
    """Read the study's answered trials into the hygiene and data frames, as ``spec`` (its kind's
    report) reads them (``kind_reports.services`` module docstring)."""
    import pandas as pd

    settings = kind_settings(study, spec)
    rows = answered_trial_rows(study=study, unit=design_of(study).unit, unit_fields=spec.unit_fields)
    dimensions = spec.dimensions(settings.dimensions, rows)
    if dimensions != settings.dimensions:  # a study without declared dimensions: what was answered
        settings = KindSettings(settings.kind, settings.k, dimensions, settings.scale, settings.margin)

    took_check = any(r["comprehension_attempts"] > 0 for r in rows)
    hygiene_rows = []
    data_rows = []
    sequence: dict[str, int] = {}
    for r in rows:
        number = sequence.get(r["rater"], 0)
        sequence[r["rater"]] = number + 1
        displayed = spec.displayed_answer(r, dimensions)
        is_check = bool(str(r["attention_expected"]).strip())
        h: dict[str, Any] = {
            "participant": r["rater"],
            "trial": number,
            "trial_id": r["trial_id"],
            "is_attention_check": is_check,
            "attention_passed": spec.attention_passed(r, displayed, dimensions) if is_check else None,
            "response_ms": math.nan if r["response_ms"] is None else float(r["response_ms"]),
            "answer": displayed,
        }
        if took_check:  # decision 2
            attempts = int(r["comprehension_attempts"])
            h["comprehension_attempts"] = attempts
            h["comprehension_passed"] = bool(r["comprehension_passed"]) or attempts == 0
        hygiene_rows.append(h)
        if not is_check:
            data_rows.append(
                {
                    "trial_id": r["trial_id"],
                    "rater": r["rater"],
                    "unit": r["unit"],
                    "brief": r["brief"],
                    "is_repeat": bool(r["is_repeat"]),
                    "label": str(r["label"]),
                    **spec.data_fields(r),
                }
            )

    hygiene_columns = _HYGIENE_COLUMNS + (_COMPREHENSION_COLUMNS if took_check else [])
    return KindFrames(
        settings=settings,
        hygiene=pd.DataFrame(hygiene_rows, columns=hygiene_columns),
        data=pd.DataFrame(data_rows, columns=[*_DATA_COLUMNS, *spec.data_columns]),
        n_screened_out=screened_out_count(study=study),
    )
