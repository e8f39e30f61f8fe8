"""Calibration of a study's judges (docs/protocol.md "Judges and calibration") and freezing of the fitted
weights.

``calibration_report_for_study`` reads the study (``calibration.selectors.calibration``), runs the
pure ``stats.judge_weights.calibrate`` and returns its JSON report (docs/protocol.md "Report keys"
``calibrate`` keys and extras) with the provenance a frozen set needs: the exact comparison ids of the fit and
``data_hash`` — the SHA-256 of a canonical JSON of the fitted matrix ``x̄`` and ``h`` (see
:func:`fit_data_hash`). ``coefficient_set_freeze`` turns such a report into an immutable
``CoefficientSet``. The command, the researcher page and the REST endpoint all call these.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from annotation.errors import Conflict, ValidationFailed
from annotation.models import AuditEvent, Study
from annotation.progress import progress_step
from calibration.models import CalibrationReport, CoefficientSet
from calibration.selectors.calibration import calibration_inputs
from judges.prompts import prompt_template_sha256
from judges.selectors import UNKNOWN_TEMPLATE, judge_prompt_templates, judge_usage
from stats.defaults import CALIBRATION_RESAMPLES, CALIBRATION_SEED

if TYPE_CHECKING:
    import numpy as np

#: Libraries whose versions are recorded with every report and frozen set.
RECORDED_LIBRARIES: tuple[str, ...] = ("numpy", "scipy", "statsmodels", "pandas")
MAX_RESAMPLES = 100_000
NAME_MAX_LENGTH = 120


def library_versions() -> dict[str, str]:
    """Installed versions of the numerical libraries the fit depends on."""
    out = {}
    for name in RECORDED_LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover - all are dependencies
            out[name] = "unknown"
    return out


def fit_data_hash(
    *, comparisons: Sequence[object], judges: Sequence[str], x: np.ndarray, h: np.ndarray
) -> str:
    """SHA-256 of the canonical JSON of the fitted data (docs/protocol.md "Judges and calibration"
    (Freezing)).

    The JSON is ``{"comparisons": [...], "h": [...], "judges": [...], "x": [[...], ...]}``: the
    comparison ids in fit order, ``h_i``, the judge names in column order and the matrix of
    ``x̄_ij`` (one row per comparison), with sorted keys, no whitespace (separators ``,`` and
    ``:``), floats in Python's shortest round-trip form, UTF-8.
    """
    import numpy as np

    x = np.asarray(x, dtype=float)
    h = np.asarray(h, dtype=float)
    if x.shape != (len(comparisons), len(judges)) or h.shape != (len(comparisons),):
        raise ValueError("fit data: x must be (comparisons × judges) and h one value per comparison")
    payload = {
        "comparisons": [str(c) for c in comparisons],
        "judges": [str(j) for j in judges],
        "x": [[float(v) for v in row] for row in x.tolist()],
        "h": [float(v) for v in h.tolist()],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_parameters(resamples: int, seed: int, pilot_size: int | None) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or not 1 <= resamples <= MAX_RESAMPLES:
        raise ValidationFailed(f"expected an integer 1…{MAX_RESAMPLES}, got {resamples!r}", field="bootstrap")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValidationFailed(f"expected a non-negative integer, got {seed!r}", field="seed")
    if pilot_size is not None and (
        isinstance(pilot_size, bool) or not isinstance(pilot_size, int) or pilot_size < 1
    ):
        raise ValidationFailed(f"expected a positive integer, got {pilot_size!r}", field="pilot_size")


def calibration_report_for_study(
    *,
    study: Study,
    resamples: int = CALIBRATION_RESAMPLES,
    seed: int = CALIBRATION_SEED,
    pilot_size: int | None = None,
    judges: Sequence[str] | None = None,
    rules: Mapping[str, Any] | None = None,
    rules_where: str = "",
    raw: bool = False,
) -> dict[str, Any]:
    """The docs/protocol.md "Judges and calibration" calibration report of ``study`` as a JSON-ready dict
    (docs/protocol.md "Report keys" keys + extras).

    Without ``rules`` a study's saved exclusion rules apply by default (issue 30); ``raw``: none.

    ``rules`` (issue 17): the human reference is computed from the votes the study's exclusion
    rules keep (stored settings, these on top); the report gains ``exclusions``.

    Deterministic in (data, resamples, seed, pilot_size, judges). Besides the keys of
    ``CalibrationResult.to_dict(include_predictions=True)`` it holds ``study``, ``pilot_size``,
    ``fit_data{comparison_ids, data_hash}`` and ``library_versions``. Bad input raises a one-line
    ``ArbiterError``.
    """
    from stats.judge_weights import calibrate

    _check_parameters(resamples, seed, pilot_size)
    votes = exclusions = None
    from calibration.services.exclusion_rules import effective_rules

    rules, by_default = effective_rules(study, rules, raw=raw)
    if rules is not None:
        from annotation.selectors.votes import votes_frame
        from calibration.services.agreement import reference_votes_filtered

        votes, exclusions = reference_votes_filtered(
            study=study, votes=votes_frame(study=study), rules=rules, where=rules_where
        )
        exclusions["applied_by_default"] = by_default
    inputs = calibration_inputs(study=study, judges=judges, votes=votes)
    warnings: list[str] = [f"judge {d['judge']} left out: {d['reason']}" for d in inputs.dropped_judges]
    if inputs.missing_families:
        warnings.append(
            "no vendor family recorded for judge(s) "
            + ", ".join(inputs.missing_families)
            + ": committee audit skipped (set the judge's family)"
        )
    progress_step(f"calibration and {resamples:,} bootstrap resamples")
    try:
        result = calibrate(
            inputs.judge_outputs,
            inputs.human,
            judges=list(inputs.judges),
            resamples=resamples,
            seed=seed,
            pilot_size=pilot_size,
            families=inputs.families,
        )
    except ValueError as exc:
        # When the rules removed raters, the reason may be theirs (every rater excluded): say so.
        cause = ""
        if exclusions is not None and exclusions["n_kept_raters"] < exclusions["n_raters"]:
            from calibration.services.exclusion_rules import exclusions_line

            cause = f" ({exclusions_line(exclusions)})"
        raise ValidationFailed(f"study {study.slug}: {exc}{cause}") from None
    report = result.to_dict(include_predictions=True)
    pred = result.predictions
    x = pred[[f"x:{j}" for j in result.judges]].to_numpy(dtype=float)
    h = pred["h"].to_numpy(dtype=float)
    comparison_ids = [str(c) for c in pred["comparison"].tolist()]
    data_hash = fit_data_hash(comparisons=comparison_ids, judges=result.judges, x=x, h=h)
    templates = judge_prompt_templates(study=study, judges=result.judges, comparisons=comparison_ids)
    for judge, counts in templates.items():
        if len(counts) > 1:
            unknown = " (some imported without naming theirs)" if UNKNOWN_TEMPLATE in counts else ""
            warnings.append(
                f"judge {judge}'s outputs come from {len(counts)} different prompt templates{unknown}: "
                "the prompt changed during its run; re-run it on one prompt before freezing"
            )
    if warnings:
        report["warnings"] = [*warnings, *report.get("warnings", [])]
    if exclusions is not None:
        report["exclusions"] = exclusions
    return {
        "study": study.slug,
        **report,
        # Judges with outputs that the fit left out, and why (audit F2).
        "dropped_judges": [dict(d) for d in inputs.dropped_judges],
        "pilot_size": pilot_size,
        # Which prompt template produced each judge's valid outputs in the fit ("unknown": imported
        # without one), and the study's current one, to tell them apart.
        "prompt_templates": templates,
        "prompt_template_current": prompt_template_sha256(study.judge_prompt),
        # Tokens and cost per judge on the fitted comparisons (every attempt, as billed).
        "judge_usage": judge_usage(study=study, judges=result.judges, comparisons=comparison_ids),
        # The data the coefficients were fitted on (docs/protocol.md "Judges and calibration" (Freezing)),
        # kept with every stored report and frozen set, so the fit can be re-checked against its hash later.
        "fit_data": {
            "comparison_ids": comparison_ids,
            "judges": list(result.judges),
            "x": x.tolist(),
            "h": h.tolist(),
            "data_hash": data_hash,
        },
        "library_versions": library_versions(),
    }


def report_without_predictions(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus its per-comparison ``predictions`` (what is stored in the database)."""
    return {k: v for k, v in report.items() if k != "predictions"}


