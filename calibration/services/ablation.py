"""The judge-subset ablation of a study (issue 16 part 1, paper B.4): which judges are worth paying for.

``judge_ablation_report`` reads the study (``calibration.selectors.ablation``), runs the pure
``stats.judge_ablation.judge_ablation`` and returns its JSON report with the study, the
judges left out, how the cost was estimated and the library versions. The ``judge_ablation``
command, the researcher page and the REST endpoint all call it. Nothing is stored.
"""

from __future__ import annotations

from typing import Any

from annotation.errors import ValidationFailed
from annotation.models import Study
from calibration.selectors.ablation import ablation_inputs
from calibration.services.agreement import check_bootstrap_options
from calibration.services.calibration import library_versions
from stats.defaults import ABLATION_RESAMPLES, ABLATION_SEED
from stats.errors import AblationError

MAX_RESAMPLES = 100_000


def judge_ablation_report(
    *, study: Study, resamples: Any = ABLATION_RESAMPLES, seed: Any = ABLATION_SEED
) -> dict[str, Any]:
    """The nested judge-subset ablation of ``study`` as a JSON-ready dict (one-line errors)."""
    from stats.judge_ablation import judge_ablation

    resamples, seed = check_bootstrap_options(resamples, seed, max_resamples=MAX_RESAMPLES)
    inputs = ablation_inputs(study=study)
    try:
        result = judge_ablation(
            inputs.overall,
            inputs.axis,
            inputs.h,
            inputs.valid_votes,
            blocks=inputs.blocks,
            pages=inputs.pages,
            judges=inputs.judges,
            costs=inputs.costs,
            cost_unit=str(inputs.cost_method["unit"]),
            resamples=resamples,
            seed=seed,
        )
    except AblationError as exc:
        raise ValidationFailed(f"study {study.slug}: {exc}") from None
    report = result.to_dict()
    report["warnings"] = [
        *(f"judge {d['judge']} left out: {d['reason']}" for d in inputs.dropped_judges),
        *report["warnings"],
    ]
    return {
        "study": study.slug,
        **report,
        "dropped_judges": [dict(d) for d in inputs.dropped_judges],
        "cost_method": dict(inputs.cost_method),
        "library_versions": library_versions(),
    }
