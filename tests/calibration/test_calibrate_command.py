"""The ``calibrate`` command (docs/protocol.md "Judges and calibration", "Commands", "Report keys") against a
direct call of the pure ``calibrate``."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calibration.models import CalibrationReport, CoefficientSet
from calibration.selectors.calibration import human_reference_table
from stats.judge_weights import calibrate
from tests.calibration.cal_factories import make_calibration_study

pytestmark = pytest.mark.django_db

SPEC_KEYS = {
    "n_comparisons",
    "n_excluded",
    "judges",
    "coefficients",
    "cv",
    "per_block",
    "committees",
    "bootstrap",
}


def assert_close(got: Any, want: Any, path: str = "$") -> None:
    """Recursive equality with a float tolerance (JSON round trip of floats is exact anyway)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), path
        assert set(got) == set(want), f"{path}: keys {set(got) ^ set(want)}"
        for k in want:
            assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, int | float), path
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {got} != {want}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


@pytest.fixture
def cal(db: None):  # type: ignore[no-untyped-def]
    return make_calibration_study("cal-cmd")


def run(slug: str, tmp_path: Path, *extra: str, name: str = "report.json") -> dict[str, Any]:
    out = tmp_path / name
    call_command("calibrate", slug, "--json", str(out), *extra)
    return json.loads(out.read_text())


def test_selector_human_table_equals_independent_counts(cal) -> None:  # type: ignore[no-untyped-def]
    got = human_reference_table(study=cal.study)
    want = cal.human
    assert list(got.columns) == list(want.columns)
    assert got["comparison"].tolist() == want["comparison"].tolist()
    for col in ("page", "block", "system_a", "system_b"):
        assert got[col].astype(str).tolist() == want[col].astype(str).tolist(), col
    for col in ("n_valid", "n_A", "n_T", "n_B"):
        assert got[col].tolist() == want[col].tolist(), col
    assert got["h"].to_numpy() == pytest.approx(want["h"].to_numpy(), abs=1e-15, nan_ok=True)
    # The voided assignments voted A everywhere and every repeat said B: neither may count.
    assert (got["n_valid"] <= 4).all()


