"""Frozen coefficient sets (docs/protocol.md "The study model", "Judges and calibration" (Freezing),
"Commands" import_coefficients): provenance, immutability, unique names, import / export round trip and
one-line errors."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.errors import ArbiterError, Conflict
from annotation.models import AuditEvent, Study
from calibration.models import CoefficientSet, FrozenError
from calibration.services.calibration import calibration_report_for_study, coefficient_set_freeze
from calibration.services.coefficients import coefficient_set_import
from tests.calibration.cal_factories import make_calibration_study

pytestmark = pytest.mark.django_db

VOTE = {"A": 1.0, "TIE": 0.5, "B": 0.0}


def make_study(slug: str) -> Study:
    return Study.objects.create(slug=slug, title=slug)


@pytest.fixture
def cal(db: None):  # type: ignore[no-untyped-def]
    return make_calibration_study("cal-sets", n_blocks=2, pages_per_block=6)


@pytest.fixture
def report(cal):  # type: ignore[no-untyped-def]
    return calibration_report_for_study(study=cal.study, resamples=20, seed=3)


def independent_hash(cal) -> tuple[list[str], str]:  # type: ignore[no-untyped-def]
    """Comparison ids and data hash recomputed by brute force from the factory's own frames."""
    rows = []
    for _, row in cal.human.sort_values("comparison").iterrows():
        if row["n_valid"] == 0:
            continue
        x = []
        for judge in cal.judges:
            outs = cal.judge_outputs[
                (cal.judge_outputs["comparison"] == row["comparison"])
                & (cal.judge_outputs["judge"] == judge)
                & (cal.judge_outputs["status"] == "valid")
            ]
            x.append(sum(VOTE[w] for w in outs["winner"]) / len(outs) if len(outs) else None)
        if None in x:
            continue
        rows.append((row["comparison"], x, float(row["h"])))
    payload = {
        "comparisons": [r[0] for r in rows],
        "judges": cal.judges,
        "x": [r[1] for r in rows],
        "h": [r[2] for r in rows],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return [r[0] for r in rows], hashlib.sha256(text.encode()).hexdigest()


def test_freeze_records_provenance(cal, report, researcher) -> None:  # type: ignore[no-untyped-def]
    cs = coefficient_set_freeze(study=cal.study, name="v1", report=report, user=researcher)
    cs.refresh_from_db()
    ids, data_hash = independent_hash(cal)
    assert cs.study == cal.study and cs.source == "fit"
    assert cs.comparison_ids == ids and cal.excluded_comparison not in ids
    assert cs.data_hash == data_hash
    assert cs.coefficients == report["coefficients"]
    assert cs.library_versions == {
        name: metadata.version(name) for name in ("numpy", "scipy", "statsmodels", "pandas")
    }
    assert cs.frozen_by == researcher and cs.frozen_by_label == researcher.username
    assert "predictions" not in cs.report and cs.report["cv"] == report["cv"]
    # The data it was fitted on is kept with the set and still hashes to its data hash.
    stored = cs.report["fit_data"]
    text = json.dumps(
        {"comparisons": stored["comparison_ids"], "judges": stored["judges"], "x": stored["x"], "h": stored["h"]},
        sort_keys=True,
        separators=(",", ":"),
    )
    assert hashlib.sha256(text.encode()).hexdigest() == cs.data_hash
    event = AuditEvent.objects.get(action="coefficients.freeze")
    assert event.study == cal.study and event.target == "v1" and event.actor == researcher


def test_frozen_set_refuses_every_change(cal, report) -> None:  # type: ignore[no-untyped-def]
    cs = coefficient_set_freeze(study=cal.study, name="v1", report=report)
    before = dict(cs.coefficients)
    cs.coefficients = {j: 0.0 for j in before}
    with pytest.raises(FrozenError):
        cs.save()
    with pytest.raises(FrozenError):
        CoefficientSet.objects.filter(pk=cs.pk).update(coefficients={})
    with pytest.raises(FrozenError):
        CoefficientSet.objects.filter(pk=cs.pk).delete()
    with pytest.raises(FrozenError):
        CoefficientSet.objects.get(pk=cs.pk).delete()
    assert CoefficientSet.objects.get(pk=cs.pk).coefficients == before


def test_freezing_an_existing_name_is_refused(cal, report) -> None:  # type: ignore[no-untyped-def]
    coefficient_set_freeze(study=cal.study, name="v1", report=report)
    with pytest.raises(Conflict) as err:
        coefficient_set_freeze(study=cal.study, name="v1", report=report)
    assert "\n" not in str(err.value) and "'v1'" in str(err.value)
    assert CoefficientSet.objects.filter(study=cal.study).count() == 1
    assert AuditEvent.objects.filter(action="coefficients.freeze").count() == 1


def test_freeze_refuses_another_studys_report_and_bad_names(cal, report) -> None:  # type: ignore[no-untyped-def]
    other = make_study("other-study")
    with pytest.raises(ArbiterError, match="not 'other-study'"):
        coefficient_set_freeze(study=other, name="v1", report=report)
    for bad in ("", "   ", "a/b", "x" * 121):
        with pytest.raises(ArbiterError):
            coefficient_set_freeze(study=cal.study, name=bad, report=report)
    assert not CoefficientSet.objects.exists()


def test_export_import_round_trip(cal, report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    coefficient_set_freeze(study=cal.study, name="v1", report=report)
    first = tmp_path / "v1.json"
    call_command("export_coefficients", "cal-sets", "v1", str(first))
    document = json.loads(first.read_text())
    assert document["name"] == "v1"
    assert list(document["coefficients"]) == report["judges"]  # fit order kept
    assert document["coefficients"] == report["coefficients"]
    prov = document["provenance"]
    assert prov["study"] == "cal-sets" and prov["data_hash"] == report["fit_data"]["data_hash"]
    assert prov["comparison_ids"] == report["fit_data"]["comparison_ids"]

    # Same study, same name: refused with one line; under another study it is imported unchanged.
    with pytest.raises(CommandError, match="already has a frozen coefficient set"):
        call_command("import_coefficients", "cal-sets", str(first))
    make_study("target")
    call_command("import_coefficients", "target", str(first))
    imported = CoefficientSet.objects.get(study__slug="target", name="v1")
    assert imported.source == "import"
    assert imported.coefficients == report["coefficients"]
    assert imported.data_hash == prov["data_hash"] and imported.comparison_ids == prov["comparison_ids"]
    assert imported.library_versions == prov["library_versions"]
    second = tmp_path / "again.json"
    call_command("export_coefficients", "target", "v1", str(second))
    assert second.read_text() == first.read_text()
    assert AuditEvent.objects.filter(action="coefficients.import", study__slug="target").count() == 1
    # --name freezes the same file under another name in the original study.
    call_command("import_coefficients", "cal-sets", str(first), "--name", "v1-copy")
    assert CoefficientSet.objects.get(study=cal.study, name="v1-copy").coefficients == report["coefficients"]


def test_minimal_import_and_its_export(cal, researcher, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"name": "hand", "coefficients": {"cal-opus": 0.6, "cal-gpt": 0.35}}))
    cs = coefficient_set_import(study=cal.study, path=path, user=researcher)
    assert cs.coefficients == {"cal-opus": 0.6, "cal-gpt": 0.35} and cs.frozen_by == researcher
    assert cs.comparison_ids == [] and cs.data_hash == ""
    out = tmp_path / "out.json"
    call_command("export_coefficients", "cal-sets", "hand", str(out))
    document = json.loads(out.read_text())
    assert document["coefficients"] == {"cal-opus": 0.6, "cal-gpt": 0.35}
    assert document["provenance"]["source"] == "import"
    make_study("target")
    call_command("import_coefficients", "target", str(out))  # every export is importable again
    event = AuditEvent.objects.filter(action="coefficients.import").first()
    assert event is not None and event.details["coefficients"]["cal-opus"] == 0.6


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (
            {"name": "x", "coefficients": {"cal-opus": 0.5, "gpt-9": 0.2, "zed": 1}},
            "unknown judge(s) gpt-9, zed",
        ),
        ({"name": "x", "coefficients": {"cal-opus": "0.5"}}, "$.coefficients.cal-opus"),
        ({"name": "x", "coefficients": {"cal-opus": True}}, "$.coefficients.cal-opus"),
        ({"name": "x", "coefficients": {}}, "$.coefficients"),
        ({"coefficients": {"cal-opus": 0.5}}, "$.name"),
        ({"name": "x", "coefficients": {"cal-opus": 0.5}, "extra": 1}, "extra"),
        ({"name": "x", "coefficients": {"cal-opus": 0.5}, "provenance": {"data_hash": "zz"}}, "data_hash"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_imports_are_one_line_and_write_nothing(cal, tmp_path: Path, document, fragment: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(CommandError) as err:
        call_command("import_coefficients", "cal-sets", str(path))
    message = str(err.value)
    assert "\n" not in message and fragment in message and "bad.json" in message
    assert not CoefficientSet.objects.exists()
    assert not AuditEvent.objects.filter(action="coefficients.import").exists()


def test_bad_json_names_the_line(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "broken.json"
    path.write_text('{\n  "name": "x",\n  "coefficients": {,}\n}\n')
    with pytest.raises(CommandError, match=r"broken\.json:3"):
        call_command("import_coefficients", "cal-sets", str(path))


def test_export_of_unknown_set_is_one_line(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError, match="no coefficient set 'nope'"):
        call_command("export_coefficients", "cal-sets", "nope", str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()
