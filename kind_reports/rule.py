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


RENDER_JSON_MAX_BYTES = 64 * 1024 * 1024  # a render's JSON (render_pages writes far less)


def rule_score_folders(
    *,
    systems: list[tuple[str, Path]],
    requirements_path: Path,
    json_path: Path | None = None,
    resamples: Any = DEFAULT_RESAMPLES,
    seed: Any = 0,
) -> dict[str, Any]:
    """The same report from ``render_pages`` output folders, with no study: each system's
    ``<page>.json`` scored against ``requirements_path`` (``{page id: requirements}``). A page
    without its JSON in a system's folder is that system's failed render (0 on each asked channel).
    Written whole to ``json_path`` when given."""
    from annotation.services.bundles.reference_format import load_json
    from rule_score.requirements import RequirementsError, parse_requirements
    from rule_score.summary import MEASURES, OutputResult, summarize
    from rule_score.verifiers import rule_result
    from stats.serialize import json_safe

    resamples, seed = check_bootstrap_options(resamples, seed, max_resamples=MAX_RESAMPLES)
    output_path_check(json_path)
    if not requirements_path.is_file():
        raise ValidationFailed("no such file", where=str(requirements_path))
    raw = load_json(requirements_path.read_bytes(), filename=str(requirements_path))
    if not isinstance(raw, dict) or not raw:
        raise ValidationFailed(
            "expected a JSON object {page id: requirements} with at least one page",
            where=str(requirements_path),
        )
    requirements = {}
    for page, value in raw.items():
        try:
            requirements[str(page)] = parse_requirements(value)
        except RequirementsError as error:
            raise ValidationFailed(error.reason, where=f"{requirements_path} $.{page}{error.path}") from None
    names = [name for name, _ in systems]
    if not systems or len(set(names)) != len(names):
        raise ValidationFailed("give each system once, as NAME=FOLDER", where="--system")
    pages, outputs = [], []
    for name, folder in systems:
        if not folder.is_dir():
            raise ValidationFailed(f"no such folder (--system {name})", where=str(folder))
        for page, wanted in requirements.items():
            path = folder / f"{page}.json"
            record: dict[str, Any] = {"status": "failed"}
            found = path.is_file() and not path.is_symlink()
            if found:
                if path.stat().st_size > RENDER_JSON_MAX_BYTES:
                    raise ValidationFailed(
                        f"over {RENDER_JSON_MAX_BYTES:,} bytes; not a render's JSON", where=str(path)
                    )
                loaded = load_json(path.read_bytes(), filename=str(path))
                record = loaded if isinstance(loaded, dict) else record
            result = rule_result(record, wanted).to_json()
            outputs.append(OutputResult(page, name, result))
            pages.append(
                {
                    "brief": page,
                    "system": name,
                    "item": None,
                    **({} if found else {"missing": True}),
                    **result,
                }
            )
    summary = summarize(outputs, resamples=resamples, seed=seed)
    report: dict[str, Any] = json_safe(
        {
            "study": None,
            "measures": list(MEASURES),
            "bootstrap": {"resamples": resamples, "seed": seed, "unit": "brief"},
            "n_outputs": len(outputs),
            "n_briefs": len(requirements),
            "systems": [s.to_json() for s in summary],
            "pages": pages,
        }
    )
    if json_path is not None:
        write_texts_atomic(
            [(Path(json_path), json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n")]
        )
    return report