def test_command_json_equals_pure_calibrate(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = run("cal-cmd", tmp_path, "--bootstrap", "300", "--seed", "5")
    assert set(report) >= SPEC_KEYS
    direct = calibrate(
        cal.judge_outputs, cal.human, judges=cal.judges, resamples=300, seed=5, families=cal.families
    ).to_dict(include_predictions=True)
    for key, value in direct.items():
        assert_close(report[key], value, f"$.{key}")
    # docs/protocol.md "Report keys" shapes and the data the factory built.
    assert report["n_excluded"] == 1
    assert report["n_comparisons"] == len(cal.human) - 1
    assert cal.excluded_comparison not in report["fit_data"]["comparison_ids"]
    assert report["bootstrap"] == {"resamples": 300, "seed": 5}
    assert set(report["coefficients"]) == set(cal.judges)
    assert len(report["cv"]["brier"]["ci95"]) == 2
    assert report["cv"]["spearman_ranking"]["value"] is not None
    assert [b["block"] for b in report["per_block"]] == ["blk-1", "blk-2", "blk-3"]
    assert report["committees"], "two openai judges + anthropic + google: at least one eligible committee"
    for c in report["committees"]:
        assert len(set(c["families"])) == 3
        assert {"brier", "coverage", "rank"} <= set(c["pilot"]) and {"brier", "coverage", "rank"} <= set(
            c["holdout"]
        )
    assert set(report["library_versions"]) == {"numpy", "scipy", "statsmodels", "pandas"}
    # The run is stored as the study's latest report (without the per-comparison predictions).
    stored = CalibrationReport.objects.get(study=cal.study)
    assert "predictions" not in stored.report and stored.report["coefficients"] == report["coefficients"]


def test_same_seed_same_json_other_seed_other_intervals(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("cal-cmd", tmp_path, "--bootstrap", "100", "--seed", "9", name="a.json")
    run("cal-cmd", tmp_path, "--bootstrap", "100", "--seed", "9", name="b.json")
    run("cal-cmd", tmp_path, "--bootstrap", "100", "--seed", "10", name="c.json")
    a, b, c = ((tmp_path / n).read_text() for n in ("a.json", "b.json", "c.json"))
    assert a == b
    ja, jc = json.loads(a), json.loads(c)
    assert ja["coefficients"] == jc["coefficients"]  # the fit does not depend on the seed
    assert ja["cv"]["brier"]["ci95"] != jc["cv"]["brier"]["ci95"]


def test_judges_and_pilot_size_options(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = run(
        "cal-cmd", tmp_path, "--bootstrap", "50", "--judges", "cal-opus,cal-gpt", "--pilot-size", "10"
    )
    assert report["judges"] == ["cal-opus", "cal-gpt"]
    # cal-gemini (whose outputs are all invalid on one comparison) is not used: nothing is left out.
    assert report["n_excluded"] == 0
    assert report["committees"] == []  # three judges are needed
    direct = calibrate(
        cal.judge_outputs[cal.judge_outputs["judge"].isin(["cal-opus", "cal-gpt"])],
        cal.human,
        judges=["cal-opus", "cal-gpt"],
        resamples=50,
        seed=20260830,
        pilot_size=10,
        families=cal.families,
    ).to_dict()
    assert_close(report["coefficients"], direct["coefficients"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--judges", "cal-opus,nobody"], "nobody"),
        (["--bootstrap", "0"], "bootstrap"),
        (["--pilot-size", "100000"], "pilot size"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    cal, tmp_path: Path, args: list[str], fragment: str
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.json"
    with pytest.raises(CommandError) as err:
        call_command("calibrate", "cal-cmd", "--json", str(out), "--freeze", "never", *args)
    message = str(err.value)
    assert "\n" not in message and fragment in message
    assert not out.exists()
    assert not CoefficientSet.objects.exists() and not CalibrationReport.objects.exists()


def test_unknown_study_and_missing_folder(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError, match="no study"):
        call_command("calibrate", "nope", "--json", str(tmp_path / "x.json"))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("calibrate", "cal-cmd", "--json", str(tmp_path / "missing" / "x.json"))


def test_freeze_via_command_then_again_refused(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = run("cal-cmd", tmp_path, "--bootstrap", "50", "--freeze", "v1")
    cs = CoefficientSet.objects.get(study=cal.study, name="v1")
    assert cs.coefficients == report["coefficients"]
    assert cs.comparison_ids == report["fit_data"]["comparison_ids"]
    assert cs.frozen_by is None and cs.frozen_by_label.startswith("os:")
    out = tmp_path / "again.json"
    with pytest.raises(CommandError) as err:
        call_command("calibrate", "cal-cmd", "--json", str(out), "--freeze", "v1")
    assert "already has a frozen coefficient set named 'v1'" in str(err.value)
    assert "\n" not in str(err.value)
    assert not out.exists()
    assert CoefficientSet.objects.filter(study=cal.study).count() == 1


def test_html_is_self_contained(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    html_path = tmp_path / "report.html"
    report = run("cal-cmd", tmp_path, "--bootstrap", "50", "--html", str(html_path))
    html = html_path.read_text()
    assert "<script" not in html.lower()
    # No external reference anywhere: every src/href is a data: URI or a fragment.
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html)
    assert refs and all(r.startswith("data:") or r.startswith("#") for r in refs)
    assert not re.search(r"url\(\s*['\"]?(?!data:)", html)
    outside_data = re.sub(r'"data:[^"]*"', '""', html)
    assert "http://" not in outside_data and "https://" not in outside_data
    # Four figures, each an SVG that decodes.
    figures = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert len(figures) == 4
    for fig in figures:
        assert base64.b64decode(fig).lstrip().startswith(b"<?xml")
    # The tables carry the coefficients, the committees and the judges' diagnostics.
    for judge, beta in report["coefficients"].items():
        assert judge in html and f"{beta:.4f}" in html
    assert "Committee audit" in html and "human noise ceiling" in html
    assert "order consistency" in html and "repeat consistency" in html


def test_a_judge_run_in_progress_is_left_out_not_fatal(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Queued calls of a new judge must neither break nor silently shrink the default fit."""
    from annotation.models import Comparison
    from judges.models import Judge, JudgeOutput

    before = run("cal-cmd", tmp_path, "--bootstrap", "50", "--seed", "3", name="before.json")
    newcomer = Judge.objects.create(name="newcomer", family="newfam")
    comparisons = list(Comparison.objects.filter(study=cal.study, set="human"))
    JudgeOutput.objects.bulk_create(
        JudgeOutput(judge=newcomer, comparison=c, order="primary", repeat=0, status="pending") for c in comparisons
    )
    JudgeOutput.objects.filter(judge=newcomer, comparison=comparisons[0]).update(status="valid", winner="A")
    after = run("cal-cmd", tmp_path, "--bootstrap", "50", "--seed", "3", name="after.json")
    assert "newcomer" not in after["judges"]
    assert after["coefficients"] == before["coefficients"]
    assert after["n_comparisons"] == before["n_comparisons"]
    with pytest.raises(CommandError, match="still have calls pending"):
        run("cal-cmd", tmp_path, "--judges", ",".join([*before["judges"], "newcomer"]), name="x.json")


def test_the_report_names_the_prompt_templates_and_warns_on_a_mixed_run(cal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Outputs record the sha256 of the template they answered ("unknown" when imported without
    one); a judge whose outputs in the fit come from two templates (the prompt was edited mid-run)
    is named in a warning."""
    import hashlib

    from judges.models import JudgeOutput
    from judges.prompts import DEFAULT_JUDGE_PROMPT

    imported = run("cal-cmd", tmp_path, "--bootstrap", "50", name="imported.json")
    fitted = set(imported["fit_data"]["comparison_ids"])

    def valid_in_fit(judge: str):  # type: ignore[no-untyped-def]
        return JudgeOutput.objects.filter(
            judge__name=judge, status="valid", comparison__study=cal.study, comparison__external_id__in=fitted
        )

    assert imported["prompt_templates"] == {j: {"unknown": valid_in_fit(j).count()} for j in imported["judges"]}
    assert imported["prompt_template_current"] == hashlib.sha256(DEFAULT_JUDGE_PROMPT.encode()).hexdigest()
    assert not any("prompt templates" in w for w in imported.get("warnings", []))

    judge = imported["judges"][0]
    pks = list(valid_in_fit(judge).order_by("pk").values_list("pk", flat=True))
    first, second = "1" * 64, "2" * 64
    JudgeOutput.objects.filter(pk__in=pks[: len(pks) // 2]).update(prompt_sha256=first)
    half = run("cal-cmd", tmp_path, "--bootstrap", "50", name="half.json")
    assert half["prompt_templates"][judge] == {first: len(pks) // 2, "unknown": len(pks) - len(pks) // 2}
    assert any(f"judge {judge}'s outputs come from 2 different prompt templates (some imported" in w
               for w in half["warnings"])

    JudgeOutput.objects.filter(pk__in=pks[len(pks) // 2 :]).update(prompt_sha256=second)
    mixed = run("cal-cmd", tmp_path, "--bootstrap", "50", name="mixed.json")
    assert mixed["prompt_templates"][judge] == {first: len(pks) // 2, second: len(pks) - len(pks) // 2}
    assert any(f"judge {judge}'s outputs come from 2 different prompt templates:" in w for w in mixed["warnings"])
    others = [j for j in mixed["judges"] if j != judge]
    assert not any(f"judge {j}'s outputs" in w for j in others for w in mixed["warnings"])
    assert mixed["coefficients"] == imported["coefficients"]  # the fingerprint is provenance, not data
