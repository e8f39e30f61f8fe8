"""Agreement report for a study (docs/protocol.md "Human reference and agreement", "Commands"
``agreement_report``, docs/protocol.md "Report keys" keys).

Selector (``annotation.selectors.votes.votes_frame``, voided assignments excluded) → pure
statistics (``stats.agreement.agreement_report``) → plain JSON dict. The command, the
researcher page and the REST endpoint all go through ``agreement_report_compute``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from annotation.errors import ValidationFailed
from annotation.files import output_path_check, write_texts_atomic
from annotation.models import Study
from annotation.progress import progress_step
from annotation.selectors.allocation import allocation_report_section
from annotation.selectors.votes import gold_votes_frame, votes_frame
from calibration.reports import agreement_figures, render_agreement_html
from calibration.services.exclusion_rules import effective_rules

if TYPE_CHECKING:
    from stats.agreement import AgreementResult

DEFAULT_RESAMPLES = 2000  # docs/protocol.md "Commands" default of the command and the REST endpoint
PAGE_RESAMPLES = 200  # the researcher page computes on request, so it starts smaller
MAX_RESAMPLES = 100_000


@dataclass(frozen=True)
class StudyAgreement:
    """A computed agreement report: its JSON object and the result it serializes (for the figures)."""

    study: Study
    report: dict[str, Any]
    result: AgreementResult


def check_bootstrap_options(
    resamples: Any, seed: Any, *, max_resamples: int = MAX_RESAMPLES
) -> tuple[int, int]:
    """Validate the bootstrap resample count and seed (integers; 1 ≤ resamples ≤ max, seed ≥ 0)."""
    try:
        r = int(str(resamples).strip())
    except ValueError:
        raise ValidationFailed(
            f"expected an integer 1–{max_resamples}, got {resamples!r}", field="bootstrap"
        ) from None
    if not 1 <= r <= max_resamples:
        raise ValidationFailed(f"expected an integer 1–{max_resamples}, got {r}", field="bootstrap")
    try:
        s = int(str(seed).strip())
    except ValueError:
        raise ValidationFailed(f"expected a non-negative integer, got {seed!r}", field="seed") from None
    if s < 0:
        raise ValidationFailed(f"expected a non-negative integer, got {s}", field="seed")
    return r, s


def agreement_report_compute(
    *,
    study: Study,
    resamples: int,
    seed: int | None = None,
    rules: Mapping[str, Any] | None = None,
    rules_where: str = "",
    raw: bool = False,
) -> StudyAgreement:
    """docs/protocol.md "Human reference and agreement" agreement for ``study``; ``seed=None`` uses the
    study's seed.

    ``rules`` (issue 17): apply the study's exclusion rules with these settings on top (``{}``:
    the stored ones) before the analysis; the report gains ``exclusions`` (removed per rule).
    Without ``rules`` a study's saved rules apply by default (issue 30, ``effective_rules``;
    ``exclusions.applied_by_default`` is then true); ``raw`` gives the figures without any rule.
    """
    from stats.agreement import agreement_report

    resamples, seed = check_bootstrap_options(resamples, study.seed if seed is None else seed)
    votes = votes_frame(study=study)
    exclusions = None
    rules, by_default = effective_rules(study, rules, raw=raw)
    if rules is not None:
        votes, exclusions = reference_votes_filtered(study=study, votes=votes, rules=rules, where=rules_where)
        exclusions["applied_by_default"] = by_default
    progress_step(f"agreement and {resamples:,} bootstrap resamples on {len(votes):,} votes")
    try:
        result = agreement_report(votes, resamples=resamples, seed=seed)
    except ValueError as exc:  # stored data the statistics refuse: say so in one line
        raise ValidationFailed(f"study '{study.slug}' votes: {exc}") from None
    report = {"study": study.slug, **result.to_dict()}
    if exclusions is not None:
        report["exclusions"] = exclusions
    adaptive = allocation_report_section(study)
    if adaptive is not None:  # docs/protocol.md "Adaptive allocation and stopping"
        report["allocation"] = adaptive
    return StudyAgreement(study=study, report=report, result=result)


def reference_votes_filtered(
    *, study: Study, votes: Any, rules: Mapping[str, Any], where: str = ""
) -> tuple[Any, dict[str, Any]]:
    """The votes a reference study's exclusion rules keep, and the report's ``exclusions`` object."""
    from calibration.services.exclusion_rules import hygiene_rules
    from stats.reference_hygiene import exclusions_section, reference_rules_apply

    settings = hygiene_rules(study, rules, where=where or "rules")
    if votes.empty:
        return votes, {
            "settings": {},
            "n_raters": 0,
            "n_kept_raters": 0,
            "n_votes": 0,
            "n_kept_votes": 0,
            "rules": [],
            "excluded_raters": [],
        }
    try:
        kept, result = reference_rules_apply(votes, settings, gold_votes_frame(study=study))
    except ValueError as exc:
        raise ValidationFailed(f"study '{study.slug}' votes: {exc}") from None
    return kept, exclusions_section(result)


def agreement_report_for_study(*, study: Study, resamples: int, seed: int | None = None) -> dict[str, Any]:
    """The docs/protocol.md "Report keys" ``agreement_report`` JSON object (plain types, NaN as null)."""
    return agreement_report_compute(study=study, resamples=resamples, seed=seed).report


def agreement_report_html(agreement: StudyAgreement) -> str:
    """The self-contained HTML page (inline CSS, SVG figures as data URIs, no script)."""
    figures = agreement_figures(agreement.report, agreement.result)
    return render_agreement_html(study=agreement.study, report=agreement.report, figures=figures)


def agreement_report_write(
    *,
    study: Study,
    json_path: Path,
    html_path: Path | None = None,
    resamples: int,
    seed: int | None = None,
    rules: Mapping[str, Any] | None = None,
    rules_where: str = "",
    raw: bool = False,
) -> dict[str, Any]:
    """Compute once; write the JSON report (and the HTML page); return the report."""
    output_path_check(json_path)
    output_path_check(html_path)
    agreement = agreement_report_compute(
        study=study, resamples=resamples, seed=seed, rules=rules, rules_where=rules_where, raw=raw
    )
    html = agreement_report_html(agreement) if html_path is not None else None
    files = [(Path(json_path), json.dumps(agreement.report, indent=2, allow_nan=False) + "\n")]
    if html_path is not None and html is not None:
        files.append((Path(html_path), html))
    write_texts_atomic(files)
    return agreement.report
