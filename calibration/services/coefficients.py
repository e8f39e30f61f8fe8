"""Import and export of frozen coefficient sets (docs/protocol.md "Judges and calibration" (Freezing),
"Commands" ``import_coefficients``).

File format (JSON): ``{"name": str, "coefficients": {judge name: beta}}`` and, as written by the
export, ``"provenance": {...}`` (study, source, frozen_at, frozen_by, data_hash,
n_comparisons, comparison_ids, judges, standard_errors, bootstrap, library_versions). An export is
imported again unchanged; the provenance of an imported set is kept verbatim and exported as is.
Import validates the whole file before writing; every error is one line naming the file and the
JSON path.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from annotation.errors import ValidationFailed
from annotation.files import write_text_atomic
from annotation.models import Study
from annotation.safe_json import JSONRefused, loads_bounded
from calibration.models import CoefficientSet
from calibration.selectors.coefficients import coefficient_set_get
from calibration.services.calibration import (
    check_coefficient_set_name,
    coefficient_set_create,
    refuse_existing_name,
)
from judges.models import Judge

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
MAX_FILE_BYTES = 20 * 1024 * 1024


def _load(path: Path) -> Any:
    name = path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ValidationFailed(f"cannot read the file ({exc.strerror or exc})", where=str(path)) from None
    if size > MAX_FILE_BYTES:
        raise ValidationFailed(f"file of {size} bytes is over the {MAX_FILE_BYTES}-byte limit", where=name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationFailed(f"cannot read the file as UTF-8 ({exc})", where=name) from None
    try:
        return loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed(f"not JSON: {exc.msg}", where=f"{name}:{exc.lineno}") from None
    except JSONRefused as exc:
        raise ValidationFailed(str(exc), where=name) from None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_coefficient_file(data: Any, *, source: str) -> tuple[str, dict[str, float], dict[str, Any] | None]:
    """Check a coefficient-set document; returns (name, coefficients, provenance or None)."""
    if not isinstance(data, dict):
        raise ValidationFailed("expected a JSON object with 'name' and 'coefficients'", where=f"{source} $")
    allowed = {"name", "coefficients", "provenance"}
    extra = sorted(set(data) - allowed)
    if extra:
        raise ValidationFailed(
            f"unexpected key(s) {', '.join(extra)} (allowed: name, coefficients, provenance)",
            where=f"{source} $",
        )
    if "name" not in data:
        raise ValidationFailed("missing", where=f"{source} $.name")
    try:
        name = check_coefficient_set_name(data["name"])
    except ValidationFailed as exc:
        raise ValidationFailed(str(exc).split(": ", 1)[-1], where=f"{source} $.name") from None
    coefficients = data.get("coefficients")
    if not isinstance(coefficients, dict) or not coefficients:
        raise ValidationFailed("expected a non-empty object {judge: beta}", where=f"{source} $.coefficients")
    parsed: dict[str, float] = {}
    for judge, beta in coefficients.items():
        if not isinstance(judge, str) or not judge.strip():
            raise ValidationFailed(
                "a judge name must be a non-empty string", where=f"{source} $.coefficients"
            )
        if not _number(beta):
            raise ValidationFailed(
                f"expected a finite number, got {beta!r}", where=f"{source} $.coefficients.{judge}"
            )
        parsed[judge] = float(beta)
    provenance = data.get("provenance")
    if provenance is not None:
        _check_provenance(provenance, source)
    return name, parsed, provenance


def _check_provenance(provenance: Any, source: str) -> None:
    where = f"{source} $.provenance"
    if not isinstance(provenance, dict):
        raise ValidationFailed("expected an object", where=where)
    data_hash = provenance.get("data_hash")
    if data_hash not in (None, "") and not (isinstance(data_hash, str) and _HEX64.match(data_hash)):
        raise ValidationFailed("expected 64 lowercase hex digits (SHA-256)", where=f"{where}.data_hash")
    ids = provenance.get("comparison_ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(c, str) for c in ids)):
        raise ValidationFailed("expected a list of comparison ids (strings)", where=f"{where}.comparison_ids")
    versions = provenance.get("library_versions")
    if versions is not None and not (
        isinstance(versions, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in versions.items())
    ):
        raise ValidationFailed("expected an object {library: version}", where=f"{where}.library_versions")


def coefficient_set_import(
    *,
    study: Study,
    path: Path | str | None = None,
    data: Any = None,
    user: Any = None,
    name: str | None = None,
) -> CoefficientSet:
    """Freeze an imported set ``{"name", "coefficients"[, "provenance"]}`` in ``study``
    (docs/protocol.md "Commands").

    Give ``path`` (a JSON file) or ``data`` (the parsed document). ``name`` overrides the file's
    name. Every judge must be registered (``Judge.name``); an unknown judge, a non-finite beta or a
    name already frozen in the study is refused with one line and nothing is written.
    """
    if (path is None) == (data is None):
        raise ValidationFailed("give either a file path or the document, not both")
    if path is not None:
        path = Path(path)
        data = _load(path)
        source = path.name
    else:
        source = "request"
    file_name, coefficients, provenance = parse_coefficient_file(data, source=source)
    set_name = check_coefficient_set_name(name) if name is not None else file_name
    known = set(Judge.objects.filter(name__in=list(coefficients)).values_list("name", flat=True))
    unknown = [j for j in coefficients if j not in known]
    if unknown:
        raise ValidationFailed(
            f"unknown judge(s) {', '.join(unknown)} (register them with add_judge first)",
            where=f"{source} $.coefficients",
        )
    refuse_existing_name(study=study, name=set_name)
    prov = provenance or {}
    report: dict[str, Any] = {"judges": list(coefficients), "imported_from": source}
    if provenance is not None:
        report["provenance"] = provenance
    return coefficient_set_create(
        study=study,
        name=set_name,
        coefficients=coefficients,
        comparison_ids=list(prov.get("comparison_ids") or []),
        data_hash=str(prov.get("data_hash") or ""),
        versions=dict(prov.get("library_versions") or {}),
        source="import",
        report=report,
        user=user,
        action="coefficients.import",
        details={"coefficients": coefficients, "file": source, "name_in_file": file_name},
    )


def coefficient_set_judges(coefficient_set: CoefficientSet) -> list[str]:
    """Judge names in the order of the fit (a JSON column may not keep key order)."""
    order = (coefficient_set.report or {}).get("judges")
    names = list(coefficient_set.coefficients)
    if isinstance(order, list) and sorted(map(str, order)) == sorted(names):
        return [str(j) for j in order]
    return sorted(names)


def coefficient_set_document(*, coefficient_set: CoefficientSet) -> dict[str, Any]:
    """The export document: name, coefficients (fit order) and provenance (docs/protocol.md "Files"
    re-importable)."""
    cs = coefficient_set
    judges = coefficient_set_judges(cs)
    coefficients = {j: float(cs.coefficients[j]) for j in judges}
    stored = (cs.report or {}).get("provenance")
    if cs.source == "import" and isinstance(stored, dict):
        provenance = stored
    else:
        report = cs.report or {}
        provenance = {
            "study": cs.study.slug,
            "source": cs.source,
            "frozen_at": cs.created_at.isoformat() if cs.created_at else None,
            "frozen_by": cs.frozen_by_label,
            "data_hash": cs.data_hash,
            "n_comparisons": len(cs.comparison_ids or []),
            "comparison_ids": list(cs.comparison_ids or []),
            "judges": judges,
            "standard_errors": report.get("standard_errors"),
            "bootstrap": report.get("bootstrap"),
            "library_versions": dict(cs.library_versions or {}),
        }
    return {"name": cs.name, "coefficients": coefficients, "provenance": _provenance_ordered(provenance)}


PROVENANCE_KEYS = (
    "study",
    "source",
    "frozen_at",
    "frozen_by",
    "data_hash",
    "n_comparisons",
    "comparison_ids",
    "judges",
    "standard_errors",
    "bootstrap",
    "library_versions",
)


def _provenance_ordered(provenance: dict[str, Any]) -> dict[str, Any]:
    """A fixed key order, so export → import → export is byte-identical on every database
    (PostgreSQL's jsonb does not keep key order)."""
    known = {k: provenance[k] for k in PROVENANCE_KEYS if k in provenance}
    return {**known, **{k: provenance[k] for k in sorted(provenance) if k not in known}}


def coefficient_set_export(*, study: Study, name: str, path: Path | str) -> CoefficientSet:
    """Write the set ``name`` of ``study`` to ``path`` as JSON (import_coefficients takes it back)."""
    coefficient_set = coefficient_set_get(study=study, name=name)
    path = Path(path)
    if not path.parent.is_dir():
        raise ValidationFailed("the folder does not exist", where=str(path.parent))
    document = coefficient_set_document(coefficient_set=coefficient_set)
    write_text_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return coefficient_set
