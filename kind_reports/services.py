"""``kind_report`` for the docs/study-kinds.md "The kind report" study kinds (``pairwise``, ``checklist``,
``rating``).

Stored votes (``kind_reports.selectors``) → pandas frames (``kind_frames``) → hygiene rules
(``stats.hygiene``) → the kind's analysis and the inter-rater agreement on the **kept
data answers** (the kind's report, ``kind_reports.kinds``) → one plain-JSON dict. The command, the
researcher page, its downloads and the REST endpoint all call ``kind_report_build`` (or
``kind_report_compute`` when they also draw the figures).

What is read (docs/study-kinds.md): the selectors' answered trials. ``Trial.attention_expected``
non-blank marks an instructed-response attention check: it feeds only the hygiene rules (passed
when the *displayed* answer equals the expected one; for ratings when every dimension's rating
equals it) and is never data. Hidden repeats stay in the frames with ``is_repeat``: the analyses
leave them out of the statistics and the agreement uses them for hidden-repeat consistency.

Decisions (docs/study-kinds.md "The kind report" and the docs are silent):

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
   first two systems of the study by position (``kind_reports.kinds.rating``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from annotation.errors import ValidationFailed
from annotation.files import output_path_check, write_texts_atomic
from annotation.models import Study
from annotation.progress import progress_step
from annotation.selectors.allocation import allocation_report_section
from annotation.services.scheduling import schedule_command
from calibration.services.agreement import check_bootstrap_options
from calibration.services.exclusion_rules import hygiene_rules, read_rules_file
from kind_reports.frames import KindFrames, kind_frames_of
from kind_reports.kinds import report_of

if TYPE_CHECKING:

    from stats.hygiene import HygieneResult

DEFAULT_RESAMPLES = 2000  # the command's default, as agreement_report
PAGE_RESAMPLES = 1000  # the researcher page computes on request
MAX_RESAMPLES = 100_000



class NoKindVotes(ValidationFailed):
    """The study has no answered trial yet: the page shows an empty state instead of an error."""


def kind_frames(study: Study) -> KindFrames:
    """Read the study's answered trials into the hygiene and data frames (``kind_reports.frames``)."""
    return kind_frames_of(study, report_of(study))


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
    """docs/study-kinds.md "The kind report" report of a ``pairwise`` / ``checklist`` / ``rating`` study;
    ``seed=None``: the study's seed.

    Order: hygiene frame → exclusion rules → kept data answers → the kind's analysis and the
    agreement → the hygiene report. Raises ``ValidationFailed`` (one line) on bad input and
    ``NoKindVotes`` when nothing has been answered yet.
    """
    from stats.hygiene import apply_hygiene
    from stats.serialize import json_safe

    spec = report_of(study)
    resamples, seed = check_bootstrap_options(
        resamples, study.seed if seed is None else seed, max_resamples=MAX_RESAMPLES
    )
    chosen = spec.systems(study, systems)
    hygiene_settings = hygiene_rules(study, rules, where=rules_where)
    frames = kind_frames(study)
    if frames.hygiene.empty and not spec.reports_without_votes(study):
        # The command it suggests schedules this study (issue 40: not 8 blocks of 234 for a small one).
        schedule = "" if study.blocks.exists() else f"schedule its blocks ({schedule_command(study)}), "
        raise NoKindVotes(
            f"study '{study.slug}' has no votes yet: {schedule}share the participant link (study_link "
            f"{study.slug}) and run the report again once raters have answered trials"
        )
    progress_step(f"exclusion rules and the {spec.kind} analysis ({resamples:,} bootstrap resamples)")
    try:
        hygiene = apply_hygiene(frames.hygiene, hygiene_settings)
        kept_ids = set(hygiene.kept["trial_id"].tolist())
        data = frames.data[frames.data["trial_id"].isin(kept_ids)].reset_index(drop=True)
        report: dict[str, Any] = {
            "study": study.slug,
            "kind": spec.kind,
            "title": study.title,
            "bootstrap": {"resamples": resamples, "seed": seed},
        }
        analysis, agreement = spec.analyse(
            study=study, data=data, settings=frames.settings, systems=chosen, resamples=resamples, seed=seed
        )
    except ValidationFailed:
        raise
    except ValueError as exc:  # stored data the statistics refuse: say so in one line
        raise ValidationFailed(f"study '{study.slug}' votes: {exc}") from None
    report["hygiene"] = hygiene_section(hygiene, frames)
    report["agreement"] = agreement.to_dict()
    report[spec.analysis_key] = analysis
    from kind_reports.rule import rule_report_section

    rule = rule_report_section(study=study, resamples=resamples, seed=seed)
    if rule is not None:  # docs/protocol.md "AesCode's rule score"; a study without rule scores is unchanged
        report["rule"] = rule
    adaptive = allocation_report_section(study)
    if adaptive is not None:  # docs/protocol.md "Adaptive allocation and stopping"; a uniform study's report is unchanged
        report["allocation"] = adaptive
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
    from kind_reports.rendering import render_kind_report_html

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
    files = [
        (Path(json_path), json.dumps(computed.report, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    ]
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
    "kind_frames",
    "kind_report_build",
    "kind_report_compute",
    "kind_report_html",
    "kind_report_write",
]