def actor_label(user: Any = None) -> str:
    """The user's name, or the operating-system user for the command line."""
    if user is not None and getattr(user, "is_authenticated", False):
        return str(user.get_username())[:150]
    try:
        return f"os:{getpass.getuser()}"[:150]
    except (KeyError, OSError):  # no passwd entry (containers)
        return "os:unknown"


def _user_or_none(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def calibration_report_save(*, study: Study, report: dict[str, Any], user: Any = None) -> CalibrationReport:
    """Store a computed report (without predictions) as the study's latest calibration."""
    boot = report.get("bootstrap") or {}
    return CalibrationReport.objects.create(
        study=study,
        report=report_without_predictions(report),
        resamples=int(boot.get("resamples") or 0),
        seed=int(boot.get("seed") or 0),
        data_hash=str((report.get("fit_data") or {}).get("data_hash") or ""),
        created_by=_user_or_none(user),
        created_by_label=actor_label(user),
    )


def check_coefficient_set_name(name: object) -> str:
    """A set name: 1–120 printable characters, no surrounding spaces, no '/' (it is a URL part)."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationFailed("a coefficient set needs a non-empty name", field="name")
    name = name.strip()
    if len(name) > NAME_MAX_LENGTH:
        raise ValidationFailed(f"at most {NAME_MAX_LENGTH} characters, got {len(name)}", field="name")
    if "/" in name or not name.isprintable():
        raise ValidationFailed(f"{name!r} contains '/' or a control character", field="name")
    return name


def refuse_existing_name(*, study: Study, name: str) -> None:
    """One-line Conflict when ``name`` is already frozen in ``study`` (frozen sets are immutable)."""
    if CoefficientSet.objects.filter(study=study, name=name).exists():
        raise Conflict(
            f"study {study.slug} already has a frozen coefficient set named {name!r}; "
            "frozen sets are immutable: choose another name"
        )


def coefficient_set_create(
    *,
    study: Study,
    name: str,
    coefficients: dict[str, float],
    comparison_ids: list[str],
    data_hash: str,
    versions: dict[str, str],
    source: str,
    report: dict[str, Any],
    user: Any,
    action: str,
    details: dict[str, Any],
) -> CoefficientSet:
    """Create the frozen set and its AuditEvent in one transaction; a taken name is a Conflict."""
    try:
        with transaction.atomic():
            refuse_existing_name(study=study, name=name)
            label = actor_label(user)
            coefficient_set = CoefficientSet.objects.create(
                study=study,
                name=name,
                coefficients=coefficients,
                comparison_ids=comparison_ids,
                data_hash=data_hash,
                library_versions=versions,
                source=source,
                report=report,
                frozen_by=_user_or_none(user),
                frozen_by_label=label,
            )
            AuditEvent.objects.create(
                actor=_user_or_none(user),
                actor_label=label,
                action=action,
                study=study,
                target=name,
                details=details,
            )
    except IntegrityError:  # a concurrent freeze took the name between the check and the insert
        raise Conflict(
            f"study {study.slug} already has a frozen coefficient set named {name!r}; "
            "frozen sets are immutable: choose another name"
        ) from None
    return coefficient_set


def coefficient_set_freeze(
    *, study: Study, name: str, report: dict[str, Any], user: Any = None
) -> CoefficientSet:
    """Freeze the coefficients of a calibration ``report`` of ``study`` under ``name``
    (docs/protocol.md "Judges and calibration").

    Records the study, the exact comparison ids and the data hash of the fit, the library
    versions, who froze it (``user``, or the OS user) and the report (without predictions).
    A name that exists is refused with one line; so is a report of another study or one whose
    coefficients are not all finite numbers.
    """
    import numpy as np

    name = check_coefficient_set_name(name)
    if report.get("study") not in (None, study.slug):
        raise ValidationFailed(f"the report is of study {report.get('study')!r}, not {study.slug!r}")
    coefficients = report.get("coefficients")
    judges = report.get("judges")
    if not isinstance(coefficients, dict) or not coefficients or not isinstance(judges, list):
        raise ValidationFailed("the report has no coefficients to freeze")
    bad = [j for j in judges if not _finite_number(coefficients.get(j))]
    if bad:
        raise ValidationFailed(
            f"coefficient of judge(s) {', '.join(map(str, bad))} is not a finite number: not frozen"
        )
    fit_data = report.get("fit_data") or {}
    comparison_ids = [str(c) for c in fit_data.get("comparison_ids") or []]
    data_hash = str(fit_data.get("data_hash") or "")
    if not comparison_ids or len(data_hash) != 64:
        raise ValidationFailed("the report does not record the data it was fitted on (fit_data): not frozen")
    if "x" in fit_data and "h" in fit_data:
        recomputed = fit_data_hash(
            comparisons=comparison_ids,
            judges=[str(j) for j in fit_data.get("judges") or judges],
            x=np.asarray(fit_data["x"], dtype=float),
            h=np.asarray(fit_data["h"], dtype=float),
        )
        if recomputed != data_hash:
            raise ValidationFailed("the report's fit data does not match its data hash: not frozen")
    ordered = {str(j): float(coefficients[j]) for j in judges}
    stored = report_without_predictions(report)
    return coefficient_set_create(
        study=study,
        name=name,
        coefficients=ordered,
        comparison_ids=comparison_ids,
        data_hash=data_hash,
        versions=dict(report.get("library_versions") or library_versions()),
        source="fit",
        report=stored,
        user=user,
        action="coefficients.freeze",
        details={
            "coefficients": ordered,
            "n_comparisons": report.get("n_comparisons"),
            "data_hash": data_hash,
            "bootstrap": report.get("bootstrap"),
        },
    )


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def calibration_run(
    *,
    study: Study,
    resamples: int = CALIBRATION_RESAMPLES,
    seed: int = CALIBRATION_SEED,
    pilot_size: int | None = None,
    judges: Sequence[str] | None = None,
    freeze: str | None = None,
    user: Any = None,
    rules: Mapping[str, Any] | None = None,
    rules_where: str = "",
    raw: bool = False,
) -> tuple[dict[str, Any], CalibrationReport, CoefficientSet | None]:
    """Compute the report, store it as the study's latest and optionally freeze it as ``freeze``.

    A ``freeze`` name that already exists is refused before anything is computed or written.
    """

    name = None
    if freeze is not None:
        name = check_coefficient_set_name(freeze)
        refuse_existing_name(study=study, name=name)
    report = calibration_report_for_study(
        study=study,
        resamples=resamples,
        seed=seed,
        pilot_size=pilot_size,
        judges=judges,
        rules=rules,
        rules_where=rules_where,
        raw=raw,
    )
    with transaction.atomic():
        coefficient_set = (
            coefficient_set_freeze(study=study, name=name, report=report, user=user)
            if name is not None
            else None
        )
        stored = calibration_report_save(study=study, report=report, user=user)
    return report, stored, coefficient_set
