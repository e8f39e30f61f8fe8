"""AesCode's rule score of a study (docs/protocol.md "AesCode's rule score"): each output's stored
result (``Candidate.rule``, scored when the study was made from HTML outputs, or imported with the
bundle), per system Rule and each channel with brief-block bootstrap intervals
(``rule_score.summary``). The ``rule_score`` command, the kind report's "Rule score" section and the
API (``GET /api/studies/<slug>/rule-score/``) all call :func:`rule_score_report`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from annotation.errors import ValidationFailed
from annotation.files import output_path_check, write_texts_atomic
from annotation.models import Study
from calibration.services.agreement import check_bootstrap_options
from kind_reports.selectors import rule_output_rows

DEFAULT_RESAMPLES = 2000
MAX_RESAMPLES = 100_000


class NoRuleScores(ValidationFailed):
    """No output of the study has a rule score: the page and the command say how to get one."""


def rule_score_report(
    *, study: Study, resamples: Any = DEFAULT_RESAMPLES, seed: Any = None, pages: bool = True
) -> dict[str, Any]:
    """``{measures, bootstrap, n_outputs, systems: [...], pages: [...]}``; ``pages`` lists each
    output's result (left out with ``pages=False``, the kind report's section). Raises
    :class:`NoRuleScores` when no output has one."""
    from rule_score.summary import MEASURES, OutputResult, summarize
    from stats.serialize import json_safe

    resamples, seed = check_bootstrap_options(
        resamples, study.seed if seed is None else seed, max_resamples=MAX_RESAMPLES
    )
    rows = rule_output_rows(study=study)
    if not rows:
        raise NoRuleScores(
            f"study '{study.slug}' has no rule scores: give its briefs verifiable requirements and make it from "
            "HTML outputs (new_study --requirements FILE), or import a bundle whose items carry 'rule' "
            '(docs/protocol.md "AesCode\'s rule score")'
        )
    systems = summarize(
        [OutputResult(r["brief"], r["system"], r["result"]) for r in rows], resamples=resamples, seed=seed
    )
    report: dict[str, Any] = {
        "study": study.slug,
        "measures": list(MEASURES),
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "brief"},
        "n_outputs": len(rows),
        "n_briefs": len({r["brief"] for r in rows}),
        "systems": [s.to_json() for s in systems],
    }
    if pages:
        report["pages"] = [
            {"brief": r["brief"], "system": r["system"], "item": r["item"], **r["result"]} for r in rows
        ]
    return json_safe(report)


def rule_report_section(*, study: Study, resamples: int, seed: int) -> dict[str, Any] | None:
    """The kind report's section: per system only; None when no output has a rule score."""
    try:
        return rule_score_report(study=study, resamples=resamples, seed=seed, pages=False)
    except NoRuleScores:
        return None


def rule_score_write(
    *, study: Study, json_path: Path | None, resamples: Any, seed: Any = None
) -> dict[str, Any]:
    """Compute the report and write it whole to ``json_path`` (when given); return it."""
    output_path_check(json_path)
    report = rule_score_report(study=study, resamples=resamples, seed=seed)
    if json_path is not None:
        text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        write_texts_atomic([(Path(json_path), text)])
    return report
